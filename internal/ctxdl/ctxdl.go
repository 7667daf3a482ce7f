// Package ctxdl provides Context, a context.Context that ends at a deadline
// its owner moves before every use, so that a loop that waits with a
// timeout over and over (a polling wait, a progress goroutine) does not
// allocate a context, and a timer, for every wait.
package ctxdl

import (
	"context"
	"sync"
	"time"
)

// Context is a reusable context.Context that ends when its deadline
// passes; nothing else cancels it. Reset sets the deadline; the zero value
// has the zero deadline, which has passed.
//
// Done honours the context.Context contract at no cost to callers that do
// not call it: its channel, and the timer that closes it at the deadline,
// are made only when Done is first called, and later deadlines reuse them
// as long as the channel was not closed. A wait that is bounded by the
// deadline anyway should watch Cancellation(ctx) instead of ctx.Done().
//
// Its methods are safe for concurrent use, except Reset, which must not be
// called while the context is in use: a wait that started before sees
// the old deadline or the new one.
type Context struct {
	deadline time.Time // written by Reset only
	// holdThread: see SetHoldThread. Written by its owner between waits.
	holdThread bool

	mu     sync.Mutex
	done   chan struct{} // Done's channel for this deadline; nil until asked for
	closed bool          // done is closed
	spare  chan struct{} // an open channel an earlier deadline made, for reuse
	timer  *time.Timer   // closes done at the deadline; made by the first Done
}

// closedChan is Done's channel when it is first asked for after the
// deadline passed.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Reset makes deadline the context's deadline, for the next use.
func (c *Context) Reset(deadline time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = deadline
	if c.done == nil {
		return
	}
	if !c.closed {
		// Nobody uses the old channel any more: keep it for the next
		// deadline. A timer function already running finds done gone.
		c.timer.Stop()
		c.spare = c.done
	}
	c.done, c.closed = nil, false
}

// Deadline returns the deadline; ok is always true.
func (c *Context) Deadline() (deadline time.Time, ok bool) { return c.deadline, true }

// Done returns a channel that is closed once the deadline has passed.
// The first call for a deadline that has not passed arms a timer.
func (c *Context) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	d := time.Until(c.deadline)
	if d <= 0 {
		c.done, c.closed = closedChan, true
		return c.done
	}
	c.done, c.spare = c.spare, nil
	if c.done == nil {
		c.done = make(chan struct{})
	}
	if c.timer == nil {
		c.timer = time.AfterFunc(d, c.expire)
	} else {
		c.timer.Reset(d)
	}
	return c.done
}

// expire is the timer's function: it closes Done's channel once the
// deadline has passed. A timer of an earlier deadline that fires late
// finds the channel gone, or the deadline ahead and waits for it.
func (c *Context) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil || c.closed {
		return
	}
	if d := time.Until(c.deadline); d > 0 {
		c.timer.Reset(d)
		return
	}
	close(c.done)
	c.closed = true
}

// Err returns nil before the deadline and context.DeadlineExceeded from
// then on. It costs a clock reading: no lock, unless the deadline has
// passed and Done's channel is still open, which it then closes, so that
// Err never reports the end before Done does.
func (c *Context) Err() error {
	if time.Now().Before(c.deadline) {
		return nil
	}
	c.mu.Lock()
	if c.done != nil && !c.closed {
		c.timer.Stop()
		close(c.done)
		c.closed = true
	}
	c.mu.Unlock()
	return context.DeadlineExceeded
}

// Value returns nil: the context carries no values.
func (c *Context) Value(key any) any { return nil }

// SetHoldThread marks the waits under c as ones that may block their OS
// thread without handing the Go scheduler's P to another thread (see
// nic.ThreadWaiter): the waiting goroutine is the one the program's call
// is blocked in, and nothing else of the process needs to run meanwhile.
// Like Reset, it must not be called while the context is in use.
func (c *Context) SetHoldThread(on bool) { c.holdThread = on }

// HoldsThread reports whether ctx is a *Context marked by SetHoldThread.
func HoldsThread(ctx context.Context) bool {
	c, ok := ctx.(*Context)
	return ok && c.holdThread
}

// Cancellation returns the channel a wait must watch besides ctx's
// deadline when a timer of its own already ends the wait by that deadline:
// ctx.Done() for any context but a *Context, and nil (never ready) for a
// *Context, whose only end is its deadline. The wait then neither
// allocates nor arms a timer for a *Context, as its Done would.
func Cancellation(ctx context.Context) <-chan struct{} {
	if _, ok := ctx.(*Context); ok {
		return nil
	}
	return ctx.Done()
}
