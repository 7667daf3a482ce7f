package mplite

import (
	"errors"
	"fmt"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/rdma"
)

// Request is a nonblocking send or receive. Complete it with Wait, Test or
// Waitall; its buffer belongs to the communicator until then.
type Request struct {
	c    *Comm
	send bool
	buf  []byte
	peer int // destination, or the source asked for (maybe AnySource)
	tag  int
	ctx  uint16
	seq  uint64 // receive post order
	done bool
	st   Status
	err  error

	prev, next *Request
	list       *rlist

	cancelled bool // Cancel took it off its queue before any message matched

	// handshake
	sync   bool // Ssend: by handshake at any length
	id     uint32
	reg    *rdma.Region
	writer *peer // a receive's: the peer its region is granted to
	grant  int
	off    int
	chunks int
	rkey   uint32
	raddr  uint64
	recvID uint32

	// layout requests (IsendLayout, IrecvLayout): buf is nil, or the
	// staging copy while one is needed
	lay    Layout
	layLen int

	// A send's RDMA straight from and into runs (RunLayout): its own span
	// and runs (its layout's; none: it writes from buf), with the run its
	// next write starts in (run, at message offset runAt); and the
	// receiver's runs, decoded from the CTS into memory the request keeps
	// across reuse (none: the receive buffer is contiguous), dst and dstAt
	// alike.
	span       []byte
	runs       []Run
	run, runAt int
	dstRuns    []Run
	dst, dstAt int
}

// ready reports completion; c.mu is held.
func (r *Request) ready() bool { return r.done }

// Cancel cancels a receive that no message has matched yet (MPI_Cancel):
// it completes at once with no data, and Cancelled then reports true. A
// receive already matched, or whose buffer has been offered to its sender
// for a direct write, is not cancelled and completes as usual; nor are
// sends (MPI 4 deprecates cancelling them). Cancel reports whether it
// cancelled; either way the request must still be completed (Wait, Test).
func (r *Request) Cancel() bool {
	if r == nil || r.c == nil || r.send {
		return false
	}
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.done || r.list == nil || (r.peer >= 0 && r.peer < len(c.peers) && c.peers[r.peer] != nil && c.peers[r.peer].offered == r) {
		return false
	}
	r.list.remove(r)
	r.cancelled = true
	r.st = Status{Source: r.peer, Tag: r.tag}
	c.complete(r, nil)
	return true
}

// Cancelled reports whether Cancel cancelled r.
func (r *Request) Cancelled() bool {
	if r == nil || r.c == nil {
		return false
	}
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.cancelled
}

// Free gives a completed request back to its communicator, which reuses
// it for a later operation, as MPI frees a request that Wait or Test
// completed: r must not be used after Free. Programs that start many
// nonblocking operations then allocate none in steady state. Free does
// nothing to a request not yet complete (it is left to the garbage
// collector, as is any request never freed).
func (r *Request) Free() {
	if r == nil || r.c == nil {
		return
	}
	c := r.c
	c.mu.Lock()
	if r.done {
		c.putReqLocked(r)
	}
	c.mu.Unlock()
}

// Wait blocks until the request completes and returns its status: for a
// receive the message's source, tag and delivered length.
func (r *Request) Wait() (Status, error) {
	if r == nil || r.c == nil {
		return Status{}, errors.New("mplite: wait on a nil request")
	}
	c := r.c
	c.wait(r)
	c.mu.Lock()
	st, err := r.st, r.err
	c.mu.Unlock()
	return c.commStatus(st), err
}

// Test makes progress once and reports whether the request has completed,
// with its status if it has. It never blocks.
func (r *Request) Test() (done bool, st Status, err error) {
	if r == nil || r.c == nil {
		return false, Status{}, errors.New("mplite: test of a nil request")
	}
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !r.done {
		c.progressLocked()
	}
	if !r.done {
		return false, Status{}, nil
	}
	return true, c.commStatus(r.st), r.err
}

