package main

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/nic/memnic"
)

var lineRE = regexp.MustCompile(`^coll=([\w-]+) algo=([\w-]+) bytes=(\d+) ranks=(\d+) us=(\d+\.\d\d)( chosen=([\w-]+))?$`)

// localBench runs the whole harness (every collective, algorithm and
// size, checked) on a local world of n ranks and returns rank 0's output,
// the ranks' stderr and errors.
func localBench(t *testing.T, n int, o options, opts ...mplite.Option) (string, string, []error) {
	t.Helper()
	return localBenchLaunched(t, n, o, "", opts...)
}

// localBenchLaunched is localBench with MPRUN_START set to launched.
func localBenchLaunched(t *testing.T, n int, o options, launched string, opts ...mplite.Option) (string, string, []error) {
	t.Helper()
	comms, err := mplite.NewLocalWorld(n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]bytes.Buffer, n)
	var errOut syncBuf
	errs := eachRank(t, comms, func(i int, c, ctl *mplite.Comm) error {
		b := &bench{o: o, c: c, ctl: ctl, out: &outs[i], errOut: &errOut, launched: launched}
		err := b.startup()
		if err == nil {
			err = b.all()
		}
		if err == nil {
			err = b.agreeErrors()
		}
		return err
	})
	for i := 1; i < n; i++ {
		if outs[i].Len() != 0 {
			t.Errorf("rank %d printed %q; only rank 0 prints", i, outs[i].String())
		}
	}
	return outs[0].String(), errOut.String(), errs
}

// eachRank runs f on every rank of comms at once, with a second
// communicator for the harness (as run makes), finalizes the ranks and
// returns their errors; it fails t if they take more than a minute.
func eachRank(t *testing.T, comms []*mplite.Comm, f func(i int, c, ctl *mplite.Comm) error) []error {
	t.Helper()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctl, err := c.Dup()
			if err == nil {
				err = f(i, c, ctl)
			}
			if ferr := c.Finalize(); ferr != nil && err == nil {
				err = ferr
			}
			errs[i] = err
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%d ranks still running after 60 s", len(comms))
	}
	return errs
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLocalBench runs collbench's harness with -check on 5 ranks over a
// lossy switch: every line parses, and every collective × algorithm ×
// size (plus auto, with its choice) is there exactly once.
func TestLocalBench(t *testing.T) {
	const n = 5
	sizes := []int{0, 1, 1001, mplite.DefaultEagerLimit + 1000}
	o := options{sizes: sizes, colls: mplite.Collectives(), secs: 1, iters: 2, check: true, rounds: 2}
	out, stderr, errs := localBench(t, n, o, mplite.WithLocalFaults(3, memnic.Faults{Loss: 0.02, Reorder: 0.01}))
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", i, err)
		}
	}
	if !strings.Contains(stderr, "every result matches") {
		t.Errorf("no check summary in stderr:\n%s", stderr)
	}
	// Two rounds: two times behind every line's median.
	if !regexp.MustCompile(`(?m)^  bcast/binomial bytes=1 iters=2 rounds\(us\)=[\d.]+,[\d.]+$`).MatchString(stderr) {
		t.Errorf("no two-round timing for bcast/binomial in stderr:\n%s", stderr)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		m := lineRE.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("line %q does not parse", line)
			continue
		}
		if m[4] != fmt.Sprint(n) {
			t.Errorf("line %q: ranks", line)
		}
		if (m[2] == "auto") != (m[7] != "") || m[7] != "" && !slices.Contains(mplite.Algorithms(m[1]), m[7]) {
			t.Errorf("line %q: chosen= wrong", line)
		}
		seen[m[1]+"/"+m[2]+"/"+m[3]]++
	}
	for _, coll := range mplite.Collectives() {
		for _, algo := range append(mplite.Algorithms(coll), "auto") {
			for _, s := range sizes {
				b := s
				switch {
				case coll == "barrier":
					b = 0
				case slices.Contains([]string{"reduce", "allreduce", "scan", "exscan"}, coll):
					b = 8 * elems(s)
				}
				if seen[fmt.Sprint(coll, "/", algo, "/", b)] != 1 {
					t.Errorf("%d lines for coll=%s algo=%s bytes=%d, want 1", seen[fmt.Sprint(coll, "/", algo, "/", b)], coll, algo, b)
				}
			}
		}
	}
	for _, a := range []string{algoL2, algoL3} {
		if seen["alltoallv/"+a+"/1001"] != 1 {
			t.Errorf("no line for alltoallv %s", a)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s\nstderr:\n%s", out, stderr)
	}
}

