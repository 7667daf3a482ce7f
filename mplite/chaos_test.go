package mplite_test

import (
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/mplite/internal/mpitest"
	"github.com/ethervia/ethervia/nic/memnic"
)

// TestChaosLocal runs the seeded chaos mix (the workload of the end-to-end
// chaos runs) on 5 in-process ranks over a switch that loses, duplicates,
// reorders and corrupts frames.
func TestChaosLocal(t *testing.T) {
	ops := 300
	if testing.Short() {
		ops = 60
	}
	cfg := mpitest.ChaosConfig{Seed: 11, Ops: ops, MaxSize: 256 << 10}
	opts := []mplite.Option{mplite.WithLocalFaults(5, memnic.Faults{Loss: 0.02, Duplicate: 0.01, Reorder: 0.01, Corrupt: 0.01})}
	noErrors(t, runWorld(t, 5, 2*time.Minute, opts, func(c *mplite.Comm) error {
		sum, err := mpitest.Chaos(c, cfg)
		if err == nil && c.Rank() == 0 {
			t.Logf("rank 0: %d ops %v, %d messages, %d bytes checked", sum.Ops, sum.ByKind, sum.Messages, sum.Bytes)
		}
		return err
	}))
}
