package netpipe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/mplite/bootstrap"
)

// MPLiteModule is the "mplite" module: the two ends are the ranks of a
// two-rank mplite world on the first link (the transmitter is rank 0), and
// messages go with Send and Recv, so the curve shows the eager protocol
// below the eager limit and the handshake (RTS, CTS, RDMA write) above it.
type MPLiteModule struct{}

// Name implements Module.
func (MPLiteModule) Name() string { return "mplite" }

// Frames implements Module.
func (MPLiteModule) Frames() bool { return true }

// Connect implements Module. A receiver without the transmitter's MAC
// finds it with mplite's bootstrap discovery under the job key.
func (MPLiteModule) Connect(ctx context.Context, ep Endpoint) (Conn, error) {
	if len(ep.Devices) != 1 {
		return nil, fmt.Errorf("mplite: the mplite module runs on one link, not %d", len(ep.Devices))
	}
	timeout := ep.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	dev := ep.Devices[0]
	rank := 0
	if ep.Role == Receiver {
		rank = 1
	}
	macs := make([]net.HardwareAddr, 2)
	macs[rank] = dev.HardwareAddr()
	switch {
	case len(ep.PeerMACs) == 1:
		macs[1-rank] = ep.PeerMACs[0]
	case len(ep.PeerMACs) == 0 && ep.Role == Receiver:
		dctx, cancel := context.WithTimeout(ctx, 6*timeout)
		found, err := bootstrap.Discover(dctx, dev, bootstrap.Config{Rank: rank, Size: 2,
			EtherType: ep.Filter.EtherType, JobKey: ep.Filter.JobKey})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("mplite: find the transmitter: %w", err)
		}
		macs = found
	default:
		return nil, errors.New("mplite: the transmitter needs the receiver's MAC")
	}
	spin := ep.Spin
	if spin == 0 {
		spin = mplite.DefaultSpinTime
	}
	c, err := mplite.NewComm(dev, rank, macs,
		mplite.WithJobKey(ep.Filter.JobKey), mplite.WithEtherType(ep.Filter.EtherType),
		mplite.WithSpinTime(spin), mplite.WithYield(ep.Yield), mplite.WithPeerTimeout(timeout))
	if err != nil {
		return nil, fmt.Errorf("mplite: %w", err)
	}
	// Open the connection now, so the first timed message does not.
	errc := make(chan error, 1)
	go func() { errc <- c.Barrier() }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(6 * timeout):
		err = fmt.Errorf("no answer from the peer in %v", 6*timeout)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("mplite: connect: %w", err)
	}
	return &mpliteConn{c: c, peer: 1 - rank}, nil
}

// mpliteConn is one rank of the two. mplite's calls take no context: a
// dead peer fails them after the peer timeout, and Close fails them at once.
type mpliteConn struct {
	c    *mplite.Comm
	peer int
}

// Send implements Conn.
func (m *mpliteConn) Send(_ context.Context, msg []byte) error {
	if err := m.c.Send(msg, m.peer, 0); err != nil {
		return fmt.Errorf("mplite: %w", err)
	}
	return nil
}

// Recv implements Conn.
func (m *mpliteConn) Recv(_ context.Context, msg []byte) error {
	st, err := m.c.Recv(msg, m.peer, 0)
	if err != nil {
		return fmt.Errorf("mplite: %w", err)
	}
	if st.Count != len(msg) {
		return fmt.Errorf("mplite: message of %d bytes, this end expects %d", st.Count, len(msg))
	}
	return nil
}

// Exchange implements Conn.
func (m *mpliteConn) Exchange(ctx context.Context, out, in []byte) error {
	switch {
	case out == nil:
		return m.Recv(ctx, in)
	case in == nil:
		return m.Send(ctx, out)
	}
	st, err := m.c.Sendrecv(out, m.peer, 0, in, m.peer, 0)
	if err != nil {
		return fmt.Errorf("mplite: %w", err)
	}
	if st.Count != len(in) {
		return fmt.Errorf("mplite: message of %d bytes, this end expects %d", st.Count, len(in))
	}
	return nil
}

// Close implements Conn: the rank leaves at once (the other end is closing
// too, or has failed), without Finalize's barrier.
func (m *mpliteConn) Close() error { return m.c.Close() }
