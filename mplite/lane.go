package mplite

// Lanes. A bonded connection orders every message over its rails with a
// layer of its own (message numbers, headers, a copy out of the rail
// buffers), which a one-frame message pays for on both ends: over two NICs
// a 1-byte message cost more CPU, and more time, than over one. So a rank
// with several NICs gives each connection a lane beside the bond: a plain
// VI on the first NIC, peer to peer with the peer's lane, at reliable
// reception (a send completes once the peer has it, so that the sender
// knows what a broken lane may have lost). Envelopes (eager messages up to the bond's stripe threshold, RTS,
// CTS, offers' and Finalize's messages) go on the lane; the bond carries
// the handshakes' RDMA writes, striped over every rail. Longer eager
// messages go by handshake instead, so that their data is striped too, and
// no offers are made (an offered write on the bond could land after the
// envelope sent behind it on the lane).
//
// Every envelope to a peer with a lane carries its number as immediate
// data, whichever way it goes. A lane that breaks (its NIC died, or the
// peer's lane never connected) loses nothing: the sender disconnects it,
// which completes every send still posted on it as flushed, and sends
// those again through the bond, in order, before anything newer; the
// receiver drops what it already had (a flushed send may have arrived),
// and a bond message that comes before an earlier one finds it among the
// lane's completed receives (a lane send completes only once delivered,
// so what the sender did not send again is there). The connection then
// goes on through the bond alone.

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
// up, and reports whether it did.
func (c *Comm) postLane(p *peer, i int) bool {
	if !p.laneUp {
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
	p.laneUp, p.laneGone = false, true
	_ = p.lane.Disconnect() // completes every send still posted as flushed
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

// laneSent handles the completion of p's oldest lane send: its slot is
// free, or, flushed, its message goes again through the bond.
func (c *Comm) laneSent(p *peer, d *descriptors.Descriptor) {
	op, ok := p.lsops.pop()
	if !ok || &p.sd[op.idx] != d {
		c.stats.BadEnvelopes++ // cannot happen: sends complete in order
		return
	}
	if !d.Status.Failed() {
		p.sfre = append(p.sfre, op.idx)
		return
	}
	if p.state == stDead || p.state == stClosed {
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

// inSequence checks the number s of an envelope of p that came by lane or
// by bond, and reports whether to handle it (false: it is a copy of one
// handled already, or p failed).
func (c *Comm) inSequence(p *peer, s uint32, lane bool) bool {
	if s == p.recvSeq {
		p.recvSeq++
		return true
	}
	if int32(s-p.recvSeq) < 0 {
		c.stats.LaneDuplicates++
		return false
	}
	if !lane && p.lane != nil {
		// Sent through the bond after the lane broke: the envelopes
		// before it that the sender did not send again were delivered
		// on the lane.
		for s != p.recvSeq {
			d, ok := p.lane.RecvDone()
			if !ok {
				break
			}
			c.onRecv(p, d, true)
		}
		if s == p.recvSeq {
			p.recvSeq++
			return true
		}
	}
	c.stats.BadEnvelopes++
	c.peerFailed(p, fmt.Errorf("mplite: message %d of rank %d came before its message %d", s, p.rank, p.recvSeq), true)
	return false
}
