package mplite

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/vi"
)

// A peer is this rank's side of its connection to one other rank: a state
// machine (stNone, then stConnecting or stAwaiting, stConnected, and at
// last stDead or stClosed), the VI with its pre-registered slots, and the
// queues of what waits to be posted on it. The send path reads top down:
// p2p.go queues a request on its peer (startSend), which opens the
// connection on first use (ensureConn) and posts what the VI's credits
// allow (pumpPeer, postSlot, postChunk); peerFailed ends every operation
// on a peer that is gone.

// peerState is where a peer's connection stands.
type peerState uint8

const (
	stNone       peerState = iota // no connection yet
	stConnecting                  // our connection request is under way
	stAwaiting                    // our request lost to the lower rank's; waiting for it
	stConnected
	stDead   // failed: operations on it fail with PeerError
	stClosed // finalized normally
)

// peer is this rank's state for one other rank.
type peer struct {
	rank       int
	local      bool               // on this host: the link is a shmLink (local.go)
	macs       []net.HardwareAddr // one per rail (its endpoint: c.addrs[rank].EP)
	v          link
	state      peerState
	attempt    int
	awaitUntil int64
	err        error

	area []byte // registered: recvDepth receive slots, then as many send slots
	h    descriptors.MemHandle
	rd   []descriptors.Descriptor
	sd   []descriptors.Descriptor
	wd   [maxChunks]descriptors.Descriptor
	rpos ring // receive slots posted, in order
	sfre []int
	wfre []int
	sops opRing // sends posted, in order

	sendq rlist // sends not yet posted (eager copy or RTS), in order
	// Receiver-initiated handshakes (offer.go): messages counted each way,
	// the receive offered to this peer, and the offer it made us.
	msgsSent, msgsRecv uint32
	offered            *Request
	offer              envelope
	hasOffer           bool
	rdmaq              rlist // handshake sends with a CTS and data left to post
	ctrlq              []envelope
	ctrlH              int

	finRecv, finAcked, finSent bool

	// A bonded peer's lane (lane.go): the plain VI on the first NIC that
	// carries envelopes, rail 0's handle of area, whether it is connected
	// and whether it broke, its receive slots posted (rd[len(sd):] are
	// its slots) and its sends posted, in order, and the numbers of the
	// envelopes each way, which order them over lane and bond.
	lane             *vi.VI
	laneH            descriptors.MemHandle
	laneUp, laneGone bool
	lrpos            ring
	lsops            opRing
	sendSeq, recvSeq uint32
	// offerOut is the send written into the peer's offer, on the bond,
	// until it completes: envelopes go through the bond behind it
	// meanwhile. held are the numbered envelopes that came before their
	// turn.
	offerOut *Request
	held     []heldMsg
}

// The area holds the receive slots, the send slots, then a lane's receive
// slots (receive slot i >= len(sd)).
func (p *peer) recvSlot(c *Comm, i int) []byte {
	o := i * c.slot
	if i >= len(p.sd) {
		o += len(p.sd) * c.slot
	}
	return p.area[o : o+c.slot : o+c.slot]
}

func (p *peer) sendSlot(c *Comm, i int) []byte {
	o := (len(p.sd) + i) * c.slot
	return p.area[o : o+c.slot : o+c.slot]
}

// ---- connections ----

// setState moves p to s, keeping the count of unconnected peers.
func (c *Comm) setState(p *peer, s peerState) {
	wasOpen := p.state == stNone || p.state == stConnecting || p.state == stAwaiting
	isOpen := s == stNone || s == stConnecting || s == stAwaiting
	if wasOpen && !isOpen {
		c.unconnected--
	} else if !wasOpen && isOpen {
		c.unconnected++
	}
	if p.state == stAwaiting {
		c.awaiting--
	}
	if s == stAwaiting {
		c.awaiting++
	}
	p.state = s
	c.changed = true
}

