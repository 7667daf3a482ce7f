package mplite

// Lanes. A bonded connection orders every message over its rails with a
// layer of its own (message numbers, headers, a copy out of the rail
// buffers), which a one-frame message pays for on both ends: over two NICs
// a 1-byte message cost more CPU, and more time, than over one. So a rank
// with several NICs gives each connection a lane beside the bond: a plain
// VI on the first NIC, peer to peer with the peer's lane, at reliable
// reception (a send completes once the peer has it, so that the sender
// knows what a broken lane may have lost). Messages up to the bond's stripe
// threshold, envelope included, go on the lane (what the bond would have
// sent on one rail anyway); longer ones, and the handshakes' RDMA writes,
// go through the bond, striped.
//
// Every envelope to a peer with a lane carries its number as immediate
// data, whichever way it goes, and the receiver handles them in that
// order: one that overtook an earlier one on the other way is copied aside
// until its turn. Offers (offer.go) keep their order too: until a write
// into an offer completes, the sender's envelopes go through the bond
// behind it, and the receiver takes in its bond's completions before a
// lane's while it has an offer out.
//
// A lane that breaks (its NIC died, or the peer's lane never connected)
// loses nothing: the sender disconnects it, which completes every send
// still posted on it as flushed, and sends those again through the bond;
// the receiver drops the numbers it has seen (a flushed send may have
// arrived). The connection then goes on through the bond alone.

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/vi"
)

// laneBit marks the discriminator of a lane's peer-to-peer connection
// (the bond's rails use bits 62 and 63).
const laneBit = 1 << 40

// laneConnectTimeout bounds the wait for the peer's lane once the bond is
// connected: the peer asks at the same moment, so only a lost lane waits
// this long, and the connection then runs on the bond alone.
const laneConnectTimeout = 2 * time.Second

// connectLane connects lane (if any) to the lane of the peer at mac and
// endpoint ep, and reports whether it did.
func connectLane(ctx context.Context, lane *vi.VI, mac net.HardwareAddr, ep uint16) bool {
	if lane == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, laneConnectTimeout)
	defer cancel()
	if err := lane.ConnectPeer(ctx, vi.Address{MAC: mac, Endpoint: ep, Discriminator: discriminator ^ laneBit}); err != nil {
		_ = lane.Disconnect()
		return false
	}
	return true
}

// postLane posts send slot i, filled and numbered, on p's lane if it is
// up and the message is short, and reports whether it did.
func (c *Comm) postLane(p *peer, i int) bool {
	if !p.laneUp || len(p.sd[i].Segments[0].Buf) > c.laneBytes {
		return false
	}
	d := &p.sd[i]
	d.Segments[0].Handle = p.laneH
	if err := p.lane.PostSend(d); err != nil {
		c.laneDown(p) // what it still held goes to the bond first
		return false
	}
	p.lsops.push(sendOp{kind: opSlot, idx: i})
	return true
}

// laneDown stops using p's lane: what it still holds is flushed and sent
// again through the bond, in order, before anything newer.
func (c *Comm) laneDown(p *peer) {
	if p.laneGone {
		return
	}
	if p.laneUp && !p.finRecv { // not the peer's Finalize closing it
		c.stats.LaneFailovers++
	}
	closeLane(p) // completes every send still posted as flushed
	for {
		d, ok := p.lane.SendDone()
		if !ok {
			break
		}
		c.laneSent(p, d)
	}
	// Its receive slots stay unposted; completions of the flushed ones
	// are dropped as they come.
}

// closeLane marks p's lane broken and disconnects it, which completes what
// it still holds as flushed.
func closeLane(p *peer) {
	p.laneUp, p.laneGone = false, true
	_ = p.lane.Disconnect()
}

