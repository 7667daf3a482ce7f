package mplite

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ethervia/ethervia/mplite/cc"
)

// alltoallPhased is Alltoall's "phased" algorithm: the all-to-all
// pattern's n-1 phases, or everything at once (linear) for blocks below
// the phased threshold.
func (c *Comm) alltoallPhased(send, recv []byte) error {
	n := c.csize
	m := len(send) / n
	counts, displs := c.uniform(n, m)
	if m < c.phasedThreshold() {
		return c.alltoallvLinear(send, counts, displs, recv, counts, displs)
	}
	return c.runPhases(cc.AllToAllPhases(n), m < readyPhasesBelow, send, counts, displs, recv, counts, displs)
}

// readyPhasesBelow: a phased exchange whose largest message is shorter
// than this starts each phase's messages when their receivers say they are
// ready (runSchedPhase), longer ones after a barrier between phases.
// Interleaved against the barrier on every phase, 16 ranks at 100 Mbit/s:
// 16 KiB blocks 1.04-1.08x faster, 64 KiB 1.01-1.05x, 256 KiB 1.01x, 1 MiB
// 0.96x; 8 ranks, 64 KiB level, 1 MiB 0.89x (2026-12-02). AlltoallvSchedule
// (Levels 2 and 3) follows the same rule: its 1 MiB exchange took 735 ms
// on 8 ranks with ready messages and 651-660 with barriers, 16 ranks
// 1 493-1 510 and 1 429-1 433 (2026-12-02, eighteenth session). Why is
// not measured; a ready message crosses a switch port that may be taking
// in a window (4 ms) of another phase's bulk data.
const readyPhasesBelow = 128 << 10

