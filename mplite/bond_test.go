package mplite_test

import (
	"fmt"
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
// the run finishes on the remaining rail. It then takes rail 0 down mid-run,
// which carries the lanes: their messages go on through the bond.
func TestBondedRailLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		rail int
		cut  time.Duration // after the start; negative: before it
		ops  int
	}{
		{"midrun", 1, 150 * time.Millisecond, 2000},
		{"beforeconnect", 1, -1, 200},
		{"lane", 0, 150 * time.Millisecond, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := tc.ops
			if testing.Short() {
				ops /= 4
			}
			railLost(t, tc.rail, tc.cut, ops)
		})
	}
}

// TestLaneCarriesSmallMessages checks that a bonded world sends its small
// messages on the lanes (none through the bonds) and stripes a long one
// over both rails, and that WithBondLane(false) puts everything through
// the bonds.
func TestLaneCarriesSmallMessages(t *testing.T) {
	for _, lanes := range []bool{true, false} {
		t.Run(map[bool]string{true: "lanes", false: "nolanes"}[lanes], func(t *testing.T) {
			big := 1 << 20
			bond := make([]uint64, 2)
			lane := make([]uint64, 2)
			var tx []uint64
			opts := []mplite.Option{mplite.WithLocalRails(2), mplite.WithBondLane(lanes)}
			noErrors(t, runWorld(t, 2, 60*time.Second, opts, func(c *mplite.Comm) error {
				i := c.Rank()
				buf := make([]byte, 8)
				for k := range 100 {
					if (k+i)%2 == 0 {
						buf[0] = byte(k)
						if err := c.Send(buf, 1-i, 1); err != nil {
							return err
						}
					} else if _, err := c.Recv(buf, 1-i, 1); err != nil {
						return err
					} else if buf[0] != byte(k) {
						return fmt.Errorf("message %d carried %d", k, buf[0])
					}
				}
				bond[i], _ = mplite.BondMessages(c)
				lane[i] = mplite.LaneMessages(c)
				long := make([]byte, big)
				if i == 1 {
					if _, err := c.Recv(long, 0, 2); err != nil {
						return err
					}
					for j := range long {
						if long[j] != byte(j*7) {
							return fmt.Errorf("long message: byte %d is %d", j, long[j])
						}
					}
					return nil
				}
				for j := range long {
					long[j] = byte(j * 7)
				}
				before := mplite.RailTxBytes(c)
				err := c.Send(long, 1, 2)
				after := mplite.RailTxBytes(c)
				tx = []uint64{after[0] - before[0], after[1] - before[1]}
				return err
			}))
			for i := range 2 {
				if lanes && (bond[i] != 0 || lane[i] < 40) {
					t.Errorf("rank %d: %d messages through the bond, %d on the lane; want 0 and at least 40", i, bond[i], lane[i])
				}
				if !lanes && (bond[i] < 40 || lane[i] != 0) {
					t.Errorf("rank %d without lanes: %d messages through the bond, %d on a lane", i, bond[i], lane[i])
				}
			}
			for r, b := range tx {
				if b < uint64(big)/4 {
					t.Errorf("rail %d carried %d bytes of a %d-byte message: not striped (%v)", r, b, big, tx)
				}
			}
		})
	}
}

// TestLaneKeepsOrder sends messages of one tag that alternate between the
// lane (8 bytes) and the bond (60 KiB, eager, striped), nonblocking, so
// that short ones overtake long ones on the way: they must still match
// the receives in the order they were sent, every byte intact, and some
// must have overtaken.
func TestLaneKeepsOrder(t *testing.T) {
	const n = 400
	size := func(k int) int {
		if k%2 == 0 {
			return 60 << 10
		}
		return 8
	}
	var reordered uint64
	noErrors(t, runWorld(t, 2, 60*time.Second, []mplite.Option{mplite.WithLocalRails(2)}, func(c *mplite.Comm) error {
		me := c.Rank()
		bufs := make([][]byte, n)
		reqs := make([]*mplite.Request, n)
		for k := range n {
			bufs[k] = make([]byte, size(k))
			var err error
			if me == 0 {
				for j := range bufs[k] {
					bufs[k][j] = byte(k + j)
				}
				reqs[k], err = c.Isend(bufs[k], 1, 3)
			} else {
				reqs[k], err = c.Irecv(bufs[k], 0, 3)
			}
			if err != nil {
				return err
			}
		}
		if err := mplite.Waitall(reqs...); err != nil || me == 0 {
			return err
		}
		for k := range n {
			for j, b := range bufs[k] {
				if b != byte(k+j) {
					return fmt.Errorf("message %d, byte %d: %d, want %d", k, j, b, byte(k+j))
				}
			}
		}
		reordered = c.Stats().LaneReordered
		return nil
	}))
	if reordered == 0 {
		t.Error("no short message overtook a long one: the reordering was not exercised")
	}
	t.Logf("%d of %d messages waited for an earlier one", reordered, n)
}

