package mplite

import (
	"runtime"

	"github.com/ethervia/ethervia/shm"
)

// Blocking Send and Recv between two ranks of one host take a shorter way
// when nothing is queued on either side: the send writes its message
// straight into the peer's ring, the receive takes it straight from the
// head of the peer's ring. Neither makes a request, posts anything or goes
// through the general wait, whose bookkeeping cost as much as the cache
// lines the message moves. Whenever the order of messages could depend on
// something queued (a receive posted before, an unexpected message, a
// send waiting for room, a handshake), they leave the work to the general
// path, which would have done the same thing more slowly.

// fastLink returns p's shared-memory link if the short ways may be taken
// to p: connected, no error, no send of the descriptor path waiting for
// the ring. c.mu is held.
func (c *Comm) fastLink(p *peer) *shmLink {
	if p.state != stConnected || p.err != nil || c.finalized || c.stopped.Load() {
		return nil
	}
	return ringLink(p)
}

// sendLocalNow sends eager message buf to local peer p straight into its
// ring and reports true, or reports false, having done nothing, when the
// message must take the general path. c.mu is held.
func (c *Comm) sendLocalNow(p *peer, buf []byte, tag int, ctx uint16) bool {
	if len(buf) > c.cfg.eagerLimit || p.sendq.head != nil || p.ctrlH < len(p.ctrlq) || p.hasOffer {
		return false
	}
	sl := c.fastLink(p)
	if sl == nil {
		return false
	}
	n := eagerLen + len(buf)
	b, ok := sl.out.ReserveSend(n)
	if !ok {
		return false
	}
	putEnvelope(b, &envelope{typ: msgEager, ctx: ctx, tag: tag, length: len(buf)})
	copy(b[eagerLen:], buf)
	sl.out.CommitSend(n)
	p.msgsSent++
	c.stats.EagerSent++
	return true
}

// localRecv is the outcome of one look at a local peer's ring.
type localRecv int

const (
	localEmpty   localRecv = iota // nothing there yet
	localTaken                    // the message was received
	localGeneral                  // the general path must run
)

// recvLocalNow receives an eager message from local peer p into buf when
// the head of its ring holds one that matches (tag, ctx) and no receive
// posted before could match it. c.mu is held.
func (c *Comm) recvLocalNow(p *peer, buf []byte, tag int, ctx uint16, st *Status) localRecv {
	sl := c.fastLink(p)
	if sl == nil || sl.ring == nil || sl.rdone.len() > 0 || c.posted[p.rank].head != nil || c.anyPost.head != nil || c.unexp[p.rank].find(tag, ctx) != nil {
		return localGeneral
	}
	m, ok, err := sl.ring.Peek()
	if err != nil {
		return localGeneral // the general path fails the link
	}
	if !ok {
		return localEmpty
	}
	var e envelope
	if m.Kind != shm.Send || len(m.Data) == 0 || m.Data[0] != msgEager ||
		parseEager(m.Data, c.cfg.eagerLimit, &e) != nil || e.ctx != ctx ||
		tag != AnyTag && e.tag != tag || e.length > len(buf) {
		return localGeneral
	}
	copy(buf, m.Data[eagerLen:])
	sl.ring.Release()
	*st = Status{Source: p.rank, Tag: e.tag, Count: e.length}
	c.stats.EagerReceived++
	c.consumedLocal(sl, 1)
	c.envelopeArrived(p)
	return localTaken
}

// recvLocal is Recv from local peer p by the short way: it looks at p's
// ring, and while it is empty spins on it for the spin time, polling the
// NIC now and then for the protocol's timers and other peers. It reports
// localTaken, or localGeneral with nothing received when the general path
// must run (something else arrived first, another goroutine posted a
// receive), or localEmpty when the spin time passed: the general path then
// blocks without spinning again. c.mu is held on entry and on return.
func (c *Comm) recvLocal(p *peer, buf []byte, tag int, ctx uint16, st *Status) localRecv {
	if len(buf) > c.cfg.eagerLimit {
		return localGeneral // posted at once, it offers its buffer (offerRecv)
	}
	switch r := c.recvLocalNow(p, buf, tag, ctx, st); {
	case r == localTaken:
		// Counted as a wait that ended, so that the progress goroutine
		// stays out of the fabric while calls come.
		c.polls.Add(1 << 32)
		return r
	case r == localGeneral || c.cfg.osYield || c.cfg.spin <= 0:
		// With ranks sharing CPUs the general path yields and sleeps.
		return localGeneral
	}
	ring := p.v.(*shmLink).ring
	c.startPolling()
	defer c.donePolling()
	if c.bgWaiting.Load() {
		c.fab.interrupt()
	}
	var start int64
	for turn := 1; ; turn++ {
		c.mu.Unlock()
		for k := 0; k < localNICSkips && !ring.Ready(); k++ {
			if c.cfg.yield && !c.cfg.lockedCallers {
				runtime.Gosched()
			}
		}
		c.mu.Lock()
		if r := c.recvLocalNow(p, buf, tag, ctx, st); r != localEmpty {
			return r
		}
		// Still empty after localNICSkips looks: the NIC's turn, and the
		// clock's.
		c.progressLocked()
		now := c.nanos()
		if turn == 1 {
			start = now
		} else if now-start > int64(c.cfg.spin) {
			return localEmpty
		}
	}
}
