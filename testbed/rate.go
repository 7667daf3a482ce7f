package testbed

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/ethervia/ethervia/nic"
)

// ErrRate is wrapped by every error of ParseRate.
var ErrRate = errors.New("bad rate")

// ParseRate reads a rate the way tc does and returns it in bit/s: a decimal
// number, optionally with a fraction or exponent, followed by a unit: bit,
// kbit, mbit, gbit, tbit (powers of 1000), kibit, mibit, gibit, tibit
// (powers of 1024), or the same with "bps" for bytes per second ("bps",
// "kbps", "mibps", ...). Units ignore case. A bare number is bit/s. The result
// is rounded to a whole bit/s; "0" gives 0 (no limit).
func ParseRate(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("%w: empty", ErrRate)
	}
	// The number ends where the unit's letters begin; exponents ("1e9bit")
	// keep an 'e' or 'E' followed by a digit or sign.
	end := 0
	for end < len(t) {
		c := t[end]
		if '0' <= c && c <= '9' || c == '.' || c == '+' || c == '-' {
			end++
			continue
		}
		if (c == 'e' || c == 'E') && end > 0 && end+1 < len(t) {
			n := t[end+1]
			if '0' <= n && n <= '9' || n == '+' || n == '-' {
				end++
				continue
			}
		}
		break
	}
	num, unit := t[:end], strings.TrimSpace(t[end:])
	if num == "" {
		return 0, fmt.Errorf("%w: %q has no number", ErrRate, s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: number %q", ErrRate, s, num)
	}
	// rateUnits are tc's rate suffixes (iproute2 tc_util.c), in bit/s, matched
	// without regard to case as tc does: "kbps" is kilobytes per second.
	rateUnits := [...]struct {
		name  string
		scale float64
	}{
		{"bit", 1},
		{"kibit", 1024},
		{"kbit", 1000},
		{"mibit", 1024 * 1024},
		{"mbit", 1000000},
		{"gibit", 1024 * 1024 * 1024},
		{"gbit", 1000000000},
		{"tibit", 1024 * 1024 * 1024 * 1024},
		{"tbit", 1000000000000},
		{"bps", 8},
		{"kibps", 8 * 1024},
		{"kbps", 8000},
		{"mibps", 8 * 1024 * 1024},
		{"mbps", 8000000},
		{"gibps", 8 * 1024 * 1024 * 1024},
		{"gbps", 8000000000},
		{"tibps", 8 * 1024 * 1024 * 1024 * 1024},
		{"tbps", 8000000000000},
	}
	scale := 1.0
	if unit != "" {
		scale = 0
		for _, u := range rateUnits {
			if strings.EqualFold(u.name, unit) {
				scale = u.scale
				break
			}
		}
		if scale == 0 {
			if strings.HasSuffix(unit, "%") {
				return 0, fmt.Errorf("%w: %q: percent rates need a link speed; give an absolute rate", ErrRate, s)
			}
			return 0, fmt.Errorf("%w: %q: unknown unit %q (want bit, kbit, mbit, gbit, tbit, kibit.., bps, kbps.., mibps..)", ErrRate, s, unit)
		}
	}
	if v < 0 || math.IsNaN(v) {
		return 0, fmt.Errorf("%w: %q is negative", ErrRate, s)
	}
	bits := math.Round(v * scale)
	if bits >= 1<<64 || math.IsInf(bits, 0) {
		return 0, fmt.Errorf("%w: %q is too large", ErrRate, s)
	}
	return uint64(bits), nil
}

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
func FormatRate(bitsPerSec uint64) string {
	units := [...]struct {
		name  string
		scale uint64
	}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}}
	for _, u := range units {
		if bitsPerSec >= u.scale && bitsPerSec%u.scale == 0 {
			return strconv.FormatUint(bitsPerSec/u.scale, 10) + u.name
		}
	}
	return strconv.FormatUint(bitsPerSec, 10) + "bit"
}

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
