package netpipe

import (
	"math"
	"slices"
	"testing"
	"time"
)

// netpipeLoop transcribes netpipe.c's main loop (NetPIPE 3.7) statement by
// statement, without the timing stop, and returns the sizes it tests. It is
// deliberately written like the C, not like Sched, so the two can disagree.
func netpipeLoop(start, end, perturbation int) []int {
	var out []int
	inc := 1
	nq := 0
	if start > 1 {
		inc = start / 2
		nq = 1
	}
	n := 0
	for len := start; n < NSamp-3 && len <= end; len, nq = len+inc, nq+1 {
		if nq > 2 {
			if nq%2 != 0 {
				inc = inc + inc
			}
		}
		var pert int
		if perturbation > 0 && inc > perturbation+1 {
			pert = -perturbation
		} else {
			pert = 0
		}
		for pert <= perturbation {
			out = append(out, len+pert)
			n++
			if perturbation > 0 && inc > perturbation+1 {
				pert += perturbation
			} else {
				pert += perturbation + 1
			}
		}
	}
	return out
}

func TestScheduleDefaultRangeMatchesNetPIPE(t *testing.T) {
	// The sequence prior-art.md gives for NetPIPE 3.x's defaults.
	want := []int{1, 2, 3, 4, 6, 8, 12, 13, 16, 19, 21, 24, 27, 29, 32, 35, 45, 48, 51, 61, 64, 67, 93, 96, 99, 125, 128, 131}
	got := Schedule(1, 8<<20, DefaultPerturbation)
	if !slices.Equal(got[:len(want)], want) {
		t.Fatalf("schedule starts\n%v\nwant\n%v", got[:len(want)], want)
	}
	ref := netpipeLoop(1, 8<<20, DefaultPerturbation)
	if !slices.Equal(got, ref) {
		t.Fatalf("schedule differs from netpipe.c's loop:\n got %v\nwant %v", got, ref)
	}
	// NetPIPE checks the bound on the base size, so the last group ends
	// at 8 MiB + 3. Seven single points (1 to 12), then a group of three
	// around 16·2^k (k = 0..19) and 24·2^k (k = 0..18): 7 + 3·39 = 124.
	if last := got[len(got)-1]; last != 8<<20+3 {
		t.Errorf("last size %d, want %d", last, 8<<20+3)
	}
	if len(got) != 124 {
		t.Errorf("%d points, want 124", len(got))
	}
}

func TestScheduleOtherRangesMatchNetPIPE(t *testing.T) {
	for _, c := range []struct{ start, end, pert int }{
		{1, 1, 3}, {1, 131072, 0}, {1, 4096, 1}, {5, 100000, 3}, {1000, 1 << 20, 3},
		{2, 50, 7}, {3, 3, 3}, {1, 1 << 30, 3}, {64, 64, 3},
	} {
		got := Schedule(c.start, c.end, c.pert)
		ref := netpipeLoop(c.start, c.end, c.pert)
		if !slices.Equal(got, ref) {
			t.Errorf("Schedule(%d, %d, %d)\n got %v\nwant %v", c.start, c.end, c.pert, got, ref)
		}
	}
}

func TestScheduleNSampBound(t *testing.T) {
	// With no perturbation and start 1, the increment stays 1 for ever only
	// if it never doubles; a huge end with pert 0 still ends by NSamp.
	got := Schedule(2, math.MaxInt32, 0)
	if len(got) > NSamp {
		t.Fatalf("%d points, more than NSamp", len(got))
	}
	if !slices.Equal(got, netpipeLoop(2, math.MaxInt32, 0)) {
		t.Fatal("differs from netpipe.c's loop")
	}
}

func TestRepeats(t *testing.T) {
	// nrepeat = MAX(RUNTM / (bufflen/(bufflen-inc+1) * tlast), TRIALS)
	cases := []struct {
		tlast     float64
		prev, inc int
		want      int
	}{
		{10e-6, 1, 1, 25000},      // 0.25 / (1/1 * 10µs)
		{10e-6, 3, 2, 16666},      // 0.25 / (3/2 * 10µs)
		{0.1, 1000, 500, 7},       // 2.49 -> TRIALS
		{1e-6, 12, 8, 104166},     // 0.25 / (12/5 * 1µs)
		{1e-6, 10, 20, Trials},    // negative denominator: MAX picks TRIALS
		{0, 10, 2, Trials},        // no estimate
		{50e-6, 4096, 1024, 3750}, // 0.25 / (4096/3073 * 50µs) = 3751.2
	}
	for _, c := range cases {
		got := Repeats(RunTime, c.tlast, c.prev, c.inc, Trials)
		ref := int(math.Max(RunTime.Seconds()/(float64(c.prev)/(float64(c.prev)-float64(c.inc)+1.0)*c.tlast), Trials))
		if c.prev-c.inc+1 <= 0 || c.tlast == 0 {
			ref = Trials
		}
		if got != ref || absDiff(got, c.want) > 1 {
			t.Errorf("Repeats(tlast %g, prev %d, inc %d) = %d, want %d (formula %d)", c.tlast, c.prev, c.inc, got, c.want, ref)
		}
	}
	if got := Repeats(time.Second, 1e-15, 1, 1, 3); got != 1<<30 {
		t.Errorf("huge estimate not capped: %d", got)
	}
}

func absDiff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}

func TestMbps(t *testing.T) {
	// 1 MiB in one second is 8 "Mbps" in NetPIPE's 2^20 units.
	if got := Mbps(1<<20, false, 1); got != 8 {
		t.Errorf("Mbps = %v, want 8", got)
	}
	if got := Mbps(1<<20, true, 1); got != 16 {
		t.Errorf("bidirectional Mbps = %v, want 16", got)
	}
	if got := Mbps(1, false, 10e-6); math.Abs(got-0.762939453125) > 1e-9 {
		t.Errorf("Mbps = %v", got)
	}
}
