package cc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// CC-MPI's compiled Alltoallv, Levels 2 and 3 (Level 1, which gathers the
// pattern at run time, is mplite's Alltoallv "phased" algorithm):
//
//   - Level 2: every rank holds the whole pattern (a []Msg) locally, so no
//     exchange of counts is needed; the schedule is computed on each rank
//     (mplite.Comm.AlltoallvPattern, or CompileSchedule once and
//     mplite.Comm.AlltoallvSchedule per call).
//   - Level 3: the schedule itself was computed beforehand, for instance
//     offline with both schedulers keeping the better, and is loaded from a
//     file (ReadSchedule) and run with mplite.Comm.AlltoallvSchedule.
//
// mplite separates the phases by per-message readiness instead of CC-MPI's
// barrier (see mplite.Comm.AlltoallvSchedule).

// MaxScheduleRanks bounds the ranks of a Schedule (and of a schedule file).
const MaxScheduleRanks = 1 << 12

// maxScheduleMsg bounds one message of a schedule (1 TiB).
const maxScheduleMsg = 1 << 40

// scheduleMagic is a schedule file's first line, with its version.
const scheduleMagic = "mplite-schedule 1"

// Schedule is a checked communication schedule for n ranks: phases of
// messages, each ordered pair of ranks at most once, no self-messages.
// It is immutable and may be shared by every rank (and goroutine).
type Schedule struct {
	n       int
	phases  []Phase
	byRank  [][]Op // each rank's part, in phase order
	largest int    // the longest message, in bytes
}

// Op is one rank's part in one message of a schedule.
type Op struct {
	Phase int  // the message's phase
	Peer  int  // the rank at the other end
	Size  int  // the message's bytes
	Send  bool // whether the rank sends the message (else it receives it)
}

// NewSchedule checks phases as a schedule for n ranks and compiles each
// rank's part of it. Every rank must be in [0, n), no message may be a
// self-message (those are local copies) or have a negative size, no
// ordered pair may appear twice, and no phase may be empty. It does not
// require the phases to be contention-free (a scheduler's last phase of
// small messages is not); CheckSchedule says whether they are.
func NewSchedule(n int, phases []Phase) (*Schedule, error) {
	if n < 1 || n > MaxScheduleRanks {
		return nil, fmt.Errorf("mplite: schedule for %d ranks (want 1 to %d)", n, MaxScheduleRanks)
	}
	s := &Schedule{n: n, phases: make([]Phase, len(phases)), byRank: make([][]Op, n)}
	seen := make(map[[2]int]int)
	for k, p := range phases {
		if len(p) == 0 {
			return nil, fmt.Errorf("mplite: schedule phase %d is empty", k)
		}
		for _, m := range p {
			switch {
			case m.Src < 0 || m.Src >= n || m.Dst < 0 || m.Dst >= n:
				return nil, fmt.Errorf("mplite: schedule phase %d: message %d→%d outside ranks 0 to %d", k, m.Src, m.Dst, n-1)
			case m.Src == m.Dst:
				return nil, fmt.Errorf("mplite: schedule phase %d: self-message %d→%d (self-messages are local copies)", k, m.Src, m.Dst)
			case m.Size < 0 || m.Size > maxScheduleMsg:
				return nil, fmt.Errorf("mplite: schedule phase %d: message %d→%d of %d bytes", k, m.Src, m.Dst, m.Size)
			}
			key := [2]int{m.Src, m.Dst}
			if prev, dup := seen[key]; dup {
				return nil, fmt.Errorf("mplite: schedule phase %d: message %d→%d already sent in phase %d", k, m.Src, m.Dst, prev)
			}
			seen[key] = k
			s.largest = max(s.largest, m.Size)
			s.byRank[m.Src] = append(s.byRank[m.Src], Op{Phase: k, Peer: m.Dst, Size: m.Size, Send: true})
			s.byRank[m.Dst] = append(s.byRank[m.Dst], Op{Phase: k, Peer: m.Src, Size: m.Size})
		}
		s.phases[k] = append(Phase(nil), p...)
	}
	return s, nil
}