// TestCheckCatches: the references are not vacuous: before the call, the
// check fails on some rank for every collective but barrier (each rank's
// buffers hold only its own data and gap bytes).
func TestCheckCatches(t *testing.T) {
	const n = 3
	comms, err := mplite.NewLocalWorld(n)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	for _, coll := range mplite.Collectives() {
		if coll == "barrier" {
			continue
		}
		for _, algo := range append(mplite.Algorithms(coll), algoL2, algoL3) {
			if (algo == algoL2 || algo == algoL3) && coll != "alltoallv" {
				continue
			}
			caught := 0
			for _, c := range comms {
				p, err := newPoint(c, coll, algo, 1001, 1)
				if err != nil {
					t.Fatal(err)
				}
				if p.verify() != nil {
					caught++
				}
			}
			if caught == 0 {
				t.Errorf("%s/%s: the check passes before the collective ran", coll, algo)
			}
		}
	}
}

// TestParse: flags, defaults and errors.
func TestParse(t *testing.T) {
	var errOut bytes.Buffer
	o, err := parse(nil, &errOut)
	if err != nil || fmt.Sprint(o.sizes) != "[1 1024 65536 1048576]" || len(o.colls) != len(mplite.Collectives()) || o.algos != nil || o.warm != time.Second {
		t.Errorf("defaults: %+v %v", o, err)
	}
	o, err = parse([]string{"-sizes", "0,7", "-colls", "bcast,alltoall", "-algos", "auto,ring", "-iters", "3", "-check"}, &errOut)
	if err != nil || fmt.Sprint(o.sizes, o.colls, o.algos, o.iters, o.check) != "[0 7] [bcast alltoall] [auto ring] 3 true" {
		t.Errorf("%+v %v", o, err)
	}
	for _, bad := range [][]string{{"-sizes", "x"}, {"-sizes", "-1"}, {"-colls", "broadcast"}, {"-secs", "0"}, {"-warmup", "-1s"}, {"-rounds", "0"}, {"extra"}, {"-algos", "auto,carrier_pigeon"}} {
		if _, err := parse(bad, &errOut); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestWarmupAndCalibration: the warm-up runs for -warmup before the first
// point, and with -secs the timed loop is sized from a calibration of many
// calls, not from one or two.
func TestWarmupAndCalibration(t *testing.T) {
	const warm = 150 * time.Millisecond
	o := options{sizes: []int{1}, colls: []string{"barrier"}, algos: []string{"auto"}, secs: 0.05, warm: warm, rounds: 1}
	start := time.Now()
	_, stderr, errs := localBench(t, 3, o)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
	}
	if el := time.Since(start); el < warm {
		t.Errorf("the run took %v, less than its %v warm-up", el, warm)
	}
	m := regexp.MustCompile(`iters=(\d+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no iters= in stderr:\n%s", stderr)
	}
	// A barrier of 3 in-process ranks takes microseconds: 50 ms of them is
	// far more than the 5-call floor a two-call estimate could give.
	if n, _ := strconv.Atoi(m[1]); n < 50 {
		t.Errorf("timed loop of %d calls for -secs 0.05", n)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestStartupLine: under mprun rank 0 reports the time from the launch to
// the end of every rank's Init; a malformed MPRUN_START is an error.
func TestStartupLine(t *testing.T) {
	o := options{colls: []string{"barrier"}, sizes: []int{0}, algos: []string{"auto"}, iters: 1, rounds: 1}
	launched := strconv.FormatInt(time.Now().Add(-time.Second).UnixNano(), 10)
	out, _, errs := localBenchLaunched(t, 2, o, launched)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var ranks int
	var us float64
	if _, err := fmt.Sscanf(out, "startup ranks=%d us=%g", &ranks, &us); err != nil || ranks != 2 || us < 1e6 {
		t.Fatalf("output %q: ranks %d, us %g, %v", out, ranks, us, err)
	}
	if _, _, errs := localBenchLaunched(t, 2, o, "soon"); errs[0] == nil {
		t.Fatal("MPRUN_START=soon was accepted")
	}
}

// TestSyncTimesCallsAlone: a chain whose every hop takes d (rank r waits for
// r-1, then sleeps d) costs about d a call back to back, where hops of
// successive calls overlap, but 3d a call timed alone: -sync must put a
// barrier before every call and leave it out of the time.
func TestSyncTimesCallsAlone(t *testing.T) {
	const (
		n     = 3
		d     = 2 * time.Millisecond
		iters = 20
	)
	comms, err := mplite.NewLocalWorld(n)
	if err != nil {
		t.Fatal(err)
	}
	times := make([]float64, n)
	errs := eachRank(t, comms, func(i int, c, ctl *mplite.Comm) error {
		buf := make([]byte, 1)
		hop := &point{call: func() error {
			if i > 0 {
				if _, err := c.Recv(buf, i-1, 0); err != nil {
					return err
				}
			}
			time.Sleep(d)
			if i < n-1 {
				return c.Send(buf, i+1, 0)
			}
			return nil
		}}
		b := &bench{o: options{sync: true}, c: c, ctl: ctl}
		var err error
		times[i], err = b.timeit(hop, iters)
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
	}
	if times[0] != times[n-1] {
		t.Errorf("ranks disagree on the time: %v", times)
	}
	if got := time.Duration(times[0] * float64(time.Second)); got < n*d {
		t.Errorf("-sync: %v a call, less than the %v one call of the chain takes alone", got, n*d)
	}
}