// Waitall waits for every request (nil entries are skipped) and returns
// the errors of those that failed, joined.
func Waitall(reqs ...*Request) error {
	var errs []error
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if _, err := r.Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Comm) checkDest(dest, tag int) error {
	if c.freed.Load() {
		return ErrFreed
	}
	if dest < 0 || dest >= c.csize {
		return fmt.Errorf("mplite: send to rank %d of %d: %w", dest, c.csize, ErrRank)
	}
	if tag < 0 || tag > MaxTag {
		return fmt.Errorf("mplite: send with tag %d: %w", tag, ErrTag)
	}
	return nil
}

func (c *Comm) checkSrc(src, tag int) error {
	if c.freed.Load() {
		return ErrFreed
	}
	if src != AnySource && (src < 0 || src >= c.csize) {
		return fmt.Errorf("mplite: receive from rank %d of %d: %w", src, c.csize, ErrRank)
	}
	if tag != AnyTag && (tag < 0 || tag > MaxTag) {
		return fmt.Errorf("mplite: receive with tag %d: %w", tag, ErrTag)
	}
	return nil
}

// Isend starts sending buf to rank dest with tag. A message up to the
// eager limit is copied at once (or as soon as a send buffer is free) and
// the request completes then; a longer one completes when its data has been
// handed to the VI layer, after the receiver posted its receive.
func (c *Comm) Isend(buf []byte, dest, tag int) (*Request, error) {
	if err := c.checkDest(dest, tag); err != nil {
		return nil, err
	}
	r := c.getReq()
	if err := c.startSend(r, buf, c.worldRank(dest), tag, c.pctx); err != nil {
		c.putReq(r)
		return nil, err
	}
	return r, nil
}

// Irecv starts receiving a message from rank src (or AnySource) with tag
// (or AnyTag) into buf.
func (c *Comm) Irecv(buf []byte, src, tag int) (*Request, error) {
	if err := c.checkSrc(src, tag); err != nil {
		return nil, err
	}
	r := c.getReq()
	if err := c.startRecv(r, buf, c.worldRank(src), tag, c.pctx); err != nil {
		c.putReq(r)
		return nil, err
	}
	return r, nil
}

// Send sends buf to rank dest with tag and returns once buf may be reused.
func (c *Comm) Send(buf []byte, dest, tag int) error {
	if err := c.checkDest(dest, tag); err != nil {
		return err
	}
	return c.send(buf, c.worldRank(dest), tag, c.pctx)
}

func (c *Comm) send(buf []byte, dest, tag int, ctx uint16) error {
	// Under one hold of the lock unless it must wait: most sends complete
	// as they start (eager, or to a rank of this host).
	c.mu.Lock()
	if dest != c.rank && c.peers[dest].local && c.sendLocalNow(c.peers[dest], buf, tag, ctx) {
		c.mu.Unlock()
		return nil
	}
	r := c.getReqLocked()
	err := c.startSendLocked(r, buf, dest, tag, ctx)
	if err == nil {
		c.waitHeld(r)
		err = r.err
	}
	c.putReqLocked(r)
	c.mu.Unlock()
	return err
}

// Recv receives a message from rank src (or AnySource) with tag (or
// AnyTag) into buf.
func (c *Comm) Recv(buf []byte, src, tag int) (Status, error) {
	if err := c.checkSrc(src, tag); err != nil {
		return Status{}, err
	}
	st, err := c.recv(buf, c.worldRank(src), tag, c.pctx)
	return c.commStatus(st), err
}

func (c *Comm) recv(buf []byte, src, tag int, ctx uint16) (Status, error) {
	c.mu.Lock()
	var st Status
	spin := c.cfg.spin
	if src >= 0 && src != c.rank && c.peers[src].local {
		switch c.recvLocal(c.peers[src], buf, tag, ctx, &st) {
		case localTaken:
			c.mu.Unlock()
			return st, nil
		case localEmpty:
			spin = 0 // it spun its time
		}
	}
	r := c.getReqLocked()
	err := c.startRecvLocked(r, buf, src, tag, ctx)
	if err == nil {
		c.waitSpin(r, spin)
		st, err = r.st, r.err
	}
	c.putReqLocked(r)
	c.mu.Unlock()
	return st, err
}

// Ssend sends buf to rank dest with tag synchronously (MPI_Ssend): it
// returns once the receiver has matched the message to a receive, and buf
// may be reused. It always uses the handshake protocol, whose clear-to-send
// only a matched receive sends, so a short message costs a round trip more
// than Send.
func (c *Comm) Ssend(buf []byte, dest, tag int) error {
	r, err := c.Issend(buf, dest, tag)
	if err != nil {
		return err
	}
	_, err = r.Wait()
	return err
}

