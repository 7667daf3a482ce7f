package bonding

import (
	"context"
	"fmt"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/internal/wake"
	"github.com/ethervia/ethervia/vi"
)

// progressLocked takes the rails' completions, re-sends the work of failed
// rails, posts new work and publishes completed descriptors. v.mu is held.
func (v *VI) progressLocked() { v.progressRound(0) }

// progressRound is progressLocked as part of CQ round round (0: none,
// poll every rail this VI polls).
func (v *VI) progressRound(round uint64) {
	// Rails connected before the bond is established keep their messages
	// queued until it is.
	if v.state != Connected {
		return
	}
	v.round++
	// In a CQ round, every rail each quietPollEvery-th CQ round, whether
	// this VI took part in the rounds between (a quiet one did not, and
	// its rails may be taking in an RDMA write, which completes nothing
	// here until its notice).
	all := v.round%quietPollEvery == 0
	if round != 0 {
		all = round%quietPollEvery == 0
	}
	first := true
	for r, rl := range v.rails {
		// A poll costs a system call on most drivers, so a round polls
		// only the rails that may have something: the first live one,
		// which carries the peer's small messages, those with work in
		// flight or recent completions, and every rail each
		// quietPollEvery rounds (striped blocks, control, timers).
		poll := all || rl.n > 0 || v.round-rl.activeRound < hotRounds
		if first && rl.live && !rl.failed {
			poll, first = true, false
		}
		if poll && v.reap(r, round) {
			rl.activeRound = v.round
		}
	}
	// What follows changes only with a rail completion, whoever handled
	// it (slots, credit, rates, a rail's state), or a post (which
	// schedules itself); a spinning waiter's empty rounds skip it but for
	// every quietPollEvery-th, which also notices a rail the reconnect
	// goroutine brought back.
	if v.changed || all {
		v.changed = false
		v.checkRails()
		v.maybeCredit()
		v.schedule()
	}
}

// sampleRate counts n completed bytes on rl towards its rate. Throughput
// is bytes completed over a window of time during which the rail was never
// idle (post starts a window on an idle rail). Single completions are no
// good samples: a rail CQ is reaped in batches. The clock is read only for
// windows that can reach a sample: a small message posted on an idle rail
// starts none (a ping-pong then reads no clock for rates), and the window
// starts at its completion if the rail is still busy.
func (v *VI) sampleRate(rl *rail, n int) {
	if rl.winStart == 0 {
		if rl.n > 0 {
			rl.winStart, rl.winBytes = v.b.now(), 0
		}
		return
	}
	rl.winBytes += n
	if rl.winBytes < rateMinBytes {
		return
	}
	now := v.b.now()
	dt := now - rl.winStart
	if dt < rateWindow {
		return
	}
	sample := float64(rl.winBytes) / float64(dt)
	if dt > rateMaxWindow {
		// A stall (loss repaired by a timeout, a rail failing), not the
		// rail's speed: no sample.
	} else if rl.samples == 0 {
		rl.rate = sample
	} else {
		rl.rate += (sample - rl.rate) * rateGain
	}
	rl.samples++
	rl.winStart, rl.winBytes = now, 0
}

// Rail polling: a rail is polled every round while it is hot (a completion
// in the last hotRounds rounds), and otherwise every quietPollEvery rounds.
const (
	hotRounds      = 64
	quietPollEvery = 8
	// quietProgressEvery: a quiet VI makes a whole progress round this
	// often (checkRails and the like) even if nothing woke it.
	quietProgressEvery = 64
)

// reap makes progress on rail r, handles every rail descriptor that
// completed and reports whether there was any. It polls the rail through
// its CQ at most once (a spinning waiter calls it over and over, and the
// poll is on the latency path of every message), then drains what is
// there. Every completed rail descriptor leaves an entry in the CQ, and
// an entry sends reap to drain the queue it names: a descriptor drained
// along with another one's entry (or taken back by resetRail) leaves a
// stale entry behind, which costs a pop. Whoever else takes an entry, the
// rail goroutine, drains both of the rail's queues right after.
func (v *VI) reap(r int, round uint64) (found bool) {
	rl := v.rails[r]
	// One pass over the device; what it found is drained without more
	// passes (each costs the rail's locks, a ring check and a flush).
	// In a CQ round another VI may have made that pass already.
	var c vi.Completion
	var ok bool
	if round != 0 && v.b.polled[r].Swap(round) == round {
		c, ok = rl.cq.Ready()
	} else {
		c, ok = rl.cq.Done()
	}
	for ok {
		found = true
		if c.Recv {
			v.drainRecvs(rl)
		} else {
			v.drainSends(rl)
		}
		c, ok = rl.cq.Ready()
	}
	return found
}

