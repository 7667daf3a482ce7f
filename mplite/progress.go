package mplite

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// waitCond is what a waiting call waits for; ready is called with c.mu
// held.
type waitCond interface{ ready() bool }

// wait returns once w is ready. It polls (making progress itself, with no
// other goroutine involved) for the spin time; then it blocks on the
// completion queue itself, so that the frame that completes w wakes this
// very goroutine; a second waiting goroutine sleeps until the first is
// done. While any call waits, the progress goroutine stays out.
func (c *Comm) wait(w waitCond) {
	c.mu.Lock()
	c.waitHeld(w)
	c.mu.Unlock()
}

// waitHeld is wait for a caller that holds c.mu, and returns with it held:
// a call that reads its request's result next takes the lock once.
func (c *Comm) waitHeld(w waitCond) { c.waitSpin(w, c.cfg.spin) }

// waitSpin is waitHeld polling for spin before it blocks (none: a caller
// that has spun already).
func (c *Comm) waitSpin(w waitCond, spin time.Duration) {
	if w.ready() {
		return
	}
	if c.fab == nil {
		// A world of one: only another goroutine's call can complete w.
		c.blocked.Add(1)
		for !w.ready() {
			c.cond.Wait()
		}
		c.blocked.Add(-1)
		return
	}
	c.mu.Unlock()
	c.startPolling()
	defer c.donePolling()
	if c.bgWaiting.Load() {
		// The progress goroutine sleeps in the fabric, where it would
		// take the completions this call waits for without waking it:
		// send it back to its naps (see background).
		c.fab.interrupt()
	}
	// Spin once, on entry. A waiter that blocked and was woken for nothing
	// goes back to sleep at once: spinning again on every wake-up let an
	// idle waiter (a library's service goroutine, say) take the CPU from
	// the call that is about to complete, on every message.
	for {
		if spin > 0 {
			spin = 0
			// The window starts at the first look at the clock, a few
			// turns in: most waits on a rank of this host end before.
			win := spinWindow{limit: int64(c.cfg.spin)}
			for turn := 1; ; turn++ {
				c.mu.Lock()
				c.progressFor(w)
				if w.ready() {
					return
				}
				c.mu.Unlock()
				// The clock every few turns only: reading it cost a
				// quarter of a shared-memory round trip.
				if turn%clockEvery == 0 && !win.more(c.nanos(), c.received()) && !c.localWriteSpin(&win) {
					break
				}
				if c.cfg.osYield {
					// Another process's rank may be the one we
					// wait for. Raw: sched_yield never blocks, so
					// the runtime need not hand off this P.
					_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
				}
				if c.cfg.yield && !c.cfg.lockedCallers {
					runtime.Gosched()
				}
			}
		}
		c.mu.Lock()
		if w.ready() {
			return
		}
		if c.leader || c.stopped.Load() {
			// Another call waits on the queue and wakes us when it
			// is done or something changed.
			c.blocked.Add(1)
			c.cond.Wait()
			c.blocked.Add(-1)
			if w.ready() {
				return
			}
			c.mu.Unlock()
			continue
		}
		if c.sleepLocal(true) && w.ready() {
			c.sleepLocal(false)
			return
		}
		c.leader = true
		bound := c.blockBound()
		if !c.cfg.osYield {
			// A call with a CPU of its own looks up from the fabric at
			// least every bgBlock: measured, a 512 KiB exchange both ways
			// took 2-3x as long with the idle bound (idleBlock is for
			// ranks that share CPUs, where each wake-up is another's).
			bound = min(bound, bgBlock)
		}
		c.mu.Unlock()
		c.leaderCtx.Reset(time.Now().Add(bound))
		comp, err := c.fab.wait(&c.leaderCtx, false)
		c.sleepLocal(false)
		c.mu.Lock()
		c.leader = false
		if err == nil {
			c.handle(comp)
		}
		c.connClock = true
		c.progressFor(w)
		ok := w.ready()
		if c.blocked.Load() > 0 && (c.changed || c.timed > 0 || ok) {
			// Results for the sleepers, or the queue is theirs now.
			c.changed = false
			c.cond.Broadcast()
		}
		if ok {
			return
		}
		c.mu.Unlock()
	}
}

// clockEvery is how many turns of a spinning wait, or progress rounds
// with a peer unconnected, pass between looks at the clock. Collectives
// leave most of a rank's peers unconnected, and looking every round made
// an empty one take 79 ns over one NIC and 120 over two, against 58 and 99
// (BenchmarkIdleProgress, three interleaved runs, 2026-12-02). A caller
// woken from a blocking wait looks at once (connClock), so connection
// requests are still looked at every connPollEvery.
const clockEvery = 8

// blockBound is how long one blocking wait on the fabric may sleep (c.mu
// held): idleBlock when only a completion or a connection request can
// change anything, bgBlock while a peer's promised connection must be
// timed or connection requests must be polled for, and never past a
// timed waiter's deadline.
func (c *Comm) blockBound() time.Duration {
	if c.awaiting > 0 || c.unconnected > 0 && !c.fab.wakesOnRequest() {
		return bgBlock
	}
	d := idleBlock
	if c.timed > 0 {
		d = min(d, max(bgBlock, time.Duration(c.timedBy-c.nanos())))
	}
	return d
}

