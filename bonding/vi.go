package bonding

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/vi"
)

// Attributes are a bonded VI's attributes. The rails always run reliable
// reception, so there is no reliability level to choose: a bonded VI
// delivers every message exactly once, in order, while any rail lives.
type Attributes struct {
	// PTag is the bond protection tag of the memory the VI may use.
	PTag PTag
	// EnableRDMAWrite lets the peer RDMA-write memory registered under PTag
	// with vi.AccessRDMAWrite.
	EnableRDMAWrite bool
	// SendCQ and RecvCQ, when set, receive a completion for every
	// descriptor that completes on the queue.
	SendCQ, RecvCQ *CQ
	// QueueDepth bounds each work queue; zero means the bond's
	// Options.QueueDepth.
	QueueDepth int
}

// State is a bonded VI's connection state.
type State uint8

// Bonded VI states.
const (
	Idle      State = iota // not connected
	Connected              // at least one rail carries data
	Error                  // every rail died; Disconnect returns to Idle
	closedVI
)

func (s State) String() string {
	switch s {
	case Idle:
		return "idle"
	case Connected:
		return "connected"
	case Error:
		return "error"
	case closedVI:
		return "closed"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Errors.
var (
	// ErrState means the VI is in the wrong state for the call.
	ErrState = errors.New("bonding: wrong state")
	// ErrAllRails means every rail of the VI died.
	ErrAllRails = errors.New("bonding: every rail failed")
	// ErrDiscriminator means a discriminator uses RailBit or ReconnectBit.
	ErrDiscriminator = errors.New("bonding: discriminator uses a reserved bit")
)

// Peer names the other end of a bonded connection: its MAC address on every
// rail, in rail order, and a discriminator both ends agree on, with RailBit
// and ReconnectBit clear. Rail reconnections use Discriminator^ReconnectBit;
// the rails after rail 0 of a requested connection use a discriminator
// derived with RailBit.
type Peer struct {
	MACs          []net.HardwareAddr
	Discriminator uint64
}

// The reserved discriminator bits. A connection's own discriminator has
// both clear (ErrDiscriminator otherwise), so the three kinds of rail
// connection never meet one another: a first connection's rail 0, and
// every rail of ConnectPeer, use the discriminator d; rail r ≥ 1 of a
// ConnectRequest uses d^RailBit^(m<<8)^r, where m is the requester's
// rail-0 MAC as a 48-bit number (bit 62 set, 63 clear); a rail
// reconnection uses d^ReconnectBit (bit 63 set, 62 clear).
const (
	// ReconnectBit is flipped in the discriminator of rail reconnections,
	// so that they never meet a first connection request.
	ReconnectBit = 1 << 63
	// RailBit is flipped in the discriminators the rails after rail 0 of
	// a requested connection use, so that they never meet a rail-0
	// request or a reconnection.
	RailBit = 1 << 62
)

// RailStats count what one rail of a bonded VI did.
type RailStats struct {
	// Live says the rail currently carries data.
	Live bool
	// Sent and SentBytes count rail descriptors (blocks, RDMA pieces,
	// control messages) completed on the rail, and their payload bytes.
	Sent, SentBytes uint64
	// Received and ReceivedBytes count bond messages received on the rail.
	Received, ReceivedBytes uint64
	// Failures counts the times the rail died, including a connection
	// that started with the rail down because it did not connect in time
	// with rail 0 (see VI.ConnectRequest); Reconnects the times it came
	// back.
	Failures, Reconnects uint64
	// Rate is the measured throughput of the rail in bytes per second
	// (an EWMA over completed blocks and pieces).
	Rate float64
}

// VIStats count what a bonded VI did.
type VIStats struct {
	MessagesSent, MessagesReceived uint64
	// Resent counts rail descriptors re-sent on another rail after their
	// own failed.
	Resent uint64
	// Duplicates counts blocks that arrived twice (a re-send of a block
	// that had landed) and were dropped.
	Duplicates uint64
	// Refused counts bond messages dropped as malformed or beyond the
	// credit we gave.
	Refused uint64
	// Credits counts credit-only messages sent.
	Credits uint64
	// Queries counts handle queries sent for RDMA writes.
	Queries uint64
	// Sleeps counts the times a wait for this VI (VI or CQ wait) blocked;
	// DeviceSleeps those of them spent in a rail's device, where a frame
	// wakes the waiter directly, rather than on a channel.
	Sleeps, DeviceSleeps uint64
	Rails                []RailStats
}

// work is one thing to send on a rail: a block, an RDMA piece (or a longer
// range to cut into pieces) or a control message.
type work struct {
	kind kind
	pos  uint64 // the user send it belongs to
	off  int
	n    int
	aux  uint32
}

// kindRDMA is a work item that is a rail RDMA write; it has no header.
const kindRDMA kind = 0x80

type slot struct {
	d   descriptors.Descriptor
	hdr []byte
	w   work
	at  int64
}

// rail is one rail of a bonded VI: its rail VI and CQ, the send slots in
// flight (a FIFO, as rail sends complete in order) and the receive buffers.
type rail struct {
	idx        int
	v          *vi.VI
	cq         *vi.CQ
	ptag       vi.PTag
	addr       vi.Address // the peer on this rail, for reconnections
	live       bool
	failed     bool // a completion failed: take the rail down
	connecting bool

	slots    []slot
	head, n  int
	inflight int

	rds []descriptors.Descriptor
	// parked holds receive buffers that came back while the rail VI was
	// in the Error state: posting them there would flush them at once,
	// forever. resetRail posts them again once the VI is Idle.
	parked            []*descriptors.Descriptor
	hdrArea, recvArea []byte
	hdrH, recvH       descriptors.MemHandle
	rate              float64 // bytes per nanosecond
	lastDone          int64
	winStart          int64 // the rate window: since when the rail was busy
	winBytes          int   // bytes completed in the window
	samples           int   // rate samples taken
	stats             RailStats
	hdrRegd, recvRegd bool
	// activeRound is the last progress round that found a completion on
	// the rail.
	activeRound uint32
}

type sendState struct {
	started, done  bool
	rdma, consumes bool
	noticeSent     bool
	status         descriptors.Status
	msn            uint32
	total          int
	blockLen       int
	nblocks        int
	blocksOut      int
	left           int // eager: blocks; RDMA: bytes not yet completed
	peer           *peerRegion
	next, end      [maxRails]int
}

type recvState struct {
	capacity          int
	started, complete bool
	lenErr, write     bool
	hasImm            bool
	status            descriptors.Status
	msgLen, blockLen  uint32
	nblocks, got      int
	imm               uint32
}

// peerRegion is what the peer told us about one of its bond handles.
type peerRegion struct {
	pending, ok bool
	rail        [maxRails]descriptors.MemHandle
}

// VI is a bonded virtual interface: one endpoint of one connection, striped
// over the bond's rails, with a send and a receive work queue used like a
// vi.VI's. It is safe for concurrent use.
type VI struct {
	b           *Bond
	attrs       Attributes
	maxTransfer int
	maxSegs     int
	maxBlocks   int
	words       int
	rails       []*rail

	mu    sync.Mutex
	state State
	err   error
	peer  Peer
	// round counts progress rounds, for polling quiet rails less often.
	round uint32
	// stopCtx ends with the connection; rail reconnections use it.
	stopCtx    context.Context
	stopCancel context.CancelFunc
	// connecting: a ConnectRequest, ConnectPeer or Accept (connOp) is
	// under way. connCancel ends its context, connDone is closed when it
	// has ended, and connAbort, once set by Disconnect, Close or Accept,
	// is why it fails.
	connecting bool
	connOp     string
	connCancel context.CancelFunc
	connDone   chan struct{}
	connAbort  error
	wg         sync.WaitGroup

	sq, rq *descriptors.Queue
	ss     []sendState
	rs     []recvState
	bits   []uint64

	// send side
	sqStart      uint64 // the next send to start
	sqReap       uint64 // sends before this are published
	cur          [maxRails]uint64
	sndMsn       uint32
	peerLimit    uint32
	handles      map[descriptors.MemHandle]*peerRegion
	ctl          deque
	creditQueued bool

	// receive side
	rqNext    uint64
	rcvMsn    uint32 // the message number of the receive at rqNext
	announced uint32 // the last credit sent
	hiSeen    uint32 // one past the highest message number seen

	// sendWake and recvWake are signalled when a send or receive
	// completes (and when the VI fails); waiters block on them.
	sendWake, recvWake chan struct{}
	// pollers counts the waiters spinning on the VI right now (VI and CQ
	// waits): while there are any, they make all the progress and the
	// rail goroutines stay parked on railWake, so that no frame wakes a
	// goroutine that only gets in the spinner's way. The last spinner to
	// give up and block wakes them (doneSpinning).
	pollers atomic.Int32
	// polls counts the progress rounds of non-blocking calls (RecvDone,
	// SendDone, CQ.Done): a caller that polls in its own loop, as
	// mplite's progress engine does, is a spinner the rail goroutines
	// cannot see in pollers, and they step aside for it too.
	polls    atomic.Uint64
	sleepers atomic.Int32 // waiters blocked on a wake channel
	railWake []chan struct{}
	// blockedOn counts the waiters for this VI asleep in each rail's
	// device (sleeper): the rail's goroutine leaves the rail to them.
	blockedOn [maxRails]atomic.Int32
	// sleeps and deviceSleeps are VIStats.Sleeps and DeviceSleeps,
	// counted without v.mu.
	sleeps, deviceSleeps atomic.Uint64
	timers               timerPool
	stats                VIStats
}

// NewVI creates a bonded VI in the Idle state: one reliable-reception VI
// per rail, each with its own completion queue, send slots and receive
// buffers (registered under the rail's tag of a.PTag).
func (b *Bond) NewVI(a Attributes) (*VI, error) {
	o := b.opts
	if a.QueueDepth == 0 {
		a.QueueDepth = o.QueueDepth
	}
	if a.QueueDepth < 0 || a.QueueDepth > o.QueueDepth {
		return nil, fmt.Errorf("bonding: new VI: queue depth %d outside [1, %d]", a.QueueDepth, o.QueueDepth)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	var tags [maxRails]vi.PTag
	for r := range b.rails {
		t, ok := b.railTag(a.PTag, r)
		if !ok {
			b.mu.Unlock()
			return nil, fmt.Errorf("bonding: new VI: %w: unknown protection tag %d", vi.ErrAttributes, a.PTag)
		}
		tags[r] = t
	}
	b.mu.Unlock()
	for _, cq := range []*CQ{a.SendCQ, a.RecvCQ} {
		if cq != nil && cq.b != b {
			return nil, fmt.Errorf("bonding: new VI: %w: CQ of another bond", vi.ErrCQ)
		}
	}
	v := &VI{
		b: b, attrs: a, maxTransfer: o.MaxTransfer, maxSegs: o.MaxSegments - 1,
		maxBlocks: maxBlocks(o),
		sq:        descriptors.NewQueue(a.QueueDepth),
		rq:        descriptors.NewQueue(a.QueueDepth),
		ss:        make([]sendState, a.QueueDepth),
		rs:        make([]recvState, a.QueueDepth),
		handles:   make(map[descriptors.MemHandle]*peerRegion),
	}
	v.stopCtx, v.stopCancel = context.WithCancel(context.Background())
	v.stopCancel()
	v.words = (v.maxBlocks + 63) / 64
	v.bits = make([]uint64, v.words*a.QueueDepth)
	v.ctl.init(2*a.QueueDepth + len(b.rails)*o.RailSlots)
	v.sendWake, v.recvWake = make(chan struct{}, 1), make(chan struct{}, 1)
	v.railWake = make([]chan struct{}, len(b.rails))
	for r := range v.railWake {
		v.railWake[r] = make(chan struct{}, 1)
	}
	for r, p := range b.rails {
		rl, err := v.newRail(r, p, tags[r])
		if err != nil {
			v.destroyRails()
			return nil, fmt.Errorf("bonding: new VI: rail %d: %w", r, err)
		}
		v.rails = append(v.rails, rl)
	}
	for _, cq := range []*CQ{a.SendCQ, a.RecvCQ} {
		if cq != nil {
			if err := cq.attach(v, a.QueueDepth); err != nil {
				v.destroyRails()
				return nil, fmt.Errorf("bonding: new VI: %w", err)
			}
		}
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		v.Close()
		return nil, ErrClosed
	}
	b.vis[v] = struct{}{}
	b.mu.Unlock()
	return v, nil
}

// The rail rate EWMA: a sample is the bytes a busy rail completed in at
// least rateWindow and rateMinBytes; each moves the estimate by rateGain.
const (
	rateWindow   = int64(200 * time.Microsecond)
	rateMinBytes = 64 << 10
	rateGain     = 0.25
	// rateMaxWindow: a longer window measured a stall, not a rate.
	rateMaxWindow = int64(50 * time.Millisecond)
)

// maxBlocks bounds the blocks of one eager message: start cuts a message
// into one block per live rail or into BlockSize blocks.
func maxBlocks(o Options) int {
	return max(maxRails, (o.MaxTransfer+o.BlockSize-1)/o.BlockSize)
}

func (v *VI) newRail(r int, p *vi.Provider, tag vi.PTag) (*rail, error) {
	o := v.b.opts
	s := o.RailSlots
	rl := &rail{idx: r, ptag: tag, slots: make([]slot, s), rds: make([]descriptors.Descriptor, s), parked: make([]*descriptors.Descriptor, 0, s), rate: 1}
	cq, err := p.NewCQ(2 * s)
	if err != nil {
		return nil, err
	}
	rl.cq = cq
	rl.v, err = p.NewVI(vi.Attributes{Reliability: vi.ReliableReception, PTag: tag,
		EnableRDMAWrite: v.attrs.EnableRDMAWrite, SendCQ: cq, RecvCQ: cq, QueueDepth: s})
	if err != nil {
		cq.Close()
		rl.cq = nil
		return nil, err
	}
	// Rails are appended only when complete; clean up this one on failure.
	fail := func(err error) (*rail, error) {
		rl.destroy(p)
		return nil, err
	}
	const hdrSlot = hdrLen + ctlCap
	rl.hdrArea = make([]byte, s*hdrSlot)
	if rl.hdrH, err = p.RegisterMemory(rl.hdrArea, tag, 0); err != nil {
		return fail(err)
	}
	rl.hdrRegd = true
	bufLen := hdrLen + max(o.BlockSize, ctlCap)
	rl.recvArea = make([]byte, s*bufLen)
	if rl.recvH, err = p.RegisterMemory(rl.recvArea, tag, 0); err != nil {
		return fail(err)
	}
	rl.recvRegd = true
	for i := range rl.slots {
		sl := &rl.slots[i]
		sl.hdr = rl.hdrArea[i*hdrSlot : (i+1)*hdrSlot : (i+1)*hdrSlot]
		sl.d.Segments = make([]descriptors.Segment, 0, o.MaxSegments)
	}
	for i := range rl.rds {
		d := &rl.rds[i]
		d.Segments = []descriptors.Segment{{Buf: rl.recvArea[i*bufLen : (i+1)*bufLen : (i+1)*bufLen], Handle: rl.recvH}}
		if err := rl.v.PostRecv(d); err != nil {
			return fail(err)
		}
	}
	return rl, nil
}

// destroy closes the rail VI and CQ and deregisters its buffers.
func (rl *rail) destroy(p *vi.Provider) {
	if rl.v != nil {
		rl.v.Close()
	}
	if rl.cq != nil {
		rl.cq.Close()
	}
	if rl.hdrRegd {
		p.DeregisterMemory(rl.hdrH)
	}
	if rl.recvRegd {
		p.DeregisterMemory(rl.recvH)
	}
}

func (v *VI) destroyRails() {
	for r, rl := range v.rails {
		rl.destroy(v.b.rails[r])
	}
}

// Attributes returns the VI's attributes.
func (v *VI) Attributes() Attributes { return v.attrs }

// Bond returns the bond the VI belongs to.
func (v *VI) Bond() *Bond { return v.b }

// State returns the VI's state.
func (v *VI) State() State {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.state
}

// Err returns why the VI is in the Error state, or nil.
func (v *VI) Err() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// Stats returns the VI's counters.
func (v *VI) Stats() VIStats {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.stats
	s.Sleeps, s.DeviceSleeps = v.sleeps.Load(), v.deviceSleeps.Load()
	s.Rails = make([]RailStats, len(v.rails))
	for i, rl := range v.rails {
		s.Rails[i] = rl.stats
		s.Rails[i].Live = rl.live
		s.Rails[i].Rate = rl.rate * 1e9
	}
	return s
}

// RailVI returns rail r's VI, for its counters.
func (v *VI) RailVI(r int) *vi.VI { return v.rails[r].v }

// ---- posting ----

// acquire checks that every non-empty segment lies in a bond region of the
// VI's tag and holds the regions until release.
func (v *VI) acquire(d *descriptors.Descriptor) error {
	b := v.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	for i := range d.Segments {
		s := &d.Segments[i]
		if len(s.Buf) == 0 {
			continue
		}
		rg := b.lookup(s.Handle)
		if rg == nil || rg.ptag != v.attrs.PTag || !rg.r0.Contains(s.Buf) {
			releaseSegs(b, d.Segments[:i])
			return descriptors.ErrProtection
		}
		rg.inUse.Add(1)
	}
	return nil
}

func (v *VI) release(d *descriptors.Descriptor) {
	v.b.mu.RLock()
	releaseSegs(v.b, d.Segments)
	v.b.mu.RUnlock()
}

func releaseSegs(b *Bond, segs []descriptors.Segment) {
	for i := range segs {
		if len(segs[i].Buf) == 0 {
			continue
		}
		if rg := b.lookup(segs[i].Handle); rg != nil {
			rg.inUse.Add(-1)
		}
	}
}

func (v *VI) limits() descriptors.Limits {
	return descriptors.Limits{MaxSegments: v.maxSegs, MaxTransfer: v.maxTransfer}
}

// PostSend posts d on the send queue. Sends and RDMA writes (with or
// without immediate data) are supported; RDMA reads are not. The VI must be
// Connected, or in the Error state, where d completes at once as flushed.
// Segments name bond memory handles; an RDMA write's address segment names
// a bond handle of the peer.
func (v *VI) PostSend(d *descriptors.Descriptor) error {
	d.Reset()
	if err := d.CheckFormat(v.limits(), false); err != nil {
		d.Status = descriptors.StatusDone | descriptors.StatusFormat
		return fmt.Errorf("bonding: post send: %w", err)
	}
	if d.Control.Op == descriptors.OpRDMARead {
		d.Status = descriptors.StatusDone | descriptors.StatusFormat
		return fmt.Errorf("bonding: post send: %w: RDMA read is not supported on a bond", descriptors.ErrFormat)
	}
	if err := v.acquire(d); err != nil {
		d.Status = descriptors.StatusDone | descriptors.StatusProtection
		return fmt.Errorf("bonding: post send: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.state != Connected && v.state != Error {
		v.release(d)
		if v.state == closedVI {
			return fmt.Errorf("bonding: post send: %w", ErrClosed)
		}
		return fmt.Errorf("bonding: post send: %w: %v", ErrState, v.state)
	}
	pos, err := v.sq.Push(d)
	if err != nil {
		v.release(d)
		return fmt.Errorf("bonding: post send: %w", err)
	}
	v.ss[v.sq.Slot(pos)] = sendState{}
	if v.state == Error {
		st := &v.ss[v.sq.Slot(pos)]
		st.started, st.done, st.status = true, true, descriptors.StatusFlushed
		v.sqStart = v.sq.Back()
		v.publish()
		return nil
	}
	v.schedule()
	return nil
}

// PostRecv posts d on the receive queue. Receives may be posted in any
// state but closed; each is a credit the peer may use for one message.
func (v *VI) PostRecv(d *descriptors.Descriptor) error {
	d.Reset()
	if err := d.CheckFormat(descriptors.Limits{MaxSegments: v.maxSegs + 1, MaxTransfer: v.maxTransfer}, true); err != nil {
		d.Status = descriptors.StatusDone | descriptors.StatusFormat
		return fmt.Errorf("bonding: post recv: %w", err)
	}
	if err := v.acquire(d); err != nil {
		d.Status = descriptors.StatusDone | descriptors.StatusProtection
		return fmt.Errorf("bonding: post recv: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.state == closedVI {
		v.release(d)
		return fmt.Errorf("bonding: post recv: %w", ErrClosed)
	}
	pos, err := v.rq.Push(d)
	if err != nil {
		v.release(d)
		return fmt.Errorf("bonding: post recv: %w", err)
	}
	v.rs[v.rq.Slot(pos)] = recvState{capacity: d.TotalLength()}
	if v.state == Error {
		v.flushRecvs()
		v.publish()
		return nil
	}
	// A peer that used up its credit learns of this receive at once;
	// otherwise the credit rides on the next message or progress.
	if v.state == Connected && v.announced == v.hiSeen {
		v.maybeCredit()
		v.schedule()
	}
	return nil
}

// ---- completion ----

func (v *VI) popLocked(recv bool) *descriptors.Descriptor {
	if recv {
		if v.rq.Front() < v.rqNext {
			return v.rq.Pop()
		}
		return nil
	}
	if v.sq.Front() < v.sqReap {
		return v.sq.Pop()
	}
	return nil
}

// SendDone returns the oldest send descriptor if it has completed, after
// making progress. It never blocks.
func (v *VI) SendDone() (*descriptors.Descriptor, bool) { return v.done(false) }

// RecvDone returns the oldest receive descriptor if it has completed, after
// making progress. It never blocks.
func (v *VI) RecvDone() (*descriptors.Descriptor, bool) { return v.done(true) }

func (v *VI) done(recv bool) (*descriptors.Descriptor, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if d := v.popLocked(recv); d != nil {
		return d, true
	}
	v.polls.Add(1)
	v.progressLocked()
	d := v.popLocked(recv)
	return d, d != nil
}

// SendWait waits for the oldest send descriptor to complete and returns it.
// It fails when ctx ends, and at once when the queue is empty and the VI
// is not connected.
func (v *VI) SendWait(ctx context.Context) (*descriptors.Descriptor, error) {
	return v.waitQ(ctx, false)
}

// RecvWait waits for the oldest receive descriptor to complete and returns
// it. It fails when ctx ends, and at once when the queue is empty and the
// VI is not connected.
func (v *VI) RecvWait(ctx context.Context) (*descriptors.Descriptor, error) {
	return v.waitQ(ctx, true)
}

func (v *VI) waitQ(ctx context.Context, recv bool) (*descriptors.Descriptor, error) {
	var start int64
	spinning := false
	var sl sleeper
	defer func() {
		if spinning {
			v.doneSpinning(false)
		}
		sl.disarm(v.b)
	}()
	for {
		v.mu.Lock()
		d := v.popLocked(recv)
		if d == nil {
			v.progressLocked()
			d = v.popLocked(recv)
		}
		var stuck error
		if d == nil {
			q := v.sq
			if recv {
				q = v.rq
			}
			if q.Len() == 0 {
				stuck = v.stuckErr()
			}
		}
		v.mu.Unlock()
		if d != nil {
			return d, nil
		}
		if stuck != nil {
			return nil, fmt.Errorf("bonding: wait: %w", stuck)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("bonding: wait: %w", err)
		}
		now := v.b.now()
		if start == 0 {
			start = now
		}
		if sp := v.b.opts.SpinTime; sp > 0 && now-start < int64(sp) {
			if !spinning {
				spinning = true
				v.pollers.Add(1)
			}
			// Let the other goroutines of this P run between polls: a
			// goroutine readied by our progress (a peer's, in the same
			// process, or the user's) would otherwise wait for the spin
			// to end, and a waiter would often wait for that very one.
			if !v.b.opts.NoYield {
				runtime.Gosched()
			}
			continue
		}
		// About to block (counted first, so that a spinner that stops
		// meanwhile sees it): the rail goroutines must take over. Armed,
		// the wait looks once more before it sleeps, so that nothing
		// published before publishers could see it is missed.
		if !sl.armed {
			v.sleepers.Add(1)
			v.mu.Lock()
			r := v.blockRail()
			v.mu.Unlock()
			sl.arm(v.b, r, v, nil)
			if spinning {
				spinning = false
				v.doneSpinning(true)
			}
			continue
		}
		wake := v.sendWake
		if recv {
			wake = v.recvWake
		}
		sl.sleep(ctx, v.b, &v.timers, wake)
		sl.disarm(v.b)
		v.sleepers.Add(-1)
		start = 0
	}
}

// blockRail is the rail whose device a blocking waiter sleeps in: the
// first live one, which carries the peer's small messages; -1 when none
// is. v.mu is held.
func (v *VI) blockRail() int {
	for r, rl := range v.rails {
		if rl.live && !rl.failed {
			return r
		}
	}
	return -1
}

// sleeper is a waiter about to block. Armed on a rail, it is counted in
// Bond.blocked, so that publishers interrupt that rail's device; it then
// sleeps in the device itself (vi.Provider.Block), where a frame of the
// rail wakes its thread directly, rather than on a wake channel, which a
// rail goroutine, itself woken first, would signal. It sleeps on the
// channel when the device is taken (a rail goroutine or the provider's
// background goroutine holds it) or cannot be interrupted.
//
// The rail goroutines of the VIs it waits for stay parked on that rail
// while it sleeps there (VI.blockedOn): it takes their frames off the rail
// itself when it wakes. Other VIs' rail goroutines carry on.
type sleeper struct {
	armed bool
	rail  int
	vi    *VI   // a VI wait's VI, or nil
	vis   []*VI // a CQ wait's VIs
}

// arm counts the sleeper for rail (none when -1) and the VI v or the VIs
// vis it waits for.
func (s *sleeper) arm(b *Bond, rail int, v *VI, vis []*VI) {
	s.armed, s.rail, s.vi, s.vis = true, rail, v, vis
	s.count(b, 1)
}

func (s *sleeper) disarm(b *Bond) {
	if s.armed {
		s.count(b, -1)
	}
	s.armed, s.vi, s.vis = false, nil, nil
}

func (s *sleeper) count(b *Bond, n int32) {
	if s.rail < 0 {
		return
	}
	if s.vi != nil {
		s.vi.blockedOn[s.rail].Add(n)
	}
	for _, v := range s.vis {
		v.blockedOn[s.rail].Add(n)
	}
	b.blocked[s.rail].Add(n)
}

func (s *sleeper) sleep(ctx context.Context, b *Bond, timers *timerPool, wake chan struct{}) {
	s.note(false)
	if s.rail >= 0 {
		dl := time.Now().Add(maxSleep)
		if d, ok := ctx.Deadline(); ok && d.Before(dl) {
			dl = d
		}
		if b.rails[s.rail].Block(dl) {
			s.note(true)
			return
		}
	}
	timers.sleep(ctx, wake)
}

// note counts a sleep (in the device) on every VI the sleeper waits for.
func (s *sleeper) note(device bool) {
	if s.vi != nil {
		s.vi.noteSleep(device)
	}
	for _, v := range s.vis {
		v.noteSleep(device)
	}
}

func (v *VI) noteSleep(device bool) {
	if device {
		v.deviceSleeps.Add(1)
	} else {
		v.sleeps.Add(1)
	}
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

// ---- progress ----

// progressLocked takes the rails' completions, re-sends the work of failed
// rails, posts new work and publishes completed descriptors. v.mu is held.
func (v *VI) progressLocked() {
	// Rails connected before the bond is established keep their messages
	// queued until it is.
	if v.state != Connected {
		return
	}
	v.round++
	all := v.round%quietPollEvery == 0
	first := true
	for r, rl := range v.rails {
		// A poll costs a system call on most drivers, so a round polls
		// only the rails that may have something: the first live one,
		// which carries the peer's small messages, those with work in
		// flight or recent completions, and every rail each
		// quietPollEvery rounds (striped blocks, control, timers).
		poll := all || rl.n > 0 || v.round-rl.activeRound < hotRounds
		if first && rl.live && !rl.failed {
			poll, first = true, false
		}
		if poll && v.reap(r) {
			rl.activeRound = v.round
		}
	}
	v.checkRails()
	v.maybeCredit()
	v.schedule()
}

// Rail polling: a rail is polled every round while it is hot (a completion
// in the last hotRounds rounds), and otherwise every quietPollEvery rounds.
const (
	hotRounds      = 64
	quietPollEvery = 8
)

// reap makes progress on rail r, handles every rail descriptor that
// completed and reports whether there was any. It polls the rail through
// its CQ at most once (a spinning waiter calls it over and over, and the
// poll is on the latency path of every message), then drains what is
// there. Every completed rail descriptor leaves an entry in the CQ, and
// an entry sends reap to drain the queue it names: a descriptor drained
// along with another one's entry (or taken back by resetRail) leaves a
// stale entry behind, which costs a pop. Whoever else takes an entry, the
// rail goroutine, drains both of the rail's queues right after.
func (v *VI) reap(r int) (found bool) {
	rl := v.rails[r]
	// One pass over the device; what it found is drained without more
	// passes (each costs the rail's locks, a ring check and a flush).
	c, ok := rl.cq.Done()
	for ok {
		found = true
		if c.Recv {
			v.drainRecvs(rl)
		} else {
			v.drainSends(rl)
		}
		c, ok = rl.cq.Ready()
	}
	return found
}

// drainRail handles every completed descriptor of rail rl's queues and
// returns how many there were.
func (v *VI) drainRail(rl *rail) int {
	return v.drainRecvs(rl) + v.drainSends(rl)
}

func (v *VI) drainRecvs(rl *rail) int {
	n := 0
	for {
		d, ok := rl.v.RecvReady()
		if !ok {
			return n
		}
		v.onRailRecv(rl, d)
		n++
	}
}

func (v *VI) drainSends(rl *rail) int {
	n := 0
	for {
		d, ok := rl.v.SendReady()
		if !ok {
			return n
		}
		v.onRailSend(rl, d)
		n++
	}
}

// onRailSend handles the completion of the oldest rail send.
func (v *VI) onRailSend(rl *rail, d *descriptors.Descriptor) {
	if rl.n == 0 {
		return // cannot happen: every rail send has a slot
	}
	s := &rl.slots[rl.head]
	rl.head = (rl.head + 1) % len(rl.slots)
	rl.n--
	rl.inflight -= s.w.n
	w := s.w
	if d.Status.Failed() {
		if d.Status&descriptors.StatusRDMAProtection != 0 && w.pos >= v.sqReap {
			v.failLocked(fmt.Errorf("rail %d: %w", rl.idx, descriptors.ErrRDMAProtection), w.pos, descriptors.StatusRDMAProtection, false)
			return
		}
		if v.state == Connected {
			// Every message carries our credit, and this one may not
			// have arrived: the peer surely knows only the credit it
			// used, so announce it again.
			v.announced = v.hiSeen
			// The rail broke: the work goes to the other rails.
			if w.kind != kindCredit && (w.kind == kindQuery || w.kind == kindReply || w.pos >= v.sqReap) {
				v.ctl.pushFront(w)
				v.stats.Resent++
			}
			if w.kind == kindCredit {
				v.creditQueued = false
			}
			if rl.live {
				rl.failed = true
			}
		}
		return
	}
	rl.stats.Sent++
	rl.stats.SentBytes += uint64(w.n)
	now := v.b.now()
	// Throughput: bytes completed over a window of time during which the
	// rail was never idle (post starts a window on an idle rail). Single
	// completions are no good samples: a rail CQ is reaped in batches.
	rl.winBytes += w.n
	if dt := now - rl.winStart; dt >= rateWindow && rl.winBytes >= rateMinBytes {
		sample := float64(rl.winBytes) / float64(dt)
		if dt > rateMaxWindow {
			// A stall (loss repaired by a timeout, a rail failing), not
			// the rail's speed: no sample.
		} else if rl.samples == 0 {
			rl.rate = sample
		} else {
			rl.rate += (sample - rl.rate) * rateGain
		}
		rl.samples++
		rl.winStart, rl.winBytes = now, 0
	}
	rl.lastDone = now
	if w.kind == kindCredit || w.kind == kindQuery || w.kind == kindReply || w.pos < v.sqReap {
		return
	}
	st := &v.ss[v.sq.Slot(w.pos)]
	switch w.kind {
	case kindData:
		st.left--
	case kindRDMA:
		st.left -= w.n
		if st.left == 0 && v.sq.At(w.pos).Control.Immediate && !st.noticeSent {
			st.noticeSent = true
			v.ctl.pushBack(work{kind: kindNotice, pos: w.pos})
			return
		}
	case kindNotice:
	}
	if st.left == 0 && (w.kind == kindNotice || !v.sq.At(w.pos).Control.Immediate || !st.rdma) {
		st.done = true
		v.publish()
	}
}

// onRailRecv handles a rail receive and posts its buffer again.
func (v *VI) onRailRecv(rl *rail, d *descriptors.Descriptor) {
	if !d.Status.Failed() {
		buf := d.Segments[0].Buf[:d.Length]
		var h header
		if err := parseHeader(buf, &h); err != nil {
			v.stats.Refused++
		} else {
			rl.stats.Received++
			rl.stats.ReceivedBytes += uint64(h.length)
			v.onMessage(&h, buf[hdrLen:])
		}
	}
	v.repost(rl, d)
}

// repost gives a rail receive buffer back to the rail VI. A connected VI,
// or an idle one that reconnects, takes it. One in the Error state would
// flush it at once (and the reap loop would see it again, forever), so it
// is parked until resetRail; the rail is then broken. A closed VI refuses
// it, and it is gone with the VI.
func (v *VI) repost(rl *rail, d *descriptors.Descriptor) {
	if rl.v.State() == vi.Error {
		rl.parked = append(rl.parked, d)
		if rl.live {
			rl.failed = true
		}
		return
	}
	_ = rl.v.PostRecv(d)
}

// onMessage handles one bond message.
func (v *VI) onMessage(h *header, payload []byte) {
	if v.state != Connected {
		return
	}
	if msnLess(v.peerLimit, h.credit) {
		v.peerLimit = h.credit
	}
	switch h.kind {
	case kindData, kindNotice:
		v.place(h, payload)
	case kindQuery:
		v.ctl.pushBack(work{kind: kindReply, aux: h.aux})
	case kindReply:
		pr := v.handles[descriptors.MemHandle(h.aux)]
		if pr == nil || !pr.pending {
			return
		}
		pr.pending = false
		pr.ok = h.flags&flagOK != 0 && int(h.rails) == len(v.rails)
		if pr.ok {
			for i := range v.rails {
				pr.rail[i] = descriptors.MemHandle(replyHandle(payload, i))
			}
		}
	}
}

// place puts a block (or notes a notice) in the receive its message number
// names, dropping what it already has.
func (v *VI) place(h *header, payload []byte) {
	k := h.msn - v.rcvMsn
	if int32(k) < 0 {
		v.stats.Duplicates++
		return
	}
	if uint64(k) >= v.rq.Back()-v.rqNext {
		v.stats.Refused++ // beyond our credit: cannot be
		return
	}
	if !msnLess(h.msn, v.hiSeen) {
		v.hiSeen = h.msn + 1
	}
	pos := v.rqNext + uint64(k)
	slot := v.rq.Slot(pos)
	rs := &v.rs[slot]
	write := h.kind == kindNotice
	if !rs.started {
		n := 1
		if !write && h.total > 0 {
			n = int((uint64(h.total) + uint64(h.aux) - 1) / uint64(h.aux))
		}
		if n > v.maxBlocks {
			v.stats.Refused++
			return
		}
		rs.started, rs.write, rs.msgLen, rs.blockLen, rs.nblocks = true, write, h.total, h.aux, n
		rs.lenErr = !write && int(h.total) > rs.capacity
		clear(v.bits[slot*v.words : slot*v.words+(n+63)/64])
	} else if rs.msgLen != h.total || rs.write != write || (!write && rs.blockLen != h.aux) {
		v.stats.Refused++
		return
	}
	if rs.complete {
		v.stats.Duplicates++
		return
	}
	idx := 0
	if !write && h.total > 0 {
		idx = int(h.offset / h.aux)
	}
	w := &v.bits[slot*v.words+idx/64]
	if *w&(1<<(idx%64)) != 0 {
		v.stats.Duplicates++
		return
	}
	*w |= 1 << (idx % 64)
	if h.flags&flagImm != 0 {
		rs.imm, rs.hasImm = h.imm, true
	}
	if !write && !rs.lenErr {
		scatter(v.rq.At(pos).Segments, int(h.offset), payload)
	}
	rs.got++
	if rs.got == rs.nblocks {
		rs.complete = true
		if rs.lenErr {
			rs.status = descriptors.StatusLength
		}
		v.publish()
	}
}

// scatter copies src into the scatter/gather list at byte offset off.
func scatter(segs []descriptors.Segment, off int, src []byte) {
	for i := range segs {
		if len(src) == 0 {
			return
		}
		b := segs[i].Buf
		if off >= len(b) {
			off -= len(b)
			continue
		}
		k := copy(b[off:], src)
		src = src[k:]
		off = 0
	}
}

func msnLess(a, b uint32) bool { return int32(a-b) < 0 }

// limit is our receive limit: the peer may start messages below it.
func (v *VI) limit() uint32 { return v.rcvMsn + uint32(v.rq.Back()-v.rqNext) }

// maybeCredit queues a credit-only message when the peer is short of
// credit we have not told it about: when what it does not know of is at
// least half of what it could use.
func (v *VI) maybeCredit() {
	if v.state != Connected || v.creditQueued {
		return
	}
	lim := v.limit()
	if lim == v.announced {
		return
	}
	if unann, avail := lim-v.announced, lim-v.hiSeen; 2*uint64(unann) >= uint64(avail) {
		v.creditQueued = true
		v.ctl.pushBack(work{kind: kindCredit})
	}
}

// publish completes, in order, the user descriptors that are done.
func (v *VI) publish() {
	published := false
	for v.sqReap < v.sq.Back() {
		st := &v.ss[v.sq.Slot(v.sqReap)]
		if !st.done {
			break
		}
		d := v.sq.At(v.sqReap)
		v.release(d)
		d.Status = descriptors.StatusDone | st.status
		if st.status == 0 {
			d.Length = st.total
			v.stats.MessagesSent++
		}
		v.sqReap++
		if cq := v.attrs.SendCQ; cq != nil {
			cq.push(v, false)
		}
		signal(v.sendWake)
		published = true
	}
	for v.rqNext < v.rq.Back() {
		rs := &v.rs[v.rq.Slot(v.rqNext)]
		if !rs.complete {
			break
		}
		d := v.rq.At(v.rqNext)
		v.release(d)
		d.Status = descriptors.StatusDone | rs.status
		if rs.status&descriptors.StatusErrorMask == 0 || rs.status&descriptors.StatusLength != 0 {
			d.Length = int(rs.msgLen)
			if rs.hasImm {
				d.Status |= descriptors.StatusImmediate
				d.ImmData = rs.imm
			}
			if rs.write {
				d.Status |= descriptors.StatusRemoteWrite
			}
		}
		if rs.status == 0 {
			v.stats.MessagesReceived++
		}
		v.rqNext++
		v.rcvMsn++
		if cq := v.attrs.RecvCQ; cq != nil {
			cq.push(v, true)
		}
		signal(v.recvWake)
		published = true
	}
	if published {
		v.b.interruptBlocked()
	}
}

// ---- scheduling ----

// schedule posts work on the live rails, one item per rail per round, so
// that a striped message spreads over them and a rail that completes
// faster takes more.
func (v *VI) schedule() {
	if v.state != Connected {
		return
	}
	for {
		posted := false
		for r, rl := range v.rails {
			if !rl.live || rl.failed || rl.n == len(rl.slots) {
				continue
			}
			w, ok := v.nextWork(r)
			if !ok {
				continue
			}
			if v.post(rl, w) {
				posted = true
			}
		}
		if !posted {
			return
		}
	}
}

// nextWork takes the next item rail r should send: control messages and
// re-sends first, then the oldest send with work for the rail, starting
// sends in order as credit and peer handles allow.
func (v *VI) nextWork(r int) (work, bool) {
	if v.ctl.n > 0 {
		w := v.ctl.front()
		if w.kind == kindRDMA && w.n > v.b.opts.RDMAPiece {
			p := work{kind: kindRDMA, pos: w.pos, off: w.off, n: v.b.opts.RDMAPiece}
			w.off += p.n
			w.n -= p.n
			return p, true
		}
		return v.ctl.popFront(), true
	}
	if v.cur[r] < v.sqReap {
		v.cur[r] = v.sqReap
	}
	for pos := v.cur[r]; pos < v.sq.Back(); pos++ {
		if pos == v.sqStart && !v.start(pos) {
			return work{}, false
		}
		st := &v.ss[v.sq.Slot(pos)]
		switch {
		case st.done:
		case !st.rdma && st.blocksOut < st.nblocks:
			off := st.blocksOut * st.blockLen
			st.blocksOut++
			return work{kind: kindData, pos: pos, off: off, n: min(st.blockLen, st.total-off)}, true
		case st.rdma && st.next[r] < st.end[r]:
			n := min(v.b.opts.RDMAPiece, st.end[r]-st.next[r])
			w := work{kind: kindRDMA, pos: pos, off: st.next[r], n: n}
			st.next[r] += n
			return w, true
		}
		if pos == v.cur[r] {
			v.cur[r]++
		}
	}
	return work{}, false
}

// start begins the send at pos: it takes a message number if the send
// consumes a receive (and the peer's credit allows), resolves an RDMA
// write's peer handles, and cuts the send into blocks or rail segments. It
// reports false when the send must wait.
func (v *VI) start(pos uint64) bool {
	d := v.sq.At(pos)
	st := &v.ss[v.sq.Slot(pos)]
	total := d.TotalLength()
	rdma := d.Control.Op == descriptors.OpRDMAWrite
	consumes := !rdma || d.Control.Immediate
	if consumes && !msnLess(v.sndMsn, v.peerLimit) {
		return false
	}
	var pr *peerRegion
	if rdma && total > 0 {
		h := d.Address.Handle
		pr = v.handles[h]
		if pr == nil {
			// The first write to this handle: ask for its rail handles.
			pr = &peerRegion{pending: true}
			v.handles[h] = pr
			v.ctl.pushBack(work{kind: kindQuery, aux: uint32(h)})
			v.stats.Queries++
			return false
		}
		if pr.pending {
			return false
		}
	}
	*st = sendState{started: true, rdma: rdma, consumes: consumes, total: total, peer: pr}
	v.sqStart++
	if rdma && pr != nil && !pr.ok {
		// The peer has no such region for us: as a refused write at
		// reliable delivery, the descriptor reports it.
		st.done, st.status = true, descriptors.StatusRDMAProtection
		v.publish()
		return true
	}
	if consumes {
		st.msn = v.sndMsn
		v.sndMsn++
	}
	if rdma {
		st.left = total
		if total == 0 {
			if d.Control.Immediate {
				st.noticeSent = true
				v.ctl.pushBack(work{kind: kindNotice, pos: pos})
			} else {
				st.done = true
				v.publish()
			}
			return true
		}
		v.split(st, total)
		return true
	}
	// At or above the stripe threshold a message is cut into one block
	// per live rail, or into BlockSize blocks when it is longer than that.
	live := v.liveRails()
	bl := min(total, v.b.opts.BlockSize)
	if total >= v.b.opts.StripeThreshold && live > 1 {
		bl = min(bl, (total+live-1)/live)
	}
	st.blockLen = bl
	st.nblocks = 1
	if total > 0 {
		st.nblocks = (total + bl - 1) / bl
	}
	st.left = st.nblocks
	return true
}

func (v *VI) liveRails() int {
	n := 0
	for _, rl := range v.rails {
		if rl.live && !rl.failed {
			n++
		}
	}
	return n
}

// split gives each live rail one contiguous segment of an RDMA write,
// sized in proportion to the rail's measured throughput.
//
// Every live rail gets at least an eighth of its equal share: a rail whose
// estimate fell low must still carry data, or it would never be measured
// again.
func (v *VI) split(st *sendState, total int) {
	var sum float64
	live, last := 0, -1
	for r, rl := range v.rails {
		if rl.live && !rl.failed {
			sum += rl.rate
			live++
			last = r
		}
	}
	floor := sum / float64(8*max(live, 1))
	wsum := 0.0
	for _, rl := range v.rails {
		if rl.live && !rl.failed {
			wsum += max(rl.rate, floor)
		}
	}
	off := 0
	for r, rl := range v.rails {
		if !rl.live || rl.failed {
			continue
		}
		n := total - off
		if r != last {
			n = int(float64(total) * max(rl.rate, floor) / wsum)
			n = min(total-off, n&^4095)
		}
		st.next[r], st.end[r] = off, off+n
		off += n
	}
}

// railSegs appends the rail-r segments of bytes [off, off+n) of d to dst.
func (v *VI) railSegs(dst []descriptors.Segment, d *descriptors.Descriptor, r, off, n int) []descriptors.Segment {
	b := v.b
	b.mu.RLock()
	for i := range d.Segments {
		if n == 0 {
			break
		}
		s := &d.Segments[i]
		l := len(s.Buf)
		if off >= l {
			off -= l
			continue
		}
		k := min(l-off, n)
		var h descriptors.MemHandle
		if rg := b.lookup(s.Handle); rg != nil {
			h = rg.rail[r]
		}
		dst = append(dst, descriptors.Segment{Buf: s.Buf[off : off+k], Handle: h})
		n -= k
		off = 0
	}
	b.mu.RUnlock()
	return dst
}

// post sends w on rail rl. It reports false, and puts w back, when the rail
// refuses it.
func (v *VI) post(rl *rail, w work) bool {
	s := &rl.slots[(rl.head+rl.n)%len(rl.slots)]
	s.w = w
	s.at = v.b.now()
	if rl.n == 0 {
		// The rail was idle: its rate window starts now.
		rl.winStart, rl.winBytes = s.at, 0
	}
	d := &s.d
	d.Control = descriptors.Control{}
	d.Address = descriptors.AddressSegment{}
	segs := d.Segments[:0]
	if w.kind == kindRDMA {
		ud := v.sq.At(w.pos)
		st := &v.ss[v.sq.Slot(w.pos)]
		d.Control.Op = descriptors.OpRDMAWrite
		d.Address = descriptors.AddressSegment{Handle: st.peer.rail[rl.idx], Offset: ud.Address.Offset + uint64(w.off)}
		segs = v.railSegs(segs, ud, rl.idx, w.off, w.n)
	} else {
		h := header{kind: w.kind, credit: v.limit(), aux: w.aux}
		switch w.kind {
		case kindData, kindNotice:
			ud := v.sq.At(w.pos)
			st := &v.ss[v.sq.Slot(w.pos)]
			h.msn, h.total = st.msn, uint32(st.total)
			if ud.Control.Immediate {
				h.flags |= flagImm
				h.imm = ud.Control.ImmData
			}
			if w.kind == kindData {
				h.offset, h.length, h.aux = uint32(w.off), uint32(w.n), uint32(st.blockLen)
			}
		case kindReply:
			h.rails = uint8(len(v.rails))
			h.length = 4 * uint32(h.rails)
			if v.replyHandles(s.hdr[hdrLen:], descriptors.MemHandle(w.aux)) {
				h.flags |= flagOK
			}
		case kindCredit:
			v.creditQueued = false
			v.stats.Credits++
		}
		putHeader(s.hdr, &h)
		hl := hdrLen
		if w.kind == kindReply {
			hl += int(h.length)
		}
		segs = append(segs, descriptors.Segment{Buf: s.hdr[:hl], Handle: rl.hdrH})
		if w.kind == kindData {
			segs = v.railSegs(segs, v.sq.At(w.pos), rl.idx, w.off, w.n)
		}
		v.announced = h.credit
	}
	d.Segments = segs
	if err := rl.v.PostSend(d); err != nil {
		if w.kind == kindCredit {
			v.creditQueued = true
		}
		v.ctl.pushFront(w)
		rl.failed = true
		return false
	}
	rl.n++
	rl.inflight += w.n
	return true
}

// replyHandles writes the rail handles of our bond handle h into b, and
// reports whether the peer may write the region through this VI.
func (v *VI) replyHandles(b []byte, h descriptors.MemHandle) bool {
	v.b.mu.RLock()
	defer v.b.mu.RUnlock()
	rg := v.b.lookup(h)
	ok := rg != nil && v.attrs.EnableRDMAWrite && rg.ptag == v.attrs.PTag && rg.access&vi.AccessRDMAWrite != 0
	for i := range v.rails {
		var x uint32
		if ok {
			x = uint32(rg.rail[i])
		}
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(x>>24), byte(x>>16), byte(x>>8), byte(x)
	}
	return ok
}

// ---- deque ----

// deque is a growable ring of work items.
type deque struct {
	buf     []work
	head, n int
}

func (q *deque) init(c int) { q.buf = make([]work, max(c, 8)) }

func (q *deque) grow() {
	nb := make([]work, 2*len(q.buf))
	for i := 0; i < q.n; i++ {
		nb[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf, q.head = nb, 0
}

func (q *deque) pushBack(w work) {
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)%len(q.buf)] = w
	q.n++
}

func (q *deque) pushFront(w work) {
	if q.n == len(q.buf) {
		q.grow()
	}
	q.head = (q.head + len(q.buf) - 1) % len(q.buf)
	q.buf[q.head] = w
	q.n++
}

func (q *deque) front() *work { return &q.buf[q.head] }

func (q *deque) popFront() work {
	w := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return w
}

func (q *deque) reset() { q.head, q.n = 0, 0 }
