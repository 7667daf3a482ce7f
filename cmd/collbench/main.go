// Command collbench times mplite's collectives, each algorithm of each
// (forced on the communicator, as WithAlgorithm or MPLITE_ALGO_<COLL> would)
// and the cost model's own choice, over message sizes. Run it under mprun
// (it calls mplite.Init):
//
//	mprun -np 8 -- collbench [-sizes 1,1024,65536,1048576] [-colls LIST] [-algos LIST]
//	                         [-secs S | -iters N] [-rounds R] [-sync] [-warmup 1s] [-check]
//	                         [-tune measure|FILE] [-stall 10m]
//
// Rank 0 prints one line per collective, algorithm and size:
//
//	coll=NAME algo=ALGO bytes=N ranks=P us=T
//
// where T is the mean time per call over a timed loop of back-to-back calls,
// the maximum over the ranks, as bench/ompi-collectives.sh
// measures Open MPI. With -sync every call is timed alone, after a barrier
// (untimed), as the OSU benchmarks time one: T is then the mean of those
// times, the maximum over the ranks. Back to back, an algorithm whose ranks
// each do little per call (a chain) overlaps one call with the next; a
// barrier between calls measures what one call costs by itself, which is
// what the cost model prices. With -rounds R, T is the median of R such loops, each
// algorithm's loops interleaved with the others'. algo=auto is the cost
// model's choice; its line ends with chosen=ALGO. Alltoallv also has phased_l2 and phased_l3, CC-MPI's
// Levels 2 (pattern held locally) and 3 (schedule compiled beforehand).
//
// bytes is as the cost model counts it: the whole buffer for bcast,
// reduce, allreduce, scan and exscan (reductions are float64 sums of
// max(1, bytes/8) elements, so 1 prints as 8), one rank's block for the
// others; barrier runs once, as bytes=0. Roots are rank 0.
//
// Under mprun, rank 0 first prints the job's start-up time, from mprun
// starting the ranks (MPRUN_START) to the end of Init on every rank:
//
//	startup ranks=P us=T
//
// With -check every call's first and last results are compared with a
// naive reference computed locally from every rank's deterministic data;
// a mismatch is reported on stderr and collbench exits 1 (on every rank).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethervia/ethervia/mplite"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Pseudo-algorithms of alltoallv: CC-MPI's Levels 2 and 3, which the
// communicator's algorithm switch does not reach (they are other calls).
const (
	algoAuto = "auto"
	algoL2   = "phased_l2"
	algoL3   = "phased_l3"
)

