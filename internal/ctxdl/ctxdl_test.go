package ctxdl

import (
	"context"
	"errors"
	"testing"
	"time"
)

// within bounds how long the tests wait for what must happen: a guard
// against hanging, not a timing requirement.
const within = 10 * time.Second

func mustClose(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	if c == nil {
		t.Fatalf("%s: nil channel (never closed)", what)
	}
	select {
	case <-c:
	case <-time.After(within):
		t.Fatalf("%s: not closed", what)
	}
}

func isOpen(c <-chan struct{}) bool {
	select {
	case <-c:
		return false
	default:
		return true
	}
}

// TestContract checks context.Context's contract: Done is closed once the
// deadline passes, Err is nil before that and DeadlineExceeded after, and
// successive calls to Done return the same channel.
func TestContract(t *testing.T) {
	var c Context
	var _ context.Context = &c
	dl := time.Now().Add(50 * time.Millisecond)
	c.Reset(dl)
	if got, ok := c.Deadline(); !ok || !got.Equal(dl) {
		t.Fatalf("Deadline() = %v, %v; want %v, true", got, ok, dl)
	}
	if c.Value("k") != nil {
		t.Fatal("Value is not nil")
	}
	done := c.Done()
	if done == nil {
		t.Fatal("Done is nil: a context with a deadline must end")
	}
	if c.Done() != done {
		t.Fatal("successive calls to Done returned different channels")
	}
	if isOpen(done) && c.Err() != nil {
		t.Fatalf("Err = %v while Done is open", c.Err())
	}
	mustClose(t, done, "Done after the deadline")
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err after Done closed = %v, want DeadlineExceeded", err)
	}
	if time.Now().Before(dl) {
		t.Fatal("Done closed before the deadline")
	}

	// A new deadline: a new open channel, and the same contract.
	c.Reset(time.Now().Add(time.Hour))
	if c.Err() != nil {
		t.Fatalf("Err after Reset to a later deadline = %v", c.Err())
	}
	d2 := c.Done()
	if !isOpen(d2) {
		t.Fatal("Done closed for a deadline an hour away")
	}
	c.Reset(time.Now().Add(20 * time.Millisecond))
	mustClose(t, c.Done(), "Done after a Reset to a nearer deadline")
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v", c.Err())
	}

	// A deadline that has passed: Done is closed at once.
	c.Reset(time.Now().Add(-time.Second))
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err for a past deadline = %v", c.Err())
	}
	mustClose(t, c.Done(), "Done for a past deadline")

	// The zero value has passed its (zero) deadline.
	var z Context
	if !errors.Is(z.Err(), context.DeadlineExceeded) || isOpen(z.Done()) {
		t.Fatal("the zero Context has not ended")
	}
}

// TestErrClosesDone: once Err reports the deadline, Done is closed, even
// if the timer has not run yet.
func TestErrClosesDone(t *testing.T) {
	var c Context
	c.Reset(time.Now().Add(10 * time.Millisecond))
	done := c.Done()
	for c.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	if isOpen(done) {
		t.Fatal("Err reported DeadlineExceeded while Done was open")
	}
}

// TestDerived: contexts derived from a Context end with it, which they
// cannot if its Done is nil.
func TestDerived(t *testing.T) {
	var c Context
	c.Reset(time.Now().Add(20 * time.Millisecond))
	child, cancel := context.WithCancel(&c)
	defer cancel()
	mustClose(t, child.Done(), "a derived context's Done")
	if !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("derived Err = %v, want DeadlineExceeded", child.Err())
	}
	fired := make(chan struct{})
	c.Reset(time.Now().Add(20 * time.Millisecond))
	stop := context.AfterFunc(&c, func() { close(fired) })
	defer stop()
	mustClose(t, fired, "context.AfterFunc")
}

// TestStaleTimer: a Reset while the timer is pending, to a later deadline,
// does not let the old timer end the new deadline.
func TestStaleTimer(t *testing.T) {
	var c Context
	c.Reset(time.Now().Add(5 * time.Millisecond))
	c.Done()
	time.Sleep(5 * time.Millisecond) // the timer may be running now
	c.Reset(time.Now().Add(time.Hour))
	d := c.Done()
	time.Sleep(20 * time.Millisecond)
	if !isOpen(d) || c.Err() != nil {
		t.Fatal("a timer of an earlier deadline ended the new one")
	}
	c.Reset(time.Now())
	if c.Err() == nil {
		t.Fatal("Err nil after the deadline")
	}
}

// TestNoAllocs: the polling use, Reset and Err, allocates nothing, nor
// does Done for deadlines that do not pass once its channel and timer
// exist, nor Cancellation.
func TestNoAllocs(t *testing.T) {
	var c Context
	if n := testing.AllocsPerRun(100, func() {
		c.Reset(time.Now().Add(time.Hour))
		_ = c.Err()
		c.Reset(time.Now().Add(-time.Second))
		_ = c.Err()
		_ = c.Done() // passed: the shared closed channel
	}); n != 0 {
		t.Fatalf("%v allocations per Reset and Err", n)
	}
	var ctx context.Context = &c
	if n := testing.AllocsPerRun(100, func() { _ = Cancellation(ctx) }); n != 0 {
		t.Fatalf("%v allocations per Cancellation", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		c.Reset(time.Now().Add(time.Hour))
		_ = c.Done()
	}); n != 0 {
		t.Fatalf("%v allocations per Reset and Done", n)
	}
}

func TestCancellation(t *testing.T) {
	var c Context
	c.Reset(time.Now().Add(time.Hour))
	if Cancellation(&c) != nil {
		t.Fatal("Cancellation of a *Context is not nil")
	}
	ctx, cancel := context.WithCancel(context.Background())
	if Cancellation(ctx) != ctx.Done() {
		t.Fatal("Cancellation of another context is not its Done")
	}
	cancel()
	mustClose(t, Cancellation(ctx), "Cancellation of a cancelled context")
}

// TestHoldsThread: only a *Context marked by SetHoldThread holds its thread.
func TestHoldsThread(t *testing.T) {
	var c Context
	if HoldsThread(&c) || HoldsThread(context.Background()) {
		t.Fatal("an unmarked context holds its thread")
	}
	c.SetHoldThread(true)
	if !HoldsThread(&c) {
		t.Fatal("a marked context does not hold its thread")
	}
	c.SetHoldThread(false)
	if HoldsThread(&c) {
		t.Fatal("an unmarked context holds its thread")
	}
}
