package netpipe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/vi"
)

// VIModule is the "vi" module: one reliable-delivery VI connection over the
// first link, MP_Lite's eager path. A message goes out as one or more send
// descriptors straight from the message buffer, which is registered once
// (as a VI program sends from registered memory), and lands in pre-posted
// receive descriptors whose buffers are copied out (the message arrives
// before Recv names its buffer), so a
// sender always has credit and the connection never waits for a post.
type VIModule struct{}

// Name implements Module.
func (VIModule) Name() string { return "vi" }

// Frames implements Module.
func (VIModule) Frames() bool { return true }

const (
	// viDiscriminator names the benchmark's VI on the receiver, like
	// NPtcp's port.
	viDiscriminator = 5002
	// viSlots is the number of staging buffers each way; it bounds a
	// message to viSlots*chunk bytes in flight and the memory registered
	// per end to 2*viSlots*chunk.
	viSlots = 16
)

// Connect implements Module. The receiver waits for the transmitter's
// connection request; the transmitter repeats it until accepted.
func (VIModule) Connect(ctx context.Context, ep Endpoint) (Conn, error) {
	if len(ep.Devices) > 1 {
		return connectBond(ctx, ep) // bondmod.go
	}
	p, timeout, err := openProvider("vi", ep, 0)
	if err != nil {
		return nil, err
	}
	c := &viConn{p: p}
	if err := c.setup(ctx, ep, timeout); err != nil {
		p.Close()
		return nil, err
	}
	return c, nil
}

// viConn is one end of a vi connection. It is used by one goroutine at a
// time, as Conn requires; Close may come from anywhere.
type viConn struct {
	p     *vi.Provider
	v     *vi.VI
	cq    *vi.CQ
	chunk int

	ptag     vi.PTag
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

	closeOnce sync.Once
}

func (c *viConn) setup(ctx context.Context, ep Endpoint, timeout time.Duration) error {
	attrs := c.p.Attributes()
	c.chunk = attrs.MaxTransfer
	cq, err := c.p.NewCQ(2 * attrs.QueueDepth)
	if err != nil {
		return fmt.Errorf("vi: %w", err)
	}
	c.cq = cq
	ptag := c.p.NewPTag()
	c.v, err = c.p.NewVI(vi.Attributes{Reliability: vi.ReliableDelivery, PTag: ptag, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		return fmt.Errorf("vi: %w", err)
	}
	c.ptag = ptag
	c.recvArea = make([]byte, viSlots*c.chunk)
	if c.recvH, err = c.p.RegisterMemory(c.recvArea, ptag, 0); err != nil {
		return fmt.Errorf("vi: register receive ring: %w", err)
	}
	c.sds = make([]descriptors.Descriptor, viSlots)
	c.rds = make([]descriptors.Descriptor, viSlots)
	for i := range viSlots {
		c.sds[i].Segments = make([]descriptors.Segment, 1)
		c.rds[i].Segments = []descriptors.Segment{{Buf: c.recvSlot(i), Handle: c.recvH}}
		// Posted before connecting: every one is a credit from the start.
		if err := c.v.PostRecv(&c.rds[i]); err != nil {
			return fmt.Errorf("vi: post receive: %w", err)
		}
	}
	return connectVI(ctx, "vi", c.p, c.v, ep, timeout, viDiscriminator)
}

func (c *viConn) recvSlot(i int) []byte {
	return c.recvArea[i*c.chunk : (i+1)*c.chunk : (i+1)*c.chunk]
}

// Send implements Conn. It returns once every chunk has completed, so msg
// may be reused.
func (c *viConn) Send(ctx context.Context, msg []byte) error { return c.exchange(ctx, msg, nil, true) }

// Recv implements Conn.
func (c *viConn) Recv(ctx context.Context, msg []byte) error { return c.exchange(ctx, nil, msg, false) }

// Exchange implements Conn.
func (c *viConn) Exchange(ctx context.Context, out, in []byte) error {
	return c.exchange(ctx, out, in, out != nil)
}

func chunks(n, chunk int) int {
	if n == 0 {
		return 1
	}
	return (n + chunk - 1) / chunk
}

// sendHandle returns the handle of the registered memory under out,
// registering out's whole backing array when it is not registered yet. No
// send is in flight when it is called: exchange waits for them all.
func (c *viConn) sendHandle(out []byte) (descriptors.MemHandle, error) {
	if len(out) == 0 {
		return 0, nil
	}
	base := out[:cap(out)]
	if len(c.msgBuf) >= len(base) && &c.msgBuf[0] == &base[0] {
		return c.msgH, nil
	}
	if c.msgBuf != nil {
		if err := c.p.DeregisterMemory(c.msgH); err != nil {
			return 0, fmt.Errorf("vi: deregister the old message buffer: %w", err)
		}
		c.msgBuf = nil
	}
	h, err := c.p.RegisterMemory(base, c.ptag, 0)
	if err != nil {
		return 0, fmt.Errorf("vi: register the message buffer: %w", err)
	}
	c.msgBuf, c.msgH = base, h
	return h, nil
}

func (c *viConn) exchange(ctx context.Context, out, in []byte, send bool) error {
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
				return fmt.Errorf("vi: post send: %w", err)
			}
			c.sNext++
			sent++
		}
		// Take completed receives of this message, in order; later ones
		// stay queued for the next Recv.
		for got < toRecv && c.recvReady > 0 {
			d, ok := c.v.RecvDone()
			if !ok {
				return errors.New("vi: a receive completion without a completed descriptor")
			}
			c.recvReady--
			if d.Status.Failed() {
				return fmt.Errorf("vi: receive: %w (%v)", d.Status.Err(), c.v.Err())
			}
			off := got * c.chunk
			want := min(c.chunk, len(in)-off)
			if d.Length != want {
				return fmt.Errorf("vi: message chunk %d is %d bytes, this end expects %d", got, d.Length, want)
			}
			copy(in[off:off+want], d.Segments[0].Buf[:want])
			d.Reset()
			if err := c.v.PostRecv(d); err != nil {
				return fmt.Errorf("vi: repost receive: %w", err)
			}
			got++
		}
		if sent == toSend && got == toRecv && c.sDone == c.sNext {
			return nil
		}
		// Wait for a completion; the provider spins, then blocks. Every
		// completion is taken from the CQ exactly once, so it never fills.
		comp, ok := c.cq.Done()
		if !ok {
			if err := c.v.Err(); err != nil {
				return fmt.Errorf("vi: connection: %w", err)
			}
			var err error
			if comp, err = c.cq.Wait(ctx); err != nil {
				return fmt.Errorf("vi: %w", err)
			}
		}
		if comp.Recv {
			c.recvReady++
			continue
		}
		d, ok := c.v.SendDone()
		if !ok {
			return errors.New("vi: a send completion without a completed descriptor")
		}
		if d.Status.Failed() {
			return fmt.Errorf("vi: send: %w (%v)", d.Status.Err(), c.v.Err())
		}
		c.sDone++
	}
}

// Close implements Conn: it closes the VI and provider, not the device.
func (c *viConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		err = c.p.Close()
		if errors.Is(err, vi.ErrClosed) || errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	return err
}
