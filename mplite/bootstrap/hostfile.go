package bootstrap

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// ParseHostfile reads a hostfile: one line per rank, "RANK MAC[,MAC...]"
// with one MAC per rail; blank lines and lines starting with # are ignored.
// It returns MACs indexed [rank][rail] and insists on every rank from 0 to
// size-1 exactly once, each with exactly rails addresses.
func ParseHostfile(r io.Reader, size, rails int) ([][]net.HardwareAddr, error) {
	if size < 1 || rails < 1 {
		return nil, fmt.Errorf("hostfile: size %d, rails %d", size, rails)
	}
	out := make([][]net.HardwareAddr, size)
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
		if len(f) != 2 {
			return nil, fmt.Errorf("hostfile line %d: want \"RANK MAC[,MAC...]\", got %q", line, text)
		}
		rank, err := strconv.Atoi(f[0])
		if err != nil || rank < 0 || rank >= size {
			return nil, fmt.Errorf("hostfile line %d: rank %q not in [0, %d)", line, f[0], size)
		}
		if out[rank] != nil {
			return nil, fmt.Errorf("hostfile line %d: rank %d listed twice", line, rank)
		}
		macs := strings.Split(f[1], ",")
		if len(macs) != rails {
			return nil, fmt.Errorf("hostfile line %d: rank %d has %d addresses, want %d (one per rail)", line, rank, len(macs), rails)
		}
		out[rank] = make([]net.HardwareAddr, rails)
		for k, m := range macs {
			hw, err := net.ParseMAC(m)
			if err != nil || len(hw) != 6 {
				return nil, fmt.Errorf("hostfile line %d: rank %d rail %d: bad MAC %q", line, rank, k, m)
			}
			out[rank][k] = hw
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hostfile: %w", err)
	}
	for r, m := range out {
		if m == nil {
			return nil, fmt.Errorf("hostfile: rank %d missing", r)
		}
	}
	return out, nil
}