// CompileSchedule is CC-MPI's Level 2 scheduling ("control2"): it cuts a
// pattern every rank holds locally into phases with the named scheduler
// (SchedAllToAll or SchedGreedy) and the small-message threshold, and
// checks the result with NewSchedule. Empty messages and self-messages are
// left out; a pair given twice is an error.
func CompileSchedule(n int, pattern []Msg, scheduler string, threshold int) (*Schedule, error) {
	if threshold < 0 {
		return nil, fmt.Errorf("mplite: phased threshold %d is negative", threshold)
	}
	msgs := make([]Msg, 0, len(pattern))
	seen := make(map[[2]int]bool, len(pattern))
	for _, m := range pattern {
		if m.Src < 0 || m.Src >= n || m.Dst < 0 || m.Dst >= n || m.Size < 0 {
			return nil, fmt.Errorf("mplite: pattern message %d→%d of %d bytes for %d ranks", m.Src, m.Dst, m.Size, n)
		}
		key := [2]int{m.Src, m.Dst}
		if seen[key] {
			return nil, fmt.Errorf("mplite: pattern has %d→%d twice", m.Src, m.Dst)
		}
		seen[key] = true
		if m.Size > 0 && m.Src != m.Dst {
			msgs = append(msgs, m)
		}
	}
	var phases []Phase
	switch scheduler {
	case SchedAllToAll, "":
		phases = AllToAllSchedule(n, msgs, threshold)
	case SchedGreedy:
		phases = GreedySchedule(msgs, threshold)
	default:
		return nil, fmt.Errorf("mplite: unknown scheduler %q (valid: %s, %s)", scheduler, SchedAllToAll, SchedGreedy)
	}
	return NewSchedule(n, phases)
}

// Ranks is the number of ranks the schedule is for.
func (s *Schedule) Ranks() int { return s.n }

// Ops returns rank's part of the schedule: one Op per message it sends
// or receives, in phase order (nil for a rank outside the schedule). The
// slice is the schedule's own, shared with every caller: it must not be
// modified.
func (s *Schedule) Ops(rank int) []Op {
	if rank < 0 || rank >= s.n {
		return nil
	}
	return s.byRank[rank][:len(s.byRank[rank]):len(s.byRank[rank])]
}

// NumPhases is the number of phases.
func (s *Schedule) NumPhases() int { return len(s.phases) }

// Largest is the length in bytes of the schedule's longest message (0 for
// a schedule without messages).
func (s *Schedule) Largest() int { return s.largest }

// Phases returns a copy of the schedule's phases.
func (s *Schedule) Phases() []Phase {
	out := make([]Phase, len(s.phases))
	for k, p := range s.phases {
		out[k] = append(Phase(nil), p...)
	}
	return out
}

// Pattern returns every message of the schedule, phase by phase.
func (s *Schedule) Pattern() []Msg {
	var out []Msg
	for _, p := range s.phases {
		out = append(out, p...)
	}
	return out
}

// WriteSchedule writes s in the schedule file format ReadSchedule reads:
//
//	mplite-schedule 1
//	ranks N
//	phase
//	SRC DST BYTES
//	...
//
// one "phase" line before each phase's messages, one message per line.
func WriteSchedule(w io.Writer, s *Schedule) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s\nranks %d\n", scheduleMagic, s.n)
	for _, p := range s.phases {
		bw.WriteString("phase\n")
		for _, m := range p {
			fmt.Fprintf(bw, "%d %d %d\n", m.Src, m.Dst, m.Size)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("mplite: writing schedule: %w", err)
	}
	return nil
}

// maxScheduleLine bounds a schedule file's lines.
const maxScheduleLine = 256