// runPhases moves the blocks of a (v) all-to-all phase by phase, as
// runOps does with this member's part of phases. Every member must pass
// the same ready. Self-messages are copied first.
func (c *Comm) runPhases(phases []cc.Phase, ready bool, send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	if err := c.selfCopy(send, scounts, sdispls, recv, rcounts, rdispls); err != nil {
		return err
	}
	me := c.crank
	var buf [64]cc.Op
	ops := buf[:0]
	for k, p := range phases {
		for _, m := range p {
			switch {
			case m.Src == me && m.Dst != me:
				ops = append(ops, cc.Op{Phase: k, Peer: m.Dst, Size: scounts[m.Dst], Send: true})
			case m.Dst == me && m.Src != me:
				ops = append(ops, cc.Op{Phase: k, Peer: m.Src, Size: rcounts[m.Src]})
			}
		}
	}
	return c.runOps(ops, len(phases), ready, send, sdispls, recv, rdispls)
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
	if err := c.run(&c.tables.allgather, 8*n, true, &collArgs{send: mine, recv: all}); err != nil {
		return fmt.Errorf("exchange counts: %w", err)
	}
	msgs := make([]cc.Msg, 0, n*n)
	for i := range n {
		for j := range n {
			if k := int(binary.LittleEndian.Uint64(all[8*(i*n+j):])); k > 0 && i != j {
				msgs = append(msgs, cc.Msg{Src: i, Dst: j, Size: k})
			}
		}
	}
	if k := int(binary.LittleEndian.Uint64(all[8*(c.crank*n+c.crank):])); k != scounts[c.crank] {
		return fmt.Errorf("counts changed under the exchange")
	}
	th := c.phasedThreshold()
	var phases []cc.Phase
	if c.scheduler() == cc.SchedGreedy {
		phases = cc.GreedySchedule(msgs, th)
	} else {
		phases = cc.AllToAllSchedule(n, msgs, th)
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
	largest := 0
	for _, m := range msgs {
		largest = max(largest, m.Size)
	}
	return c.runPhases(phases, largest < readyPhasesBelow, send, scounts, sdispls, recv, rcounts, rdispls)
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
// time on every call: for a pattern used more than once, compile it once
// (cc.CompileSchedule) and call AlltoallvSchedule.
func (c *Comm) AlltoallvPattern(pattern []cc.Msg, send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	s, err := cc.CompileSchedule(c.csize, pattern, c.scheduler(), c.phasedThreshold())
	if err != nil {
		return c.collErr(collAlltoallv, err)
	}
	return c.AlltoallvSchedule(s, send, scounts, sdispls, recv, rcounts, rdispls)
}

// AlltoallvSchedule is Alltoallv (same buffers and counts) run phase by
// phase by a precomputed schedule (CC-MPI's data_trans2; Level 3 when s
// was loaded with cc.ReadSchedule). Every member must pass the same schedule,
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
// A schedule whose longest message is readyPhasesBelow or more has a
// barrier between phases instead, as the other phased exchanges do.
func (c *Comm) AlltoallvSchedule(s *cc.Schedule, send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	if err := c.enter(collAlltoallv); err != nil {
		return err
	}
	defer c.leave()
	return c.collErr(collAlltoallv, c.alltoallvSchedule(s, send, scounts, sdispls, recv, rcounts, rdispls))
}

func (c *Comm) alltoallvSchedule(s *cc.Schedule, send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	n, me := c.csize, c.crank
	if s == nil {
		return errors.New("nil schedule")
	}
	if s.Ranks() != n {
		return fmt.Errorf("schedule for %d ranks on a communicator of %d", s.Ranks(), n)
	}
	if err := checkLayout(scounts, sdispls, len(send), n); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if err := checkLayout(rcounts, rdispls, len(recv), n); err != nil {
		return fmt.Errorf("receive: %w", err)
	}
	ops := s.Ops(me)
	if err := checkOps(ops, me, scounts, rcounts); err != nil {
		return err
	}
	if err := c.selfCopy(send, scounts, sdispls, recv, rcounts, rdispls); err != nil {
		return err
	}
	// Every member holds the same schedule, so all make the same choice.
	return c.runOps(ops, s.NumPhases(), s.Largest() < readyPhasesBelow, send, sdispls, recv, rdispls)
}

// runOps runs a member's part (ops, in phase order) of an exchange of
// phases phases. With ready, each phase's messages start when their
// receivers say they are ready (runSchedPhase), and a member without
// messages in a phase skips it; otherwise a barrier separates the phases,
// and every member takes part in every barrier.
func (c *Comm) runOps(ops []cc.Op, phases int, ready bool, send []byte, sdispls []int, recv []byte, rdispls []int) error {
	data := c.newXfer()
	var readyX *xfer
	if ready {
		readyX = c.newXfer()
	}
	i := 0
	for k := range phases {
		j := i
		for j < len(ops) && ops[j].Phase == k {
			j++
		}
		var err error
		if ready {
			if j > i {
				err = c.runSchedPhase(ops[i:j], data, readyX, send, sdispls, recv, rdispls)
			}
		} else {
			if k > 0 {
				err = c.barrierColl()
			}
			if err == nil {
				err = exchangeOps(data, ops[i:j], send, sdispls, recv, rdispls)
			}
		}
		if err != nil {
			return fmt.Errorf("phase %d: %w", k, err)
		}
		i = j
	}
	return nil
}

// exchangeOps posts a phase's receives, then its sends, and waits for
// them all.
func exchangeOps(x *xfer, ops []cc.Op, send []byte, sdispls []int, recv []byte, rdispls []int) error {
	for _, op := range ops {
		if !op.Send {
			if err := x.recv(recv[rdispls[op.Peer]:rdispls[op.Peer]+op.Size], op.Peer, tagSchedData); err != nil {
				_ = x.wait()
				return err
			}
		}
	}
	for _, op := range ops {
		if op.Send {
			if err := x.send(send[sdispls[op.Peer]:sdispls[op.Peer]+op.Size], op.Peer, tagSchedData); err != nil {
				_ = x.wait()
				return err
			}
		}
	}
	return x.wait()
}

// checkOps checks a member's part of a schedule against its counts: each
// of its messages has the counted size and every non-empty count (other
// than its own) has a message. Pairs are unique in a cc.Schedule, so equal
// numbers mean the same set.
func checkOps(ops []cc.Op, me int, scounts, rcounts []int) error {
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
		if o.Send {
			counts, dir = scounts, "send to"
		}
		if counts[o.Peer] != o.Size {
			return fmt.Errorf("the schedule says %s rank %d %d bytes, the counts say %d", dir, o.Peer, o.Size, counts[o.Peer])
		}
		if o.Size > 0 && o.Send {
			nS--
		} else if o.Size > 0 {
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
func (c *Comm) runSchedPhase(ops []cc.Op, data, ready *xfer, send []byte, sdispls []int, recv []byte, rdispls []int) error {
	fail := func(err error) error {
		_ = ready.wait()
		_ = data.wait()
		return err
	}
	for _, o := range ops {
		if o.Send || o.Size == 0 {
			continue
		}
		if err := data.recv(recv[rdispls[o.Peer]:rdispls[o.Peer]+o.Size], o.Peer, tagSchedData); err != nil {
			return fail(err)
		}
		if err := ready.send(nil, o.Peer, tagSchedReady); err != nil {
			return fail(err)
		}
	}
	for _, o := range ops {
		if o.Send && o.Size > 0 {
			if err := ready.recv(nil, o.Peer, tagSchedReady); err != nil {
				return fail(err)
			}
		}
	}
	if err := ready.wait(); err != nil {
		return fail(err)
	}
	for _, o := range ops {
		if o.Send && o.Size > 0 {
			if err := data.send(send[sdispls[o.Peer]:sdispls[o.Peer]+o.Size], o.Peer, tagSchedData); err != nil {
				return fail(err)
			}
		}
	}
	return data.wait()
}
