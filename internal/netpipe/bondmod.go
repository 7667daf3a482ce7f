package netpipe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ethervia/ethervia/bonding"
	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/vi"
)

// connectBond is the vi module over several links: one bonded VI striped
// over them (package bonding), used like the one-link VI: messages go out
// as bonded send descriptors straight from the registered message buffer
// and land in pre-posted receive descriptors that are copied out.
func connectBond(ctx context.Context, ep Endpoint) (Conn, error) {
	k := len(ep.Devices)
	if ep.Role == Transmitter && len(ep.PeerMACs) != k {
		return nil, fmt.Errorf("vi: bonding %d links: the transmitter needs the receiver's %d MACs, has %d", k, k, len(ep.PeerMACs))
	}
	timeout := ep.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	b, err := bonding.Open(ep.Devices, bonding.Options{Options: vi.Options{
		Config:      nic.Config{EtherType: ep.Filter.EtherType, JobKey: ep.Filter.JobKey},
		SpinTime:    ep.Spin,
		PeerTimeout: timeout,
	}})
	if err != nil {
		return nil, fmt.Errorf("vi: bond %d links: %w", k, err)
	}
	c := &bondConn{b: b}
	if err := c.setup(ctx, ep, timeout); err != nil {
		b.Close()
		return nil, err
	}
	return c, nil
}

// bondConn is one end of a bonded vi connection. It is used by one
// goroutine at a time, as Conn requires; Close may come from anywhere.
type bondConn struct {
	b     *bonding.Bond
	v     *bonding.VI
	cq    *bonding.CQ
	chunk int

	ptag     bonding.PTag
	recvArea []byte
	recvH    descriptors.MemHandle
	// msgBuf is the registered message buffer sends go out from,
	// registered again only when the benchmark's buffer grows.
	msgBuf       []byte
	msgH         descriptors.MemHandle
	sds, rds     []descriptors.Descriptor
	sNext, sDone int // send slots: next to post, oldest in flight
	recvReady    int // receive completions taken from the CQ, not yet fetched

	closeOnce sync.Once
}

