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
// two-rank mplite world (the transmitter is rank 0), bonded over every
// link when there are several, and messages go with Send and Recv, so the
// curve shows the eager protocol below the eager limit and the handshake
// (RTS, CTS, RDMA write) above it.
type MPLiteModule struct{}

// Name implements Module.
func (MPLiteModule) Name() string { return "mplite" }

// Frames implements Module.
func (MPLiteModule) Frames() bool { return true }

// Connect implements Module. A receiver without the transmitter's MAC
// finds it with mplite's bootstrap discovery under the job key.
func (MPLiteModule) Connect(ctx context.Context, ep Endpoint) (Conn, error) {
	k := len(ep.Devices)
	if k == 0 {
		return nil, errors.New("mplite: no link")
	}
	timeout := ep.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	rank := 0
	if ep.Role == Receiver {
		rank = 1
	}
	// macs[rank][link]
	macs := [][]net.HardwareAddr{make([]net.HardwareAddr, k), make([]net.HardwareAddr, k)}
	for i, d := range ep.Devices {
		macs[rank][i] = d.HardwareAddr()
	}
	switch {
	case len(ep.PeerMACs) == k && !ep.Announce:
		copy(macs[1-rank], ep.PeerMACs)
	case len(ep.PeerMACs) == k || (len(ep.PeerMACs) == 0 && ep.Role == Receiver):
		// Both ends announce: the receiver learns the transmitter's
		// MACs, and a transmitter that was given the receiver's checks
		// them.
		for i, d := range ep.Devices {
			dctx, cancel := context.WithTimeout(ctx, 6*timeout)
			found, err := bootstrap.Discover(dctx, d, bootstrap.Config{Rank: rank, Size: 2, Rail: i,
				EtherType: ep.Filter.EtherType, JobKey: ep.Filter.JobKey})
			cancel()
			if err != nil {
				return nil, fmt.Errorf("mplite: find the peer on link %d: %w", i, err)
			}
			peer := net.HardwareAddr(found[1-rank].MAC[:])
			if len(ep.PeerMACs) == k && peer.String() != ep.PeerMACs[i].String() {
				return nil, fmt.Errorf("mplite: link %d: the peer announced %v, not %v", i, peer, ep.PeerMACs[i])
			}
			macs[1-rank][i] = peer
		}
	default:
		return nil, fmt.Errorf("mplite: the transmitter needs the receiver's %d MACs, has %d", k, len(ep.PeerMACs))
	}
	spin := ep.Spin
	if spin == 0 {
		spin = mplite.DefaultSpinTime
	}
	eps := make([]uint16, 2)
	eps[rank], eps[1-rank] = ep.Endpoint, ep.PeerEndpoint
	c, err := mplite.NewBondedComm(ep.Devices, rank, macs, mplite.WithEndpoints(eps),
		mplite.WithJobKey(ep.Filter.JobKey), mplite.WithEtherType(ep.Filter.EtherType),
		mplite.WithSpinTime(spin), mplite.WithYield(ep.Yield), mplite.WithPeerTimeout(timeout))
	if err != nil {
		return nil, fmt.Errorf("new comm: %w", err)
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
// Package mplite's errors say "mplite:"; the module adds the operation.
type mpliteConn struct {
	c    *mplite.Comm
	peer int
}

// Send implements Conn.
func (m *mpliteConn) Send(_ context.Context, msg []byte) error {
	if err := m.c.Send(msg, m.peer, 0); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// Recv implements Conn.
func (m *mpliteConn) Recv(_ context.Context, msg []byte) error {
	st, err := m.c.Recv(msg, m.peer, 0)
	if err != nil {
		return fmt.Errorf("receive: %w", err)
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
		return fmt.Errorf("exchange: %w", err)
	}
	if st.Count != len(in) {
		return fmt.Errorf("mplite: message of %d bytes, this end expects %d", st.Count, len(in))
	}
	return nil
}

// Close implements Conn: the rank leaves at once (the other end is closing
// too, or has failed), without Finalize's barrier.
func (m *mpliteConn) Close() error { return m.c.Close() }
