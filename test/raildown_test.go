package test

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestRailDownMidOperation takes rail 1 of a two-rail bond down on every
// host while the ranks are inside a bonded operation: Alltoall of 1 MiB
// blocks on 4 ranks, and a 16 MiB mplite message between 2 ranks, each
// repeated back to back (so one is always in flight at the cut) on ports of
// 100 Mbit/s, every byte checked. The cut comes once the hosts have sent
// 8 MiB on rail 1, which only the operations themselves do: a timed cut
// landed before the first call on a slow machine. Every call must complete with the right
// data on the remaining rail, and every rank must have seen the rail fail
// during a call. Last, rail 0 goes down under an Alltoall of 1 KiB blocks,
// whose messages travel on the lanes (plain VIs on rail 0 beside the bond):
// what they held goes on through the bond. Rail 0 also carries the 1-byte
// broadcast of the loop's stop flag between calls, so there a rank may
// first see the loss between two calls.
func TestRailDownMidOperation(t *testing.T) {
	needRoot(t)
	done := regexp.MustCompile(`loop (\w+) ok: (\d+) calls, (\d+) bytes checked in \S+; rails 2, rail failures (\d+), first seen in call (\d+)`)
	for _, tc := range []struct {
		name, op string
		np       int
		size     string
		down     string // -rail-down
	}{
		{"alltoall", "alltoall", 4, "1048576", "1@8MiB"},
		{"16MiB", "pingpong", 2, "16777216", "1@8MiB"},
		// Rail 0 carries the lanes, where 1 KiB blocks go.
		{"lane", "alltoall", 4, "1024", "0@1MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, 3*time.Minute, built.path(t, "mprun"), "-np", strconv.Itoa(tc.np), "-nics", "2", "-rate", "100mbit",
				"-rail-down", tc.down, "-timeout", "2m", "--",
				built.path(t, "mpitest"), "-loop", tc.op, "-size", tc.size, "-for", "2s")
			if err != nil {
				t.Fatalf("mprun failed: %v\n%s", err, out)
			}
			ms := done.FindAllStringSubmatch(out, -1)
			if len(ms) != tc.np {
				t.Fatalf("%d of %d ranks reported a checked loop:\n%s", len(ms), tc.np, out)
			}
			for _, m := range ms {
				calls, _ := strconv.Atoi(m[2])
				fails, _ := strconv.Atoi(m[4])
				seen, _ := strconv.Atoi(m[5])
				// Rail 0 also carries the stop flag broadcast between
				// calls: a rank may first see its loss there (seen 0).
				between := tc.down[0] == '0' && seen == 0
				if m[1] != tc.op || calls < 1 || fails < 1 || (seen < 1 && !between) || seen > calls {
					t.Errorf("want the rail lost during a completed %s call: %s", tc.op, m[0])
				}
			}
			t.Logf("%s", ms[0][0])
		})
	}
}