type options struct {
	sizes  []int
	colls  []string
	algos  []string // nil: all
	secs   float64
	iters  int
	check  bool
	tune   string
	stall  time.Duration // a point running longer is reported and the rank exits (0: never)
	warm   time.Duration // collectives run untimed before the first point
	rounds int           // each point is timed this many times, algorithms interleaved
	mstats bool          // print each rank's multicast counters at the end
	lstats bool          // print each rank's transport counters at the end
	sync   bool          // a barrier before every call, each call timed alone
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("collbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizes := fs.String("sizes", "1,1024,65536,1048576", "comma-separated message sizes in bytes")
	colls := fs.String("colls", "all", "comma-separated collectives (all: "+strings.Join(mplite.Collectives(), ",")+")")
	algos := fs.String("algos", "all", "comma-separated algorithm names to run (auto is the cost model's choice; all: every algorithm and auto)")
	fs.Float64Var(&o.secs, "secs", 1, "timed seconds per point (the loop runs at least 5 calls)")
	fs.IntVar(&o.iters, "iters", 0, "calls per timed loop (overrides -secs)")
	fs.IntVar(&o.rounds, "rounds", 1, "time every point this many times, the algorithms interleaved, and print the median (-secs is split among them)")
	fs.BoolVar(&o.sync, "sync", false, "time every call alone after an untimed barrier (OSU style) instead of back-to-back calls")
	fs.BoolVar(&o.check, "check", false, "check every result against a local naive reference; exit 1 on a mismatch")
	fs.DurationVar(&o.warm, "warmup", time.Second, "run untimed allreduces this long before the first point (ranks that just started run several times slower for a while)")
	fs.DurationVar(&o.stall, "stall", 10*time.Minute, "if one point (collective, algorithm, size) takes longer, print the goroutines and exit 3 (0: wait for ever)")
	fs.BoolVar(&o.mstats, "mcast-stats", false, "print every rank's multicast counters (McastStats) on stderr at the end")
	fs.BoolVar(&o.lstats, "link-stats", false, "print every rank's transport counters (Stats.Transport: frames sent and resent, timeouts, acknowledgements) on stderr at the end")
	fs.StringVar(&o.tune, "tune", "", "cost-model parameters: measure, or a tuning file (default: MPLITE_TUNING or the built-in values)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("collbench: unexpected arguments %q", fs.Args())
	}
	for _, s := range strings.Split(*sizes, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v < 0 || v > 1<<30 {
			return o, fmt.Errorf("collbench: -sizes: %q is not a size in [0, 1 GiB]", s)
		}
		o.sizes = append(o.sizes, v)
	}
	if *colls == "all" {
		o.colls = mplite.Collectives()
	} else {
		for _, s := range strings.Split(*colls, ",") {
			if mplite.Algorithms(s) == nil {
				return o, fmt.Errorf("collbench: -colls: unknown collective %q (valid: %s)", s, strings.Join(mplite.Collectives(), ", "))
			}
			o.colls = append(o.colls, s)
		}
	}
	if *algos != "all" {
		o.algos = strings.Split(*algos, ",")
		for _, a := range o.algos {
			if !knownAlgo(a) {
				return o, fmt.Errorf("collbench: -algos: no collective has an algorithm %q", a)
			}
		}
	}
	if !(o.secs > 0) || o.iters < 0 || o.warm < 0 || o.rounds < 1 {
		return o, fmt.Errorf("collbench: -secs %v / -iters %d / -warmup %v / -rounds %d: want positive", o.secs, o.iters, o.warm, o.rounds)
	}
	return o, nil
}

// knownAlgo says whether a is auto, a Level pseudo-algorithm or an
// algorithm of some collective.
func knownAlgo(a string) bool {
	if a == algoAuto || a == algoL2 || a == algoL3 {
		return true
	}
	for _, coll := range mplite.Collectives() {
		if slices.Contains(mplite.Algorithms(coll), a) {
			return true
		}
	}
	return false
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, err)
		}
		return 2
	}
	var opts []mplite.Option
	switch o.tune {
	case "":
	case "measure":
		opts = append(opts, mplite.WithMeasuredTuning())
	default:
		opts = append(opts, mplite.WithTuningFile(o.tune))
	}
	c, err := mplite.Init(opts...)
	if err != nil {
		fmt.Fprintln(stderr, "collbench:", err)
		return 1
	}
	// A second communicator for the harness's own barriers and reductions,
	// so that the algorithm forced on c never times or checks itself.
	ctl, err := c.Dup()
	if err != nil {
		fmt.Fprintln(stderr, "collbench:", err)
		return 1
	}
	b := &bench{o: o, c: c, ctl: ctl, out: stdout, errOut: stderr, launched: os.Getenv("MPRUN_START")}
	err = b.startup()
	if err == nil {
		err = b.all()
	}
	if err == nil {
		err = b.agreeErrors()
	}
	if o.mstats {
		fmt.Fprintf(stderr, "mcast stats: %+v device drops: %d\n", c.McastStats(), c.Stats().DeviceDropped)
	}
	if o.lstats {
		fmt.Fprintf(stderr, "link stats: %+v\n", c.Stats().Transport)
	}
	if ferr := c.Finalize(); ferr != nil && err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "collbench rank %d: %v\n", c.Rank(), err)
		return 1
	}
	return 0
}

type bench struct {
	o          options
	c, ctl     *mplite.Comm
	out        io.Writer
	errOut     io.Writer
	mismatches int
	// launched is MPRUN_START: when mprun began starting the ranks, in
	// Unix nanoseconds ("" outside mprun).
	launched string
}

// startup waits until every rank has finished Init and, under mprun
// (b.launched), has rank 0 print how long that took:
//
//	startup ranks=P us=T
func (b *bench) startup() error {
	var ns int64
	if b.launched != "" {
		// Every rank has the same MPRUN_START: each refuses a bad one
		// before the barrier, so none waits there for the others.
		var err error
		if ns, err = strconv.ParseInt(b.launched, 10, 64); err != nil {
			return fmt.Errorf("MPRUN_START=%q: %w", b.launched, err)
		}
	}
	if err := b.ctl.Barrier(); err != nil {
		return fmt.Errorf("barrier after Init: %w", err)
	}
	if b.launched == "" || b.c.Rank() != 0 {
		return nil
	}
	fmt.Fprintf(b.out, "startup ranks=%d us=%.0f\n", b.c.Size(), float64(time.Now().UnixNano()-ns)/1e3)
	return nil
}