// Issend starts a synchronous send (MPI_Issend): the request completes
// once the receiver has matched the message.
func (c *Comm) Issend(buf []byte, dest, tag int) (*Request, error) {
	if err := c.checkDest(dest, tag); err != nil {
		return nil, err
	}
	r := c.getReq()
	r.sync = true
	if err := c.startSend(r, buf, c.worldRank(dest), tag, c.pctx); err != nil {
		c.putReq(r)
		return nil, err
	}
	return r, nil
}

// Sendrecv sends sendbuf to dest and receives into recvbuf from src at the
// same time, so that pairs of ranks may exchange without deadlock.
func (c *Comm) Sendrecv(sendbuf []byte, dest, sendtag int, recvbuf []byte, src, recvtag int) (Status, error) {
	if err := c.checkDest(dest, sendtag); err != nil {
		return Status{}, err
	}
	if err := c.checkSrc(src, recvtag); err != nil {
		return Status{}, err
	}
	st, err := c.sendrecv(sendbuf, c.worldRank(dest), sendtag, recvbuf, c.worldRank(src), recvtag, c.pctx)
	return c.commStatus(st), err
}

func (c *Comm) sendrecv(sendbuf []byte, dest, sendtag int, recvbuf []byte, src, recvtag int, ctx uint16) (Status, error) {
	rr := c.getReq()
	if err := c.startRecv(rr, recvbuf, src, recvtag, ctx); err != nil {
		c.putReq(rr)
		return Status{}, err
	}
	sr := c.getReq()
	serr := c.startSend(sr, sendbuf, dest, sendtag, ctx)
	if serr == nil {
		c.wait(sr)
	}
	c.wait(rr)
	c.mu.Lock()
	st, rerr := rr.st, rr.err
	if serr == nil {
		serr = sr.err
	}
	c.putReqLocked(rr)
	c.putReqLocked(sr)
	c.mu.Unlock()
	if serr != nil {
		return st, serr
	}
	return st, rerr
}

