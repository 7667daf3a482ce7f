package vi

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ethervia/ethervia/internal/wake"
)

// Completion names a work queue on which a descriptor completed. Fetch the
// descriptor with VI.SendDone or VI.RecvDone.
type Completion struct {
	VI   *VI
	Recv bool // the receive queue; false: the send queue
}

// CQ is a completion queue: it merges the completions of the work queues
// attached to it, in the order they completed. It is safe for concurrent
// use.
type CQ struct {
	p       *Provider
	ring    []Completion
	head, n int
	// queued is n, for the polls that find the queue empty without the
	// provider's lock (Ready, Queued: a bond's waiter asks every turn).
	queued   atomic.Int32
	reserved int // queue slots of attached work queues
	closed   bool
	wake     chan struct{}
	watcher  chan struct{}   // a DatagramPort's wake (WatchCQ), under p.mu
	notify   []chan struct{} // Notify's channels, under p.mu
}

// NewCQ creates a completion queue of the given depth. Every work queue
// attached to it reserves its queue depth, so the CQ can never overflow.
func (p *Provider) NewCQ(depth int) (*CQ, error) {
	if depth <= 0 {
		return nil, fmt.Errorf("%w: depth %d", ErrCQ, depth)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	return &CQ{p: p, ring: make([]Completion, depth), wake: make(chan struct{}, 1)}, nil
}

// Depth is the CQ's capacity.
func (cq *CQ) Depth() int { return len(cq.ring) }

// reserve attaches a work queue of depth slots. p.mu is held.
func (cq *CQ) reserve(depth int) error {
	if cq.closed {
		return fmt.Errorf("%w: closed", ErrCQ)
	}
	if cq.reserved+depth > len(cq.ring) {
		return fmt.Errorf("%w: depth %d cannot hold %d more queue entries (%d reserved)", ErrCQ, len(cq.ring), depth, cq.reserved)
	}
	cq.reserved += depth
	return nil
}

// push adds a completion. p.mu is held.
func (cq *CQ) push(v *VI, recv bool) {
	if cq.n == len(cq.ring) {
		return // cannot happen: reservations bound the entries
	}
	cq.ring[(cq.head+cq.n)%len(cq.ring)] = Completion{VI: v, Recv: recv}
	cq.n++
	cq.queued.Store(int32(cq.n))
	wake.Signal(cq.wake)
	if cq.watcher != nil {
		wake.Signal(cq.watcher)
	}
	for _, ch := range cq.notify {
		wake.Signal(ch)
	}
}

// Queued reports whether a completion is queued, without making progress.
// It takes no lock: a completion queued meanwhile is seen by the next look.
func (cq *CQ) Queued() bool { return cq.queued.Load() > 0 }

// Notify makes every completion queued on cq also signal each of chs,
// without blocking (a full channel is already signalled), so that a
// consumer that waits elsewhere (a bond's completion queue,
// bonding.CQ.Follow) learns of it. It replaces the channels of an earlier
// call; none (or nil) stops it.
func (cq *CQ) Notify(chs ...chan struct{}) {
	var keep []chan struct{}
	for _, ch := range chs {
		if ch != nil {
			keep = append(keep, ch)
		}
	}
	cq.p.mu.Lock()
	cq.notify = keep
	cq.p.mu.Unlock()
}

func (cq *CQ) popLocked() (Completion, bool) {
	if cq.n == 0 {
		return Completion{}, false
	}
	c := cq.ring[cq.head]
	cq.ring[cq.head] = Completion{}
	cq.head = (cq.head + 1) % len(cq.ring)
	cq.n--
	cq.queued.Store(int32(cq.n))
	return c, true
}

// Ready returns the oldest completion if one is queued, without making
// progress: for callers that have just polled (Done) and drain what that
// found.
func (cq *CQ) Ready() (Completion, bool) {
	if cq.queued.Load() == 0 {
		return Completion{}, false
	}
	cq.p.mu.Lock()
	defer cq.p.mu.Unlock()
	return cq.popLocked()
}

// Done returns the oldest completion, if any, after making progress. It
// never blocks.
func (cq *CQ) Done() (Completion, bool) {
	p := cq.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := cq.popLocked(); ok {
		return c, true
	}
	if p.closed {
		return Completion{}, false
	}
	p.pollLocked()
	return cq.popLocked()
}

// Wait returns the oldest completion, waiting for one until ctx ends.
func (cq *CQ) Wait(ctx context.Context) (Completion, error) {
	c, _, err := cq.WaitOr(ctx, noStop)
	return c, err
}

func noStop() bool { return false }

// WaitOr is Wait that also gives up, reporting ok false and no error, once
// stop reports true. It checks stop (with the provider's lock held: stop
// must not call into the provider) before every sleep and after every
// wake-up, so a helper goroutine that should step aside when another one
// starts polling (a bond's rail goroutine, when a user wait spins) never
// sleeps in the device again after that. This matters when goroutines
// locked to their threads spin without yielding on every P: a helper that
// borrows a P while one of them is preempted and then blocks in a system
// call keeps that P until the runtime's monitor takes it back, which can
// be 10 ms, and the spinner waits as long.
func (cq *CQ) WaitOr(ctx context.Context, stop func() bool) (c Completion, ok bool, err error) {
	stopped := false
	err = cq.p.wait(ctx, cq.wake, func() bool {
		c, ok = cq.popLocked()
		if !ok && !cq.closed && stop() {
			stopped = true
		}
		return ok || cq.closed || stopped
	})
	switch {
	case err != nil:
		return Completion{}, false, fmt.Errorf("vi: cq wait: %w", err)
	case ok:
		return c, true, nil
	case stopped:
		return Completion{}, false, nil
	}
	return Completion{}, false, fmt.Errorf("vi: cq wait: %w", ErrClosed)
}

// Close destroys the CQ. It fails while work queues are attached.
func (cq *CQ) Close() error {
	p := cq.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if cq.reserved > 0 {
		return fmt.Errorf("%w: %d queue entries still attached", ErrCQ, cq.reserved)
	}
	cq.closed = true
	wake.Signal(cq.wake)
	return nil
}

// timeUntil converts a provider time to a duration from now, at least zero.
func timeUntil(t, now int64) time.Duration {
	if t <= now {
		return 0
	}
	return time.Duration(t - now)
}

// Interrupt wakes a Wait or WaitOr under way on the CQ, so that it looks
// at its stop function again: something outside the provider (another
// transport) has work for the waiter. It never blocks.
func (cq *CQ) Interrupt() {
	wake.Signal(cq.wake)
	cq.p.Interrupt()
}
