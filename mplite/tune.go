package mplite

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethervia/ethervia/internal/linerate"
	"github.com/ethervia/ethervia/mplite/cc"
)

// Tuning holds the machine parameters of the cost model.
type Tuning struct {
	Ts float64 // start-up time of a message, seconds
	Tc float64 // time per byte, seconds
	// Rate is the line rate of the job's slowest switch port in bit/s (0:
	// unknown). A known rate bounds Tc below (8/Rate), sizes the
	// connections' windows, paces multicast, and lets the cost model
	// choose the algorithms that pay on a line-rate switch (docs/
	// design-notes.md, "Collectives at line rate").
	Rate uint64
}

// byteTime is the time per byte the cost model uses: Tc, or the line's
// if that is slower.
func (t Tuning) byteTime() float64 {
	if t.Rate > 0 {
		return max(t.Tc, 8/float64(t.Rate))
	}
	return t.Tc
}

// DefaultTuning is used unless measured or loaded: 20 µs and 10 Gb/s.
func DefaultTuning() Tuning { return Tuning{Ts: 20e-6, Tc: 0.8e-9} }

// MarshalText writes the tuning file format that WithTuningFile reads.
func (t Tuning) MarshalText() ([]byte, error) {
	b := fmt.Appendf(nil, "ts %g\ntc %g\n", t.Ts, t.Tc)
	if t.Rate > 0 {
		b = fmt.Appendf(b, "rate %s\n", linerate.Format(t.Rate))
	}
	return b, nil
}

// ParseTuning reads a tuning file: lines "ts SECONDS" and "tc
// SECONDS_PER_BYTE", optionally "rate RATE" (the slowest port's line rate,
// tc style: "100mbit") and "algo COLLECTIVE ALGORITHM" (overrides), blank
// lines and #-comments. Missing values keep DefaultTuning's.
func ParseTuning(r io.Reader) (Tuning, map[string]string, error) {
	t := DefaultTuning()
	algos := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = strings.TrimSpace(s[:i])
		}
		if s == "" {
			continue
		}
		f := strings.Fields(s)
		switch {
		case (f[0] == "ts" || f[0] == "tc") && len(f) == 2:
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil || v < 0 || v > 1 || math.IsNaN(v) {
				return t, nil, fmt.Errorf("mplite: tuning line %d: bad %s %q", line, f[0], f[1])
			}
			if f[0] == "ts" {
				t.Ts = v
			} else {
				t.Tc = v
			}
		case f[0] == "rate" && len(f) == 2:
			r, err := linerate.Parse(f[1])
			if err != nil {
				return t, nil, fmt.Errorf("mplite: tuning line %d: %w", line, err)
			}
			t.Rate = r
		case f[0] == "algo" && len(f) == 3:
			if err := checkAlgo(f[1], f[2]); err != nil {
				return t, nil, fmt.Errorf("tuning line %d: %w", line, err)
			}
			algos[f[1]] = f[2]
		default:
			return t, nil, fmt.Errorf("mplite: tuning line %d: cannot parse %q", line, s)
		}
	}
	if err := sc.Err(); err != nil {
		return t, nil, fmt.Errorf("mplite: tuning: %w", err)
	}
	return t, algos, nil
}

// WithAlgorithm forces the algorithm of a collective ("auto" restores the
// cost model's choice), overriding MPLITE_ALGO_<COLL>. Every rank must
// pass the same. An unknown name is an error listing the valid ones.
func WithAlgorithm(coll, algo string) Option {
	return func(c *config) error {
		if err := checkAlgo(coll, algo); err != nil {
			return err
		}
		if c.algos == nil {
			c.algos = map[string]string{}
		}
		c.algos[coll] = algo
		c.algoSet = append(c.algoSet, coll)
		return nil
	}
}

// WithTuning sets the cost model's parameters.
func WithTuning(t Tuning) Option {
	return func(c *config) error {
		if !(t.Ts >= 0 && t.Tc >= 0) {
			return fmt.Errorf("mplite: tuning %+v is negative", t)
		}
		if t.Rate > 0 {
			c.rateSet = true
		} else if c.rateSet {
			t.Rate = c.tuning.Rate
		}
		c.tuning, c.tuneMeasure, c.tuneSet = t, false, true
		return nil
	}
}

// WithTuningFile loads the cost model's parameters (and algorithm
// overrides) from a file in ParseTuning's format, overriding MPLITE_TUNING.
func WithTuningFile(path string) Option {
	return func(c *config) error {
		c.tuneSet = true
		return c.loadTuning(path)
	}
}

// WithPortRate gives the cost model the line rate of the job's slowest
// switch port in bit/s (0: unknown), as MPLITE_RATE (tc style, "100mbit")
// does; it keeps the rest of the tuning. Every rank must give the same.
func WithPortRate(bitsPerSec uint64) Option {
	return func(c *config) error {
		c.tuning.Rate, c.rateSet = bitsPerSec, true
		return nil
	}
}

