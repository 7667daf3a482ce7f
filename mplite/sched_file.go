package mplite

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// CC-MPI's compiled Alltoallv, Levels 2 and 3 (Level 1, which gathers the
// pattern at run time, is Alltoallv's "phased" algorithm):
//
//   - Level 2: every rank holds the whole pattern (a []Msg) locally, so no
//     exchange of counts is needed; the schedule is computed on each rank
//     (AlltoallvPattern, or CompileSchedule once and AlltoallvSchedule per
//     call).
//   - Level 3: the schedule itself was computed beforehand, for instance
//     offline with both schedulers keeping the better, and is loaded from a
//     file (ReadSchedule) and run with AlltoallvSchedule.
//
// Phases are separated by per-message readiness instead of CC-MPI's barrier
// (see AlltoallvSchedule).

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
	n      int
	phases []Phase
	byRank [][]schedOp // each rank's part, in phase order
}

// schedOp is one rank's part in one message of a schedule.
type schedOp struct {
	phase int
	peer  int
	size  int
	send  bool
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
	s := &Schedule{n: n, phases: make([]Phase, len(phases)), byRank: make([][]schedOp, n)}
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
			s.byRank[m.Src] = append(s.byRank[m.Src], schedOp{phase: k, peer: m.Dst, size: m.Size, send: true})
			s.byRank[m.Dst] = append(s.byRank[m.Dst], schedOp{phase: k, peer: m.Src, size: m.Size})
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

// Tags of the scheduled Alltoallv on the collective context.
const (
	tagSchedData  = 2000
	tagSchedReady = 2001
)

// AlltoallvPattern is Alltoallv (same buffers and counts) at CC-MPI's
// Level 2: pattern, the whole communication pattern, which every member
// holds locally and passes identically, is scheduled on each member with
// the communicator's scheduler (SetScheduler) and phased threshold, with no
// exchange of counts, and run as AlltoallvSchedule does. Scheduling costs
// time on every call: for a pattern used more than once, CompileSchedule
// it once and call AlltoallvSchedule.
func (c *Comm) AlltoallvPattern(pattern []Msg, send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	s, err := CompileSchedule(c.csize, pattern, c.scheduler(), c.phasedThreshold())
	if err != nil {
		return c.collErr(collAlltoallv, err)
	}
	return c.AlltoallvSchedule(s, send, scounts, sdispls, recv, rcounts, rdispls)
}

// AlltoallvSchedule is Alltoallv (same buffers and counts) run phase by
// phase by a precomputed schedule (CC-MPI's data_trans2; Level 3 when s
// was loaded with ReadSchedule). Every member must pass the same schedule,
// for the communicator's size; the schedule's messages must be exactly the
// non-empty counts (a message of the schedule from i to j has scounts[j]
// bytes on i and rcounts[i] on j), which each member checks for its own
// part before sending anything.
//
// Synchronisation: instead of a barrier between phases (log2 n rounds in
// sequence on every member, about 1 ms each in CC-MPI), each receiver, once
// it has finished its earlier phases and posted its receive of phase k,
// sends the phase's sender a zero-byte "ready" message, and the sender
// starts the data only when it has it. So a member's link to the switch
// carries at most its one phase-k message in each direction: its own
// earlier sends and receives are complete (it waited for them), and the
// member it sends to has finished receiving its earlier phases. That is
// the contention-freedom a barrier gives, for one small message per
// message and no log n rounds, and members whose phases do not depend on
// each other are not held back. Phases with several messages per member
// (the scheduler's last phase of small messages) send them all at once.
func (c *Comm) AlltoallvSchedule(s *Schedule, send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	if err := c.enter(collAlltoallv); err != nil {
		return err
	}
	defer c.leave()
	return c.collErr(collAlltoallv, c.alltoallvSchedule(s, send, scounts, sdispls, recv, rcounts, rdispls))
}

func (c *Comm) alltoallvSchedule(s *Schedule, send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	n, me := c.csize, c.crank
	if s == nil {
		return errors.New("nil schedule")
	}
	if s.n != n {
		return fmt.Errorf("schedule for %d ranks on a communicator of %d", s.n, n)
	}
	if err := checkLayout(scounts, sdispls, len(send), n); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if err := checkLayout(rcounts, rdispls, len(recv), n); err != nil {
		return fmt.Errorf("receive: %w", err)
	}
	ops := s.byRank[me]
	if err := checkOps(ops, me, scounts, rcounts); err != nil {
		return err
	}
	if err := c.selfCopy(send, scounts, sdispls, recv, rcounts, rdispls); err != nil {
		return err
	}
	data, ready := c.newXfer(), c.newXfer()
	for i := 0; i < len(ops); {
		j := i
		for j < len(ops) && ops[j].phase == ops[i].phase {
			j++
		}
		if err := c.runSchedPhase(ops[i:j], data, ready, send, sdispls, recv, rdispls); err != nil {
			return fmt.Errorf("phase %d: %w", ops[i].phase, err)
		}
		i = j
	}
	return nil
}

// checkOps checks a member's part of a schedule against its counts: each
// of its messages has the counted size and every non-empty count (other
// than its own) has a message. Pairs are unique in a Schedule, so equal
// numbers mean the same set.
func checkOps(ops []schedOp, me int, scounts, rcounts []int) error {
	nS, nR := 0, 0
	for j := range scounts {
		if j != me && scounts[j] > 0 {
			nS++
		}
		if j != me && rcounts[j] > 0 {
			nR++
		}
	}
	for _, o := range ops {
		counts, dir := rcounts, "receive from"
		if o.send {
			counts, dir = scounts, "send to"
		}
		if counts[o.peer] != o.size {
			return fmt.Errorf("the schedule says %s rank %d %d bytes, the counts say %d", dir, o.peer, o.size, counts[o.peer])
		}
		if o.size > 0 && o.send {
			nS--
		} else if o.size > 0 {
			nR--
		}
	}
	if nS != 0 || nR != 0 {
		return fmt.Errorf("the counts have %d sends and %d receives that the schedule does not", max(nS, 0), max(nR, 0))
	}
	return nil
}

// runSchedPhase runs one member's part of one phase: post its receives and
// tell their senders it is ready, wait until each of its destinations is
// ready, send, and wait for everything.
func (c *Comm) runSchedPhase(ops []schedOp, data, ready *xfer, send []byte, sdispls []int, recv []byte, rdispls []int) error {
	fail := func(err error) error {
		_ = ready.wait()
		_ = data.wait()
		return err
	}
	for _, o := range ops {
		if o.send || o.size == 0 {
			continue
		}
		if err := data.recv(recv[rdispls[o.peer]:rdispls[o.peer]+o.size], o.peer, tagSchedData); err != nil {
			return fail(err)
		}
		if err := ready.send(nil, o.peer, tagSchedReady); err != nil {
			return fail(err)
		}
	}
	for _, o := range ops {
		if o.send && o.size > 0 {
			if err := ready.recv(nil, o.peer, tagSchedReady); err != nil {
				return fail(err)
			}
		}
	}
	if err := ready.wait(); err != nil {
		return fail(err)
	}
	for _, o := range ops {
		if o.send && o.size > 0 {
			if err := data.send(send[sdispls[o.peer]:sdispls[o.peer]+o.size], o.peer, tagSchedData); err != nil {
				return fail(err)
			}
		}
	}
	return data.wait()
}
