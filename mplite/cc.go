package mplite

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// CC-MPI's phased communication (Karwande, Yuan, Lowenthal): a many-to-many
// pattern is cut into phases in which no rank sends twice and no rank
// receives twice, so that on a switch no link carries two messages at once;
// a barrier separates the phases.

// Msg is one message of a communication pattern: Size bytes from rank Src
// to rank Dst.
type Msg struct{ Src, Dst, Size int }

// Phase is a set of messages sent at the same time.
type Phase []Msg

// Scheduler names for SetScheduler.
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

// allToAllPhases is the all-to-all pattern's n-1 phases: phase i-1 is
// {j → j+i mod n}.
func allToAllPhases(n int) []Phase {
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

// runPhases moves the blocks of a (v) all-to-all phase by phase, with a
// barrier between phases. Self-messages are copied first.
func (c *Comm) runPhases(phases []Phase, send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	me := c.crank
	if err := c.selfCopy(send, scounts, sdispls, recv, rcounts, rdispls); err != nil {
		return err
	}
	x := c.newXfer()
	for k, p := range phases {
		if k > 0 {
			if err := c.barrierColl(); err != nil {
				return err
			}
		}
		for _, m := range p {
			if m.Dst == me {
				if err := x.recv(recv[rdispls[m.Src]:rdispls[m.Src]+rcounts[m.Src]], m.Src, 1000); err != nil {
					_ = x.wait()
					return err
				}
			}
		}
		for _, m := range p {
			if m.Src == me {
				if err := x.send(send[sdispls[m.Dst]:sdispls[m.Dst]+scounts[m.Dst]], m.Dst, 1000); err != nil {
					_ = x.wait()
					return err
				}
			}
		}
		if err := x.wait(); err != nil {
			return err
		}
	}
	return nil
}

// alltoallvPhased is CC-MPI's Level 1: the pattern is gathered at run
// time, then scheduled the same way on every member. Empty messages are
// not sent.
func (c *Comm) alltoallvPhased(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	n := c.csize
	mine := make([]byte, 8*n)
	for j, k := range scounts {
		binary.LittleEndian.PutUint64(mine[8*j:], uint64(k))
	}
	all := make([]byte, 8*n*n)
	if err := c.allgatherBytes(mine, all, c.pickAlgo(collAllgather, 8*n, true)); err != nil {
		return fmt.Errorf("exchange counts: %w", err)
	}
	msgs := make([]Msg, 0, n*n)
	for i := range n {
		for j := range n {
			if k := int(binary.LittleEndian.Uint64(all[8*(i*n+j):])); k > 0 && i != j {
				msgs = append(msgs, Msg{Src: i, Dst: j, Size: k})
			}
		}
	}
	if k := int(binary.LittleEndian.Uint64(all[8*(c.crank*n+c.crank):])); k != scounts[c.crank] {
		return fmt.Errorf("counts changed under the exchange")
	}
	th := c.phasedThreshold()
	var phases []Phase
	if c.scheduler() == SchedGreedy {
		phases = GreedySchedule(msgs, th)
	} else {
		phases = AllToAllSchedule(n, msgs, th)
	}
	// A member that expects bytes from a rank that sends it none would
	// wait for ever: check what the schedule says against rcounts.
	for i := range n {
		if i == c.crank {
			continue
		}
		got := int(binary.LittleEndian.Uint64(all[8*(i*n+c.crank):]))
		if got != rcounts[i] {
			return fmt.Errorf("rank %d sends %d bytes where %d are expected", i, got, rcounts[i])
		}
	}
	return c.runPhases(phases, send, scounts, sdispls, recv, rcounts, rdispls)
}
