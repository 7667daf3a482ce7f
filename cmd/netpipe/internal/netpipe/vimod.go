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
	if len(ep.Devices) > 1 || ep.Bond {
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
	staged
	p  *vi.Provider
	cq *vi.CQ

	closeOnce sync.Once
}

func (c *viConn) setup(ctx context.Context, ep Endpoint, timeout time.Duration) error {
	attrs := c.p.Attributes()
	cq, err := c.p.NewCQ(2 * attrs.QueueDepth)
	if err != nil {
		return fmt.Errorf("new CQ: %w", err) // package vi's errors say "vi:"
	}
	c.cq = cq
	ptag := c.p.NewPTag()
	v, err := c.p.NewVI(vi.Attributes{Reliability: vi.ReliableDelivery, PTag: ptag, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		return fmt.Errorf("new VI: %w", err)
	}
	poll, wait := cqWaits(cq.Done, cq.Wait, func(c vi.Completion) bool { return c.Recv })
	c.staged = staged{
		poll:       poll,
		wait:       wait,
		name:       "vi",
		v:          v,
		register:   func(b []byte) (descriptors.MemHandle, error) { return c.p.RegisterMemory(b, ptag, 0) },
		deregister: c.p.DeregisterMemory,
		chunk:      attrs.MaxTransfer,
	}
	if err := c.postRing(); err != nil {
		return err
	}
	return connectVI(ctx, "vi", c.p, v, ep, timeout, viDiscriminator)
}

func chunks(n, chunk int) int {
	if n == 0 {
		return 1
	}
	return (n + chunk - 1) / chunk
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