func (c *bondConn) setup(ctx context.Context, ep Endpoint, timeout time.Duration) error {
	o := c.b.Options()
	c.chunk = o.MaxTransfer
	cq, err := c.b.NewCQ(2 * o.QueueDepth)
	if err != nil {
		return fmt.Errorf("vi: bond: %w", err)
	}
	c.cq = cq
	c.ptag = c.b.NewPTag()
	c.v, err = c.b.NewVI(bonding.Attributes{PTag: c.ptag, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		return fmt.Errorf("vi: bond: %w", err)
	}
	c.recvArea = make([]byte, viSlots*c.chunk)
	if c.recvH, err = c.b.RegisterMemory(c.recvArea, c.ptag, 0); err != nil {
		return fmt.Errorf("vi: bond: register receive ring: %w", err)
	}
	c.sds = make([]descriptors.Descriptor, viSlots)
	c.rds = make([]descriptors.Descriptor, viSlots)
	for i := range viSlots {
		c.sds[i].Segments = make([]descriptors.Segment, 1)
		c.rds[i].Segments = []descriptors.Segment{{Buf: c.recvArea[i*c.chunk : (i+1)*c.chunk : (i+1)*c.chunk], Handle: c.recvH}}
		// Posted before connecting: every one is a credit from the start.
		if err := c.v.PostRecv(&c.rds[i]); err != nil {
			return fmt.Errorf("vi: bond: post receive: %w", err)
		}
	}
	hctx, cancel := context.WithTimeout(ctx, 6*timeout)
	defer cancel()
	if ep.Role == Receiver {
		req, err := c.b.ConnectWait(hctx, viDiscriminator)
		if err != nil {
			return fmt.Errorf("vi: bond: wait for the transmitter: %w", err)
		}
		if err := req.Accept(c.v); err != nil {
			return fmt.Errorf("vi: bond: accept: %w", err)
		}
		return nil
	}
	peer := bonding.Peer{MACs: ep.PeerMACs, Discriminator: viDiscriminator}
	if err := c.v.ConnectRequest(hctx, peer); err != nil {
		return fmt.Errorf("vi: bond: connect to %v: %w", ep.PeerMACs, err)
	}
	return nil
}

// Send implements Conn. It returns once every chunk has completed.
func (c *bondConn) Send(ctx context.Context, msg []byte) error {
	return c.exchange(ctx, msg, nil, true)
}

// Recv implements Conn.
func (c *bondConn) Recv(ctx context.Context, msg []byte) error {
	return c.exchange(ctx, nil, msg, false)
}

// Exchange implements Conn.
func (c *bondConn) Exchange(ctx context.Context, out, in []byte) error {
	return c.exchange(ctx, out, in, out != nil)
}

// sendHandle returns the bond handle of the registered memory under out,
// registering out's whole backing array when it is not registered yet. No
// send is in flight when it is called.
func (c *bondConn) sendHandle(out []byte) (descriptors.MemHandle, error) {
	if len(out) == 0 {
		return 0, nil
	}
	base := out[:cap(out)]
	if len(c.msgBuf) >= len(base) && &c.msgBuf[0] == &base[0] {
		return c.msgH, nil
	}
	if c.msgBuf != nil {
		if err := c.b.DeregisterMemory(c.msgH); err != nil {
			return 0, fmt.Errorf("vi: bond: deregister the old message buffer: %w", err)
		}
		c.msgBuf = nil
	}
	h, err := c.b.RegisterMemory(base, c.ptag, 0)
	if err != nil {
		return 0, fmt.Errorf("vi: bond: register the message buffer: %w", err)
	}
	c.msgBuf, c.msgH = base, h
	return h, nil
}

func (c *bondConn) exchange(ctx context.Context, out, in []byte, send bool) error {
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
		for sent < toSend && c.sNext-c.sDone < viSlots {
			i := c.sNext % viSlots
			off := sent * c.chunk
			n := min(c.chunk, len(out)-off)
			d := &c.sds[i]
			d.Reset()
			d.Segments[0] = descriptors.Segment{Buf: out[off : off+n], Handle: h}
			if err := c.v.PostSend(d); err != nil {
				return fmt.Errorf("vi: bond: post send: %w", err)
			}
			c.sNext++
			sent++
		}
		for got < toRecv && c.recvReady > 0 {
			d, ok := c.v.RecvDone()
			if !ok {
				return errors.New("vi: bond: a receive completion without a completed descriptor")
			}
			c.recvReady--
			if d.Status.Failed() {
				return fmt.Errorf("vi: bond: receive: %w (%v)", d.Status.Err(), c.v.Err())
			}
			off := got * c.chunk
			want := min(c.chunk, len(in)-off)
			if d.Length != want {
				return fmt.Errorf("vi: bond: message chunk %d is %d bytes, this end expects %d", got, d.Length, want)
			}
			copy(in[off:off+want], d.Segments[0].Buf[:want])
			d.Reset()
			if err := c.v.PostRecv(d); err != nil {
				return fmt.Errorf("vi: bond: repost receive: %w", err)
			}
			got++
		}
		if sent == toSend && got == toRecv && c.sDone == c.sNext {
			return nil
		}
		comp, ok := c.cq.Done()
		if !ok {
			if err := c.v.Err(); err != nil {
				return fmt.Errorf("vi: bond: connection: %w", err)
			}
			var err error
			if comp, err = c.cq.Wait(ctx); err != nil {
				return fmt.Errorf("vi: bond: %w", err)
			}
		}
		if comp.Recv {
			c.recvReady++
			continue
		}
		d, ok := c.v.SendDone()
		if !ok {
			return errors.New("vi: bond: a send completion without a completed descriptor")
		}
		if d.Status.Failed() {
			return fmt.Errorf("vi: bond: send: %w (%v)", d.Status.Err(), c.v.Err())
		}
		c.sDone++
	}
}

// Close implements Conn: it closes the bonded VI and the bond, not the
// devices.
func (c *bondConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		err = c.b.Close()
		if errors.Is(err, bonding.ErrClosed) {
			err = nil
		}
	})
	return err
}