// laneSent handles the completion of p's oldest lane send: its slot is
// free, or, flushed, its message goes again through the bond.
func (c *Comm) laneSent(p *peer, d *descriptors.Descriptor) {
	op, ok := p.lsops.pop()
	if !ok || &p.sd[op.idx] != d {
		c.stats.BadEnvelopes++ // cannot happen: sends complete in order
		return
	}
	if !d.Status.Failed() || p.state == stDead || p.state == stClosed {
		p.sfre = append(p.sfre, op.idx)
		return
	}
	c.stats.LaneResent++
	c.postBond(p, op.idx) // same bytes, same number
}

// handleLane takes the descriptor a lane completion names.
func (c *Comm) handleLane(p *peer, comp completion) {
	if p.lane == nil || p.lane != comp.raw {
		return
	}
	if comp.recv {
		if p.offered != nil {
			c.drainBond(p)
		}
		if d, ok := p.lane.RecvDone(); ok {
			c.onRecv(p, d, true)
		}
		return
	}
	d, ok := p.lane.SendDone()
	if !ok {
		return
	}
	failed := d.Status.Failed()
	c.laneSent(p, d) // a flushed one first: it is older than the rest
	if failed {
		c.laneDown(p)
	}
	c.pumpPeer(p)
}

// drainBond takes in what p's bond holds before the next envelope from its
// lane while an offer is out to p: the write into the offer, if p used it,
// completed at p before p sent anything more by envelope, so it is here.
func (c *Comm) drainBond(p *peer) {
	for p.offered != nil && p.state == stConnected {
		d, ok := p.v.RecvDone()
		if !ok {
			return
		}
		c.onRecv(p, d, false)
	}
}

// inSequence handles numbered envelope msg of p (in receive slot slot) in
// order: the next one at once, with those kept that follow it; a later one
// is copied aside (its slot goes back, so that the one it waits for, which
// may come the same way after a lane broke, finds a slot) until its turn;
// one seen already is dropped.
func (c *Comm) inSequence(p *peer, s uint32, msg []byte, slot int) {
	d := int32(s - p.recvSeq)
	switch {
	case d < 0 || d > 0 && p.heldAt(s) >= 0: // the next one is never held
		c.stats.LaneDuplicates++
		c.repost(p, slot)
	case d > 0:
		if len(p.held) >= 2*len(p.sd)+maxChunks {
			// More than lane and bond can have in flight: not our peer's
			// doing.
			c.stats.BadEnvelopes++
			c.peerFailed(p, fmt.Errorf("mplite: rank %d sent message %d while %d was missing and %d more came", p.rank, s, p.recvSeq, len(p.held)), true)
			return
		}
		b := c.tmp.get(len(msg))
		copy(b, msg)
		p.held = append(p.held, heldMsg{seq: s, msg: b})
		c.stats.LaneReordered++
		c.repost(p, slot)
	default:
		p.recvSeq++
		c.dispatch(p, msg, slot)
		c.releaseHeld(p)
	}
}

// heldMsg is a numbered envelope that came before its turn, copied.
type heldMsg struct {
	seq uint32
	msg []byte
}

// heldAt is the index of envelope s among p's held ones, or -1.
func (p *peer) heldAt(s uint32) int {
	for i := range p.held {
		if p.held[i].seq == s {
			return i
		}
	}
	return -1
}

// releaseHeld handles p's held envelopes whose turn has come. p may still
// count as connecting: a bond's accept returns, and our side's state
// changes, only after the lanes connect, by when the peer may have sent.
func (c *Comm) releaseHeld(p *peer) {
	for len(p.held) > 0 && p.state != stDead && p.state != stClosed {
		i := p.heldAt(p.recvSeq)
		if i < 0 {
			return
		}
		h := p.held[i]
		last := len(p.held) - 1
		p.held[i], p.held[last] = p.held[last], heldMsg{}
		p.held = p.held[:last]
		p.recvSeq++
		c.dispatch(p, h.msg, -1)
		c.tmp.put(h.msg)
	}
}
