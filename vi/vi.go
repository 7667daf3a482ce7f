package vi

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/internal/wake"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/rdma"
	"github.com/ethervia/ethervia/reliability"
)

// VI is a virtual interface: one endpoint of one connection, with a send
// and a receive work queue. It is safe for concurrent use, though a queue
// is best waited on by one goroutine at a time.
type VI struct {
	p     *Provider
	id    uint16
	attrs Attributes
	state State
	err   error
	dirty bool

	// connection
	mode         connMode
	remote       Address
	remoteAddr   nic.Addr
	remoteVI     uint16
	localConnID  uint32
	remoteConnID uint32
	isn          reliability.Seq
	advCredit    uint32 // credit limit sent in our connection frame
	conn         *reliability.Conn
	rejected     bool
	prev         prevConn

	// work queues and per-descriptor state, indexed by queue slot
	sq, rq  *descriptors.Queue
	ss      []sendState
	rs      []recvState
	sqStart uint64 // next send position to start
	sqAcked uint64 // sends before this have been matched against acknowledgements
	sqReap  uint64 // send completions before this are visible
	rqNext  uint64 // first receive position not completed
	recvMsn uint32 // the message number the receive at rqNext takes
	u       unreliableRx

	// RDMA reads: ours outstanding, and the peer's we must answer
	readsOut  int
	jobs      [maxReads]readJob
	ready     [maxReads]int8 // indices into jobs, in the order to answer
	readyHead int
	readyN    int

	sendWake, recvWake, stateWake chan struct{}
	stats                         VIStats
}

// VIStats count what a VI did, in addition to its connection's counters.
type VIStats struct {
	reliability.Stats
	MessagesSent, MessagesReceived uint64
	// MessagesLost counts messages an unreliable VI started to receive and
	// never completed, or could not place for want of a descriptor.
	MessagesLost uint64
	// RDMARefused counts the peer's RDMA frames this VI refused: no such
	// region, another protection tag, a right not granted, out of bounds,
	// or the operation not enabled on the VI. Provider.Stats breaks the
	// refusals down by reason.
	RDMARefused uint64
}

type connMode uint8

const (
	modeNone connMode = iota
	modeClient
	modeServer
	modePeer
)

// prevConn remembers the last connection so that its stray frames can be
// answered with a Disconnect.
type prevConn struct {
	remoteAddr   nic.Addr
	remoteVI     uint16
	localConnID  uint32
	remoteConnID uint32
	reason       reliability.Reason
}

type sendState struct {
	begun, queued, done bool
	msn                 uint32
	first, last         reliability.Seq
	off, seg, segOff    int
	total               int
}

type recvState struct {
	capacity int
	started  bool
	lenErr   bool
	hasFirst bool
	hasImm   bool
	write    bool // an RDMA write with immediate data consumes this one
	msgLen   uint32
	got      int
	imm      uint32
	firstSeq reliability.Seq
}

type unreliableRx struct {
	active  bool
	msn     uint32
	discard bool // the active message is being dropped (length error)
}

// readJob is a peer's RDMA read that we answer: n bytes from offset raddr
// of region handle. The bytes are copied out of the region frame by frame,
// each copy checked, so a region deregistered mid-transfer is refused.
type readJob struct {
	used, ready bool
	seq         reliability.Seq
	id          uint32
	handle      rdma.Handle
	raddr       uint64
	n, off      int
	sentAny     bool
}