// ReadSchedule reads a schedule in WriteSchedule's format (CC-MPI's
// Level 3: phases computed beforehand and stored). The parser is strict:
// the version line first, then "ranks N", then phases; blank lines and
// lines starting with '#' are skipped; numbers are plain decimal. Every
// error names the line. The result is checked as NewSchedule does.
func ReadSchedule(r io.Reader) (*Schedule, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, maxScheduleLine), maxScheduleLine)
	n := -1
	var phases []Phase
	line, magic := 0, false
	seen := map[[2]int]int{} // message -> its line
	for sc.Scan() {
		line++
		text := sc.Text()
		if text == "" || text[0] == '#' {
			continue
		}
		f := strings.Fields(text)
		bad := func(format string, args ...any) error {
			return fmt.Errorf("mplite: schedule line %d: %s", line, fmt.Sprintf(format, args...))
		}
		switch {
		case !magic:
			if strings.TrimSpace(text) != scheduleMagic {
				if len(f) == 2 && f[0] == "mplite-schedule" {
					return nil, bad("version %q, this reader knows %q", f[1], scheduleMagic)
				}
				return nil, bad("%q is not a schedule file (want %q first)", trunc(text), scheduleMagic)
			}
			magic = true
		case n < 0:
			if len(f) != 2 || f[0] != "ranks" {
				return nil, bad("want \"ranks N\", got %q", trunc(text))
			}
			v, err := decimal(f[1], MaxScheduleRanks)
			if err != nil || v < 1 {
				return nil, bad("ranks %q: want 1 to %d", trunc(f[1]), MaxScheduleRanks)
			}
			n = v
		case len(f) == 1 && f[0] == "phase":
			if k := len(phases); k > 0 && len(phases[k-1]) == 0 {
				return nil, bad("phase %d is empty", k-1)
			}
			phases = append(phases, Phase{})
		default:
			if len(f) != 3 {
				return nil, bad("want \"phase\" or \"SRC DST BYTES\", got %q", trunc(text))
			}
			if len(phases) == 0 {
				return nil, bad("message before the first \"phase\" line")
			}
			var v [3]int
			for i, lim := range [3]int{n - 1, n - 1, maxScheduleMsg} {
				x, err := decimal(f[i], lim)
				if err != nil {
					return nil, bad("%s %q: %v", [3]string{"source", "destination", "size"}[i], trunc(f[i]), err)
				}
				v[i] = x
			}
			if v[0] == v[1] {
				return nil, bad("self-message %d→%d (self-messages are local copies)", v[0], v[1])
			}
			if prev, dup := seen[[2]int{v[0], v[1]}]; dup {
				return nil, bad("message %d→%d already on line %d", v[0], v[1], prev)
			}
			seen[[2]int{v[0], v[1]}] = line
			k := len(phases) - 1
			phases[k] = append(phases[k], Msg{Src: v[0], Dst: v[1], Size: v[2]})
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("mplite: schedule line %d: longer than %d bytes", line+1, maxScheduleLine)
		}
		return nil, fmt.Errorf("mplite: reading schedule: %w", err)
	}
	switch {
	case !magic:
		return nil, fmt.Errorf("mplite: schedule: empty file (want %q first)", scheduleMagic)
	case n < 0:
		return nil, fmt.Errorf("mplite: schedule: no \"ranks N\" line")
	case len(phases) > 0 && len(phases[len(phases)-1]) == 0:
		return nil, fmt.Errorf("mplite: schedule: phase %d is empty", len(phases)-1)
	}
	return NewSchedule(n, phases)
}

// decimal parses a plain decimal number in [0, lim]: digits only, no
// sign, no leading zeros.
func decimal(s string, lim int) (int, error) {
	if s == "" || len(s) > 19 {
		return 0, fmt.Errorf("not a number in [0, %d]", lim)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("not a plain decimal number")
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("leading zero")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v > int64(lim) {
		return 0, fmt.Errorf("outside [0, %d]", lim)
	}
	return int(v), nil
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