// spinWindow is how long a waiter polls before it blocks: the spin time
// after the last frame the fabric received, not after the call began. A
// large message's data frames complete nothing until its last one, so a
// window counted from the start expired in the middle of every transfer
// longer than the spin time and the receiver (and the sender, waiting for
// acknowledgements) then slept and woke for every batch of frames.
type spinWindow struct {
	limit int64  // nanoseconds without a frame before blocking
	last  int64  // when the frame count last moved
	seen  uint64 // the frame count then
	// started: the window has begun (a waiter starts it at its first
	// look at the clock, more's first call).
	started bool
}

func (s *spinWindow) restart(now int64, received uint64) {
	s.last, s.seen, s.started = now, received, true
}

// more reports whether to go on polling at now, the fabric having received
// received frames so far.
func (s *spinWindow) more(now int64, received uint64) bool {
	if received != s.seen || !s.started {
		s.restart(now, received)
		return true
	}
	return now-s.last <= s.limit
}

// donePolling ends a wait. The progress goroutine is not woken: it takes
// over by itself once no call has waited for its grace, so a program that
// calls often never pays for a goroutine wake-up.
func (c *Comm) donePolling() {
	c.polls.Add(1<<32 - 1) // one more ended, one fewer polling
}

// startPolling marks a call polling: the progress goroutine steps aside.
func (c *Comm) startPolling() { c.polls.Add(1) }

// polling reports calls polling.
func (c *Comm) polling() bool { return uint32(c.polls.Load()) > 0 }

// progressLocked takes the completions waiting (which makes the provider
// progress) and handles them. c.mu is held.
func (c *Comm) progressLocked() { c.progressFor(nil) }

// progressFor is progressLocked for a waiter: it stops as soon as w is
// ready, since asking the completion queue for more when it is empty polls
// the device, a system call the waiter does not need to wait for.
func (c *Comm) progressFor(w waitCond) {
	if c.fab == nil || c.stopped.Load() {
		return
	}
	c.pollLocal()
	if w != nil && w.ready() || !c.nicNeeded(w) {
		c.afterProgress()
		return
	}
	for k := 0; k < 256; k++ {
		comp, ok := c.fab.done()
		if !ok {
			break
		}
		c.handle(comp)
		if w != nil && w.ready() {
			break
		}
	}
	if c.unconnected > 0 {
		// A spinning caller looks at the clock for them every
		// clockEvery-th round; one that woke from a blocking wait
		// (connClock) at once.
		c.connRounds++
		if c.connClock || c.connRounds%clockEvery == 0 {
			c.connClock = false
			if now := c.nanos(); now-c.lastConnPoll >= connPollEvery {
				c.lastConnPoll = now
				c.pollConnRequests()
				c.checkAwaiting(now)
			}
		}
	}
	c.afterProgress()
}

// afterProgress wakes the calls blocked on cond if something changed.
func (c *Comm) afterProgress() {
	if c.changed {
		c.changed = false
		if c.blocked.Load() > 0 {
			c.cond.Broadcast()
		}
	}
}

// handle takes the descriptor a completion names and acts on it.
func (c *Comm) handle(comp completion) {
	if comp.connReq {
		c.pollConnRequests()
		return
	}
	id := c.fab.linkID(comp)
	if id < 0 || id >= len(c.byVI) || c.byVI[id] == nil {
		return
	}
	p := c.byVI[id]
	if comp.lane {
		c.handleLane(p, comp)
		return
	}
	if p.v.raw() != comp.raw {
		return
	}
	if comp.recv {
		if d, ok := p.v.RecvDone(); ok {
			c.onRecv(p, d, false)
		}
		return
	}
	if d, ok := p.v.SendDone(); ok {
		c.onSend(p, d)
	}
}

// background is the progress goroutine: when no call has waited for its
// grace (config.grace), it waits on the completion queue and handles what
// completes, so nonblocking operations advance while the user computes.
// While calls wait it only looks at the clock now and then, so it never
// slows them.
func (c *Comm) background() {
	defer close(c.bgDone)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	ends := c.polls.Load() >> 32
	for {
		if c.stopped.Load() {
			return
		}
		// Marked before the look at the callers, which mark themselves
		// before they look at this: one of the two sees the other.
		c.bgWaiting.Store(true)
		// A call polling, or one that stopped since the last look (a
		// grace ago, or a wait on the fabric ago): step aside for a
		// grace.
		if grace, n := c.cfg.grace(), c.polls.Load(); uint32(n) > 0 || n>>32 != ends {
			ends = n >> 32
			c.bgWaiting.Store(false)
			t.Reset(grace)
			select {
			case <-t.C:
			case <-c.bgStop:
				return
			}
			continue
		}
		c.mu.Lock()
		bound := c.blockBound()
		c.sleepLocal(true)
		c.mu.Unlock()
		c.bgCtx.Reset(time.Now().Add(bound))
		comp, err := c.fab.wait(&c.bgCtx, true)
		c.bgWaiting.Store(false)
		if err == nil && comp.connReq && c.polling() {
			c.bgYields.Add(1)
		}
		c.sleepLocal(false)
		if c.stopped.Load() {
			return
		}
		c.mu.Lock()
		if err == nil {
			c.handle(comp)
		}
		c.connClock = true
		c.progressLocked()
		if c.timed > 0 && c.blocked.Load() > 0 {
			c.cond.Broadcast() // waiters with deadlines look at the clock
		}
		c.mu.Unlock()
	}
}
