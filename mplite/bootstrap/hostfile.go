package bootstrap

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/ethervia/ethervia/nic"
)

// ParseHostfile reads a hostfile: one line per rank, "RANK MAC[,MAC...]
// [ENDPOINT]" with one MAC per rail and the rank's endpoint on those NICs
// (0 when left out: one rank per host); blank lines and lines starting
// with # are ignored. It returns MACs indexed [rank][rail] and the
// endpoints by rank, and insists on every rank from 0 to size-1 exactly
// once, each with exactly rails addresses.
func ParseHostfile(r io.Reader, size, rails int) ([][]net.HardwareAddr, []uint16, error) {
	if size < 1 || rails < 1 {
		return nil, nil, fmt.Errorf("hostfile: size %d, rails %d", size, rails)
	}
	out := make([][]net.HardwareAddr, size)
	eps := make([]uint16, size)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<16)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 2 && len(f) != 3 {
			return nil, nil, fmt.Errorf("hostfile line %d: want \"RANK MAC[,MAC...] [ENDPOINT]\", got %q", line, text)
		}
		rank, err := strconv.Atoi(f[0])
		if err != nil || rank < 0 || rank >= size {
			return nil, nil, fmt.Errorf("hostfile line %d: rank %q not in [0, %d)", line, f[0], size)
		}
		if out[rank] != nil {
			return nil, nil, fmt.Errorf("hostfile line %d: rank %d listed twice", line, rank)
		}
		macs := strings.Split(f[1], ",")
		if len(macs) != rails {
			return nil, nil, fmt.Errorf("hostfile line %d: rank %d has %d addresses, want %d (one per rail)", line, rank, len(macs), rails)
		}
		out[rank] = make([]net.HardwareAddr, rails)
		for k, m := range macs {
			hw, err := net.ParseMAC(m)
			if err != nil || len(hw) != 6 {
				return nil, nil, fmt.Errorf("hostfile line %d: rank %d rail %d: bad MAC %q", line, rank, k, m)
			}
			out[rank][k] = hw
		}
		if len(f) == 3 {
			ep, err := strconv.ParseUint(f[2], 10, 16)
			if err != nil || ep == nic.EndpointAll {
				return nil, nil, fmt.Errorf("hostfile line %d: rank %d: bad endpoint %q", line, rank, f[2])
			}
			eps[rank] = uint16(ep)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("hostfile: %w", err)
	}
	for r, m := range out {
		if m == nil {
			return nil, nil, fmt.Errorf("hostfile: rank %d missing", r)
		}
	}
	return out, eps, nil
}
