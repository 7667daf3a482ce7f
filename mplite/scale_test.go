package mplite_test

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
)

// TestGatherAtScale boots an in-process job of 1 024 ranks and gathers a
// block from every rank at one root: the first contacts of the binomial
// tree, the connection tables and the per-peer state hold at that size.
//
// The peer timeout is a minute: 1 024 ranks in one process share two CPUs
// with whatever else runs, and with two CPU-bound processes beside it some
// ranks went more than the default 5 s without running, so their peers
// rightly declared them dead. With a minute the gather took 15 s there (9 s
// on an idle machine).
func TestGatherAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("1 024 ranks: about 10 s and 1.2 GB")
	}
	const n = 1024
	comms, err := mplite.NewLocalWorld(n, mplite.WithPeerTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	closeAll := func() {
		var wg sync.WaitGroup
		for _, c := range comms {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
		wg.Wait()
	}
	var closeOnce sync.Once
	defer closeOnce.Do(closeAll)
	out := make([]byte, 8*n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var in [8]byte
			binary.LittleEndian.PutUint64(in[:], uint64(r)*0x9e3779b97f4a7c15)
			var recv []byte
			if r == 0 {
				recv = out
			}
			if errs[r] = c.Gather(in[:], recv, 0); errs[r] != nil {
				// The others would wait for this rank for ever:
				// end the job, as a failed process would.
				closeOnce.Do(closeAll)
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := range n {
		if got, want := binary.LittleEndian.Uint64(out[8*r:]), uint64(r)*0x9e3779b97f4a7c15; got != want {
			t.Fatalf("block of rank %d: %#x, want %#x", r, got, want)
		}
	}
}
