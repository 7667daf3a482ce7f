// Package netpipe is the library behind cmd/netpipe: NetPIPE's measurement
// method (message-size schedule, repeat calibration, minimum over trials,
// output formats), a small Conn interface that every benchmark module
// implements, the raw-frame, kernel-TCP and VI modules, and the plots.
//
// The method follows NetPIPE 3.x (netpipe.c, FINAL build) so that numbers
// from this tool and from NPtcp can sit in one table.
package netpipe

import "time"

// NetPIPE 3.x constants (netpipe.h, FINAL build).
const (
	// NSamp bounds the number of data points of one run.
	NSamp = 8000
	// DefaultPerturbation is the ±bytes tested around each size.
	DefaultPerturbation = 3
	// StopTime ends the run once one transfer takes this long.
	StopTime = time.Second
	// Trials is the number of timed runs per point; the fastest is kept.
	Trials = 7
	// RunTime is the target duration of one trial, used to calibrate the
	// repeat count.
	RunTime = 250 * time.Millisecond
	// LatencyRepeats is the number of round trips that estimate the first
	// point's transfer time.
	LatencyRepeats = 100
)

// Sched generates NetPIPE's message-size schedule: sizes grow by an increment
// that doubles every other step after the third point, and once the
// increment exceeds pert+1 every size is also tested at size-pert and
// size+pert. Use NewSched, then call Next until it reports false. The zero
// value is not usable.
//
// The loop mirrors netpipe.c's main loop exactly, including its quirks: the
// upper bound is checked against the base size, so the last point may exceed
// it by pert, and the NSamp-3 bound is checked only before a group of
// perturbed points.
type Sched struct {
	end, pert int
	len, inc  int
	nq        int
	n         int
	// group state: the perturbations still to emit for the current len
	p, pstep int
	inGroup  bool
}

// NewSched returns the schedule from start to end bytes with ±pert
// perturbations (pert <= 0 means none). start must be at least 1.
func NewSched(start, end, pert int) *Sched {
	if pert < 0 {
		pert = 0
	}
	s := &Sched{end: end, pert: pert, len: start}
	if start > 1 {
		s.inc = start / 2
		s.nq = 1
	} else {
		s.inc = 1
	}
	return s
}

// Next returns the next size and the current increment (which calibrates the
// repeat count), or ok=false when the schedule is done. Stopping on
// NetPIPE's time limit is the caller's business.
func (s *Sched) Next() (size, inc int, ok bool) {
	if !s.inGroup {
		if s.n >= NSamp-3 || s.len > s.end || s.len < 1 {
			return 0, 0, false
		}
		if s.nq > 2 && s.nq%2 == 1 {
			s.inc += s.inc
		}
		if s.pert > 0 && s.inc > s.pert+1 {
			s.p, s.pstep = -s.pert, s.pert
		} else {
			s.p, s.pstep = 0, s.pert+1
		}
		s.inGroup = true
	}
	size, inc = s.len+s.p, s.inc
	s.n++
	s.p += s.pstep
	if s.p > s.pert {
		s.inGroup = false
		s.len += s.inc
		s.nq++
	}
	return size, inc, true
}

// Schedule returns every size NewSched(start, end, pert) yields, ignoring
// NetPIPE's time limit.
func Schedule(start, end, pert int) []int {
	var out []int
	s := NewSched(start, end, pert)
	for {
		size, _, ok := s.Next()
		if !ok {
			return out
		}
		out = append(out, size)
	}
}

// Repeats is NetPIPE's calibration of the repeat count for the next point:
// enough repetitions that one trial lasts about runtime, given the last
// point's one-way time tlast, the previous message size prev and the
// increment inc, and never fewer than trials.
func Repeats(runtime time.Duration, tlast float64, prev, inc, trials int) int {
	den := float64(prev) - float64(inc) + 1
	if den <= 0 {
		return trials // netpipe.c's MAX picks TRIALS for a negative estimate
	}
	est := float64(prev) / den * tlast
	if est <= 0 {
		return trials
	}
	n := runtime.Seconds() / est
	if n > 1<<30 {
		n = 1 << 30
	}
	if int(n) < trials {
		return trials
	}
	return int(n)
}

// Mbps is NetPIPE's throughput: bits / (seconds * 2^20).
func Mbps(bytes int, bidir bool, seconds float64) float64 {
	bits := float64(bytes) * 8
	if bidir {
		bits *= 2
	}
	return bits / (seconds * 1024 * 1024)
}
