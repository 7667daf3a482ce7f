package testbed

import (
	"fmt"
	"math"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/ethervia/ethervia/internal/linerate"
	"github.com/ethervia/ethervia/nic"
)

// ErrRate is wrapped by every error of ParseRate.
var ErrRate = linerate.ErrRate

// ParseRate reads a rate the way tc does and returns it in bit/s: a decimal
// number, optionally with a fraction or exponent, followed by a unit: bit,
// kbit, mbit, gbit, tbit (powers of 1000), kibit, mibit, gibit, tibit
// (powers of 1024), or the same with "bps" for bytes per second ("bps",
// "kbps", "mibps", ...). Units ignore case. A bare number is bit/s. The result
// is rounded to a whole bit/s; "0" gives 0 (no limit).
func ParseRate(s string) (uint64, error) { return linerate.Parse(s) }

// ParseRates reads a comma-separated list of rates, one per rail
// ("250mbit,500mbit"), each as ParseRate does. One entry means the same rate
// on every rail.
func ParseRates(s string) ([]uint64, error) {
	parts := strings.Split(s, ",")
	out := make([]uint64, len(parts))
	for i, p := range parts {
		v, err := ParseRate(p)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// SetRates applies a list from ParseRates to c: one rate goes to every rail
// (Rate), one per rail to RailRates. Set c.Rails first.
func (c *Config) SetRates(rates []uint64) error {
	rails := max(c.Rails, 1)
	switch len(rates) {
	case 1:
		c.Rate, c.RailRates = rates[0], nil
	case rails:
		c.Rate, c.RailRates = 0, rates
	default:
		return fmt.Errorf("%w: %d rates for %d rails (give one, or one per rail)", ErrRate, len(rates), rails)
	}
	return nil
}

// FormatRate writes bits/s in tc's style with the largest decimal unit that
// keeps it whole: 1000000000 is "1gbit", 1500000 is "1500kbit".
func FormatRate(bitsPerSec uint64) string { return linerate.Format(bitsPerSec) }

// Token bucket sizing: the bucket holds 5 ms of traffic but at least two
// full frames (a frame larger than the bucket could never pass), and the
// queue behind it holds another 50 ms.
const (
	tbfBurstDiv   = 200 // 1/200 s = 5 ms
	tbfLatencyDiv = 20  // 1/20 s = 50 ms
)

// tbfParams returns the tbf for a port, without link index, or an error if
// the rate cannot be expressed.
func tbfParams(bitsPerSec uint64, mtu int) (*netlink.Tbf, error) {
	rate := bitsPerSec / 8 // tbf counts bytes
	if rate == 0 {
		return nil, fmt.Errorf("rate %d bit/s below 8 bit/s", bitsPerSec)
	}
	frame := uint64(nic.FrameCap(mtu))
	burst := max(rate/tbfBurstDiv, 2*frame)
	// The kernel keeps the bucket as a time in psched ticks (uint32).
	ticks := float64(burst) / float64(rate) * 1e6 * netlink.TickInUsec()
	if burst > math.MaxUint32 || ticks >= math.MaxUint32 || ticks <= 0 {
		return nil, fmt.Errorf("rate %s too low for MTU %d: a %d-byte bucket would take %.0f s", FormatRate(bitsPerSec), mtu, burst, float64(burst)/float64(rate))
	}
	limit := min(burst+rate/tbfLatencyDiv, math.MaxUint32)
	return &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{
			Handle: netlink.MakeHandle(1, 0),
			Parent: netlink.HANDLE_ROOT,
		},
		Rate:   rate,
		Limit:  uint32(limit),
		Buffer: netlink.Xmittime(rate, uint32(burst)),
	}, nil
}
