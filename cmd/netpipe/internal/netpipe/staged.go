package netpipe

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethervia/ethervia/descriptors"
)

// workQueues are one VI's work queues: a plain VI's or a bonded one's.
type workQueues interface {
	PostSend(*descriptors.Descriptor) error
	PostRecv(*descriptors.Descriptor) error
	SendDone() (*descriptors.Descriptor, bool)
	RecvDone() (*descriptors.Descriptor, bool)
	Err() error
}

// staged moves the vi module's messages over one VI, plain or bonded:
// chunks sent straight from the registered message buffer, received into
// a ring of viSlots posted buffers. It is used by one goroutine at a time.
type staged struct {
	name       string // prefix of its errors
	v          workQueues
	poll       func() (recv, ok bool)                  // a completion waiting? is it a receive?
	wait       func(ctx context.Context) (bool, error) // block for one; is it a receive?
	register   func(b []byte) (descriptors.MemHandle, error)
	deregister func(descriptors.MemHandle) error
	chunk      int

	recvArea []byte
	recvH    descriptors.MemHandle
	// msgBuf is the registered message buffer sends go out from: the
	// benchmark reuses one buffer per size, so it is registered again
	// only when the buffer grows.
	msgBuf       []byte
	msgH         descriptors.MemHandle
	sds, rds     []descriptors.Descriptor
	sNext, sDone int // send slots: next to post, oldest in flight
	recvReady    int // receive completions taken from the CQ, not yet fetched
}

// cqWaits adapts a completion queue, plain or bonded, to staged's poll and
// wait: recv says whether a completion is a receive.
func cqWaits[C any](done func() (C, bool), wait func(context.Context) (C, error), recv func(C) bool) (func() (bool, bool), func(context.Context) (bool, error)) {
	poll := func() (bool, bool) {
		comp, ok := done()
		return recv(comp), ok
	}
	w := func(ctx context.Context) (bool, error) {
		comp, err := wait(ctx)
		return recv(comp), err
	}
	return poll, w
}

// postRing registers the receive ring and posts every buffer of it; it
// runs before connecting, so every one is a credit from the start.
func (c *staged) postRing() error {
	c.recvArea = make([]byte, viSlots*c.chunk)
	var err error
	if c.recvH, err = c.register(c.recvArea); err != nil {
		return fmt.Errorf("%s: register receive ring: %w", c.name, err)
	}
	c.sds = make([]descriptors.Descriptor, viSlots)
	c.rds = make([]descriptors.Descriptor, viSlots)
	for i := range viSlots {
		c.sds[i].Segments = make([]descriptors.Segment, 1)
		c.rds[i].Segments = []descriptors.Segment{{Buf: c.recvArea[i*c.chunk : (i+1)*c.chunk : (i+1)*c.chunk], Handle: c.recvH}}
		if err := c.v.PostRecv(&c.rds[i]); err != nil {
			return fmt.Errorf("%s: post receive: %w", c.name, err)
		}
	}
	return nil
}

// Send implements Conn. It returns once every chunk has completed, so msg
// may be reused.
func (c *staged) Send(ctx context.Context, msg []byte) error { return c.exchange(ctx, msg, nil, true) }

// Recv implements Conn.
func (c *staged) Recv(ctx context.Context, msg []byte) error { return c.exchange(ctx, nil, msg, false) }

// Exchange implements Conn.
func (c *staged) Exchange(ctx context.Context, out, in []byte) error {
	return c.exchange(ctx, out, in, out != nil)
}

// sendHandle returns the handle of the registered memory under out,
// registering out's whole backing array when it is not registered yet. No
// send is in flight when it is called: exchange waits for them all.
func (c *staged) sendHandle(out []byte) (descriptors.MemHandle, error) {
	if len(out) == 0 {
		return 0, nil
	}
	base := out[:cap(out)]
	if len(c.msgBuf) >= len(base) && &c.msgBuf[0] == &base[0] {
		return c.msgH, nil
	}
	if c.msgBuf != nil {
		if err := c.deregister(c.msgH); err != nil {
			return 0, fmt.Errorf(c.name+": deregister the old message buffer: %w", err)
		}
		c.msgBuf = nil
	}
	h, err := c.register(base)
	if err != nil {
		return 0, fmt.Errorf(c.name+": register the message buffer: %w", err)
	}
	c.msgBuf, c.msgH = base, h
	return h, nil
}

func (c *staged) exchange(ctx context.Context, out, in []byte, send bool) error {
	toSend, toRecv := 0, 0
	var h descriptors.MemHandle
	if send {
		toSend = chunks(len(out), c.chunk)
		var err error
		if h, err = c.sendHandle(out); err != nil {
			return err
		}
	}
	if in != nil {
		toRecv = chunks(len(in), c.chunk)
	}
	sent, got := 0, 0
	for {
		// Post what the staging ring has room for.
		for sent < toSend && c.sNext-c.sDone < viSlots {
			i := c.sNext % viSlots
			off := sent * c.chunk
			n := min(c.chunk, len(out)-off)
			d := &c.sds[i]
			d.Reset()
			d.Segments[0] = descriptors.Segment{Buf: out[off : off+n], Handle: h}
			if err := c.v.PostSend(d); err != nil {
				return fmt.Errorf(c.name+": post send: %w", err)
			}
			c.sNext++
			sent++
		}
		// Take completed receives of this message, in order; later ones
		// stay queued for the next Recv.
		for got < toRecv && c.recvReady > 0 {
			d, ok := c.v.RecvDone()
			if !ok {
				return errors.New(c.name + ": a receive completion without a completed descriptor")
			}
			c.recvReady--
			if d.Status.Failed() {
				return fmt.Errorf(c.name+": receive: %w (%v)", d.Status.Err(), c.v.Err())
			}
			off := got * c.chunk
			want := min(c.chunk, len(in)-off)
			if d.Length != want {
				return fmt.Errorf(c.name+": message chunk %d is %d bytes, this end expects %d", got, d.Length, want)
			}
			copy(in[off:off+want], d.Segments[0].Buf[:want])
			d.Reset()
			if err := c.v.PostRecv(d); err != nil {
				return fmt.Errorf(c.name+": repost receive: %w", err)
			}
			got++
		}
		if sent == toSend && got == toRecv && c.sDone == c.sNext {
			return nil
		}
		// Wait for a completion; the provider spins, then blocks. Every
		// completion is taken from the CQ exactly once, so it never fills.
		recv, ok := c.poll()
		if !ok {
			if err := c.v.Err(); err != nil {
				return fmt.Errorf(c.name+": connection: %w", err)
			}
			var err error
			if recv, err = c.wait(ctx); err != nil {
				return err // the provider's own error ("vi: cq wait: ...")
			}
		}
		if recv {
			c.recvReady++
			continue
		}
		d, ok := c.v.SendDone()
		if !ok {
			return errors.New(c.name + ": a send completion without a completed descriptor")
		}
		if d.Status.Failed() {
			return fmt.Errorf(c.name+": send: %w (%v)", d.Status.Err(), c.v.Err())
		}
		c.sDone++
	}
}