// NewVI creates a VI (VipCreateVi) in the Idle state.
func (p *Provider) NewVI(a Attributes) (*VI, error) {
	if a.Reliability == 0 {
		a.Reliability = ReliableDelivery
	}
	if !a.Reliability.Valid() {
		return nil, fmt.Errorf("vi: new: %w: reliability level %v", ErrAttributes, a.Reliability)
	}
	if a.MaxTransfer == 0 {
		a.MaxTransfer = p.opts.MaxTransfer
	}
	if a.MaxTransfer < 0 || a.MaxTransfer > p.opts.MaxTransfer {
		return nil, fmt.Errorf("vi: new: %w: MaxTransfer %d above the provider's %d", ErrAttributes, a.MaxTransfer, p.opts.MaxTransfer)
	}
	if a.QueueDepth == 0 {
		a.QueueDepth = p.opts.QueueDepth
	}
	if a.QueueDepth < 0 || a.QueueDepth > p.opts.QueueDepth {
		return nil, fmt.Errorf("vi: new: %w: queue depth %d above the provider's %d", ErrAttributes, a.QueueDepth, p.opts.QueueDepth)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if !p.validTag(a.PTag) {
		return nil, fmt.Errorf("vi: new: %w: unknown protection tag %d", ErrAttributes, a.PTag)
	}
	for _, cq := range []*CQ{a.SendCQ, a.RecvCQ} {
		if cq != nil && cq.p != p {
			return nil, fmt.Errorf("vi: new: %w: belongs to another provider", ErrCQ)
		}
	}
	if a.SendCQ != nil {
		if err := a.SendCQ.reserve(a.QueueDepth); err != nil {
			return nil, fmt.Errorf("vi: new: send: %w", err)
		}
	}
	if a.RecvCQ != nil {
		if err := a.RecvCQ.reserve(a.QueueDepth); err != nil {
			if a.SendCQ != nil {
				a.SendCQ.reserved -= a.QueueDepth
			}
			return nil, fmt.Errorf("vi: new: receive: %w", err)
		}
	}
	var id uint16
	if n := len(p.freeIDs); n > 0 {
		id = p.freeIDs[n-1]
		p.freeIDs = p.freeIDs[:n-1]
	} else {
		if len(p.vis) > p.opts.MaxVIs {
			if a.SendCQ != nil {
				a.SendCQ.reserved -= a.QueueDepth
			}
			if a.RecvCQ != nil {
				a.RecvCQ.reserved -= a.QueueDepth
			}
			return nil, fmt.Errorf("vi: new: %d VIs already", p.opts.MaxVIs)
		}
		id = uint16(len(p.vis))
		p.vis = append(p.vis, nil)
	}
	v := &VI{
		p: p, id: id, attrs: a,
		sq:        descriptors.NewQueue(a.QueueDepth),
		rq:        descriptors.NewQueue(a.QueueDepth),
		ss:        make([]sendState, a.QueueDepth),
		rs:        make([]recvState, a.QueueDepth),
		sendWake:  make(chan struct{}, 1),
		recvWake:  make(chan struct{}, 1),
		stateWake: make(chan struct{}, 1),
	}
	p.vis[id] = v
	return v, nil
}

// Grantee is the writer identity of this VI's incoming RDMA writes: a
// region registered with AccessGrantedWrite takes them only while granted
// to it (rdma.Region.Grant).
func (v *VI) Grantee() rdma.Grantee { return rdma.Grantee(v.id) }

// ID is the VI's number on its provider, as carried in frames.
func (v *VI) ID() uint16 { return v.id }

// Provider returns the provider the VI belongs to.
func (v *VI) Provider() *Provider { return v.p }

// Attributes returns the VI's attributes (VipQueryVi).
func (v *VI) Attributes() Attributes { return v.attrs }

// State returns the VI's connection state.
func (v *VI) State() State {
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	return v.state
}

// Err returns why the VI is in the Error state, or nil.
func (v *VI) Err() error {
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	return v.err
}

// Remote returns the address of the connected (or last requested) peer.
func (v *VI) Remote() Address {
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	return v.remote
}

// Stats returns the VI's counters, including its current connection's.
func (v *VI) Stats() VIStats {
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	s := v.stats
	if v.conn != nil {
		s.Stats = s.Stats.Add(v.conn.Stats())
	}
	return s
}

// ---- posting ----

func (v *VI) limits() descriptors.Limits {
	return descriptors.Limits{MaxSegments: v.p.opts.MaxSegments, MaxTransfer: v.attrs.MaxTransfer}
}

// checkSend validates a send-queue descriptor and, when it is valid, holds
// the regions of its segments. p.mu is held.
func (v *VI) checkSend(d *descriptors.Descriptor) (descriptors.Status, error) {
	if err := d.CheckFormat(v.limits(), false); err != nil {
		return descriptors.StatusFormat, err
	}
	if d.Control.Op == descriptors.OpRDMARead && !v.attrs.Reliability.Reliable() {
		return descriptors.StatusFormat, fmt.Errorf("%w: RDMA read needs a reliable VI", descriptors.ErrFormat)
	}
	// An RDMA read writes into its local segments.
	if err := v.p.acquire(d.Segments, v.attrs.PTag, d.Control.Op == descriptors.OpRDMARead); err != nil {
		return descriptors.StatusProtection, err
	}
	return 0, nil
}

// PostSend posts d on the send queue (VipPostSend). The VI must be
// Connected, or in the Error state, where d completes at once as flushed.
// A malformed descriptor, or one over memory the VI may not use, is not
// queued: it is marked done with StatusFormat or StatusProtection and the
// error is returned. Every non-empty segment must lie inside one region
// registered under the VI's protection tag; a posted descriptor holds those
// regions (DeregisterMemory fails) until it completes.
func (v *VI) PostSend(d *descriptors.Descriptor) error {
	p := v.p
	d.Reset()
	p.mu.Lock()
	defer p.mu.Unlock()
	if v.state == closedVI || p.closed {
		return fmt.Errorf("vi %d: post send: %w", v.id, ErrClosed)
	}
	if st, err := v.checkSend(d); err != nil {
		d.Status = descriptors.StatusDone | st
		return fmt.Errorf("vi %d: post send: %w", v.id, err)
	}
	if v.state != Connected && v.state != Error {
		p.release(d.Segments)
		return fmt.Errorf("vi %d: post send: %w: %v", v.id, ErrState, v.state)
	}
	pos, err := v.sq.Push(d)
	if err != nil {
		p.release(d.Segments)
		return fmt.Errorf("vi %d: post send: %w", v.id, err)
	}
	v.ss[v.sq.Slot(pos)] = sendState{}
	if v.state == Error {
		v.completeSend(pos, descriptors.StatusFlushed)
		v.sqStart, v.sqAcked = v.sq.Back(), v.sq.Back()
		v.publishSend()
		return nil
	}
	now := p.now()
	p.service(v, now)
	p.sendTx()
	return nil
}

// PostRecv posts d on the receive queue (VipPostRecv). Receives may be
// posted in any state but closed; each is a credit the peer may use for one
// message. A malformed descriptor is refused as in PostSend.
func (v *VI) PostRecv(d *descriptors.Descriptor) error {
	p := v.p
	d.Reset()
	p.mu.Lock()
	defer p.mu.Unlock()
	if v.state == closedVI || p.closed {
		return fmt.Errorf("vi %d: post recv: %w", v.id, ErrClosed)
	}
	if err := d.CheckFormat(v.limits(), true); err != nil {
		d.Status = descriptors.StatusDone | descriptors.StatusFormat
		return fmt.Errorf("vi %d: post recv: %w", v.id, err)
	}
	if err := p.acquire(d.Segments, v.attrs.PTag, true); err != nil {
		d.Status = descriptors.StatusDone | descriptors.StatusProtection
		return fmt.Errorf("vi %d: post recv: %w", v.id, err)
	}
	pos, err := v.rq.Push(d)
	if err != nil {
		p.release(d.Segments)
		return fmt.Errorf("vi %d: post recv: %w", v.id, err)
	}
	v.rs[v.rq.Slot(pos)] = recvState{capacity: d.TotalLength()}
	if v.state == Error {
		v.completeRecv(descriptors.StatusFlushed)
		return nil
	}
	if v.conn != nil {
		// The clock only if the limit's acknowledgement must be timed
		// or something must go out: a receive is posted per message.
		v.conn.SetRecvLimitClock(p.now, v.recvLimit())
		if v.conn.Pending() {
			p.service(v, p.now())
			p.sendTx()
		}
	}
	return nil
}

// ---- completion ----

// completeSend marks the send at pos done with the given status bits and
// lets go of its regions.
func (v *VI) completeSend(pos uint64, st descriptors.Status) {
	s := &v.ss[v.sq.Slot(pos)]
	if s.done {
		return
	}
	s.done = true
	d := v.sq.At(pos)
	v.p.release(d.Segments)
	d.Status = descriptors.StatusDone | st
	if st == 0 {
		d.Length = s.total
		if d.Control.Op != descriptors.OpRDMARead {
			v.stats.MessagesSent++
		}
	}
}

// publishSend makes completed sends visible in order.
func (v *VI) publishSend() {
	moved := false
	for v.sqReap < v.sq.Back() && v.ss[v.sq.Slot(v.sqReap)].done {
		v.sqReap++
		moved = true
		if v.attrs.SendCQ != nil {
			v.attrs.SendCQ.push(v, false)
		}
	}
	if moved {
		wake.Signal(v.sendWake)
	}
}

// completeRecv completes the receive at rqNext and lets go of its regions.
func (v *VI) completeRecv(st descriptors.Status) {
	pos := v.rqNext
	d := v.rq.At(pos)
	s := &v.rs[v.rq.Slot(pos)]
	v.p.release(d.Segments)
	d.Status = descriptors.StatusDone | st
	if st&descriptors.StatusErrorMask == 0 || st&descriptors.StatusLength != 0 {
		d.Length = int(s.msgLen)
		if s.hasImm {
			d.Status |= descriptors.StatusImmediate
			d.ImmData = s.imm
		}
		if s.write {
			d.Status |= descriptors.StatusRemoteWrite
		}
	}
	if st&descriptors.StatusErrorMask == 0 {
		v.stats.MessagesReceived++
	}
	v.rqNext++
	if v.attrs.RecvCQ != nil {
		v.attrs.RecvCQ.push(v, true)
	}
	wake.Signal(v.recvWake)
}

func (v *VI) sendDoneLocked() *descriptors.Descriptor {
	if v.sq.Front() < v.sqReap {
		return v.sq.Pop()
	}
	return nil
}

func (v *VI) recvDoneLocked() *descriptors.Descriptor {
	if v.rq.Front() < v.rqNext {
		return v.rq.Pop()
	}
	return nil
}

// SendReady returns the oldest send descriptor if it has already
// completed, without making progress. It is for callers that drive
// progress themselves (a bond draining a rail after CQ.Done): SendDone
// would make a pass over the device for every empty answer.
func (v *VI) SendReady() (*descriptors.Descriptor, bool) {
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	d := v.sendDoneLocked()
	return d, d != nil
}

// RecvReady is SendReady for the receive queue.
func (v *VI) RecvReady() (*descriptors.Descriptor, bool) {
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	d := v.recvDoneLocked()
	return d, d != nil
}

// SendDone returns the oldest send descriptor if it has completed
// (VipSendDone), after making progress. It never blocks.
func (v *VI) SendDone() (*descriptors.Descriptor, bool) {
	p := v.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := v.sendDoneLocked(); d != nil {
		return d, true
	}
	p.pollLocked()
	d := v.sendDoneLocked()
	return d, d != nil
}

// RecvDone returns the oldest receive descriptor if it has completed
// (VipRecvDone), after making progress. It never blocks.
func (v *VI) RecvDone() (*descriptors.Descriptor, bool) {
	p := v.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := v.recvDoneLocked(); d != nil {
		return d, true
	}
	p.pollLocked()
	d := v.recvDoneLocked()
	return d, d != nil
}

// SendWait waits for the oldest send descriptor to complete and returns it
// (VipSendWait). It fails when ctx ends, and at once when the queue is
// empty and the VI is not connected, since nothing could complete.
func (v *VI) SendWait(ctx context.Context) (*descriptors.Descriptor, error) {
	var d *descriptors.Descriptor
	var stuck error
	err := v.p.wait(ctx, v.sendWake, func() bool {
		d = v.sendDoneLocked()
		if d == nil && v.sq.Len() == 0 {
			stuck = v.stuckErr()
		}
		return d != nil || stuck != nil
	})
	if d != nil {
		return d, nil
	}
	if err == nil {
		err = stuck
	}
	return nil, fmt.Errorf("vi %d: send wait: %w", v.id, err)
}

// RecvWait waits for the oldest receive descriptor to complete and returns
// it (VipRecvWait). It fails when ctx ends, and at once when the queue is
// empty and the VI is not connected.
func (v *VI) RecvWait(ctx context.Context) (*descriptors.Descriptor, error) {
	var d *descriptors.Descriptor
	var stuck error
	err := v.p.wait(ctx, v.recvWake, func() bool {
		d = v.recvDoneLocked()
		if d == nil && v.rq.Len() == 0 {
			stuck = v.stuckErr()
		}
		return d != nil || stuck != nil
	})
	if d != nil {
		return d, nil
	}
	if err == nil {
		err = stuck
	}
	return nil, fmt.Errorf("vi %d: recv wait: %w", v.id, err)
}

// stuckErr says why nothing can complete on an empty queue, or nil.
func (v *VI) stuckErr() error {
	switch v.state {
	case Connected:
		return nil
	case Error:
		return v.err
	case closedVI:
		return ErrClosed
	}
	return fmt.Errorf("%w: %v", ErrState, v.state)
}

// ---- failure ----

// failure describes how a connection breaks.
type failure struct {
	cause error
	// what to tell the peer, if the connection is still open
	reason reliability.Reason
	seq    reliability.Seq
	hasSeq bool
	// the send descriptor that failed, and its status
	sendStatus descriptors.Status
	sendPos    uint64
	hasSend    bool
	// the receive descriptor that failed (always the one at rqNext)
	recvStatus descriptors.Status
	// firstStatus goes to the oldest pending descriptor of each queue
	// when no specific one failed; the rest are flushed.
	firstStatus descriptors.Status
}

// fail moves v to the Error state, tells the peer (unless it told us),
// completes every pending descriptor with an error and wakes all waiters.
func (v *VI) fail(now reliability.Time, f failure) {
	if v.state != Connected && v.state != Pending {
		return
	}
	if v.conn != nil && !v.conn.IsClosed() {
		v.conn.Close(now, f.reason, f.seq, f.hasSeq)
	}
	v.state = Error
	v.err = fmt.Errorf("vi %d: %w: %w", v.id, ErrBroken, f.cause)
	first := true
	for pos := v.sqReap; pos < v.sq.Back(); pos++ {
		if v.ss[v.sq.Slot(pos)].done {
			continue
		}
		st := descriptors.StatusFlushed
		switch {
		case f.hasSend && pos == f.sendPos:
			st = f.sendStatus
		case !f.hasSend && first && f.firstStatus != 0:
			st = f.firstStatus
		}
		first = false
		v.completeSend(pos, st)
	}
	v.sqStart, v.sqAcked = v.sq.Back(), v.sq.Back()
	v.readsOut = 0
	v.publishSend()
	first = true
	for v.rqNext < v.rq.Back() {
		st := descriptors.StatusFlushed
		switch {
		case f.recvStatus != 0 && first:
			st = f.recvStatus
		case first && f.firstStatus != 0 && v.rs[v.rq.Slot(v.rqNext)].started:
			st = f.firstStatus
		}
		first = false
		v.completeRecv(st)
	}
	v.p.markDirty(v) // send the Disconnect
	wake.Signal(v.stateWake)
	wake.Signal(v.sendWake)
	wake.Signal(v.recvWake)
}

// remoteClosed handles the peer's Disconnect.
func (v *VI) remoteClosed(now reliability.Time) {
	err := v.conn.Err()
	f := failure{cause: err}
	var de *reliability.DisconnectError
	if errors.As(err, &de) {
		switch de.Reason {
		case reliability.ReasonLength, reliability.ReasonNoDescriptor:
			f.sendStatus = descriptors.StatusRemoteDescriptor
		case reliability.ReasonRDMAProtection:
			f.sendStatus = descriptors.StatusRDMAProtection
			f.cause = fmt.Errorf("%w: %w", descriptors.ErrRDMAProtection, err)
		case reliability.ReasonTransport, reliability.ReasonProtocol:
			f.firstStatus = descriptors.StatusTransport
		}
		if f.sendStatus != 0 && de.HasSeq {
			f.sendPos, f.hasSend = v.sendPosForSeq(de.Seq)
		}
		if f.sendStatus == descriptors.StatusRDMAProtection && !f.hasSend {
			// The refused write already completed, as writes do at
			// reliable delivery once their frames are handed over: the
			// oldest send still pending reports the error instead.
			f.sendPos, f.hasSend = v.firstPendingSend()
		}
		// Otherwise not found: the failing send already completed
		// (reliable delivery); the rest are flushed.
	}
	v.fail(now, f)
}

// firstPendingSend returns the oldest send that has not completed.
func (v *VI) firstPendingSend() (uint64, bool) {
	for pos := v.sqReap; pos < v.sq.Back(); pos++ {
		if !v.ss[v.sq.Slot(pos)].done {
			return pos, true
		}
	}
	return 0, false
}

// sendPosForSeq finds the send descriptor that sent frame seq.
func (v *VI) sendPosForSeq(seq reliability.Seq) (uint64, bool) {
	for pos := v.sqReap; pos < v.sq.Back(); pos++ {
		s := &v.ss[v.sq.Slot(pos)]
		if !s.begun {
			break
		}
		if s.first.LessEq(seq) && (!s.queued || seq.LessEq(s.last)) {
			return pos, true
		}
	}
	return 0, false
}

// Disconnect ends the connection (VipDisconnect): the peer is told, every
// pending descriptor completes as flushed and the VI returns to Idle, from
// where it may connect again. It also cancels a pending connection request
// and clears the Error state.
func (v *VI) Disconnect() error {
	p := v.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if v.state == closedVI {
		return fmt.Errorf("vi %d: disconnect: %w", v.id, ErrClosed)
	}
	v.disconnectLocked(p.now(), reliability.ReasonNormal)
	return nil
}

func (v *VI) disconnectLocked(now reliability.Time, reason reliability.Reason) {
	p := v.p
	switch v.state {
	case Pending:
		v.state, v.mode = Idle, modeNone
	case Connected, Error:
		if v.state == Connected {
			v.fail(now, failure{cause: errors.New("disconnected"), reason: reason})
		}
		if v.conn != nil {
			p.service(v, now) // sends the Disconnect
			p.sendTx()
			v.prev = prevConn{remoteAddr: v.remoteAddr, remoteVI: v.remoteVI, localConnID: v.localConnID,
				remoteConnID: v.remoteConnID, reason: reason}
			v.stats.Stats = v.stats.Stats.Add(v.conn.Stats())
		}
		v.conn = nil
		v.state, v.mode, v.err = Idle, modeNone, nil
	}
	wake.Signal(v.stateWake)
	wake.Signal(v.sendWake)
	wake.Signal(v.recvWake)
}

// Close destroys the VI (VipDestroyVi), disconnecting it first. Descriptors
// still queued complete as flushed; Done and Wait still return them.
func (v *VI) Close() error {
	p := v.p
	p.mu.Lock()
	defer p.mu.Unlock()
	v.closeLocked(p.now(), reliability.ReasonNormal)
	return nil
}

func (v *VI) closeLocked(now reliability.Time, reason reliability.Reason) {
	if v.state == closedVI {
		return
	}
	v.disconnectLocked(now, reason)
	// Receives posted while idle complete too, so their regions are free.
	for v.rqNext < v.rq.Back() {
		v.completeRecv(descriptors.StatusFlushed)
	}
	v.state = closedVI
	if v.attrs.SendCQ != nil {
		v.attrs.SendCQ.reserved -= v.attrs.QueueDepth
	}
	if v.attrs.RecvCQ != nil {
		v.attrs.RecvCQ.reserved -= v.attrs.QueueDepth
	}
	p := v.p
	p.vis[v.id] = nil
	p.freeIDs = append(p.freeIDs, v.id)
	wake.Signal(v.stateWake)
	wake.Signal(v.sendWake)
	wake.Signal(v.recvWake)
}