// algosOf is the algorithms collbench runs for coll: every one of the
// collective's, auto, and for alltoallv the Level 2 and 3 calls; filtered
// by -algos.
func (b *bench) algosOf(coll string) []string {
	all := append(slices.Clone(mplite.Algorithms(coll)), algoAuto)
	if coll == "alltoallv" {
		all = append(all, algoL2, algoL3)
	}
	if b.o.algos == nil {
		return all
	}
	var out []string
	for _, a := range all {
		if slices.Contains(b.o.algos, a) {
			out = append(out, a)
		}
	}
	return out
}

func (b *bench) all() error {
	if b.c.Rank() == 0 {
		t := b.c.Tuning()
		fmt.Fprintf(b.errOut, "collbench: %d ranks, cost model ts=%g tc=%g rate=%d bit/s (before any measurement)\n", b.c.Size(), t.Ts, t.Tc, t.Rate)
	}
	if err := b.warmup(); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if b.c.Rank() == 0 && b.o.tune == "measure" {
		t := b.c.Tuning()
		fmt.Fprintf(b.errOut, "collbench: measured ts=%g tc=%g rate=%d bit/s\n", t.Ts, t.Tc, t.Rate)
	}
	salt := 0
	for _, coll := range b.o.colls {
		sizes := b.o.sizes
		if coll == "barrier" {
			sizes = []int{0}
		}
		for _, size := range sizes {
			algos := b.algosOf(coll)
			times := make([][]float64, len(algos))
			iters := make([]int, len(algos))
			bytes := 0
			// Rounds interleave the algorithms, so that a slow spell of
			// the machine falls on all of them alike.
			for range b.o.rounds {
				for i, algo := range algos {
					salt++
					t, n, by, err := b.point(coll, algo, size, salt)
					if err != nil {
						return fmt.Errorf("coll=%s algo=%s bytes=%d: %w", coll, algo, size, err)
					}
					times[i] = append(times[i], t)
					iters[i], bytes = n, by
				}
			}
			if b.c.Rank() == 0 {
				if err := b.report(coll, bytes, algos, times, iters); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// report prints one line per algorithm of a point (its rounds' median), and
// the rounds themselves on stderr.
func (b *bench) report(coll string, bytes int, algos []string, times [][]float64, iters []int) error {
	for i, algo := range algos {
		line := fmt.Sprintf("coll=%s algo=%s bytes=%d ranks=%d us=%.2f", coll, algo, bytes, b.c.Size(), median(times[i])*1e6)
		if algo == algoAuto {
			chosen, err := b.c.Algorithm(coll, bytes)
			if err != nil {
				return err
			}
			line += " chosen=" + chosen
		}
		fmt.Fprintln(b.out, line)
		fmt.Fprintf(b.errOut, "  %s/%s bytes=%d iters=%d rounds(us)=%s\n", coll, algo, bytes, iters[i], usList(times[i]))
	}
	return nil
}

// median of a non-empty list (the mean of the middle two for an even
// count).
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	h := len(s) / 2
	if len(s)%2 == 1 {
		return s[h]
	}
	return (s[h-1] + s[h]) / 2
}

func usList(v []float64) string {
	parts := make([]string, len(v))
	for i, t := range v {
		parts[i] = strconv.FormatFloat(t*1e6, 'f', 2, 64)
	}
	return strings.Join(parts, ",")
}

// point times (and checks) one collective, algorithm and size for one
// round: the mean seconds per call (the maximum over the ranks), the calls
// timed, and the bytes as the cost model counts them.
func (b *bench) point(coll, algo string, size, salt int) (float64, int, int, error) {
	force := algo
	if algo == algoL2 || algo == algoL3 {
		force = algoAuto
	}
	if err := b.c.SetAlgorithm(coll, force); err != nil {
		return 0, 0, 0, err
	}
	defer b.c.SetAlgorithm(coll, algoAuto)
	if b.o.stall > 0 {
		// A hung collective would otherwise hold the job until mprun's
		// timeout, saying nothing about where.
		stall := time.AfterFunc(b.o.stall, func() {
			fmt.Fprintf(b.errOut, "collbench rank %d: STALLED: coll=%s algo=%s bytes=%d still running after %v; goroutines:\n",
				b.c.Rank(), coll, algo, size, b.o.stall)
			_ = pprof.Lookup("goroutine").WriteTo(b.errOut, 1)
			os.Exit(3)
		})
		defer stall.Stop()
	}
	p, err := newPoint(b.c, coll, algo, size, salt)
	if err != nil {
		return 0, 0, 0, err
	}
	// Warm-up call, checked.
	if err := p.call(); err != nil {
		return 0, 0, 0, err
	}
	b.verify(p, coll, algo, "first call")
	iters := b.o.iters
	if iters == 0 {
		secs := b.o.secs / float64(b.o.rounds)
		est, err := b.calibrate(p, secs)
		if err != nil {
			return 0, 0, 0, err
		}
		iters = int(min(max(secs/max(est, 1e-7), 5), 200000))
	}
	t, err := b.timeit(p, iters)
	if err != nil {
		return 0, 0, 0, err
	}
	b.verify(p, coll, algo, "last call")
	return t, iters, p.bytes, nil
}

func (b *bench) verify(p *point, coll, algo, when string) {
	if !b.o.check {
		return
	}
	if err := p.verify(); err != nil {
		b.mismatches++
		fmt.Fprintf(b.errOut, "collbench: MISMATCH coll=%s algo=%s bytes=%d rank=%d (%s): %v\n", coll, algo, p.bytes, b.c.Rank(), when, err)
	}
}

// warmup runs allreduces on the harness's communicator for -warmup (rank
// 0's clock decides, so every rank runs as many). A job's first few
// hundred milliseconds run several times slower (8 ranks on 2 CPUs: one
// 8-byte allreduce took 1.4 ms then against 0.5 ms after), which would
// otherwise be charged to the first point.
func (b *bench) warmup() error {
	start := time.Now()
	more, all := []int64{0}, []int64{0}
	for {
		more[0] = 0
		if b.c.Rank() == 0 && time.Since(start) < b.o.warm {
			more[0] = 1
		}
		if err := mplite.Allreduce(b.ctl, more, all, mplite.Max[int64]()); err != nil {
			return err
		}
		if all[0] == 0 {
			return nil
		}
	}
}

// calibrate estimates one call's time for -secs: it doubles a timed loop
// until the loop lasts an eighth of secs (or 4096 calls), so that the
// estimate is not one or two calls' noise.
func (b *bench) calibrate(p *point, secs float64) (float64, error) {
	for n := 1; ; n *= 2 {
		est, err := b.timeit(p, n)
		if err != nil {
			return 0, err
		}
		if est*float64(n) >= secs/8 || n >= 4096 {
			return est, nil
		}
	}
}

// timeit runs iters calls after a barrier and returns the mean seconds per
// call, the maximum over the ranks (every rank gets the same value, so
// every rank runs the same number of calls). With -sync each call follows
// a barrier of its own, which is not timed.
func (b *bench) timeit(p *point, iters int) (float64, error) {
	if err := b.ctl.Barrier(); err != nil {
		return 0, err
	}
	spent, err := b.loop(p, iters)
	if err != nil {
		return 0, err
	}
	mine := []float64{spent.Seconds() / float64(iters)}
	all := []float64{0}
	if err := mplite.Allreduce(b.ctl, mine, all, mplite.Max[float64]()); err != nil {
		return 0, err
	}
	return all[0], nil
}

// loop makes iters calls and returns the time they took: the whole loop,
// or with -sync the sum of the calls alone, each after an untimed barrier.
func (b *bench) loop(p *point, iters int) (time.Duration, error) {
	if !b.o.sync {
		start := time.Now()
		for range iters {
			if err := p.call(); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	var spent time.Duration
	for range iters {
		if err := b.ctl.Barrier(); err != nil {
			return 0, err
		}
		start := time.Now()
		if err := p.call(); err != nil {
			return 0, err
		}
		spent += time.Since(start)
	}
	return spent, nil
}

// agreeErrors sums the ranks' mismatches: every rank fails if any saw one.
func (b *bench) agreeErrors() error {
	if !b.o.check {
		return nil
	}
	mine, all := []int64{int64(b.mismatches)}, []int64{0}
	if err := mplite.Allreduce(b.ctl, mine, all, mplite.Sum[int64]()); err != nil {
		return err
	}
	if all[0] > 0 {
		return fmt.Errorf("%d result mismatches over all ranks (%d here)", all[0], b.mismatches)
	}
	if b.c.Rank() == 0 {
		fmt.Fprintln(b.errOut, "collbench: check: every result matches the reference")
	}
	return nil
}

// reductions' element count and printed bytes for a size.
func elems(size int) int {
	if size == 0 {
		return 0
	}
	return max(1, size/8)
}
