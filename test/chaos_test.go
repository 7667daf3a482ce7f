package test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestChaos runs the seeded chaos mix (point-to-point and collective
// operations, every payload checked byte for byte and by CRC32C) on 8 ranks
// under mprun, once per fault: loss at 1, 5 and 20 %, corruption and
// duplication at 1 %, a switch port that goes down for a second, and (with
// two bonded rails) rail 1 lost for good on every host. Every
// run must finish with every rank's checks passing; the faults must really
// have happened.
func TestChaos(t *testing.T) {
	needRoot(t)
	ops := "200"
	if testing.Short() {
		ops = "50"
	}
	okLine := regexp.MustCompile(`chaos ok: (\d+) ops, (\d+) messages, (\d+) bytes checked in (\S+)`)
	for _, tc := range []struct {
		name  string
		flags []string
		// field of the fault report that must be non-zero (1-based), or 0
		// for the flap, -1 for the lost rail
		field int
	}{
		{"drop1", []string{"-drop", "0.01"}, 1},
		{"drop5", []string{"-drop", "0.05"}, 1},
		{"drop20", []string{"-drop", "0.2"}, 1},
		{"corrupt1", []string{"-corrupt", "0.01"}, 2},
		{"dup1", []string{"-dup", "0.01"}, 3},
		{"flap", []string{"-flap", "500ms+1s"}, 0},
		{"raildown", []string{"-nics", "2", "-rail-down", "1@500ms"}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-np", "8", "-timeout", "4m"}, tc.flags...)
			n := ops
			if tc.field <= 0 {
				n = "1500" // long enough to span the flap or the lost rail
			}
			args = append(args, "--", built.path(t, "mpitest"), "-chaos", n, "-seed", "7", "-max", "262144", "-peer-timeout", "10s")
			start := time.Now()
			out, err := run(t, 5*time.Minute, built.path(t, "mprun"), args...)
			if err != nil {
				t.Fatalf("mprun failed: %v\n%s", err, out)
			}
			var msgs, bytes int64
			shortest := time.Hour
			for _, m := range okLine.FindAllStringSubmatch(out, -1) {
				n, _ := strconv.ParseInt(m[2], 10, 64)
				b, _ := strconv.ParseInt(m[3], 10, 64)
				msgs += n
				bytes += b
				if d, err := time.ParseDuration(m[4]); err == nil {
					shortest = min(shortest, d)
				}
			}
			wantOK(t, out, 8, 8, `\[%d\] mpitest: rank %[1]d of %d: chaos ok`)
			injected := ""
			if tc.field > 0 {
				m := faultReport.FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("no fault report:\n%s", out)
				}
				if m[tc.field] == "0" {
					t.Errorf("%v injected nothing: %s", tc.flags, m[0])
				}
				injected = m[0]
			} else if tc.field < 0 {
				for h := range 8 {
					if !strings.Contains(out, "-rail-down: switch port of host "+strconv.Itoa(h)+" rail 1 down") {
						t.Errorf("rail 1 of host %d never went down:\n%s", h, out)
					}
				}
				if shortest < 500*time.Millisecond {
					t.Errorf("a rank finished after %v, before the rail was lost", shortest)
				}
				// Every rank's bonded connections must have seen it.
				wantOK(t, out, 8, 8, `\[%d\] mpitest: rank %[1]d of %d: rails 2, rail failures [1-9]`)
				injected = "rail 1 of 2 lost for good on every host"
			} else {
				if !strings.Contains(out, "-flap: switch port of host 7 rail 0 down") || !strings.Contains(out, "-flap: switch port of host 7 rail 0 up") {
					t.Errorf("the port never flapped:\n%s", out)
				}
				if shortest < 1500*time.Millisecond {
					t.Errorf("a rank finished after %v, before the flap was over", shortest)
				}
				injected = "port of host 7 down for 1 s"
			}
			// One line per run for docs/reliability.md.
			t.Logf("RESULT %s: %s ops/rank, %d messages and %d bytes checked, %s, lost 0, in %v",
				tc.name, n, msgs, bytes, injected, time.Since(start).Round(time.Second))
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}