// setupPeer creates p's VI, its buffers and posts its receives; they are
// credits from the moment the connection exists.
func (c *Comm) setupPeer(p *peer) error {
	if p.v != nil {
		return nil
	}
	var v link
	var err error
	if p.local {
		v = c.newShmLink(p)
	} else if v, err = c.fab.newLink(c.qdepth); err != nil {
		return fmt.Errorf("new VI: %w", err)
	}
	var lane *vi.VI
	if bl, ok := v.(*bondLink); ok {
		lane = bl.lane
	}
	r := c.cfg.recvDepth
	nr := r // receive slots
	if lane != nil {
		nr = 2 * r
	}
	area := make([]byte, (nr+r)*c.slot)
	h, err := c.fab.register(area)
	if err != nil {
		_ = v.Disconnect()
		return fmt.Errorf("register buffers: %w", err)
	}
	p.area, p.h, p.v = area, h, v
	if lane != nil {
		lh, ok := c.fab.(*bondFabric).laneMemory(h)
		if !ok {
			return fmt.Errorf("register buffers: no rail 0 handle for the lane")
		}
		p.lane, p.laneH = lane, lh
		p.lrpos = newRing(r)
		p.lsops = newOpRing(r)
	}
	p.rd = make([]descriptors.Descriptor, nr)
	p.sd = make([]descriptors.Descriptor, r)
	p.rpos = newRing(r)
	p.sops = newOpRing(r + maxChunks) // a slot is on the lane or the bond, never both
	p.sfre = make([]int, 0, r)
	p.wfre = make([]int, 0, maxChunks)
	segs := make([]descriptors.Segment, nr+r+maxChunks)
	for i := range nr {
		p.rd[i].Segments = segs[i : i+1 : i+1]
		p.rd[i].Segments[0] = descriptors.Segment{Buf: p.recvSlot(c, i), Handle: h}
		if i >= r {
			p.rd[i].Segments[0].Handle = p.laneH
		}
	}
	for i := range r {
		p.sd[i].Segments = segs[nr+i : nr+i+1 : nr+i+1]
		p.sd[i].Segments[0].Handle = h
		p.sfre = append(p.sfre, r-1-i)
	}
	for i := range maxChunks {
		p.wd[i].Segments = segs[nr+r+i : nr+r+i+1 : nr+r+i+1]
		p.wfre = append(p.wfre, i)
	}
	if id := v.id(); id >= 0 {
		for len(c.byVI) <= id {
			c.byVI = append(c.byVI, nil)
		}
		c.byVI[id] = p
	}
	for i := range nr {
		if err := c.postRecvSlot(p, i); err != nil {
			return fmt.Errorf("post receive: %w", err)
		}
	}
	return nil
}

// ensureConn starts connecting to p if nothing has yet.
func (c *Comm) ensureConn(p *peer) {
	if p.state != stNone || c.fab == nil {
		return
	}
	if err := c.setupPeer(p); err != nil {
		c.peerFailed(p, err, true)
		return
	}
	if p.local {
		c.connectLocal(p)
		return
	}
	c.setState(p, stConnecting)
	p.attempt++
	attempt, v := p.attempt, p.v
	c.conns.Add(1)
	go func() {
		defer c.conns.Done()
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.connectTimeout)
		err := v.connect(ctx, p.macs, c.addrs[p.rank].EP)
		cancel()
		c.mu.Lock()
		c.connectResult(p, attempt, err)
		c.mu.Unlock()
		c.cond.Broadcast()
	}()
}

// connectResult handles the end of our connection request to p.
func (c *Comm) connectResult(p *peer, attempt int, err error) {
	if p.attempt != attempt || p.state != stConnecting {
		return // superseded: we accepted p's request instead
	}
	switch {
	case err == nil:
		c.connected(p)
	case errors.Is(err, vi.ErrRejected) && c.rank > p.rank:
		// Both asked at once and the lower rank's request wins: it
		// is on its way.
		c.setState(p, stAwaiting)
		p.awaitUntil = c.nanos() + int64(c.cfg.connectTimeout)
	default:
		c.peerFailed(p, fmt.Errorf("connect: %w", err), true)
	}
}

func (c *Comm) connected(p *peer) {
	if bl, ok := p.v.(*bondLink); ok {
		p.laneUp = bl.laneUp
	}
	c.setState(p, stConnected)
	c.pumpPeer(p)
}

// connectAll starts connections to every peer (a receive from AnySource
// must notice any dead rank).
func (c *Comm) connectAll() {
	if c.unconnected == 0 {
		return
	}
	for _, p := range c.peers {
		c.ensureConn(p)
	}
}

// pollConnRequests answers the connection requests waiting at the
// provider. The rule for two simultaneous requests: the lower rank's wins.
func (c *Comm) pollConnRequests() {
	for {
		req, ok := c.fab.pollRequest()
		if !ok {
			return
		}
		c.onConnRequest(req)
	}
}

func (c *Comm) rankOf(a nic.Addr) int {
	for i := range c.addrs {
		if c.addrs[i] == a {
			return i
		}
	}
	return -1
}