// Iprobe reports whether a message from src (or AnySource) with tag (or
// AnyTag) has arrived and not been received, with its status (Count is its
// full length). It makes progress once and never blocks. A receive that
// names the same source and tag gets the probed message.
func (c *Comm) Iprobe(src, tag int) (ok bool, st Status, err error) {
	if err := c.checkSrc(src, tag); err != nil {
		return false, Status{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finalized {
		return false, Status{}, ErrFinalized
	}
	c.progressLocked()
	ok, st, err = c.iprobeLocked(c.worldRank(src), tag, c.pctx)
	return ok, c.commStatus(st), err
}

// Probe blocks until a message from src (or AnySource) with tag (or
// AnyTag) has arrived, and returns its status without receiving it.
func (c *Comm) Probe(src, tag int) (Status, error) {
	if err := c.checkSrc(src, tag); err != nil {
		return Status{}, err
	}
	pc := &probeCond{c: c, src: c.worldRank(src), tag: tag}
	c.wait(pc)
	return c.commStatus(pc.st), pc.err
}

type probeCond struct {
	c        *Comm
	src, tag int
	st       Status
	err      error
}

func (p *probeCond) ready() bool {
	if p.c.finalized {
		p.err = ErrFinalized
		return true
	}
	ok, st, err := p.c.iprobeLocked(p.src, p.tag, p.c.pctx)
	p.st, p.err = st, err
	return ok || err != nil
}

func (c *Comm) iprobeLocked(src, tag int, ctx uint16) (bool, Status, error) {
	if m := c.findUnexpected(src, tag, ctx, false); m != nil {
		return true, Status{Source: m.src, Tag: m.tag, Count: m.length}, nil
	}
	if src == AnySource {
		c.connectAll()
		if c.anyErr != nil {
			return false, Status{}, c.anyErr
		}
	} else if src != c.rank {
		p := c.peers[src]
		c.ensureConn(p)
		if p.err != nil {
			return false, Status{}, p.err
		}
	}
	return false, Status{}, nil
}

// ---- requests ----

func (c *Comm) getReq() *Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getReqLocked()
}

func (c *Comm) getReqLocked() *Request {
	if n := len(c.reqFree); n > 0 {
		r := c.reqFree[n-1]
		c.reqFree = c.reqFree[:n-1]
		return r
	}
	return &Request{}
}

func (c *Comm) putReq(r *Request) {
	c.mu.Lock()
	c.putReqLocked(r)
	c.mu.Unlock()
}

// putReqLocked recycles an internal request, unless descriptors still
// refer to it (a failed handshake whose writes are being flushed).
func (c *Comm) putReqLocked(r *Request) {
	if r.chunks > 0 || r.list != nil || r.reg != nil || len(c.reqFree) >= 64 {
		return
	}
	keep := r.dstRuns[:0]
	*r = Request{dstRuns: keep}
	c.reqFree = append(c.reqFree, r)
}

// complete finishes r; its first error sticks.
func (c *Comm) complete(r *Request, err error) {
	if r.done {
		return
	}
	if err != nil && r.err == nil {
		r.err = err
	}
	c.unstage(r) // before done: a waiter may then reuse the layout's memory
	r.done = true
	c.changed = true
}

// completeHandshake finishes a handshake request and releases its
// registration once no descriptor uses it.
func (c *Comm) completeHandshake(r *Request, err error) {
	c.complete(r, err)
	c.releaseReg(r)
}

func (c *Comm) releaseReg(r *Request) {
	if r.reg == nil || r.chunks > 0 {
		return
	}
	if r.send {
		c.sendCache.Put(r.reg)
	} else {
		if r.writer != nil {
			c.fab.grant(r.reg, r.writer, false)
		}
		r.writer = nil
		c.recvCache.Put(r.reg)
	}
	r.reg = nil
}

func (c *Comm) newID() uint32 {
	for {
		c.nextID++
		id := c.nextID
		if id == 0 {
			continue
		}
		if c.sendIDs[id] == nil && c.recvIDs[id] == nil {
			return id
		}
	}
}

// ---- sending ----

// startSend validates and queues a send.
func (c *Comm) startSend(r *Request, buf []byte, dest, tag int, ctx uint16) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startSendLocked(r, buf, dest, tag, ctx)
}

func (c *Comm) startSendLocked(r *Request, buf []byte, dest, tag int, ctx uint16) error {
	if c.finalized {
		return ErrFinalized
	}
	r.c, r.send, r.buf, r.peer, r.tag, r.ctx = c, true, buf, dest, tag, ctx
	r.st = Status{Source: c.rank, Tag: tag, Count: r.size()}
	if dest == c.rank {
		c.sendSelf(r)
		return nil
	}
	p := c.peers[dest]
	c.ensureConn(p)
	if c.byHandshake(r) && !p.hasOffer && p.sendq.head == nil && p.err == nil {
		// The receiver's offer may be here already, unread: take in what
		// has arrived before paying for an RTS and CTS.
		c.progressLocked()
	}
	if p.err != nil {
		c.complete(r, p.err)
		return nil
	}
	if c.byHandshake(r) {
		r.id = c.newID()
		c.sendIDs[r.id] = r
		c.stats.HandshakeSent++
	} else {
		c.stats.EagerSent++
	}
	p.sendq.push(r)
	c.pumpPeer(p)
	return nil
}

// byHandshake says whether send r goes by RTS and CTS: a message above
// the eager limit, or a synchronous one (its CTS proves the receive
// matched).
func (c *Comm) byHandshake(r *Request) bool { return r.sync || r.size() > c.cfg.eagerLimit }

// sendSelf delivers a message to this rank: into a posted receive, or
// onto the unexpected queue (copied if short; a long one waits for its
// receive and is copied once).
func (c *Comm) sendSelf(r *Request) {
	c.stage(r)
	if rr := c.takePosted(c.rank, r.tag, r.ctx); rr != nil {
		c.deliver(rr, c.rank, r.tag, r.buf, len(r.buf))
		c.complete(r, nil)
		return
	}
	m := c.newUmsg()
	m.src, m.tag, m.ctx, m.length = c.rank, r.tag, r.ctx, len(r.buf)
	if !c.byHandshake(r) {
		m.typ = msgEager
		if len(r.buf) > 0 {
			m.tmp = c.tmp.get(len(r.buf))
			m.data = m.tmp
			copy(m.data, r.buf)
		}
		m.cost = int64(cap(m.tmp)) + umsgCost
		c.complete(r, nil)
	} else {
		m.typ, m.sreq, m.cost = msgSelf, r, umsgCost
	}
	c.addUnexpected(m.cost)
	c.unexp[c.rank].push(m)
	c.stats.Unexpected++
	c.changed = true
}