// WithMeasuredTuning makes the world measure t_s and t_c at its first
// collective (a ping-pong between ranks 0 and 1, whose result rank 0
// broadcasts) and, unless a rate was given, the line rate of rank 1's port
// (a stream from rank 0; kept as Tuning.Rate only where the line, not the
// CPUs, bounds it); MPLITE_TUNING=measure does the same.
func WithMeasuredTuning() Option {
	return func(c *config) error {
		c.tuneMeasure, c.tuneSet = true, true
		return nil
	}
}

// WithPhasedThreshold sets the block size below which the "phased"
// all-to-all algorithms send everything at once (CC-MPI's small-message
// threshold; default DefaultPhasedThreshold). The cost model picks phased
// by itself only for blocks of at least this size, when auto is true or
// on a switch whose line rate binds (Tuning.Rate).
func WithPhasedThreshold(bytes int, auto bool) Option {
	return func(c *config) error {
		if bytes < 0 {
			return fmt.Errorf("mplite: phased threshold %d is negative", bytes)
		}
		c.phasedTh, c.phasedAuto = bytes, auto
		return nil
	}
}

// DefaultPhasedThreshold is where CC-MPI's phased all-to-all began to win
// on its 100 Mb/s switch (8 to 16 KB).
const DefaultPhasedThreshold = 8 << 10

func (c *config) loadTuning(path string) error {
	if path == "measure" {
		c.tuneMeasure = true
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("mplite: tuning file: %w", err)
	}
	defer f.Close()
	t, algos, err := ParseTuning(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if c.rateSet || t.Rate == 0 {
		t.Rate = c.tuning.Rate
	}
	c.tuning, c.tuneMeasure = t, false
	for k, v := range algos {
		if c.algos == nil {
			c.algos = map[string]string{}
		}
		if !slices.Contains(c.algoSet, k) {
			c.algos[k] = v
		}
	}
	return nil
}

// collEnv applies MPLITE_RATE, MPLITE_TUNING and MPLITE_ALGO_<COLL> where
// no option said otherwise.
func (c *config) collEnv(getenv func(string) string) error {
	if s := getenv("MPLITE_RATE"); s != "" && !c.rateSet {
		r, err := linerate.Parse(s)
		if err != nil {
			return fmt.Errorf("%w: MPLITE_RATE: %w", ErrEnvironment, err)
		}
		c.tuning.Rate, c.rateSet = r, true
	}
	if p := getenv("MPLITE_TUNING"); p != "" && !c.tuneSet {
		if err := c.loadTuning(p); err != nil {
			return err
		}
	}
	for _, coll := range Collectives() {
		v := getenv("MPLITE_ALGO_" + strings.ToUpper(coll))
		if v == "" || slices.Contains(c.algoSet, coll) {
			continue
		}
		if err := checkAlgo(coll, v); err != nil {
			return fmt.Errorf("MPLITE_ALGO_%s: %w", strings.ToUpper(coll), err)
		}
		if c.algos == nil {
			c.algos = map[string]string{}
		}
		c.algos[coll] = v
	}
	return nil
}

// SetAlgorithm forces the algorithm of a collective on this communicator
// only ("auto": back to the world's options and the cost model). Every
// member must set the same before the next collective; it must not run
// concurrently with a collective on c.
func (c *Comm) SetAlgorithm(coll, algo string) error {
	if err := checkAlgo(coll, algo); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.coll.algos == nil {
		c.coll.algos = map[string]string{}
	}
	c.coll.algos[coll] = algo
	return nil
}

// SetAlltoallRadix sets the radix of the Bruck alltoall on this
// communicator (0: the cost model's choice). Every member must set the
// same.
func (c *Comm) SetAlltoallRadix(r int) error {
	if r < 0 || r == 1 {
		return fmt.Errorf("mplite: Bruck radix %d (want 0 or at least 2)", r)
	}
	c.mu.Lock()
	c.coll.radix = r
	c.mu.Unlock()
	return nil
}

// SetScheduler chooses the phased Alltoallv's scheduler on this
// communicator: cc.SchedAllToAll (the default) or cc.SchedGreedy.
func (c *Comm) SetScheduler(name string) error {
	if name != cc.SchedAllToAll && name != cc.SchedGreedy {
		return fmt.Errorf("mplite: unknown scheduler %q (valid: %s, %s)", name, cc.SchedAllToAll, cc.SchedGreedy)
	}
	c.mu.Lock()
	c.coll.sched = name
	c.mu.Unlock()
	return nil
}

func (c *Comm) scheduler() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.coll.sched
}

func (c *Comm) phasedThreshold() int { return c.cfg.phasedTh }

// Tuning returns the cost model's parameters in use (measured at the first
// collective if so configured).
func (c *Comm) Tuning() Tuning {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tuned {
		return c.tune
	}
	return c.cfg.tuning
}

// Algorithm returns the algorithm the communicator would use for coll with
// m bytes (as Cost counts them) and a commutative operator.
func (c *Comm) Algorithm(coll string, m int) (string, error) {
	t := c.tables.table(coll)
	if t == nil {
		return "", checkAlgo(coll, "")
	}
	if e := c.pick(t, m, true); e != nil {
		return e.name, nil
	}
	return "", nil
}

