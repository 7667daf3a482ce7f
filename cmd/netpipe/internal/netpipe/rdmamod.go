package netpipe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/vi"
)

// RDMAModule is the "rdma" module: one reliable-delivery VI connection
// over the first link on which messages move by RDMA write with immediate
// data, straight from the sender's buffer into the receiver's. Each Recv
// registers its buffer for remote write (once per buffer: the benchmark
// reuses one per size) and grants the sender that buffer in a small send
// (handle and length); each Send waits for the next grant, writes the
// message there, and the immediate data completes one receive at the other
// end, which tells Recv the bytes are in place. A message so never lands
// in a buffer its receiver is still reading, and no byte is copied.
type RDMAModule struct{}

// Name implements Module.
func (RDMAModule) Name() string { return "rdma" }

// Frames implements Module.
func (RDMAModule) Frames() bool { return true }

const (
	// rdmaDiscriminator names the benchmark's VI on the receiver.
	rdmaDiscriminator = 5003
	// rdmaSlots is the number of send descriptors in flight and of
	// receives posted for grants and write notifications.
	rdmaSlots = 16
	// rdmaGrantLen is a grant's size: handle (4), length (8).
	rdmaGrantLen = 12
)

// Connect implements Module. The receiver waits for the transmitter's
// connection request; the transmitter repeats it until accepted.
func (RDMAModule) Connect(ctx context.Context, ep Endpoint) (Conn, error) {
	p, timeout, err := openProvider("rdma", ep, vi.MaxMaxTransfer)
	if err != nil {
		return nil, err
	}
	c := &rdmaConn{p: p}
	if err := c.setup(ctx, ep, timeout); err != nil {
		p.Close()
		return nil, err
	}
	return c, nil
}

// rdmaGrant is a receive buffer the peer granted: where the next message
// goes.
type rdmaGrant struct {
	h descriptors.MemHandle
	n int
}

// rdmaBuf is a buffer registered while the benchmark keeps using it.
type rdmaBuf struct {
	base []byte
	h    descriptors.MemHandle
}

// rdmaConn is one end of an rdma connection. It is used by one goroutine
// at a time, as Conn requires; Close may come from anywhere.
type rdmaConn struct {
	p     *vi.Provider
	v     *vi.VI
	cq    *vi.CQ
	ptag  vi.PTag
	chunk int

	// ctl holds the grants this end sends (one slot per send descriptor)
	// and the receives' buffers; it also takes zero-length writes.
	ctl  []byte
	ctlH descriptors.MemHandle
	sds  []descriptors.Descriptor
	rds  []descriptors.Descriptor

	sNext, sDone int // send slots: next to post, oldest in flight
	grants       [rdmaSlots]rdmaGrant
	gHead, gN    int
	out, in      rdmaBuf // registered send and receive buffers

	closeOnce sync.Once
}

func (c *rdmaConn) setup(ctx context.Context, ep Endpoint, timeout time.Duration) error {
	attrs := c.p.Attributes()
	c.chunk = attrs.MaxTransfer
	cq, err := c.p.NewCQ(2 * attrs.QueueDepth)
	if err != nil {
		return fmt.Errorf("rdma: %w", err)
	}
	c.cq = cq
	c.ptag = c.p.NewPTag()
	c.v, err = c.p.NewVI(vi.Attributes{Reliability: vi.ReliableDelivery, PTag: c.ptag, SendCQ: cq, RecvCQ: cq,
		EnableRDMAWrite: true})
	if err != nil {
		return fmt.Errorf("rdma: %w", err)
	}
	c.ctl = make([]byte, 2*rdmaSlots*rdmaGrantLen)
	if c.ctlH, err = c.p.RegisterMemory(c.ctl, c.ptag, vi.AccessRDMAWrite); err != nil {
		return fmt.Errorf("rdma: register control buffers: %w", err)
	}
	c.sds = make([]descriptors.Descriptor, rdmaSlots)
	c.rds = make([]descriptors.Descriptor, rdmaSlots)
	for i := range rdmaSlots {
		c.sds[i].Segments = make([]descriptors.Segment, 1)
		c.rds[i].Segments = []descriptors.Segment{{Buf: c.ctlSlot(rdmaSlots + i), Handle: c.ctlH}}
		// Posted before connecting: every one is a credit from the start.
		if err := c.v.PostRecv(&c.rds[i]); err != nil {
			return fmt.Errorf("rdma: post receive: %w", err)
		}
	}
	return connectVI(ctx, "rdma", c.p, c.v, ep, timeout, rdmaDiscriminator)
}

