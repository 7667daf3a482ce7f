package cc_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ethervia/ethervia/mplite/cc"
)

// TestSchedulePaperExample reproduces CC-MPI's worked example (its Fig. 3):
// greedy needs 3 phases, the all-to-all-based scheduler 2.
func TestSchedulePaperExample(t *testing.T) {
	const kb, mb = 1 << 10, 1 << 20
	msgs := []cc.Msg{{0, 1, mb}, {1, 3, mb}, {0, 2, 10 * kb}, {2, 3, 100}, {1, 5, 100}, {2, 1, 100}}
	pairs := func(ph []cc.Phase) [][]string {
		var out [][]string
		for _, p := range ph {
			var s []string
			for _, m := range p {
				s = append(s, fmt.Sprintf("%d>%d", m.Src, m.Dst))
			}
			slices.Sort(s)
			out = append(out, s)
		}
		return out
	}
	greedy := cc.GreedySchedule(msgs, 0)
	wantG := [][]string{{"0>1", "1>3"}, {"0>2", "1>5", "2>3"}, {"2>1"}}
	if got := pairs(greedy); fmt.Sprint(got) != fmt.Sprint(wantG) {
		t.Errorf("greedy: %v, want %v", got, wantG)
	}
	a2a := cc.AllToAllSchedule(6, msgs, 0)
	wantA := [][]string{{"0>1", "1>5", "2>3"}, {"0>2", "1>3", "2>1"}}
	if got := pairs(a2a); fmt.Sprint(got) != fmt.Sprint(wantA) {
		t.Errorf("all-to-all-based: %v, want %v", got, wantA)
	}
	for name, ph := range map[string][]cc.Phase{"greedy": greedy, "alltoall": a2a} {
		if err := cc.CheckSchedule(msgs, ph); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// With a threshold above the small messages, they share one phase.
	if got := pairs(cc.GreedySchedule(msgs, 20000)); len(got) != 2 || fmt.Sprint(got[1]) != "[0>2 1>5 2>1 2>3]" {
		t.Errorf("greedy with threshold: %v", got)
	}
}

// TestScheduleProperties: for random patterns and the full all-to-all,
// both schedulers give contention-free phases covering every message once;
// the all-to-all-based one needs at most n-1 phases.
func TestScheduleProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 12; n++ {
		for trial := range 20 {
			var msgs []cc.Msg
			for i := range n {
				for j := range n {
					if trial == 0 || rng.IntN(3) > 0 {
						msgs = append(msgs, cc.Msg{Src: i, Dst: j, Size: rng.IntN(5) * 1000})
					}
				}
			}
			g := cc.GreedySchedule(msgs, 0)
			a := cc.AllToAllSchedule(n, msgs, 0)
			if err := cc.CheckSchedule(msgs, g); err != nil {
				t.Fatalf("n=%d trial %d greedy: %v", n, trial, err)
			}
			if err := cc.CheckSchedule(msgs, a); err != nil {
				t.Fatalf("n=%d trial %d alltoall: %v", n, trial, err)
			}
			if n > 1 && len(a) > n-1 {
				t.Fatalf("n=%d trial %d: all-to-all-based took %d phases", n, trial, len(a))
			}
			if trial == 0 && n > 1 && len(a) != n-1 {
				t.Fatalf("n=%d full all-to-all: %d phases, want %d", n, len(a), n-1)
			}
		}
	}
	// The checker itself must catch a conflict and a missing message.
	msgs := []cc.Msg{{0, 1, 5}, {0, 2, 5}}
	if cc.CheckSchedule(msgs, []cc.Phase{{{0, 1, 5}, {0, 2, 5}}}) == nil {
		t.Error("CheckSchedule accepted a rank sending twice in a phase")
	}
	if cc.CheckSchedule(msgs, []cc.Phase{{{0, 1, 5}}}) == nil {
		t.Error("CheckSchedule accepted a missing message")
	}
}