// bestRadix is the Bruck radix of least estimated time for blocks of m.
func (c *Comm) bestRadix(m int, t Tuning) int {
	n := c.csize
	best, bestT := 2, math.Inf(1)
	for r := 2; r <= max(n, 2); r++ {
		c1, c2 := bruckCost(n, m, r)
		if est := c1*t.Ts + c2*t.byteTime(); est < bestT {
			best, bestT = r, est
		}
	}
	return best
}

func (c *Comm) alltoallRadix(m int) int {
	c.mu.Lock()
	r := c.coll.radix
	t := c.cfg.tuning
	if c.tuned {
		t = c.tune
	}
	c.mu.Unlock()
	if r >= 2 {
		return r
	}
	return c.bestRadix(m, t)
}

// ensureTuned settles the tuning before the first collective: the
// configured values, or a measurement on the world. (The first collective
// of a rank is always on the world: every other communicator comes from a
// collective on it.)
func (c *Comm) ensureTuned() error {
	c.mu.Lock()
	if c.tuned {
		c.mu.Unlock()
		return nil
	}
	if !c.cfg.tuneMeasure || c.size == 1 {
		c.tune, c.tuned = c.cfg.tuning, true
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	t, err := c.world.measure()
	if err != nil {
		return fmt.Errorf("measure tuning: %w", err)
	}
	if c.cfg.tuning.Rate > 0 {
		t.Rate = c.cfg.tuning.Rate
	}
	c.mu.Lock()
	c.tune, c.tuned = t, true
	c.mu.Unlock()
	return nil
}

// measure times ping-pongs of 0 and 64 KiB between world ranks 0 and 1
// and, with no rate configured, probes the line between them
// (rateprobe.go); rank 0 broadcasts the result. Each size is timed as the median of
// single round trips after a few untimed ones: the first carries the
// connection's set-up, and where ranks share CPUs single round trips
// swing by milliseconds (a mean of ten once gave t_s = 2.9 ms and, the
// large ping-pong having been the luckier, t_c = 0).
func (c *Comm) measure() (Tuning, error) {
	const small, large, warm, rounds = 0, 64 << 10, 3, 15
	// Its own request set: this runs on the world inside another
	// communicator's first collective, so the world's are not ours to lend.
	x := &xfer{c: c}
	var res [24]byte
	if c.rank <= 1 {
		buf := make([]byte, large)
		peer := 1 - c.rank
		var times [rounds]float64
		pp := func(size int) (float64, error) {
			for i := range warm + rounds {
				start := time.Now()
				if c.rank == 0 {
					if err := x.send(buf[:size], peer, 900); err != nil {
						return 0, err
					}
					if err := x.wait(); err != nil {
						return 0, err
					}
					if err := x.recv(buf[:size], peer, 901); err != nil {
						return 0, err
					}
				} else {
					if err := x.recv(buf[:size], peer, 900); err != nil {
						return 0, err
					}
					if err := x.wait(); err != nil {
						return 0, err
					}
					if err := x.send(buf[:size], peer, 901); err != nil {
						return 0, err
					}
				}
				if err := x.wait(); err != nil {
					return 0, err
				}
				if i >= warm {
					times[i-warm] = time.Since(start).Seconds() / 2
				}
			}
			slices.Sort(times[:])
			return times[rounds/2], nil
		}
		ts, err := pp(small)
		if err != nil {
			return Tuning{}, err
		}
		tl, err := pp(large)
		if err != nil {
			return Tuning{}, err
		}
		// A large round trip no slower than an empty one measured
		// nothing of the bytes: keep the default t_c rather than 0.
		tc := (tl - ts) / large
		if !(tc > 0) {
			tc = DefaultTuning().Tc
		}
		t := Tuning{Ts: ts, Tc: tc}
		binary.LittleEndian.PutUint64(res[:], math.Float64bits(t.Ts))
		binary.LittleEndian.PutUint64(res[8:], math.Float64bits(t.Tc))
		if c.cfg.tuning.Rate == 0 && !c.cfg.osYield {
			// The fastest of probeRuns line-clocked streams: a line caps
			// every one, while a stall of either rank (a busy CPU) only
			// slows one, and unsettles its clock.
			rate := 0.0
			for range probeRuns {
				r, err := c.probeRate(x)
				if err != nil {
					return Tuning{}, fmt.Errorf("port rate: %w", err)
				}
				rate = max(rate, r)
			}
			if lineBinds(rate, tc) {
				binary.LittleEndian.PutUint64(res[16:], uint64(rate*8))
			}
		}
	}
	if err := c.bcastBinomial(res[:], 0); err != nil {
		return Tuning{}, err
	}
	t := Tuning{Ts: math.Float64frombits(binary.LittleEndian.Uint64(res[:])),
		Tc: math.Float64frombits(binary.LittleEndian.Uint64(res[8:])), Rate: binary.LittleEndian.Uint64(res[16:])}
	if !(t.Ts >= 0 && t.Tc >= 0) {
		return Tuning{}, errors.New("measured a negative time")
	}
	return t, nil
}