// deliver copies a message into receive r and completes it.
func (c *Comm) deliver(r *Request, src, tag int, data []byte, length int) {
	var n int
	if r.lay != nil && r.buf == nil {
		n = min(len(data), r.layLen)
		r.lay.Scatter(data[:n])
	} else {
		n = copy(r.buf, data)
	}
	r.st = Status{Source: src, Tag: tag, Count: n}
	var err error
	if size := r.size(); length > size {
		err = &TruncateError{Source: src, Tag: tag, Length: length, Capacity: size}
	}
	c.complete(r, err)
}

// ---- receiving ----

// startRecv validates a receive, matches it against the unexpected
// messages, or posts it.
func (c *Comm) startRecv(r *Request, buf []byte, src, tag int, ctx uint16) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startRecvLocked(r, buf, src, tag, ctx)
}

func (c *Comm) startRecvLocked(r *Request, buf []byte, src, tag int, ctx uint16) error {
	if c.finalized {
		return ErrFinalized
	}
	r.c, r.send, r.buf, r.peer, r.tag, r.ctx = c, false, buf, src, tag, ctx
	r.seq = c.postSeq
	c.postSeq++
	if m := c.findUnexpected(src, tag, ctx, true); m != nil {
		c.unexp[m.src].remove(m)
		c.matchUnexpected(r, m)
		return nil
	}
	if src == AnySource {
		if c.anyErr == nil {
			c.connectAll()
		}
		if c.anyErr != nil {
			c.complete(r, c.anyErr)
			return nil
		}
		c.anyPost.push(r)
		return nil
	}
	if src != c.rank {
		p := c.peers[src]
		c.ensureConn(p)
		if p.err != nil {
			c.complete(r, p.err)
			return nil
		}
	}
	c.posted[src].push(r)
	if src != c.rank {
		c.offerRecv(c.peers[src], r)
	}
	return nil
}

// findUnexpected returns the first unexpected message that a receive of
// (src, tag, ctx) matches. From AnySource it looks at the sources round
// robin from where the last such receive matched (advance moves on).
func (c *Comm) findUnexpected(src, tag int, ctx uint16, advance bool) *umsg {
	if src != AnySource {
		return c.unexp[src].find(tag, ctx)
	}
	for k := 0; k < c.size; k++ {
		s := (c.anyNext + k) % c.size
		if m := c.unexp[s].find(tag, ctx); m != nil {
			if advance {
				c.anyNext = (s + 1) % c.size
			}
			return m
		}
	}
	return nil
}

func (l *ulist) find(tag int, ctx uint16) *umsg {
	for m := l.head; m != nil; m = m.next {
		if m.ctx == ctx && (tag == AnyTag || m.tag == tag) {
			return m
		}
	}
	return nil
}

func (l *rlist) match(tag int, ctx uint16) *Request {
	for r := l.head; r != nil; r = r.next {
		if r.ctx == ctx && (r.tag == AnyTag || r.tag == tag) {
			return r
		}
	}
	return nil
}

// takePosted removes and returns the earliest posted receive that a
// message (src, tag, ctx) matches.
func (c *Comm) takePosted(src, tag int, ctx uint16) *Request {
	a := c.posted[src].match(tag, ctx)
	b := c.anyPost.match(tag, ctx)
	if a == nil || (b != nil && b.seq < a.seq) {
		a = b
	}
	if a != nil {
		a.list.remove(a)
	}
	return a
}

