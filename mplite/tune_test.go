package mplite_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
)

// TestAlgorithmOptions: unknown names fail listing the valid ones; the
// option and the environment variable force an algorithm, the option
// winning; a tuning file sets the model and overrides.
func TestAlgorithmOptions(t *testing.T) {
	_, err := mplite.NewLocalWorld(2, mplite.WithAlgorithm("bcast", "carrier-pigeon"))
	if err == nil || !strings.Contains(err.Error(), "binomial, scatter_allgather") {
		t.Errorf("unknown algorithm: %v", err)
	}
	_, err = mplite.NewLocalWorld(2, mplite.WithAlgorithm("broadcast", "binomial"))
	if err == nil || !strings.Contains(err.Error(), "alltoallv") {
		t.Errorf("unknown collective: %v", err)
	}
	t.Setenv("MPLITE_ALGO_BCAST", "nope")
	if _, err := mplite.NewLocalWorld(2); err == nil || !strings.Contains(err.Error(), "MPLITE_ALGO_BCAST") {
		t.Errorf("bad environment: %v", err)
	}
	t.Setenv("MPLITE_ALGO_BCAST", "scatter_allgather")
	t.Setenv("MPLITE_ALGO_ALLREDUCE", "ring")
	dir := t.TempDir()
	path := filepath.Join(dir, "tune")
	if err := os.WriteFile(path, []byte("# measured\nts 1e-3\ntc 2e-9\nalgo gather linear\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MPLITE_TUNING", path)
	comms, err := mplite.NewLocalWorld(3, mplite.WithAlgorithm("allreduce", "rabenseifner"))
	if err != nil {
		t.Fatal(err)
	}
	c := comms[0]
	for coll, want := range map[string]string{"bcast": "scatter_allgather", "allreduce": "rabenseifner", "gather": "linear"} {
		if got, err := c.Algorithm(coll, 1); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", coll, got, err, want)
		}
	}
	if tu := c.Tuning(); tu.Ts != 1e-3 || tu.Tc != 2e-9 {
		t.Errorf("tuning %+v from the file", tu)
	}
	if err := c.SetAlgorithm("bcast", "binomial"); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Algorithm("bcast", 1); got != "binomial" {
		t.Errorf("SetAlgorithm: %q", got)
	}
	if err := c.SetAlgorithm("bcast", "x"); err == nil || !strings.Contains(err.Error(), "scatter_allgather") {
		t.Errorf("SetAlgorithm unknown: %v", err)
	}
	for _, c := range comms {
		mplite.Abandon(c)
	}
}

