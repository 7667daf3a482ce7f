package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// hostEntry is one line of a -hostfile: a host and how many ranks it takes.
type hostEntry struct {
	name  string
	slots int
}

// parseHostfile reads the hostfile formats of Hydra ("host" or
// "host:slots") and Open MPI ("host slots=N"), with # comments.
func parseHostfile(r io.Reader) ([]hostEntry, error) {
	var hosts []hostEntry
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		h := hostEntry{name: f[0], slots: 1}
		if name, n, ok := strings.Cut(f[0], ":"); ok && !strings.Contains(n, ":") {
			// host:slots (an IPv6 address has more than one colon)
			s, err := strconv.Atoi(n)
			if err != nil || s < 1 {
				return nil, fmt.Errorf("hostfile line %d: %q: want HOST[:SLOTS]", line, f[0])
			}
			h = hostEntry{name: name, slots: s}
		}
		for _, opt := range f[1:] {
			k, v, _ := strings.Cut(opt, "=")
			if k != "slots" && k != "max_slots" {
				return nil, fmt.Errorf("hostfile line %d: unknown option %q (slots=N)", line, opt)
			}
			s, err := strconv.Atoi(v)
			if err != nil || s < 1 {
				return nil, fmt.Errorf("hostfile line %d: %q", line, opt)
			}
			if k == "slots" {
				h.slots = s
			}
		}
		if h.name == "" {
			return nil, fmt.Errorf("hostfile line %d: no host", line)
		}
		hosts = append(hosts, h)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("hostfile lists no host")
	}
	return hosts, nil
}

// place assigns np ranks to hosts, as Hydra does: consecutive ranks fill a
// host's slots (or ppn ranks per host when ppn > 0) before the next host,
// wrapping around the list when np exceeds what it holds.
func place(hosts []hostEntry, np, ppn int) []string {
	out := make([]string, 0, np)
	for len(out) < np {
		for _, h := range hosts {
			n := h.slots
			if ppn > 0 {
				n = ppn
			}
			for i := 0; i < n && len(out) < np; i++ {
				out = append(out, h.name)
			}
		}
	}
	return out
}

// shellQuote quotes s for a POSIX shell, which is how ssh hands a command
// to the remote host.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=/.,:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