// matchUnexpected completes receive r with unexpected message m (already
// off its list).
func (c *Comm) matchUnexpected(r *Request, m *umsg) {
	switch m.typ {
	case msgEager:
		c.deliver(r, m.src, m.tag, m.data, m.length)
		c.releaseUmsg(m)
	case msgRTS:
		p, sendID, length, tag := c.peers[m.src], m.sendID, m.length, m.tag
		c.releaseUmsg(m)
		c.startCTS(r, p, sendID, length, tag)
	case msgSelf:
		s := m.sreq
		c.deliver(r, m.src, m.tag, s.buf, m.length)
		c.releaseUmsg(m)
		c.complete(s, nil)
	}
}

func (c *Comm) addUnexpected(n int64) {
	c.unexpBytes += n
	c.stats.UnexpectedPeak = max(c.stats.UnexpectedPeak, c.unexpBytes)
}

func (c *Comm) newUmsg() *umsg {
	if n := len(c.umsgFree); n > 0 {
		m := c.umsgFree[n-1]
		c.umsgFree = c.umsgFree[:n-1]
		return m
	}
	return &umsg{}
}

// releaseUmsg gives back what m holds: its temporary buffer or its
// receive slot (a credit for the sender again).
func (c *Comm) releaseUmsg(m *umsg) {
	c.unexpBytes -= m.cost
	if m.tmp != nil {
		c.tmp.put(m.tmp)
	}
	if m.held {
		c.repost(c.peers[m.src], m.slot)
	}
	*m = umsg{}
	if len(c.umsgFree) < umsgKeep {
		c.umsgFree = append(c.umsgFree, m)
	}
}

// repost gives receive slot i back to p's VI (or its lane).
func (c *Comm) repost(p *peer, i int) {
	if i < 0 || p.state == stDead || p.state == stClosed || c.finalized {
		return
	}
	if err := c.postRecvSlot(p, i); err != nil {
		c.peerFailed(p, c.viCause(p, err), true)
	}
}

// postRecvSlot posts receive slot i on p's VI, or on its lane (i >=
// len(p.sd)) while that has not broken.
func (c *Comm) postRecvSlot(p *peer, i int) error {
	if i >= len(p.sd) {
		if p.laneGone {
			return nil
		}
		if err := p.lane.PostRecv(&p.rd[i]); err != nil {
			c.laneDown(p)
			return nil
		}
		p.lrpos.push(i)
		return nil
	}
	if err := p.v.PostRecv(&p.rd[i]); err != nil {
		return err
	}
	p.rpos.push(i)
	return nil
}

// onRecv handles a completed receive descriptor of p's VI, or of its lane.
func (c *Comm) onRecv(p *peer, d *descriptors.Descriptor, lane bool) {
	posted := &p.rpos
	if lane {
		posted = &p.lrpos
	}
	slot, ok := posted.pop()
	if !ok || &p.rd[slot] != d {
		// Cannot happen: receives complete in the order they were posted.
		c.stats.BadEnvelopes++
		return
	}
	if d.Status.Failed() {
		if lane {
			c.laneDown(p) // the bond carries on
			return
		}
		c.peerFailed(p, c.viCause(p, d.Status.Err()), true)
		return
	}
	if d.Status&descriptors.StatusRemoteWrite == descriptors.StatusRemoteWrite {
		id, n := d.ImmData, d.Length // read before the repost resets them
		c.repost(p, slot)
		c.onWriteDone(p, id, n)
		return
	}
	msg := p.rd[slot].Segments[0].Buf
	if d.Length > len(msg) {
		c.stats.BadEnvelopes++
		c.repost(p, slot)
		return
	}
	msg = msg[:d.Length]
	if d.Status&descriptors.StatusImmediate != 0 {
		// A numbered envelope (a peer with a lane): in order, or kept
		// until the ones before it come (lane.go).
		c.inSequence(p, d.ImmData, msg, slot)
		return
	}
	c.dispatch(p, msg, slot)
}

