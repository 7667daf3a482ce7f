package mplite

import (
	"fmt"

	"github.com/ethervia/ethervia/nic/memnic"
)

// Hooks for the external tests.

// KillSilently takes c's memnic port down, as if its host died: its peers
// hear nothing more and must notice by the peer timeout. Release it with
// Abandon.
func KillSilently(c *Comm) {
	c.dev.(*memnic.Port).SetUp(false)
}

// Abandon releases c without a Finalize: its connections close at once,
// as when a process exits and its provider says goodbye.
func Abandon(c *Comm) { c.Close() }

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
		s += fmt.Sprintf("  peer %d: state %d, VI %v (%v), posted recv %d, sends %d, free slots %d, ctrl %d/%d, fin %v/%v/%v, VI stats %+v\n",
			p.rank, p.state, p.v.State(), p.v.Err(), p.rpos.n, p.sops.n, len(p.sfre), p.ctrlH, len(p.ctrlq),
			p.finSent, p.finRecv, p.finAcked, p.v.Stats())
	}
	return s
}
