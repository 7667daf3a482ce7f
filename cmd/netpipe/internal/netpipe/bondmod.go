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
	},
		// Ends on locked threads (-local) must not yield, see Endpoint.Yield.
		Yield: ep.Yield,
	})
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
	staged
	b  *bonding.Bond
	bv *bonding.VI

	closeOnce sync.Once
}

func (c *bondConn) setup(ctx context.Context, ep Endpoint, timeout time.Duration) error {
	o := c.b.Options()
	cq, err := c.b.NewCQ(2 * o.QueueDepth)
	if err != nil {
		return fmt.Errorf("vi: bond: %w", err)
	}
	ptag := c.b.NewPTag()
	c.bv, err = c.b.NewVI(bonding.Attributes{PTag: ptag, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		return fmt.Errorf("vi: bond: %w", err)
	}
	poll, wait := cqWaits(cq.Done, cq.Wait, func(c bonding.Completion) bool { return c.Recv })
	c.staged = staged{
		poll:       poll,
		wait:       wait,
		name:       "vi: bond",
		v:          c.bv,
		register:   func(b []byte) (descriptors.MemHandle, error) { return c.b.RegisterMemory(b, ptag, 0) },
		deregister: c.b.DeregisterMemory,
		chunk:      o.MaxTransfer,
	}
	if err := c.postRing(); err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, 6*timeout)
	defer cancel()
	if ep.Role == Receiver {
		req, err := c.b.ConnectWait(hctx, viDiscriminator)
		if err != nil {
			return fmt.Errorf("vi: bond: wait for the transmitter: %w", err)
		}
		if err := req.Accept(c.bv); err != nil {
			return fmt.Errorf("vi: bond: accept: %w", err)
		}
		return nil
	}
	peer := bonding.Peer{MACs: ep.PeerMACs, Discriminator: viDiscriminator}
	if err := c.bv.ConnectRequest(hctx, peer); err != nil {
		return fmt.Errorf("vi: bond: connect to %v: %w", ep.PeerMACs, err)
	}
	return nil
}

// Bonded reports that the connection runs over the bonding layer.
func (c *bondConn) Bonded() bool { return true }

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