// drainRail handles every completed descriptor of rail rl's queues and
// returns how many there were.
func (v *VI) drainRail(rl *rail) int {
	return v.drainRecvs(rl) + v.drainSends(rl)
}

func (v *VI) drainRecvs(rl *rail) int {
	n := 0
	for {
		d, ok := rl.v.RecvReady()
		if !ok {
			return n
		}
		v.onRailRecv(rl, d)
		n++
	}
}

func (v *VI) drainSends(rl *rail) int {
	n := 0
	for {
		d, ok := rl.v.SendReady()
		if !ok {
			return n
		}
		v.onRailSend(rl, d)
		n++
	}
}

// onRailSend handles the completion of the oldest rail send.
func (v *VI) onRailSend(rl *rail, d *descriptors.Descriptor) {
	v.changed = true
	if rl.n == 0 {
		return // cannot happen: every rail send has a slot
	}
	s := &rl.slots[rl.head]
	rl.head = (rl.head + 1) % len(rl.slots)
	rl.n--
	rl.inflight -= s.w.n
	w := s.w
	if d.Status.Failed() {
		if d.Status&descriptors.StatusRDMAProtection != 0 && w.pos >= v.sqReap {
			v.failLocked(fmt.Errorf("rail %d: %w", rl.idx, descriptors.ErrRDMAProtection), w.pos, descriptors.StatusRDMAProtection, false)
			return
		}
		if v.state == Connected {
			// Every message carries our credit, and this one may not
			// have arrived: the peer surely knows only the credit it
			// used, so announce it again.
			v.announced = v.hiSeen
			// The rail broke: the work goes to the other rails.
			if w.kind != kindCredit && (w.kind == kindQuery || w.kind == kindReply || w.pos >= v.sqReap) {
				v.ctl.pushFront(w)
				v.stats.Resent++
			}
			if w.kind == kindCredit {
				v.creditQueued = false
			}
			if rl.live {
				rl.failed = true
			}
		}
		return
	}
	rl.stats.Sent++
	rl.stats.SentBytes += uint64(w.n)
	v.sampleRate(rl, w.n)
	if w.kind == kindCredit || w.kind == kindQuery || w.kind == kindReply || w.pos < v.sqReap {
		return
	}
	st := &v.ss[v.sq.Slot(w.pos)]
	switch w.kind {
	case kindData:
		st.left--
	case kindRDMA:
		st.left -= w.n
		if st.left == 0 && v.sq.At(w.pos).Control.Immediate {
			v.notify()
			return
		}
	case kindNotice:
	}
	if st.left == 0 && (w.kind == kindNotice || !v.sq.At(w.pos).Control.Immediate || !st.rdma) {
		st.done = true
		v.publish()
		v.notify()
	}
}

// notify sends, in order, the notice of each RDMA write with immediate
// data whose bytes have all landed, once every earlier send's have too:
// the receive a notice completes must find every earlier write in place,
// as on one VI, though the pieces of later writes may finish first on
// other rails.
func (v *VI) notify() {
	for pos := v.sqReap; pos < v.sqStart; pos++ {
		st := &v.ss[v.sq.Slot(pos)]
		if st.done {
			continue
		}
		if st.left != 0 {
			return
		}
		if st.rdma && !st.noticeSent && v.sq.At(pos).Control.Immediate {
			st.noticeSent = true
			v.ctl.pushBack(work{kind: kindNotice, pos: pos})
		}
	}
}

