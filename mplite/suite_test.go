package mplite_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/mplite/internal/mpitest"
	"github.com/ethervia/ethervia/nic/memnic"
)

// runWorld runs f on every rank of a local world of n ranks, then
// Finalize, and fails the test with every rank's error. A world that does
// not finish within limit fails with the ranks' states instead of hanging.
func runWorld(t *testing.T, n int, limit time.Duration, opts []mplite.Option, f func(c *mplite.Comm) error) []error {
	t.Helper()
	return runWorldFinal(t, n, limit, opts, f, nil)
}

// runWorldFinal is runWorld where finalOK says which Finalize errors are
// expected.
func runWorldFinal(t *testing.T, n int, limit time.Duration, opts []mplite.Option, f func(c *mplite.Comm) error,
	finalOK func(error) bool) []error {
	t.Helper()
	comms, err := mplite.NewLocalWorld(n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(c)
			if ferr := c.Finalize(); ferr != nil && (finalOK == nil || !finalOK(ferr)) && errs[i] == nil {
				errs[i] = fmt.Errorf("finalize: %w", ferr)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		var b strings.Builder
		for _, c := range comms {
			b.WriteString(mplite.DebugState(c))
		}
		t.Fatalf("world of %d ranks still running after %v:\n%s", n, limit, b.String())
	}
	return errs
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", i, err)
		}
	}
}

func TestSuite(t *testing.T) {
	cfg := mpitest.Config{EagerLimit: mplite.DefaultEagerLimit, MaxSize: 64 << 20, Isends: 1000, Log: t.Logf}
	if testing.Short() {
		cfg.MaxSize = 4 << 20
	}
	noErrors(t, runWorld(t, 4, 60*time.Second, nil, func(c *mplite.Comm) error { return mpitest.Run(c, cfg) }))
}

// TestSuiteLossy runs the suite over a switch that loses, duplicates and
// reorders frames, from a fixed seed.
func TestSuiteLossy(t *testing.T) {
	cfg := mpitest.Config{EagerLimit: mplite.DefaultEagerLimit, MaxSize: 64 << 20, Isends: 1000, Log: t.Logf}
	if testing.Short() {
		cfg.MaxSize = 2 << 20
	}
	opts := []mplite.Option{mplite.WithLocalFaults(7, memnic.Faults{Loss: 0.01, Duplicate: 0.005, Reorder: 0.01})}
	noErrors(t, runWorld(t, 4, 60*time.Second, opts, func(c *mplite.Comm) error { return mpitest.Run(c, cfg) }))
}

// TestSuiteRanksPerHost runs the suite with 2 and 4 ranks sharing each
// host's NIC (one MAC, an endpoint each), on a clean and a lossy switch.
func TestSuiteRanksPerHost(t *testing.T) {
	cfg := mpitest.Config{EagerLimit: mplite.DefaultEagerLimit, MaxSize: 4 << 20, Isends: 200, Log: t.Logf}
	for _, ppn := range []int{2, 4} {
		for _, lossy := range []bool{false, true} {
			t.Run(fmt.Sprintf("ppn=%d/lossy=%v", ppn, lossy), func(t *testing.T) {
				opts := []mplite.Option{mplite.WithLocalRanksPerHost(ppn)}
				if lossy {
					opts = append(opts, mplite.WithLocalFaults(11, memnic.Faults{Loss: 0.01, Duplicate: 0.005, Reorder: 0.01}))
				}
				noErrors(t, runWorld(t, 8, 90*time.Second, opts, func(c *mplite.Comm) error {
					a, b := mplite.AddrOf(c, 0), mplite.AddrOf(c, ppn-1)
					if c.Size() != 8 || a.MAC != b.MAC || a.EP != 0 || b.EP != uint16(ppn-1) || mplite.AddrOf(c, ppn).MAC == a.MAC {
						return fmt.Errorf("size %d, ranks 0 and %d at %v and %v: not sharing a NIC", c.Size(), ppn-1, a, b)
					}
					return mpitest.Run(c, cfg)
				}))
			})
		}
	}
}

// TestEarlyExit: a rank that vanishes gives the others an error naming it
// within the peer timeout, never a hang; both when its host goes silent
// and when its provider closes without Finalize.
func TestEarlyExit(t *testing.T) {
	for _, tc := range []struct {
		name string
		die  func(c *mplite.Comm)
	}{
		{"silent", mplite.KillSilently},
		{"closed", mplite.Abandon},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const timeout = 500 * time.Millisecond
			opts := []mplite.Option{mplite.WithPeerTimeout(timeout)}
			var died *mplite.Comm
			start := time.Now()
			errs := runWorldFinal(t, 4, 30*time.Second, opts, func(c *mplite.Comm) error {
				return mpitest.EarlyExit(c, func() { died = c; tc.die(c) })
			}, func(err error) bool {
				// The barrier of Finalize fails too, naming some rank
				// that is gone.
				return errors.Is(err, mplite.ErrPeerDead) || errors.Is(err, mplite.ErrFinalized)
			})
			t.Logf("survivors done after %v", time.Since(start))
			noErrors(t, errs[:3])
			if died == nil {
				t.Fatal("the last rank never died")
			}
			mplite.Abandon(died)
		})
	}
}
