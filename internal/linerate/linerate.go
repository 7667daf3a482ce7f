// Package linerate reads and writes link rates the way tc does ("100mbit",
// "1gbit", "12.5mbps"), for the testbed's ports and the collectives' cost
// model alike.
package linerate

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrRate is wrapped by every error of Parse.
var ErrRate = errors.New("bad rate")

// Parse reads a rate the way tc does and returns it in bit/s: a decimal
// number, optionally with a fraction or exponent, followed by a unit: bit,
// kbit, mbit, gbit, tbit (powers of 1000), kibit, mibit, gibit, tibit
// (powers of 1024), or the same with "bps" for bytes per second ("bps",
// "kbps", "mibps", ...). Units ignore case. A bare number is bit/s. The result
// is rounded to a whole bit/s; "0" gives 0 (no limit).
func Parse(s string) (uint64, error) {
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

// Format writes bits/s in tc's style with the largest decimal unit that
// keeps it whole: 1000000000 is "1gbit", 1500000 is "1500kbit".
func Format(bitsPerSec uint64) string {
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
