package mplite

import (
	"fmt"

	"github.com/ethervia/ethervia/bonding"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/vi"
)

// Hooks for the external tests.

// KillSilently takes c's memnic port down, as if its host died: its peers
// hear nothing more and must notice by the peer timeout. Release it with
// Abandon.
func KillSilently(c *Comm) {
	for _, d := range c.devs {
		memPort(d).SetUp(false)
	}
}

// SetRailUp takes rail r of c's memnic ports down or up: a bonded world
// loses or regains one rail.
func SetRailUp(c *Comm, r int, up bool) { memPort(c.devs[r]).SetUp(up) }

// Abandon releases c without a Finalize: its connections close at once,
// as when a process exits and its provider says goodbye.
func Abandon(c *Comm) { c.Close() }

// WithSharedMemoryCopies makes shared-memory links copy every write
// through the rings, as they do when a peer cannot read this process's
// memory (cross-memory attach refused).
func WithSharedMemoryCopies() Option {
	return func(c *config) error {
		c.shmCopies = true
		return nil
	}
}

// DebugState describes c's connections, for failure messages.
func DebugState(c *Comm) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := fmt.Sprintf("rank %d: stats %+v, handshakes %d out %d in, unexpected bytes %d\n",
		c.rank, c.stats, len(c.sendIDs), len(c.recvIDs), c.unexpBytes)
	for _, p := range c.peers {
		if p.v == nil {
			continue
		}
		var vstate, vstats any
		switch v := p.v.raw().(type) {
		case *vi.VI:
			vstate, vstats = v.State(), v.Stats()
		case *bonding.VI:
			vstate, vstats = v.State(), v.Stats()
		case *shmLink:
			vstate = fmt.Sprintf("shared memory (attached %v, ring %v, %d receives, %d sends pending, %d sent, ring ready %v, at %d)",
				v.out != nil, v.ring != nil, v.recvs.len(), len(v.pend)-v.ph, len(v.sent)-v.sh, v.ring != nil && v.ring.Ready(), v.at)
		}
		s += fmt.Sprintf("  peer %d: state %d, VI %v (%v), posted recv %d, sends %d, free slots %d, ctrl %d/%d, fin %v/%v/%v, VI stats %+v, error %v\n",
			p.rank, p.state, vstate, p.v.Err(), p.rpos.n, p.sops.n, len(p.sfre), p.ctrlH, len(p.ctrlq),
			p.finSent, p.finRecv, p.finAcked, vstats, p.err)
		if p.lane != nil {
			s += fmt.Sprintf("    lane: %v (%v) up %v gone %v, posted recv %d, sends %d, seq out %d in %d, stats %+v\n",
				p.lane.State(), p.lane.Err(), p.laneUp, p.laneGone, p.lrpos.n, p.lsops.n, p.sendSeq, p.recvSeq, p.lane.Stats())
		}
	}
	return s
}

// RailTxBytes returns the bytes c's memnic port on each rail sent.
func RailTxBytes(c *Comm) []uint64 {
	out := make([]uint64, len(c.devs))
	for r, d := range c.devs {
		out[r] = memPort(d).Stats().TxBytes
	}
	return out
}

// RailFailures sums, over c's bonded connections, the times a rail died.
func RailFailures(c *Comm) uint64 { return c.Stats().RailFailures }

// BondMessages counts the messages c's bonded connections sent and
// received through their bonds (not their lanes).
func BondMessages(c *Comm) (sent, received uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.peers {
		if l, ok := p.v.(*bondLink); ok {
			st := l.Stats()
			sent += st.MessagesSent
			received += st.MessagesReceived
		}
	}
	return sent, received
}

// LaneMessages counts the messages c's lanes sent.
func LaneMessages(c *Comm) (sent uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.peers {
		if p.lane != nil {
			sent += p.lane.Stats().MessagesSent
		}
	}
	return sent
}

// Stages is how many staging copies of layout requests c keeps for reuse.
func Stages(c *Comm) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.stages)
}

// AddrOf is rank r's address (rail-0 MAC and endpoint) as c knows it.
func AddrOf(c *Comm, r int) nic.Addr { return c.addrs[r] }

// memPort is the memnic port under a device of a local world.
func memPort(d nic.Device) *memnic.Port { return auth.Unwrap(d).(*memnic.Port) }

// RecvGranted reports whether c's receive region for buf (registered by
// an earlier handshake) is open to remote writes now.
func RecvGranted(c *Comm, buf []byte) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reg, err := c.recvCache.Get(buf)
	if err != nil {
		return false, err
	}
	defer c.recvCache.Put(reg)
	return reg.Granted(), nil
}
