package mplite

import "fmt"

// Receiver-initiated handshakes. The handshake costs a round trip (RTS out,
// CTS back) before any data moves, which made the throughput curve dip just
// above the eager limit. When a receive is posted before its message
// comes, as in every ping-pong and most halo exchanges, the receiver can
// send the CTS first: an offer naming the buffer, its context and tag, and
// the number of the sender's next message. If that message matches, the
// sender writes it straight into the buffer with the receive's id as
// immediate data; otherwise it sends as usual and the offer lapses.
//
// MPI's matching order is kept because an offer is made only when it is
// unambiguous: a specific source and tag, no AnySource receive posted, and
// no earlier receive for that source; and because it is for one message
// number only. Messages from a peer arrive in the order they were posted
// (one VI, in order), the sender lets nothing overtake an offered message,
// and the receiver counts the messages that came by envelope, so both ends
// agree whether message k used the offer. Between ranks with lanes the
// write travels on the bond and the envelopes on the lane, so the sender
// sends its envelopes through the bond, behind the write, until the write
// is complete (and so in the receiver's bond), and the receiver takes in
// what its bond holds before the next envelope from the lane while an
// offer is out (lane.go).

// Outcomes of useOffer.
const (
	offerVoid  = iota // the message goes by envelope; the offer lapsed
	offerTaken        // the message was written into the offered buffer
	offerWait         // the message fits but no write descriptor is free
)

// offerRecv offers receive r (just posted for p's messages) to p when that
// is unambiguous; see the file comment.
func (c *Comm) offerRecv(p *peer, r *Request) {
	if p.state != stConnected || p.err != nil || p.offered != nil || r.tag == AnyTag || r.lay != nil ||
		len(r.buf) <= c.cfg.eagerLimit || c.anyPost.head != nil ||
		c.posted[p.rank].head != r || r.next != nil {
		return
	}
	n := min(len(r.buf), c.chunkFor(p)) // one write descriptor: its length is the message's
	reg, err := c.recvCache.Get(r.buf[:n])
	if err != nil {
		return // the handshake will register (and report) it
	}
	r.reg, r.id, r.grant, r.writer = reg, c.newID(), n, p
	c.fab.grant(reg, p, true)
	r.st = Status{Source: p.rank, Tag: r.tag}
	c.recvIDs[r.id] = r
	p.offered = r
	c.stats.Offered++
	c.queueCtrl(p, envelope{typ: msgOffer, ctx: r.ctx, tag: r.tag, length: n, sendID: p.msgsRecv,
		recvID: r.id, rkey: uint32(reg.Handle()), raddr: regionOffset(reg, r.buf)})
}

// envelopeArrived counts a message of p that came by envelope (eager or
// RTS). An offer out to p was for exactly this message, so it lapses and
// its receive is matched like any other.
func (c *Comm) envelopeArrived(p *peer) {
	p.msgsRecv++
	r := p.offered
	if r == nil {
		return
	}
	p.offered = nil
	delete(c.recvIDs, r.id)
	r.id, r.grant = 0, 0
	c.releaseReg(r)
}

// offerWritten completes offered receive r, whose message (length bytes)
// the final write has placed.
func (c *Comm) offerWritten(p *peer, r *Request, length int) {
	p.offered = nil
	p.msgsRecv++
	delete(c.recvIDs, r.id)
	if r.list != nil {
		r.list.remove(r)
	}
	c.stats.OffersUsed++
	c.stats.HandshakeReceived++
	var err error
	if length > r.grant {
		err = fmt.Errorf("mplite: rank %d wrote %d bytes into an offer of %d", p.rank, length, r.grant)
		length = r.grant
	}
	r.st = Status{Source: p.rank, Tag: r.tag, Count: length}
	c.completeHandshake(r, err)
}

// onOffer keeps p's offer if it is for the next message this rank sends p;
// a later one replaces an earlier one.
func (c *Comm) onOffer(p *peer, e *envelope) {
	if e.sendID != p.msgsSent {
		p.hasOffer = false
		return // that message has gone by envelope already
	}
	p.offer, p.hasOffer = *e, true
	c.pumpPeer(p)
}

// useOffer sends r, the next message to p, into p's offer if it matches.
func (c *Comm) useOffer(p *peer, r *Request) int {
	o := &p.offer
	if o.sendID != p.msgsSent || r.ctx != o.ctx || r.tag != o.tag || r.lay != nil ||
		len(r.buf) <= c.cfg.eagerLimit || len(r.buf) > o.length {
		p.hasOffer = false
		return offerVoid
	}
	if len(p.wfre) == 0 {
		return offerWait
	}
	reg, err := c.sendCache.Get(r.buf)
	if err != nil {
		p.hasOffer = false
		return offerVoid // the RTS path registers again and reports it
	}
	p.hasOffer = false
	p.sendq.remove(r)
	p.msgsSent++
	c.stats.OffersTaken++
	if p.lane != nil {
		p.offerOut = r // envelopes go behind it, through the bond (lane.go)
	}
	r.reg, r.recvID, r.grant, r.rkey, r.raddr, r.off = reg, o.recvID, len(r.buf), o.rkey, o.raddr, 0
	p.rdmaq.push(r)
	c.postChunk(p, r)
	return offerTaken
}