func (c *Comm) onConnRequest(req connRequest) {
	q := c.rankOf(req.remote())
	if q < 0 || q == c.rank || c.finalized {
		_ = req.reject()
		return
	}
	p := c.peers[q]
	switch p.state {
	case stNone, stAwaiting:
	case stConnecting:
		if c.rank < q {
			_ = req.reject() // ours wins; q will accept it
			return
		}
		// q is lower: its request wins. Abandon ours (its goroutine
		// finds itself superseded) and accept on the same VI; the
		// accept also abandons our request if its goroutine only now
		// started it.
		_ = p.v.Disconnect()
	default:
		_ = req.reject()
		return
	}
	if err := c.setupPeer(p); err != nil {
		_ = req.reject()
		c.peerFailed(p, err, true)
		return
	}
	p.attempt++
	if !c.fab.acceptBlocks() {
		if err := req.accept(c.ctx, p.v, p.macs, c.addrs[p.rank].EP); err != nil {
			c.peerFailed(p, fmt.Errorf("accept: %w", err), true)
			return
		}
		c.connected(p)
		return
	}
	// A bond's accept waits for the other rails' requests: not under
	// c.mu. The peer counts as connecting meanwhile, so neither our own
	// request nor a second accept starts.
	c.setState(p, stConnecting)
	attempt, v := p.attempt, p.v
	c.conns.Add(1)
	go func() {
		defer c.conns.Done()
		err := req.accept(c.ctx, v, p.macs, c.addrs[p.rank].EP)
		c.mu.Lock()
		if err != nil {
			err = fmt.Errorf("accept: %w", err)
		}
		c.connectResult(p, attempt, err)
		c.mu.Unlock()
		c.cond.Broadcast()
	}()
}

// checkAwaiting fails peers whose promised connection never came.
func (c *Comm) checkAwaiting(now int64) {
	if c.awaiting == 0 {
		return // the usual case: no scan of every peer each millisecond
	}
	for _, p := range c.peers {
		if p.state == stAwaiting && now > p.awaitUntil {
			c.peerFailed(p, fmt.Errorf("rank %d never connected after rejecting our request", p.rank), true)
		}
	}
}

// ---- sending on a connection ----

// pumpPeer posts what p's queues hold, as far as buffers allow: control
// messages first (a CTS unblocks a whole handshake), then RDMA writes,
// then new sends in order.
func (c *Comm) pumpPeer(p *peer) {
	if p.state != stConnected {
		return
	}
	for p.ctrlH < len(p.ctrlq) && len(p.sfre) > 0 {
		if !c.postSlot(p, &p.ctrlq[p.ctrlH], nil) {
			return
		}
		p.ctrlH++
	}
	if p.ctrlH == len(p.ctrlq) {
		p.ctrlq, p.ctrlH = p.ctrlq[:0], 0
	}
	for r := p.rdmaq.head; r != nil && len(p.wfre) > 0; r = p.rdmaq.head {
		if !c.postChunk(p, r) {
			return
		}
	}
	for r := p.sendq.head; r != nil; r = p.sendq.head {
		if p.hasOffer {
			switch c.useOffer(p, r) {
			case offerWait:
				return // nothing may overtake the message the offer is for
			case offerTaken:
				continue
			}
		}
		if len(p.sfre) == 0 {
			return
		}
		p.sendq.remove(r)
		p.msgsSent++
		e := envelope{typ: msgEager, ctx: r.ctx, tag: r.tag, length: r.size()}
		if c.byHandshake(r) {
			e.typ, e.sendID, e.sync = msgRTS, r.id, r.sync
			if !c.postSlot(p, &e, nil) {
				c.complete(r, p.err)
				return
			}
			continue
		}
		if !c.postSlot(p, &e, r) {
			c.complete(r, p.err)
			return
		}
		c.complete(r, nil)
	}
}

// postSlot posts one envelope from a free send slot, with the data of
// eager send r if r is not nil: its slice, or its layout gathered straight
// into the slot.
func (c *Comm) postSlot(p *peer, e *envelope, r *Request) bool {
	if p.local && c.postDirect(p, e, r) {
		return true
	}
	n := len(p.sfre) - 1
	i := p.sfre[n]
	p.sfre = p.sfre[:n]
	b := p.sendSlot(c, i)
	k := putMessage(b, e, r)
	d := &p.sd[i]
	d.Control = descriptors.Control{}
	d.Segments[0].Buf = b[:k]
	if p.lane != nil {
		d.Control.Immediate, d.Control.ImmData = true, p.sendSeq
		p.sendSeq++
		// Behind a write into the peer's offer, through the bond, which
		// keeps their order (lane.go).
		if p.offerOut == nil && c.postLane(p, i) {
			return true
		}
	}
	return c.postBond(p, i)
}

// postBond posts send slot i, filled, on p's VI (a bond's, with lanes).
func (c *Comm) postBond(p *peer, i int) bool {
	d := &p.sd[i]
	d.Segments[0].Handle = p.h
	if err := p.v.PostSend(d); err != nil {
		p.sfre = append(p.sfre, i)
		c.peerFailed(p, c.viCause(p, err), true)
		return false
	}
	p.sops.push(sendOp{kind: opSlot, idx: i})
	return true
}

