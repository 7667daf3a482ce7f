package vi

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
)

// TestCQWaitOr: WaitOr returns a completion when there is one, gives up
// with ok false and no error once stop reports true (whether at once or
// while it sleeps), and fails when its context ends.
func TestCQWaitOr(t *testing.T) {
	a, b, va, vb, cqB := recvCQPair(t, 9)
	ctx := ctxT(t, 30*time.Second)
	never := func() bool { return false }

	// Stop already true: no sleep at all.
	c, ok, err := cqB.WaitOr(ctx, func() bool { return true })
	if err != nil || ok {
		t.Fatalf("WaitOr with stop true = %v, %v, %v; want no completion and no error", c, ok, err)
	}

	// Stop turning true while it sleeps ends the wait (within a device
	// wait's MaxBlock), long before the context would.
	var flag atomic.Bool
	time.AfterFunc(20*time.Millisecond, func() { flag.Store(true) })
	c, ok, err = cqB.WaitOr(ctx, flag.Load)
	if err != nil || ok {
		t.Fatalf("WaitOr after stop turned true = %v, %v, %v; want no completion and no error", c, ok, err)
	}

	// A completion comes first, even with stop true.
	rd := &descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 64)}}
	mustf(t, vb.PostRecv(rd), "post recv")
	sd := &descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 8)}}
	mustf(t, va.PostSend(sd), "post send")
	c, ok, err = cqB.WaitOr(ctx, never)
	if err != nil || !ok || c.VI != vb || !c.Recv {
		t.Fatalf("WaitOr with a receive due = %+v, %v, %v; want vb's receive", c, ok, err)
	}

	// The context still bounds it.
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, _, err := cqB.WaitOr(short, never); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitOr past its context: %v, want context.DeadlineExceeded", err)
	}

	// A provider that closes ends it with ErrClosed, not a hang.
	done := make(chan error, 1)
	go func() {
		_, _, err := cqB.WaitOr(ctx, never)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	b.p.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitOr on a closed provider: %v, want ErrClosed", err)
	}
}