func (c *rdmaConn) ctlSlot(i int) []byte {
	return c.ctl[i*rdmaGrantLen : (i+1)*rdmaGrantLen : (i+1)*rdmaGrantLen]
}

// register returns the handle of b's backing array, registering it (with
// remote write when it receives) unless r already holds it. Nothing that
// uses r's old registration is in flight when it is called.
func (c *rdmaConn) register(r *rdmaBuf, b []byte, acc vi.Access) (descriptors.MemHandle, error) {
	if len(b) == 0 {
		return c.ctlH, nil // zero-length writes go to the control area
	}
	base := b[:cap(b)]
	if len(r.base) >= len(base) && &r.base[0] == &base[0] {
		return r.h, nil
	}
	if r.base != nil {
		if err := c.p.DeregisterMemory(r.h); err != nil {
			return 0, fmt.Errorf("rdma: deregister the old buffer: %w", err)
		}
		r.base = nil
	}
	h, err := c.p.RegisterMemory(base, c.ptag, acc)
	if err != nil {
		return 0, fmt.Errorf("rdma: register a %d-byte buffer: %w", len(base), err)
	}
	r.base, r.h = base, h
	return h, nil
}

// Send implements Conn. It returns once every write has completed, so msg
// may be reused.
func (c *rdmaConn) Send(ctx context.Context, msg []byte) error {
	return c.exchange(ctx, msg, nil, true)
}

// Recv implements Conn.
func (c *rdmaConn) Recv(ctx context.Context, msg []byte) error {
	return c.exchange(ctx, nil, msg, false)
}

// Exchange implements Conn.
func (c *rdmaConn) Exchange(ctx context.Context, out, in []byte) error {
	return c.exchange(ctx, out, in, out != nil)
}

// post posts a send descriptor in the next slot after fill sets it up.
func (c *rdmaConn) post(fill func(d *descriptors.Descriptor, slot int)) error {
	i := c.sNext % rdmaSlots
	d := &c.sds[i]
	d.Reset()
	d.Control = descriptors.Control{}
	d.Address = descriptors.AddressSegment{}
	fill(d, i)
	if err := c.v.PostSend(d); err != nil {
		return fmt.Errorf("rdma: post send: %w", err)
	}
	c.sNext++
	return nil
}