// TestLaneOfferOrder: a long message written into the receiver's offer
// through the bond, then, while it is on its way, a short one of the same
// tag: the short one must match the second receive, never overtake into
// the first.
func TestLaneOfferOrder(t *testing.T) {
	const rounds = 50
	big := 256 << 10
	var taken uint64
	noErrors(t, runWorld(t, 2, 60*time.Second, []mplite.Option{mplite.WithLocalRails(2)}, func(c *mplite.Comm) error {
		long, short := make([]byte, big), make([]byte, 8)
		for k := range rounds {
			if c.Rank() == 1 {
				if err := offerRound(c, k, long, short); err != nil {
					return err
				}
				continue
			}
			if _, err := c.Recv(nil, 1, 2); err != nil { // the receives are posted
				return err
			}
			long[big-1], short[0] = byte(k), byte(k)
			r1, err := c.Isend(long, 1, 1)
			if err != nil {
				return err
			}
			r2, err := c.Isend(short, 1, 1)
			if err != nil {
				return err
			}
			if err := mplite.Waitall(r1, r2); err != nil {
				return err
			}
		}
		if c.Rank() == 0 {
			taken = c.Stats().OffersTaken
		}
		return nil
	}))
	if taken == 0 {
		t.Error("no message was written into an offer: the case was not exercised")
	}
	t.Logf("%d of %d long messages went into offers", taken, rounds)
}

// offerRound is the receiver's side of one round of TestLaneOfferOrder.
func offerRound(c *mplite.Comm, k int, long, short []byte) error {
	r1, err := c.Irecv(long, 0, 1)
	if err != nil {
		return err
	}
	r2, err := c.Irecv(short, 0, 1)
	if err != nil {
		return err
	}
	if err := c.Send(nil, 0, 2); err != nil {
		return err
	}
	st1, err1 := r1.Wait()
	st2, err2 := r2.Wait()
	if err1 != nil || err2 != nil {
		return fmt.Errorf("round %d: %v, %v", k, err1, err2)
	}
	if st1.Count != len(long) || st2.Count != len(short) || long[len(long)-1] != byte(k) || short[0] != byte(k) {
		return fmt.Errorf("round %d: got %d and %d bytes (%d, %d), want %d and %d", k, st1.Count, st2.Count,
			long[len(long)-1], short[0], len(long), len(short))
	}
	return nil
}

// railLost runs the chaos mix on a 4-rank world bonded over 2 rails, with
// rail lost after cut (negative: before the start). The peer timeout is
// long enough for the race detector on a loaded machine: with one rail
// gone, a keepalive missed on the other for that long would end the
// connection.
func railLost(t *testing.T, lost int, cut time.Duration, ops int) {
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
			mplite.SetRailUp(c, lost, false)
		}
	}
	failures := make([]uint64, n)
	stats := make([]mplite.Stats, n)
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
			stats[i] = c.Stats()
			if ferr := c.Finalize(); ferr != nil && errs[i] == nil {
				errs[i] = ferr
			}
		}()
	}
	if cut >= 0 {
		time.Sleep(cut)
		for _, c := range comms {
			mplite.SetRailUp(c, lost, false)
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
	var failovers, resent, dups uint64
	for i, d := range took {
		if cut >= 0 && d < cut {
			t.Errorf("rank %d finished after %v, before rail %d went down at %v", i, d, lost, cut)
		}
		if failures[i] == 0 {
			t.Errorf("rank %d: none of its bonded connections saw rail %d fail", i, lost)
		}
		failovers += stats[i].LaneFailovers
		resent += stats[i].LaneResent
		dups += stats[i].LaneDuplicates
	}
	if lost == 0 && cut >= 0 && failovers == 0 {
		t.Error("rail 0 went down mid-run and no lane failed over to its bond")
	}
	t.Logf("rail failures seen per rank: %v, finished after %v; lanes: %d failovers, %d messages resent, %d duplicates dropped",
		failures, took, failovers, resent, dups)
}
