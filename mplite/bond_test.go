package mplite_test

import (
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/mplite/internal/mpitest"
	"github.com/ethervia/ethervia/nic/memnic"
)

// TestSuiteBonded runs the MPI-semantics suite on worlds bonded over 2 and
// 3 rails, and checks that every rail carried a fair share of the bytes.
func TestSuiteBonded(t *testing.T) {
	for _, k := range []int{2, 3} {
		t.Run(map[int]string{2: "2rails", 3: "3rails"}[k], func(t *testing.T) {
			cfg := mpitest.Config{EagerLimit: mplite.DefaultEagerLimit, MaxSize: 16 << 20, Isends: 1000, Log: t.Logf}
			if testing.Short() {
				cfg.MaxSize = 2 << 20
			}
			tx := make([][]uint64, 4)
			noErrors(t, runWorld(t, 4, 90*time.Second, []mplite.Option{mplite.WithLocalRails(k)}, func(c *mplite.Comm) error {
				err := mpitest.Run(c, cfg)
				tx[c.Rank()] = mplite.RailTxBytes(c)
				return err
			}))
			for rank, bytes := range tx {
				if len(bytes) != k {
					t.Fatalf("rank %d: %d rails, want %d", rank, len(bytes), k)
				}
				var total uint64
				for _, b := range bytes {
					total += b
				}
				for r, b := range bytes {
					// Large messages are split over the live rails, so
					// none may sit idle.
					if b < total/uint64(4*k) {
						t.Errorf("rank %d: rail %d sent %d of %d bytes: not striped", rank, r, b, total)
					}
				}
			}
		})
	}
}

// TestBondedRailLost takes rail 1 of a 2-rail world down for good, in the
// middle of the seeded chaos mix and before the ranks have connected (they
// connect on first use, with rail 1 already gone), on a lossy switch: every
// payload is still checked end to end, nothing is lost or duplicated, and
// the run finishes on the remaining rail.
func TestBondedRailLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  time.Duration // after the start; negative: before it
		ops  int
	}{
		{"midrun", 150 * time.Millisecond, 2000},
		{"beforeconnect", -1, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := tc.ops
			if testing.Short() {
				ops /= 4
			}
			railLost(t, tc.cut, ops)
		})
	}
}

// railLost runs the chaos mix on a 4-rank world bonded over 2 rails, with
// rail 1 cut after cut (negative: before the start). The peer timeout is
// long enough for the race detector on a loaded machine: with rail 1 gone,
// a rail-0 keepalive missed for that long would end the connection.
func railLost(t *testing.T, cut time.Duration, ops int) {
	const n = 4
	cfg := mpitest.ChaosConfig{Seed: 23, Ops: ops, MaxSize: 256 << 10}
	opts := []mplite.Option{mplite.WithLocalRails(2), mplite.WithPeerTimeout(5 * time.Second),
		mplite.WithLocalFaults(9, memnic.Faults{Loss: 0.01, Duplicate: 0.005, Reorder: 0.01})}
	comms, err := mplite.NewLocalWorld(n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if cut < 0 {
		for _, c := range comms {
			mplite.SetRailUp(c, 1, false)
		}
	}
	failures := make([]uint64, n)
	errs := make([]error, n)
	took := make([]time.Duration, n)
	done := make(chan int, n)
	start := time.Now()
	for i, c := range comms {
		go func() {
			defer func() { done <- i }()
			_, errs[i] = mpitest.Chaos(c, cfg)
			took[i] = time.Since(start)
			failures[i] = mplite.RailFailures(c)
			if ferr := c.Finalize(); ferr != nil && errs[i] == nil {
				errs[i] = ferr
			}
		}()
	}
	if cut >= 0 {
		time.Sleep(cut)
		for _, c := range comms {
			mplite.SetRailUp(c, 1, false)
		}
	}
	deadline := time.After(3 * time.Minute)
	for range n {
		select {
		case <-done:
		case <-deadline:
			for _, c := range comms {
				t.Log(mplite.DebugState(c))
			}
			t.Fatal("the world did not finish after losing a rail")
		}
	}
	noErrors(t, errs)
	for i, d := range took {
		if cut >= 0 && d < cut {
			t.Errorf("rank %d finished after %v, before rail 1 went down at %v", i, d, cut)
		}
		if failures[i] == 0 {
			t.Errorf("rank %d: none of its bonded connections saw rail 1 fail", i)
		}
	}
	t.Logf("rail failures seen per rank: %v, finished after %v", failures, took)
}