func (c *rdmaConn) exchange(ctx context.Context, out, in []byte, send bool) error {
	var outH descriptors.MemHandle
	if send && len(out) > 0 {
		var err error
		if outH, err = c.register(&c.out, out, 0); err != nil {
			return err
		}
	}
	recv := in != nil
	granted, got := !recv, !recv
	toWrite := 0 // chunks of out to write once a grant is here
	if send {
		toWrite = max(1, (len(out)+c.chunk-1)/c.chunk)
	}
	written := 0
	var dst rdmaGrant
	for {
		if !granted && c.sNext-c.sDone < rdmaSlots {
			// Grant in: the peer writes the next message there.
			h, err := c.register(&c.in, in, vi.AccessRDMAWrite)
			if err != nil {
				return err
			}
			err = c.post(func(d *descriptors.Descriptor, slot int) {
				b := c.ctlSlot(slot)
				binary.BigEndian.PutUint32(b, uint32(h))
				binary.BigEndian.PutUint64(b[4:], uint64(len(in)))
				d.Segments[0] = descriptors.Segment{Buf: b, Handle: c.ctlH}
			})
			if err != nil {
				return err
			}
			granted = true
		}
		if written == 0 && toWrite > 0 && c.gN > 0 {
			dst = c.grants[c.gHead]
			c.gHead = (c.gHead + 1) % rdmaSlots
			c.gN--
			if dst.n != len(out) {
				return fmt.Errorf("rdma: a %d-byte message for a %d-byte receive", len(out), dst.n)
			}
		}
		for written < toWrite && (written > 0 || dst.h != 0) && c.sNext-c.sDone < rdmaSlots {
			off := written * c.chunk
			n := min(c.chunk, len(out)-off)
			last := written == toWrite-1
			h := outH
			err := c.post(func(d *descriptors.Descriptor, _ int) {
				d.Control.Op = descriptors.OpRDMAWrite
				if n > 0 {
					d.Segments[0] = descriptors.Segment{Buf: out[off : off+n], Handle: h}
				} else {
					d.Segments[0] = descriptors.Segment{}
				}
				d.Address = descriptors.AddressSegment{Handle: dst.h, Offset: uint64(off)}
				if last {
					// The notification: it completes the peer's Recv.
					d.Control.Immediate, d.Control.ImmData = true, uint32(len(out))
				}
			})
			if err != nil {
				return err
			}
			written++
		}
		if written == toWrite && granted && got && c.sDone == c.sNext {
			return nil
		}
		// Wait for a completion; the provider spins, then blocks.
		comp, ok := c.cq.Done()
		if !ok {
			if err := c.v.Err(); err != nil {
				return fmt.Errorf("rdma: connection: %w", err)
			}
			var err error
			if comp, err = c.cq.Wait(ctx); err != nil {
				return fmt.Errorf("rdma: %w", err)
			}
		}
		if !comp.Recv {
			d, ok := c.v.SendDone()
			if !ok {
				return errors.New("rdma: a send completion without a completed descriptor")
			}
			if d.Status.Failed() {
				return fmt.Errorf("rdma: send: %w (%v)", d.Status.Err(), c.v.Err())
			}
			c.sDone++
			continue
		}
		d, ok := c.v.RecvDone()
		if !ok {
			return errors.New("rdma: a receive completion without a completed descriptor")
		}
		if d.Status.Failed() {
			return fmt.Errorf("rdma: receive: %w (%v)", d.Status.Err(), c.v.Err())
		}
		if d.Status&descriptors.StatusRemoteWrite != 0 {
			// Only this end's pending Recv granted a buffer, so this is
			// its message, and every earlier write of it has landed.
			if !recv || got || !granted {
				return errors.New("rdma: a write notification without a pending receive")
			}
			if int(d.ImmData) != len(in)&0xffffffff {
				return fmt.Errorf("rdma: a %d-byte message for a %d-byte receive", d.ImmData, len(in))
			}
			got = true
		} else {
			if d.Length != rdmaGrantLen || c.gN == rdmaSlots {
				return fmt.Errorf("rdma: malformed grant (%d bytes, %d pending)", d.Length, c.gN)
			}
			b := d.Segments[0].Buf
			c.grants[(c.gHead+c.gN)%rdmaSlots] = rdmaGrant{h: descriptors.MemHandle(binary.BigEndian.Uint32(b)), n: int(binary.BigEndian.Uint64(b[4:]))}
			c.gN++
		}
		d.Reset()
		if err := c.v.PostRecv(d); err != nil {
			return fmt.Errorf("rdma: repost receive: %w", err)
		}
	}
}

// Close implements Conn: it closes the VI and provider, not the device.
func (c *rdmaConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		err = c.p.Close()
		if errors.Is(err, vi.ErrClosed) || errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	return err
}