// TestSelector: the cost model picks the fewest steps when start-up
// dominates and the fewest bytes in sequence when bandwidth does.
func TestSelector(t *testing.T) {
	for _, tc := range []struct {
		tuning     mplite.Tuning
		coll, want string
		m          int
	}{
		{mplite.Tuning{Ts: 1, Tc: 0}, "bcast", "binomial", 1 << 20},
		// Bandwidth alone: the pipeline carries the message through
		// each port once (plus n-2 segments to fill it).
		{mplite.Tuning{Ts: 0, Tc: 1}, "bcast", "pipeline", 1 << 20},
		{mplite.Tuning{Ts: 0, Tc: 1}, "reduce", "pipeline", 1 << 20},
		{mplite.Tuning{Ts: 1, Tc: 0}, "allreduce", "recursive_doubling", 256 << 10},
		{mplite.Tuning{Ts: 0, Tc: 1}, "allreduce", "ring", 1 << 20},
		// From 512 KiB a commutative Allreduce takes the ring whatever
		// the model says (measured, see allreduceLong).
		{mplite.Tuning{Ts: 1, Tc: 0}, "allreduce", "ring", 512 << 10},
		{mplite.Tuning{Ts: 1, Tc: 0}, "alltoall", "bruck", 64},
		// Large blocks: Bruck's best radix sends every block straight
		// to its rank, a direct exchange with extra copies, so a direct
		// algorithm is chosen instead.
		{mplite.Tuning{Ts: 20e-6, Tc: 1e-9}, "alltoall", "pairwise", 64 << 10},
		{mplite.DefaultTuning(), "allgather", "bruck", 8},
	} {
		comms, err := mplite.NewLocalWorld(6, mplite.WithTuning(tc.tuning))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := comms[0].Algorithm(tc.coll, tc.m); err != nil || got != tc.want {
			t.Errorf("%s at %d bytes with %+v: %q, %v; want %q", tc.coll, tc.m, tc.tuning, got, err, tc.want)
		}
		for _, c := range comms {
			mplite.Abandon(c)
		}
	}
	// Eight ranks on two CPUs: the pipeline's shorter chain costs more
	// messages than the machine can overlap.
	for _, tc := range []struct {
		opts []mplite.Option
		want string
	}{
		{nil, "pipeline"},
		{[]mplite.Option{mplite.WithSharedCPUs(2)}, "binomial"},
	} {
		comms, err := mplite.NewLocalWorld(8, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := comms[0].Algorithm("bcast", 1<<20); err != nil || got != tc.want {
			t.Errorf("bcast of 1 MiB on 8 ranks, %d options: %q, %v; want %q", len(tc.opts), got, err, tc.want)
		}
		for _, c := range comms {
			mplite.Abandon(c)
		}
	}
	// On a switch of known line rate (100 Mbit/s: 80 ns a byte against
	// the default's 0.8) the selector takes multicast for a large Bcast,
	// the phased schedule for a large Alltoall and the linear exchange for
	// blocks below the phased threshold, and the tree below mcastAutoMin;
	// without the rate it never takes multicast.
	for _, tc := range []struct {
		rate       uint64
		coll, want string
		m          int
	}{
		{100e6, "bcast", "mcast-nak", 1 << 20},
		{100e6, "bcast", "binomial", 1 << 10},
		{0, "bcast", "binomial", 1 << 20},
		{100e6, "alltoall", "phased", 1 << 20},
		{0, "alltoall", "pairwise", 1 << 20},
		{100e6, "alltoall", "linear", 1 << 10},
		{100e6, "alltoall", "linear", 4 << 10},
		{100e6, "alltoallv", "linear", 1 << 10},
		{1e9, "alltoall", "linear", 4 << 10},
		{1e9, "alltoall", "pairwise", 16 << 10},
		{100e6, "reduce", "pipeline", 64 << 10},
		{100e6, "bcast", "mcast-nak", 64 << 10},
		{100e6, "alltoall", "phased", 64 << 10},
		{100e6, "allgather", "mcast", 64 << 10},
		{0, "allgather", "ring", 1 << 20},
		{100e6, "allgather", "recursive_doubling", 1 << 10},
	} {
		// Shared CPUs as under mprun: the CPUs' work is counted at Tc,
		// not at the line's time per byte.
		comms, err := mplite.NewLocalWorld(8, mplite.WithPortRate(tc.rate), mplite.WithSharedCPUs(2))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := comms[0].Algorithm(tc.coll, tc.m); err != nil || got != tc.want {
			t.Errorf("%s of %d bytes on 8 ranks at %d bit/s: %q, %v; want %q", tc.coll, tc.m, tc.rate, got, err, tc.want)
		}
		for _, c := range comms {
			mplite.Abandon(c)
		}
	}
	// At 1 Gbit/s eight ranks on two CPUs are bound by the CPUs, where
	// multicast saves nothing; with a CPU each, the line binds again.
	for _, tc := range []struct {
		cpus  int
		mcast bool
	}{{2, false}, {0, true}} {
		comms, err := mplite.NewLocalWorld(8, mplite.WithPortRate(1e9), mplite.WithSharedCPUs(tc.cpus))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := comms[0].Algorithm("bcast", 1<<20)
		a, _ := comms[0].Algorithm("allgather", 64<<10)
		if (b == "mcast-nak") != tc.mcast || (a == "mcast") != tc.mcast {
			t.Errorf("1 Gbit/s, %d shared CPUs: bcast by %s, allgather by %s; want multicast %v", tc.cpus, b, a, tc.mcast)
		}
		for _, c := range comms {
			mplite.Abandon(c)
		}
	}
	// Over two rails at 100 Mbit/s the unicast algorithms stripe and
	// multicast does not: the ring Allgather and the chain Bcast win.
	for _, tc := range []struct {
		rails      int
		coll, want string
		m          int
	}{
		{1, "allgather", "mcast", 64 << 10}, {2, "allgather", "ring", 64 << 10},
		{1, "bcast", "mcast-nak", 1 << 20}, {2, "bcast", "pipeline", 1 << 20},
	} {
		comms, err := mplite.NewLocalWorld(8, mplite.WithPortRate(100e6), mplite.WithSharedCPUs(2), mplite.WithLocalRails(tc.rails))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := comms[0].Algorithm(tc.coll, tc.m); err != nil || got != tc.want {
			t.Errorf("%s of %d bytes over %d rails at 100 Mbit/s: %q, %v; want %q", tc.coll, tc.m, tc.rails, got, err, tc.want)
		}
		for _, c := range comms {
			mplite.Abandon(c)
		}
	}
	comms, err := mplite.NewLocalWorld(8, mplite.WithSharedCPUs(2))
	if err != nil {
		t.Fatal(err)
	}
	// Direct exchanges: linear below 32 KiB blocks, pairwise from there,
	// for Alltoall and Alltoallv alike.
	for _, tc := range []struct {
		coll, want string
		m          int
	}{
		{"alltoall", "pairwise", 64 << 10}, {"alltoall", "pairwise", 1 << 20},
		{"alltoallv", "linear", 16 << 10}, {"alltoallv", "pairwise", 64 << 10}, {"alltoallv", "pairwise", 1 << 20},
	} {
		if got, err := comms[0].Algorithm(tc.coll, tc.m); err != nil || got != tc.want {
			t.Errorf("%s of %d-byte blocks on 8 ranks sharing 2 CPUs: %q, %v; want %s", tc.coll, tc.m, got, err, tc.want)
		}
	}
	for _, c := range comms {
		mplite.Abandon(c)
	}
	// Allgather: the model's choice below a 512 KiB result, the ring from
	// there on (as MPICH does), with or without shared CPUs.
	for _, tc := range []struct {
		n, m int
		opts []mplite.Option
		want string
	}{
		{8, 1 << 10, nil, "recursive_doubling"},
		{8, 64<<10 - 1, nil, "recursive_doubling"},
		{8, 64 << 10, nil, "ring"},
		{8, 1 << 20, nil, "ring"},
		{8, 1 << 20, []mplite.Option{mplite.WithSharedCPUs(2)}, "ring"},
		{6, 8, nil, "bruck"},
		{6, 1 << 20, nil, "ring"},
		{8, 1 << 20, []mplite.Option{mplite.WithAlgorithm("allgather", "recursive_doubling")}, "recursive_doubling"},
	} {
		comms, err := mplite.NewLocalWorld(tc.n, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := comms[0].Algorithm("allgather", tc.m); err != nil || got != tc.want {
			t.Errorf("allgather of %d-byte blocks on %d ranks, %d options: %q, %v; want %q", tc.m, tc.n, len(tc.opts), got, err, tc.want)
		}
		for _, c := range comms {
			mplite.Abandon(c)
		}
	}
	if w1, w2, ok := mplite.Work("bcast", "binomial", 8, 100); !ok || w1 != 7 || w2 != 700 {
		t.Errorf("bcast binomial work %v %v %v", w1, w2, ok)
	}
	if w1, w2, ok := mplite.Work("allgather", "ring", 8, 100); !ok || w1 != 56 || w2 != 5600 {
		t.Errorf("allgather ring work %v %v %v", w1, w2, ok)
	}
	c1, c2, ok := mplite.Cost("bcast", "binomial", 8, 100)
	if !ok || c1 != 3 || c2 != 300 {
		t.Errorf("bcast binomial cost %v %v %v", c1, c2, ok)
	}
}

// TestMeasuredTuning: a world measures t_s and t_c at its first collective
// and every rank gets rank 0's values.
func TestMeasuredTuning(t *testing.T) {
	got := make([]mplite.Tuning, 3)
	noErrors(t, collWorld(t, 3, 60*time.Second, []mplite.Option{mplite.WithMeasuredTuning()}, func(c *mplite.Comm) error {
		if err := c.Barrier(); err != nil {
			return err
		}
		got[c.Rank()] = c.Tuning()
		return nil
	}))
	if got[0].Ts <= 0 || got[0].Tc <= 0 || got[0] == mplite.DefaultTuning() {
		t.Errorf("measured %+v", got[0])
	}
	for r := range got {
		if got[r] != got[0] {
			t.Errorf("rank %d has %+v, rank 0 %+v", r, got[r], got[0])
		}
	}
}

func TestParseTuning(t *testing.T) {
	tu, algos, err := mplite.ParseTuning(strings.NewReader("ts 5e-6 # comment\n\ntc 1e-10\nrate 100mbit\nalgo alltoall phased\n"))
	if err != nil || tu.Ts != 5e-6 || tu.Tc != 1e-10 || tu.Rate != 100e6 || algos["alltoall"] != "phased" {
		t.Errorf("%+v %v %v", tu, algos, err)
	}
	text, _ := tu.MarshalText()
	back, _, err := mplite.ParseTuning(strings.NewReader(string(text)))
	if err != nil || back != tu {
		t.Errorf("round trip: %+v %v", back, err)
	}
	for _, bad := range []string{"ts", "ts -1", "tc NaN", "algo bcast", "algo bcast nope", "speed 10", "rate fast", "rate -1mbit"} {
		if _, _, err := mplite.ParseTuning(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzParseTuning: the tuning file parser never panics, and what it
// accepts is sane.
func FuzzParseTuning(f *testing.F) {
	f.Add("ts 1e-5\ntc 8e-10\n")
	f.Add("# c\nalgo bcast binomial\n")
	f.Add("ts 1\n\ntc 0\nalgo alltoall phased # x\n")
	f.Add("rate 1gbit\nts 2e-5\n")
	f.Fuzz(func(t *testing.T, s string) {
		tu, algos, err := mplite.ParseTuning(strings.NewReader(s))
		if err != nil {
			return
		}
		if !(tu.Ts >= 0 && tu.Tc >= 0) {
			t.Fatalf("accepted %+v", tu)
		}
		for coll, algo := range algos {
			if !slices.Contains(mplite.Algorithms(coll), algo) && algo != "auto" {
				t.Fatalf("accepted %s %s", coll, algo)
			}
		}
	})
}

// MPLITE_RATE gives the line rate unless WithPortRate did; a bad one is
// an error naming the variable.
func TestPortRateEnvironment(t *testing.T) {
	t.Setenv("MPLITE_RATE", "100mbit")
	for _, tc := range []struct {
		opts []mplite.Option
		want uint64
	}{
		{nil, 100e6},
		{[]mplite.Option{mplite.WithPortRate(1e9)}, 1e9},
		{[]mplite.Option{mplite.WithTuning(mplite.Tuning{Ts: 1e-5, Tc: 1e-9})}, 100e6},
	} {
		comms, err := mplite.NewLocalWorld(2, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := comms[0].Tuning().Rate; got != tc.want {
			t.Errorf("%d options: rate %d, want %d", len(tc.opts), got, tc.want)
		}
		for _, c := range comms {
			mplite.Abandon(c)
		}
	}
	t.Setenv("MPLITE_RATE", "fast")
	if _, err := mplite.NewLocalWorld(2); err == nil || !strings.Contains(err.Error(), "MPLITE_RATE") {
		t.Errorf("bad MPLITE_RATE: %v", err)
	}
}
