// Package cc is CC-MPI's scheduling of many-to-many communication
// (Karwande, Yuan and Lowenthal, "CC-MPI: A Compiled Communication Capable
// MPI Prototype for Ethernet Switched Clusters", 2003), with no
// communication of its own: package mplite runs what it computes.
//
// A pattern is a set of messages (Msg). GreedySchedule and
// AllToAllSchedule cut it into phases (Phase) in which no rank sends twice
// and no rank receives twice, so that on a switch no link carries two
// messages at once; CheckSchedule checks such a cut. A Schedule is a
// checked cut for n ranks, compiled per rank (CompileSchedule from a
// pattern, NewSchedule from phases), that WriteSchedule and ReadSchedule
// store in a small text format: CC-MPI's Levels 2 and 3, which
// mplite.Comm.AlltoallvPattern and mplite.Comm.AlltoallvSchedule run.
package cc

import (
	"fmt"
	"slices"
)

// Msg is one message of a communication pattern: Size bytes from rank Src
// to rank Dst.
type Msg struct{ Src, Dst, Size int }

// Phase is a set of messages sent at the same time.
type Phase []Msg

// Scheduler names for CompileSchedule and mplite.Comm.SetScheduler.
const (
	// SchedAllToAll is CC-MPI's all-to-all-based scheduler (its Fig. 4):
	// each phase starts from the all-to-all phase holding the largest
	// message left; at most n-1 phases.
	SchedAllToAll = "alltoall"
	// SchedGreedy fills each phase with the largest messages that fit.
	SchedGreedy = "greedy"
)

// sortedMsgs returns the messages other than self-messages, largest first
// (ties in their given order).
func sortedMsgs(msgs []Msg) []Msg {
	out := make([]Msg, 0, len(msgs))
	for _, m := range msgs {
		if m.Src != m.Dst {
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b Msg) int { return b.Size - a.Size })
	return out
}

// phaseFill adds to p every message of todo (in order) that conflicts with
// nothing in p, marking it done.
type phaseFill struct {
	send, recv map[int]bool
}

func newFill() phaseFill { return phaseFill{map[int]bool{}, map[int]bool{}} }

func (f phaseFill) fits(m Msg) bool { return !f.send[m.Src] && !f.recv[m.Dst] }

func (f phaseFill) add(m Msg) { f.send[m.Src], f.recv[m.Dst] = true, true }

// lump puts every message left into one phase (they are all below the
// threshold: a barrier would cost more than their contention).
func lump(sorted []Msg, done []bool) Phase {
	var p Phase
	for i, m := range sorted {
		if !done[i] {
			p = append(p, m)
			done[i] = true
		}
	}
	return p
}

// GreedySchedule cuts msgs into contention-free phases: messages sorted
// largest first, each phase takes every message left that conflicts with
// none already in it. Once every message left is smaller than threshold,
// they all go into one last phase (which is not contention-free).
// Self-messages (Src == Dst) are local copies and left out.
func GreedySchedule(msgs []Msg, threshold int) []Phase {
	sorted := sortedMsgs(msgs)
	done := make([]bool, len(sorted))
	var phases []Phase
	for left := len(sorted); left > 0; {
		first := slices.Index(done, false)
		if sorted[first].Size < threshold {
			phases = append(phases, lump(sorted, done))
			break
		}
		f := newFill()
		var p Phase
		for i, m := range sorted {
			if !done[i] && f.fits(m) {
				f.add(m)
				p = append(p, m)
				done[i] = true
				left--
			}
		}
		phases = append(phases, p)
	}
	return phases
}

// AllToAllSchedule is CC-MPI's all-to-all-based scheduler (Fig. 4) for n
// ranks: messages sorted largest first; each new phase takes every message
// left of the all-to-all phase (offset Dst-Src mod n) holding the largest
// message left, then fills up greedily. At most n-1 phases; once every
// message left is below threshold they all go into one last phase.
// Self-messages are left out.
func AllToAllSchedule(n int, msgs []Msg, threshold int) []Phase {
	sorted := sortedMsgs(msgs)
	done := make([]bool, len(sorted))
	var phases []Phase
	for left := len(sorted); left > 0; {
		first := slices.Index(done, false)
		if sorted[first].Size < threshold {
			phases = append(phases, lump(sorted, done))
			break
		}
		class := offset(sorted[first], n)
		f := newFill()
		var p Phase
		take := func(i int) {
			f.add(sorted[i])
			p = append(p, sorted[i])
			done[i] = true
			left--
		}
		for i, m := range sorted {
			if !done[i] && offset(m, n) == class {
				take(i)
			}
		}
		for i, m := range sorted {
			if !done[i] && f.fits(m) {
				take(i)
			}
		}
		phases = append(phases, p)
	}
	return phases
}

func offset(m Msg, n int) int { return ((m.Dst-m.Src)%n + n) % n }

// CheckSchedule reports whether phases send every message of msgs (other
// than self-messages) exactly once and nothing else, and whether every
// phase is contention-free (no rank sends twice or receives twice in it).
func CheckSchedule(msgs []Msg, phases []Phase) error {
	want := map[[2]int]int{}
	for _, m := range msgs {
		if m.Src != m.Dst {
			want[[2]int{m.Src, m.Dst}]++
		}
	}
	for k, p := range phases {
		f := newFill()
		for _, m := range p {
			if !f.fits(m) {
				return fmt.Errorf("phase %d: %d→%d conflicts with another message of the phase", k, m.Src, m.Dst)
			}
			f.add(m)
			key := [2]int{m.Src, m.Dst}
			if want[key] == 0 {
				return fmt.Errorf("phase %d: %d→%d is not in the pattern or is scheduled twice", k, m.Src, m.Dst)
			}
			want[key]--
		}
	}
	for k, v := range want {
		if v != 0 {
			return fmt.Errorf("%d→%d is never scheduled", k[0], k[1])
		}
	}
	return nil
}

// AllToAllPhases returns the all-to-all pattern's n-1 phases: phase i-1 is
// {j → j+i mod n}.
func AllToAllPhases(n int) []Phase {
	phases := make([]Phase, 0, n-1)
	for i := 1; i < n; i++ {
		p := make(Phase, n)
		for j := range n {
			p[j] = Msg{Src: j, Dst: (j + i) % n}
		}
		phases = append(phases, p)
	}
	return phases
}
