package bonding

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/internal/ctxdl"
	"github.com/ethervia/ethervia/internal/timerpool"
	"github.com/ethervia/ethervia/internal/wake"
)

func (v *VI) popLocked(recv bool) *descriptors.Descriptor {
	if recv {
		if v.rq.Front() < v.rqNext {
			return v.rq.Pop()
		}
		return nil
	}
	if v.sq.Front() < v.sqReap {
		return v.sq.Pop()
	}
	return nil
}

// SendDone returns the oldest send descriptor if it has completed, after
// making progress. It never blocks.
func (v *VI) SendDone() (*descriptors.Descriptor, bool) { return v.done(false) }

// RecvDone returns the oldest receive descriptor if it has completed, after
// making progress. It never blocks.
func (v *VI) RecvDone() (*descriptors.Descriptor, bool) { return v.done(true) }

func (v *VI) done(recv bool) (*descriptors.Descriptor, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if d := v.popLocked(recv); d != nil {
		return d, true
	}
	v.polls.Add(1)
	v.progressLocked()
	d := v.popLocked(recv)
	return d, d != nil
}

// SendWait waits for the oldest send descriptor to complete and returns it.
// It fails when ctx ends, and at once when the queue is empty and the VI
// is not connected.
func (v *VI) SendWait(ctx context.Context) (*descriptors.Descriptor, error) {
	return v.waitQ(ctx, false)
}

// RecvWait waits for the oldest receive descriptor to complete and returns
// it. It fails when ctx ends, and at once when the queue is empty and the
// VI is not connected.
func (v *VI) RecvWait(ctx context.Context) (*descriptors.Descriptor, error) {
	return v.waitQ(ctx, true)
}

func (v *VI) waitQ(ctx context.Context, recv bool) (*descriptors.Descriptor, error) {
	var start int64
	spinning := false
	var sl sleeper
	defer func() {
		if spinning {
			v.doneSpinning(false)
		}
		sl.disarm(v.b)
	}()
	for {
		v.mu.Lock()
		d := v.popLocked(recv)
		if d == nil {
			v.progressLocked()
			d = v.popLocked(recv)
		}
		var stuck error
		if d == nil {
			q := v.sq
			if recv {
				q = v.rq
			}
			if q.Len() == 0 {
				stuck = v.stuckErr()
			}
		}
		v.mu.Unlock()
		if d != nil {
			return d, nil
		}
		if stuck != nil {
			return nil, fmt.Errorf("bonding: wait: %w", stuck)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("bonding: wait: %w", err)
		}
		now := v.b.now()
		if start == 0 {
			start = now
		}
		if sp := v.b.opts.SpinTime; sp > 0 && now-start < int64(sp) {
			if !spinning {
				spinning = true
				v.pollers.Add(1)
			}
			// Let the other goroutines of this P run between polls: a
			// goroutine readied by our progress (a peer's, in the same
			// process, or the user's) would otherwise wait for the spin
			// to end, and a waiter would often wait for that very one.
			if v.b.opts.Yield {
				runtime.Gosched()
			}
			continue
		}
		// About to block (counted first, so that a spinner that stops
		// meanwhile sees it): the rail goroutines must take over. Armed,
		// the wait looks once more before it sleeps, so that nothing
		// published before publishers could see it is missed.
		if !sl.armed {
			v.sleepers.Add(1)
			v.mu.Lock()
			r := v.blockRail()
			v.mu.Unlock()
			sl.arm(v.b, r, v, nil)
			if spinning {
				spinning = false
				v.doneSpinning(true)
			}
			continue
		}
		wake := v.sendWake
		if recv {
			wake = v.recvWake
		}
		sl.sleep(ctx, v.b, &v.timers, wake)
		sl.disarm(v.b)
		v.sleepers.Add(-1)
		start = 0
	}
}

// blockRail is the rail whose device a blocking waiter sleeps in: the
// first live one, which carries the peer's small messages; -1 when none
// is. v.mu is held.
func (v *VI) blockRail() int {
	for r, rl := range v.rails {
		if rl.live && !rl.failed {
			return r
		}
	}
	return -1
}