// publish completes, in order, the user descriptors that are done.
func (v *VI) publish() {
	published := false
	for v.sqReap < v.sq.Back() {
		st := &v.ss[v.sq.Slot(v.sqReap)]
		if !st.done {
			break
		}
		d := v.sq.At(v.sqReap)
		v.release(d)
		d.Status = descriptors.StatusDone | st.status
		if st.status == 0 {
			d.Length = st.total
			v.stats.MessagesSent++
		}
		v.sqReap++
		if cq := v.attrs.SendCQ; cq != nil {
			cq.push(v, false)
		}
		wake.Signal(v.sendWake)
		published = true
	}
	for v.rqNext < v.rq.Back() {
		rs := &v.rs[v.rq.Slot(v.rqNext)]
		if !rs.complete {
			break
		}
		d := v.rq.At(v.rqNext)
		v.release(d)
		d.Status = descriptors.StatusDone | rs.status
		if rs.status&descriptors.StatusErrorMask == 0 || rs.status&descriptors.StatusLength != 0 {
			d.Length = int(rs.msgLen)
			if rs.hasImm {
				d.Status |= descriptors.StatusImmediate
				d.ImmData = rs.imm
			}
			if rs.write {
				d.Status |= descriptors.StatusRemoteWrite
			}
		}
		if rs.status == 0 {
			v.stats.MessagesReceived++
		}
		v.rqNext++
		v.rcvMsn++
		if cq := v.attrs.RecvCQ; cq != nil {
			cq.push(v, true)
		}
		wake.Signal(v.recvWake)
		published = true
	}
	if published {
		v.b.interruptBlocked()
	}
}

// railWaiter blocks on rail r's completion queue for the life of the
// connection and handles what arrives there, so that the bond makes
// progress (the peer's blocks are taken out of the rail buffers and placed,
// credit flows, sends move on) while nobody polls it, and so that a waiter
// blocked on the bond is woken by any rail. It is one goroutine per rail
// and connection, never per message. The rail providers do not spin: the
// bond's own waiters do.
//
// While a waiter spins on the VI (pollers), the goroutine stays parked (and
// one already in its CQ wait leaves it before it would sleep in the device
// again, vi.CQ.WaitOr): the
// spinner polls every rail itself, and a rail goroutine woken by every
// frame would only take its CPU and its locks. It is woken when the last
// spinner blocks, and looks again every pollerNap by itself: a waiter that
// got what it waited for leaves without waking it (that would cost a
// wake-up per message), and the goroutine must notice that nobody polls
// any more. A shorter nap costs a spinning waiter a stolen CPU that often.
//
// A caller that polls in a loop of its own (RecvDone, SendDone, CQ.Done:
// mplite's progress engine) is such a spinner too, though not counted in
// pollers: the goroutine steps aside while polls keep coming (pollCount),
// looking every pollerNap. Like a waiter that got what it waited for, a
// caller that stops polling does not wake it; one that goes on to block
// in a wait does (doneSpinning).
func (v *VI) railWaiter(r int, ctx context.Context) {
	defer v.wg.Done()
	rl := v.rails[r]
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	// A waiter asleep in this rail's device handles its frames too.
	waiting := func() bool { return v.pollers.Load() > 0 || v.blockedOn[r].Load() > 0 }
	// aside: a caller polled since the last look (it is likely to poll
	// again), or a waiter spins or sleeps in the device.
	seen, aside := v.pollCount(), false
	stepAside := func() bool {
		if n := v.pollCount(); n != seen {
			seen, aside = n, true
		}
		aside = aside || waiting()
		return aside
	}
	for {
		if stepAside() {
			aside = false
			t.Reset(pollerNap)
			select {
			case <-v.railWake[r]:
			case <-t.C:
			case <-ctx.Done():
				return
			}
			t.Stop()
			continue
		}
		// The wait gives up as soon as a waiter spins or sleeps here,
		// before it would sleep in the device again (vi.CQ.WaitOr).
		_, ok, err := rl.cq.WaitOr(ctx, stepAside)
		if err != nil {
			// The connection ended (or the CQ closed: the VI is going
			// away).
			return
		}
		if !ok {
			continue
		}
		v.mu.Lock()
		v.drainRail(rl)
		v.progressLocked()
		v.setQuiet(false) // hot now: CQ rounds look again
		v.mu.Unlock()
	}
}

// pollCount moves with every non-blocking progress call on v: its own
// (VI.polls) and the rounds of the CQs it is attached to, which may skip
// it (quiet) and still poll its rails' devices.
func (v *VI) pollCount() uint64 {
	n := v.polls.Load()
	if cq := v.attrs.SendCQ; cq != nil {
		n += cq.rounds.Load()
	}
	if cq := v.attrs.RecvCQ; cq != nil && cq != v.attrs.SendCQ {
		n += cq.rounds.Load()
	}
	return n
}