// putMessage writes envelope e into b, then the data of eager send r if r
// is not nil (its slice, or its layout gathered straight into b), and
// returns the message's length, envelope included.
func putMessage(b []byte, e *envelope, r *Request) int {
	h := putEnvelope(b, e)
	switch {
	case e.sendRuns != nil:
		return h + putRuns(b, e.sendRuns, e.length)
	case r == nil:
		return h
	case r.lay != nil && r.buf == nil:
		r.lay.Gather(b[h : h+r.layLen])
		return h + r.layLen
	default:
		return h + copy(b[h:], r.buf)
	}
}

// postChunk posts the next RDMA write of handshake send r; the last one
// carries the receive's id as immediate data.
func (c *Comm) postChunk(p *peer, r *Request) bool {
	n := min(c.chunkFor(p), r.grant-r.off)
	src, at := r.buf, r.off
	if r.runs != nil { // within the sender's run that holds byte r.off
		run, in := runAt(r.runs, &r.run, &r.runAt, r.off)
		src, at, n = r.span, run.Off+in, min(n, run.Len-in)
	}
	to := r.off
	if len(r.dstRuns) > 0 { // and within the receiver's
		run, in := runAt(r.dstRuns, &r.dst, &r.dstAt, r.off)
		to, n = run.Off+in, min(n, run.Len-in)
	}
	k := len(p.wfre) - 1
	i := p.wfre[k]
	p.wfre = p.wfre[:k]
	d := &p.wd[i]
	d.Control = descriptors.Control{Op: descriptors.OpRDMAWrite}
	last := r.off+n == r.grant
	if last {
		d.Control.Immediate, d.Control.ImmData = true, r.recvID
	}
	d.Segments[0] = descriptors.Segment{Buf: src[at : at+n], Handle: descriptors.MemHandle(r.reg.Handle())}
	d.Address = descriptors.AddressSegment{Handle: descriptors.MemHandle(r.rkey), Offset: r.raddr + uint64(to)}
	if err := p.v.PostSend(d); err != nil {
		p.wfre = append(p.wfre, i)
		c.peerFailed(p, c.viCause(p, err), true)
		return false
	}
	p.sops.push(sendOp{kind: opChunk, idx: i, req: r})
	r.chunks++
	r.off += n
	if last {
		p.rdmaq.remove(r)
	}
	return true
}

// runAt returns the run of runs that holds message byte off and off's
// place in it, moving the cursor (run i, whose first byte is message byte
// *at) forward: writes go through a message in order.
func runAt(runs []Run, i, at *int, off int) (Run, int) {
	for off-*at >= runs[*i].Len {
		*at += runs[*i].Len
		*i++
	}
	return runs[*i], off - *at
}

// queueCtrl queues a control message to p.
func (c *Comm) queueCtrl(p *peer, e envelope) {
	p.ctrlq = append(p.ctrlq, e)
	c.pumpPeer(p)
}

// viCause names why p's VI failed.
func (c *Comm) viCause(p *peer, err error) error {
	if p.v != nil {
		if verr := p.v.Err(); verr != nil {
			return verr
		}
	}
	return err
}

// ---- failure ----

// peerFailed handles the loss of p: every pending operation on it fails
// and, if it died rather than finalized, so do receives from AnySource.
func (c *Comm) peerFailed(p *peer, cause error, dead bool) {
	if p.state == stDead || p.state == stClosed {
		return
	}
	if p.finRecv {
		dead = false // it said it was done: this is its Finalize
		cause = errPeerFinalized
	}
	pe := &PeerError{Rank: p.rank, Err: cause}
	p.err = pe
	if p.lane != nil && !p.laneGone {
		closeLane(p) // its flushed sends free their slots (laneSent)
	}
	for _, h := range p.held { // envelopes waiting for a turn that never comes
		c.tmp.put(h.msg)
	}
	p.held = p.held[:0]
	if dead {
		c.setState(p, stDead)
		if c.anyErr == nil {
			c.anyErr = pe
		}
		for r := c.anyPost.head; r != nil; {
			next := r.next
			c.anyPost.remove(r)
			c.complete(r, pe)
			r = next
		}
	} else {
		c.setState(p, stClosed)
	}
	for _, l := range []*rlist{&p.sendq, &p.rdmaq, &c.posted[p.rank]} {
		for r := l.head; r != nil; {
			next := r.next
			l.remove(r)
			c.complete(r, pe)
			r = next
		}
	}
	for id, r := range c.sendIDs {
		if r.peer == p.rank {
			delete(c.sendIDs, id)
			c.completeHandshake(r, pe)
		}
	}
	for id, r := range c.recvIDs {
		if r.st.Source == p.rank {
			delete(c.recvIDs, id)
			c.completeHandshake(r, pe)
		}
	}
	p.ctrlq, p.ctrlH = p.ctrlq[:0], 0
}