// dispatch handles envelope message msg of p, in receive slot slot, or in
// a copy (slot -1: nothing to give back, and an unexpected eager message
// is copied aside whatever the bound).
func (c *Comm) dispatch(p *peer, msg []byte, slot int) {
	var e envelope
	if err := parseEnvelope(msg, c.cfg.eagerLimit, &e); err != nil {
		c.stats.BadEnvelopes++
		c.repost(p, slot)
		return
	}
	switch e.typ {
	case msgEager:
		c.onEager(p, slot, &e, msg[eagerLen:])
	case msgRTS:
		c.onRTS(p, slot, &e)
	case msgCTS:
		c.onCTS(p, &e) // first: its runs are read from the slot
		c.repost(p, slot)
	case msgDone:
		c.repost(p, slot)
		c.onDone(p, &e)
	case msgFin:
		c.repost(p, slot)
		if p.finRecv {
			// One Fin per peer: repeats would queue answers without end.
			c.stats.BadEnvelopes++
			return
		}
		p.finRecv = true
		c.changed = true
		c.queueCtrl(p, envelope{typ: msgFinAck})
	case msgFinAck:
		c.repost(p, slot)
		p.finAcked = true
		c.changed = true
	case msgOffer:
		c.repost(p, slot)
		c.onOffer(p, &e)
	}
}

// onEager delivers an eager message, or keeps it as unexpected: copied
// aside while under the bound, else left in its slot (no credit back).
func (c *Comm) onEager(p *peer, slot int, e *envelope, data []byte) {
	if c.eagerToPosted(p, e, data) {
		c.repost(p, slot)
		return
	}
	c.stats.EagerReceived++
	c.envelopeArrived(p)
	m := c.newUmsg()
	m.src, m.tag, m.ctx, m.typ, m.length = p.rank, e.tag, e.ctx, msgEager, len(data)
	cost := int64(umsgCost)
	if len(data) > 0 {
		cost += int64(c.tmp.size(len(data))) // the copy's whole buffer counts
	}
	if c.unexpBytes+cost <= c.cfg.unexpectedLimit || slot < 0 {
		if len(data) > 0 {
			m.tmp = c.tmp.get(len(data))
			m.data = m.tmp
			copy(m.data, data)
		}
		m.cost = cost
		c.repost(p, slot)
	} else {
		m.held, m.slot, m.data, m.cost = true, slot, data, umsgCost
		c.stats.Held++
	}
	c.addUnexpected(m.cost)
	c.unexp[p.rank].push(m)
	c.stats.Unexpected++
	c.changed = true
}

// eagerToPosted delivers eager message data into the posted receive it
// matches and reports true, or, with none posted, does nothing and reports
// false. data may lie in a receive slot or in a shared-memory ring.
func (c *Comm) eagerToPosted(p *peer, e *envelope, data []byte) bool {
	if c.posted[p.rank].match(e.tag, e.ctx) == nil && c.anyPost.match(e.tag, e.ctx) == nil {
		return false
	}
	c.stats.EagerReceived++
	c.envelopeArrived(p) // withdraws an offer; the receive stays posted
	c.deliver(c.takePosted(p.rank, e.tag, e.ctx), p.rank, e.tag, data, len(data))
	return true
}

// onRTS answers a request to send whose receive is posted, or keeps its
// envelope (only) until one is.
func (c *Comm) onRTS(p *peer, slot int, e *envelope) {
	c.stats.HandshakeReceived++
	c.envelopeArrived(p)
	if r := c.takePosted(p.rank, e.tag, e.ctx); r != nil {
		c.repost(p, slot)
		c.startCTS(r, p, e.sendID, e.length, e.tag)
		return
	}
	m := c.newUmsg()
	m.src, m.tag, m.ctx, m.typ, m.length, m.sendID = p.rank, e.tag, e.ctx, msgRTS, e.length, e.sendID
	m.cost = umsgCost
	if c.unexpBytes+m.cost <= c.cfg.unexpectedLimit || slot < 0 {
		c.repost(p, slot)
	} else {
		m.held, m.slot = true, slot
		c.stats.Held++
	}
	c.addUnexpected(m.cost)
	c.unexp[p.rank].push(m)
	c.stats.Unexpected++
	c.changed = true
}