// sleeper is a waiter about to block. Armed on a rail, it is counted in
// Bond.blocked, so that publishers interrupt that rail's device; it then
// sleeps in the device itself (vi.Provider.Block), where a frame of the
// rail wakes its thread directly, rather than on a wake channel, which a
// rail goroutine, itself woken first, would signal. It sleeps on the
// channel when the device is taken (a rail goroutine or the provider's
// background goroutine holds it) or cannot be interrupted.
//
// The rail goroutines of the VIs it waits for stay parked on that rail
// while it sleeps there (VI.blockedOn): it takes their frames off the rail
// itself when it wakes. Other VIs' rail goroutines carry on.
type sleeper struct {
	armed bool
	rail  int
	vi    *VI   // a VI wait's VI, or nil
	vis   []*VI // a CQ wait's VIs
}

// arm counts the sleeper for rail (none when -1) and the VI v or the VIs
// vis it waits for.
func (s *sleeper) arm(b *Bond, rail int, v *VI, vis []*VI) {
	s.armed, s.rail, s.vi, s.vis = true, rail, v, vis
	s.count(b, 1)
}

func (s *sleeper) disarm(b *Bond) {
	if s.armed {
		s.count(b, -1)
	}
	s.armed, s.vi, s.vis = false, nil, nil
}

func (s *sleeper) count(b *Bond, n int32) {
	if s.rail < 0 {
		return
	}
	if s.vi != nil {
		s.vi.blockedOn[s.rail].Add(n)
	}
	for _, v := range s.vis {
		v.blockedOn[s.rail].Add(n)
	}
	b.blocked[s.rail].Add(n)
}

func (s *sleeper) sleep(ctx context.Context, b *Bond, timers *timerPool, wake chan struct{}) {
	s.note(false)
	if s.rail >= 0 {
		dl := time.Now().Add(maxSleep)
		if d, ok := ctx.Deadline(); ok && d.Before(dl) {
			dl = d
		}
		if b.rails[s.rail].Block(dl) {
			s.note(true)
			return
		}
	}
	timers.sleep(ctx, wake)
}

// note counts a sleep (in the device) on every VI the sleeper waits for.
func (s *sleeper) note(device bool) {
	if s.vi != nil {
		s.vi.noteSleep(device)
	}
	for _, v := range s.vis {
		v.noteSleep(device)
	}
}

func (v *VI) noteSleep(device bool) {
	if device {
		v.deviceSleeps.Add(1)
	} else {
		v.sleeps.Add(1)
	}
}

// stuckErr says why nothing can complete on an empty queue, or nil.
func (v *VI) stuckErr() error {
	switch v.state {
	case Connected:
		return nil
	case Error:
		return v.err
	case closedVI:
		return ErrClosed
	}
	return fmt.Errorf("%w: %v", ErrState, v.state)
}

// doneSpinning ends a waiter's spin. The last spinner wakes the rail
// goroutines when it is about to block (blocking), or when other waiters
// are blocked, since they must now make progress and wake them. A waiter
// that got what it waited for, with nobody blocked, does not: the rail
// goroutines take over after at most pollerNap by themselves, so that a
// caller that polls often never pays for their wake-up.
func (v *VI) doneSpinning(blocking bool) {
	if v.pollers.Add(-1) == 0 && (blocking || v.sleepers.Load() > 0) {
		for _, c := range v.railWake {
			wake.Signal(c)
		}
	}
}

// maxSleep bounds one blocking wait on a wake channel, so that a wake-up
// lost between two waiters of one channel costs at most this.
const maxSleep = 2 * time.Millisecond

// pollerNap is how long a rail goroutine parked for a spinning (or
// device-sleeping) waiter stays parked unless woken.
const pollerNap = 10 * time.Millisecond

// timerPool lends the timers of blocking waits.
type timerPool struct{ timerpool.Pool }

// sleep blocks until wake is signalled, ctx ends or maxSleep passes. The
// timer ends it by ctx's deadline too, so that only a cancel needs ctx's
// channel: a *ctxdl.Context (mplite's progress waits) then arms no timer
// of its own.
func (p *timerPool) sleep(ctx context.Context, wake chan struct{}) {
	d := maxSleep
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	t := p.Get()
	t.Reset(d)
	select {
	case <-wake:
	case <-ctxdl.Cancellation(ctx):
	case <-t.C:
	}
	p.Put(t)
}