// startCTS registers the receive buffer of r (matched to an RTS) and
// tells the sender where to write.
func (c *Comm) startCTS(r *Request, p *peer, sendID uint32, length, tag int) {
	size := r.size()
	grant := min(length, size)
	r.st = Status{Source: p.rank, Tag: tag, Count: grant}
	if length > size {
		r.err = &TruncateError{Source: p.rank, Tag: tag, Length: length, Capacity: size}
	}
	if p.err != nil {
		c.complete(r, p.err)
		return
	}
	r.id = c.newID()
	e := envelope{typ: msgCTS, sendID: sendID, recvID: r.id, length: grant}
	if grant > 0 {
		var mem []byte
		if span, runs, ok := c.directRuns(r); ok {
			mem, e.sendRuns = span, runs // the layout keeps runs until r completes
		} else {
			c.stage(r)
			mem = r.buf[:grant]
		}
		reg, err := c.recvCache.Get(mem)
		if err != nil {
			// Nothing can be written: let the sender finish, fail here.
			e.length, e.sendRuns = 0, nil
			r.err = err
			r.st.Count = 0
		} else {
			r.reg, r.writer = reg, p
			c.fab.grant(reg, p, true)
			e.rkey, e.raddr = uint32(reg.Handle()), regionOffset(reg, mem)
		}
	}
	c.recvIDs[r.id] = r
	c.queueCtrl(p, e)
}

// onCTS starts the RDMA writes of a handshake send.
func (c *Comm) onCTS(p *peer, e *envelope) {
	r := c.sendIDs[e.sendID]
	if r == nil || r.peer != p.rank || r.recvID != 0 || e.length > r.size() {
		c.stats.BadEnvelopes++
		return
	}
	r.recvID, r.grant, r.rkey, r.raddr = e.recvID, e.length, e.rkey, e.raddr
	r.dstRuns, r.dst, r.dstAt = r.dstRuns[:0], 0, 0
	for i := range e.nruns {
		r.dstRuns = append(r.dstRuns, e.runAt(i))
	}
	if r.grant > 0 {
		var mem []byte
		if span, runs, ok := c.directRuns(r); ok {
			r.span, r.runs, r.run, r.runAt, mem = span, runs, 0, 0, span
		} else {
			c.stage(r)
			mem = r.buf[:r.grant]
		}
		reg, err := c.sendCache.Get(mem)
		if err == nil {
			r.reg = reg
			p.rdmaq.push(r)
			c.pumpPeer(p)
			return
		}
		r.err = err
	}
	// Nothing to write: tell the receiver how much it got (nothing).
	delete(c.sendIDs, r.id)
	c.queueCtrl(p, envelope{typ: msgDone, sendID: r.id, recvID: r.recvID})
	c.complete(r, nil)
}

// onWriteDone completes the receive that the final RDMA write named.
func (c *Comm) onWriteDone(p *peer, id uint32, length int) {
	r := c.recvIDs[id]
	if r == nil || r.st.Source != p.rank {
		c.stats.BadEnvelopes++
		return
	}
	if r == p.offered {
		c.offerWritten(p, r, length)
		return
	}
	delete(c.recvIDs, id)
	c.completeHandshake(r, nil)
}

// onDone completes a receive whose sender wrote nothing.
func (c *Comm) onDone(p *peer, e *envelope) {
	r := c.recvIDs[e.recvID]
	if r == nil || r.st.Source != p.rank {
		c.stats.BadEnvelopes++
		return
	}
	delete(c.recvIDs, e.recvID)
	var err error
	if r.st.Count != e.length {
		err = fmt.Errorf("mplite: rank %d could not send the %d bytes of its message", p.rank, r.st.Count)
		r.st.Count = e.length
	}
	c.completeHandshake(r, err)
}

// onSend handles a completed send descriptor of p's VI.
func (c *Comm) onSend(p *peer, d *descriptors.Descriptor) {
	op, ok := p.sops.pop()
	if !ok {
		c.stats.BadEnvelopes++
		return
	}
	failed := d.Status.Failed()
	switch op.kind {
	case opSlot:
		p.sfre = append(p.sfre, op.idx)
	case opChunk:
		p.wfre = append(p.wfre, op.idx)
		r := op.req
		r.chunks--
		if r.chunks == 0 {
			if p.offerOut == r && r.off == r.grant {
				p.offerOut = nil
			}
			if !r.done && !failed && r.off == r.grant {
				delete(c.sendIDs, r.id)
				c.completeHandshake(r, nil)
			} else if r.done {
				c.releaseReg(r)
			}
		}
	}
	if failed {
		c.peerFailed(p, c.viCause(p, d.Status.Err()), true)
		return
	}
	c.pumpPeer(p)
}
