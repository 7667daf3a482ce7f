// Package vi is Ethervia's VI provider: the VI Architecture's programming
// model (VIs with send and receive work queues, completion queues,
// client/server and peer-to-peer connections, registered memory, RDMA) on
// a raw-Ethernet nic.Device, with the three VIA reliability levels.
//
// A Provider is one opened device. VIs are created on it, connected to VIs
// on other providers, and fed descriptors (package descriptors) with
// PostSend and PostRecv. Descriptors complete in FIFO order per queue;
// consumers poll (SendDone, RecvDone, CQ.Done) or block (SendWait,
// RecvWait, CQ.Wait).
//
// Progress is made by the callers of Done and Wait: each call receives a
// batch of frames from the device, processes it and sends what is due.
// Wait spins for Options.SpinTime, then blocks on the device's readiness
// with a deadline at the next timer. One background goroutine per provider
// runs the timers (retransmission, delayed acknowledgement, keepalive) and
// makes progress while nobody polls. Posting, fragmenting, receiving and
// completing allocate nothing.
//
// All types are safe for concurrent use. A provider serialises its work
// under one lock, which is also what keeps the device's one-sender,
// one-receiver rule.
package vi

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/internal/ctxdl"
	"github.com/ethervia/ethervia/internal/timerpool"
	"github.com/ethervia/ethervia/internal/wake"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/rdma"
	"github.com/ethervia/ethervia/reliability"
)

const never = reliability.Time(math.MaxInt64)

// Provider is an opened NIC (VipOpenNic): it owns the VIs, CQs, protection
// tags and memory registrations made on it.
type Provider struct {
	dev      nic.Device
	opts     Options
	mac      [6]byte
	ep       uint16 // the device's endpoint on its NIC (Options.Endpoint)
	mtu      int
	frameCap int
	frameLen int // the longest frame: MTU plus Ethernet header
	epoch    time.Time

	mu      sync.Mutex // guards everything below, and device Send/Recv
	closed  bool
	devErr  error
	vis     []*VI // by VI number; 0 is the provider itself
	freeIDs []uint16
	dirty   []*VI
	// idlePolls counts a caller's polls since the clock was last read
	// (pollLocked).
	idlePolls    int
	nextDeadline reliability.Time
	rxBufs       [][]byte
	rxLens       []int
	tx           [][]byte
	mgmt         [][]byte // buffers for connection management frames
	mgmtN        int
	mem          *rdma.Table
	ptags        PTag // the last protection tag handed out
	rng          *rand.Rand
	connReqs     []*ConnRequest
	connWake     chan struct{}
	connQueued   atomic.Uint64 // requests queued for ConnectWait, ever
	lastNoConn   reliability.Time
	stats        Stats
	dgram        [256 - MinDatagramKind]*DatagramPort // open datagram ports by kind (datagram.go)

	pollMu     sync.Mutex       // the poll token: its holder may block in dev.Wait
	threadDev  nic.ThreadWaiter // dev, if it can wait holding its thread; else nil
	spinners   atomic.Int32
	lastActive atomic.Int64 // when a caller last stopped polling
	blockers   atomic.Int32 // callers in Block, or blocked in wait
	// received counts frames taken from the device, for pollers that
	// decide whether traffic still flows (Received).
	received atomic.Uint64
	done     chan struct{}
	bgDone   chan struct{}
	timers   timerpool.Pool // idle timers of blocked waiters, kept for reuse
}

// Stats count what a provider did.
type Stats struct {
	FramesIn, FramesOut uint64
	BadFrames           uint64 // failed Parse: short, bad CRC, unknown kind
	Strays              uint64 // valid frames that match no connection
	SendErrors          uint64 // frames the device refused
	RecvErrors          uint64 // device receive calls that failed (not closed)
	// RepeatedRequests counts connection requests already known (a lost
	// answer, or a replay): answered again, never queued twice.
	// RefusedRequests counts requests dropped because the queue of
	// unanswered ones is full of taken ones, their source already has
	// maxReqsPerSource waiting, or they carry no nonce.
	RepeatedRequests, RefusedRequests uint64
	// EvictedRequests counts waiting requests dropped from a full queue
	// to make room for a newer one (their senders repeat them).
	EvictedRequests uint64
	// Memory is the registration table's state and its refused remote
	// accesses by reason (no region, protection tag, right, bounds).
	Memory rdma.Stats
	// RDMADisabled counts RDMA frames refused because the target VI has
	// not enabled the operation (or, for reads, is unreliable).
	RDMADisabled uint64
}

// RDMARefused is the number of remote accesses refused for any reason.
func (s Stats) RDMARefused() uint64 { return s.Memory.Refused() + s.RDMADisabled }

// Open opens a provider over dev. The provider does not own dev: close the
// provider before the device.
func Open(dev nic.Device, opts Options) (*Provider, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	mac, ok := nic.MAC(dev.HardwareAddr())
	if !ok {
		return nil, fmt.Errorf("vi: device address %v is not a MAC-48", dev.HardwareAddr())
	}
	mtu := dev.MTU()
	if mtu+nic.EthHeaderLen-reliability.HeaderLen < 64 {
		return nil, fmt.Errorf("vi: MTU %d too small", mtu)
	}
	batch := o.BatchSize
	if batch <= 0 {
		batch = dev.BatchSize()
	}
	if batch <= 0 {
		batch = 32
	}
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("vi: seed: %w", err)
	}
	p := &Provider{
		dev:          dev,
		opts:         o,
		mac:          mac,
		ep:           opts.Endpoint,
		mtu:          mtu,
		frameCap:     nic.FrameCap(mtu),
		frameLen:     mtu + nic.EthHeaderLen,
		epoch:        time.Now(),
		vis:          make([]*VI, 1, 16),
		nextDeadline: never,
		rxBufs:       make([][]byte, batch),
		rxLens:       make([]int, batch),
		tx:           make([][]byte, 0, batch),
		mgmt:         make([][]byte, 16),
		mem:          rdma.NewTable(rdma.Limits{MaxRegions: o.MaxRegions, MaxBytes: o.MaxRegisteredBytes}),
		rng:          rand.New(rand.NewChaCha8(seed)),
		connWake:     make(chan struct{}, 1),
		done:         make(chan struct{}),
		bgDone:       make(chan struct{}),
	}
	for i := range p.rxBufs {
		p.rxBufs[i] = make([]byte, nic.RecvBufLen(mtu))
	}
	for i := range p.mgmt {
		p.mgmt[i] = make([]byte, reliability.HeaderLen)
	}
	p.threadDev, _ = dev.(nic.ThreadWaiter)
	go p.background()
	return p, nil
}

// Attributes returns the provider's attributes (VipQueryNic).
func (p *Provider) Attributes() ProviderAttributes {
	return ProviderAttributes{
		HardwareAddr:       append([]byte(nil), p.mac[:]...),
		MTU:                p.mtu,
		MaxPayload:         min(p.frameLen-reliability.ShortHeaderLen, maxPayloadLen),
		MaxTransfer:        p.opts.MaxTransfer,
		QueueDepth:         p.opts.QueueDepth,
		MaxSegments:        p.opts.MaxSegments,
		MaxVIs:             p.opts.MaxVIs,
		Reliability:        Unreliable | ReliableDelivery | ReliableReception,
		RDMAWrite:          true,
		RDMARead:           true,
		MaxRegions:         p.opts.MaxRegions,
		MaxRegisteredBytes: p.opts.MaxRegisteredBytes,
	}
}

// Stats returns the provider's counters.
func (p *Provider) Stats() Stats {
	p.mu.Lock()
	s := p.stats
	p.mu.Unlock()
	s.Memory = p.mem.Stats()
	return s
}

// Received returns the number of frames the provider has taken from its
// device. It is one atomic load, without the provider's lock: a caller that
// polls can tell from it whether traffic still flows, and keep polling
// through a long transfer whose completions come only at its end (an RDMA
// write's data frames complete nothing on the target's queues).
func (p *Provider) Received() uint64 { return p.received.Load() }

// Close disconnects and destroys every VI, wakes every waiter and stops the
// background goroutine. It does not close the device. It is idempotent.
func (p *Provider) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	now := p.now()
	for _, v := range p.vis {
		if v != nil {
			v.closeLocked(now, reliability.ReasonClosed)
		}
	}
	p.sendTx()
	p.closed = true
	close(p.done)
	wake.Signal(p.connWake)
	p.mu.Unlock()
	<-p.bgDone
	return nil
}

func (p *Provider) now() reliability.Time { return reliability.Time(time.Since(p.epoch)) + 1 }

func (p *Provider) wallClock(t reliability.Time) time.Time { return p.epoch.Add(time.Duration(t - 1)) }

// ---- progress ----

// progressLocked receives what is waiting, processes it, runs due timers
// and sends what is due. p.mu is held.
func (p *Provider) progressLocked() { p.progressAt(p.now()) }

// progressAt is progressLocked at time now.
func (p *Provider) progressAt(now reliability.Time) { p.progressRounds(now, progressBatches) }

// progressBatches is how many batches one progress pass takes in before it
// runs the timers: a poller comes back soon for the rest.
const progressBatches = 4

// progressRounds is progress at now taking in up to rounds batches,
// acknowledging between them.
func (p *Provider) progressRounds(now reliability.Time, rounds int) {
	if p.closed || p.devErr != nil {
		return
	}
	n, err := p.dev.Recv(p.rxBufs, p.rxLens)
	p.progressFrom(now, n, err, rounds)
}

// progressFrom is progressRounds whose first batch, n frames (or err), the
// caller took from the device already.
func (p *Provider) progressFrom(now reliability.Time, n int, err error, rounds int) {
	for round := 0; round < rounds; round++ {
		if round > 0 {
			n, err = p.dev.Recv(p.rxBufs, p.rxLens)
		}
		if err != nil {
			if errors.Is(err, nic.ErrClosed) {
				p.deviceFailed(now, err)
				return
			}
			p.stats.RecvErrors++ // transient: lost frames are repaired
		}
		if n > 0 {
			p.received.Add(uint64(n))
		}
		for i := 0; i < n; i++ {
			p.stats.FramesIn++
			p.input(now, p.rxBufs[i][:p.rxLens[i]])
		}
		if n < len(p.rxBufs) {
			break
		}
		p.flush(now) // acknowledge and refill windows between batches
	}
	if now >= p.nextDeadline {
		p.runTimers(now)
	}
	p.flush(now)
}

// drainLocked is progress that takes in what the device holds, up to
// drainBatches batches: a background goroutine that only naps
// (BackgroundNaps) finds up to PollGrace of frames waiting, and leaving all
// but progressBatches of them let a 128-rank Alltoall of 64 KiB overflow
// the socket buffers until peers timed out. p.mu is held.
func (p *Provider) drainLocked() { p.progressRounds(p.now(), drainBatches) }

// drainBatches bounds drainLocked against a sender that never stops.
const drainBatches = 256

// pollLocked is progress made by a consumer's Done call; it tells the
// background goroutine that someone polls.
func (p *Provider) pollLocked() (frames int) {
	if p.closed || p.devErr != nil {
		return 0
	}
	// A clock read costs about 30 ns here, half of an empty poll, and a
	// spinning waiter polls over and over: a poll that finds nothing to
	// take in and nothing to send reads it only every idleClockEvery-th
	// time, for the timers and the mark that a caller polls. A frame that
	// arrives is taken in at a fresh reading.
	n, err := p.dev.Recv(p.rxBufs, p.rxLens)
	if p.idlePolls++; n == 0 && err == nil && p.idlePolls < idleClockEvery && len(p.dirty) == 0 && len(p.tx) == 0 {
		return 0
	}
	p.idlePolls = 0
	now := p.now()
	p.lastActive.Store(int64(now))
	p.progressFrom(now, n, err, progressBatches)
	return n
}

// idleClockEvery is how many empty polls pass between clock reads: timers
// run at most that many polls (a few hundred nanoseconds) late.
const idleClockEvery = 8

// markDirty queues v for service in the next flush.
func (p *Provider) markDirty(v *VI) {
	if !v.dirty {
		v.dirty = true
		p.dirty = append(p.dirty, v)
	}
}

// flush services every dirty VI and sends the batch.
func (p *Provider) flush(now reliability.Time) {
	for i := 0; i < len(p.dirty); i++ {
		v := p.dirty[i]
		v.dirty = false
		p.service(v, now)
	}
	clear(p.dirty)
	p.dirty = p.dirty[:0]
	p.sendTx()
}

// runTimers services every VI whose deadline has passed and recomputes the
// next deadline.
func (p *Provider) runTimers(now reliability.Time) {
	next := never
	for _, v := range p.vis {
		if v == nil || v.conn == nil {
			continue
		}
		d := v.conn.Deadline()
		if d != 0 && d <= now {
			p.service(v, now)
			d = 0
			if v.conn != nil {
				d = v.conn.Deadline()
			}
		}
		if d != 0 && d < next {
			next = d
		}
	}
	p.nextDeadline = next
}

func (p *Provider) noteDeadline(d reliability.Time) {
	if d != 0 && d < p.nextDeadline {
		p.nextDeadline = d
	}
}

// sendTx sends the transmit batch.
func (p *Provider) sendTx() {
	if len(p.tx) == 0 {
		return
	}
	if p.devErr == nil {
		n, err := p.dev.Send(p.tx)
		p.stats.FramesOut += uint64(n)
		if err != nil {
			p.stats.SendErrors += uint64(len(p.tx) - n)
			if errors.Is(err, nic.ErrClosed) {
				p.deviceFailed(p.now(), err)
			}
		}
	}
	clear(p.tx)
	p.tx = p.tx[:0]
	p.mgmtN = 0
}

// appendTx queues a frame, sending the batch first when it is full.
func (p *Provider) appendTx(f []byte) {
	if len(p.tx) == cap(p.tx) {
		p.sendTx()
	}
	p.tx = append(p.tx, f)
}

// mgmtBuf returns a buffer for a connection management frame; they are
// recycled when the batch is sent.
func (p *Provider) mgmtBuf() []byte {
	if p.mgmtN == len(p.mgmt) {
		p.sendTx()
	}
	b := p.mgmt[p.mgmtN]
	p.mgmtN++
	return b
}

// deviceFailed breaks every connection when the device is gone.
func (p *Provider) deviceFailed(now reliability.Time, err error) {
	if p.devErr != nil {
		return
	}
	p.devErr = err
	for _, v := range p.vis {
		if v != nil && (v.state == Connected || v.state == Pending) {
			v.fail(now, failure{cause: fmt.Errorf("device: %w", err), reason: reliability.ReasonTransport,
				firstStatus: descriptors.StatusTransport})
		}
	}
	clear(p.tx)
	p.tx = p.tx[:0]
}

// input demultiplexes one received frame.
func (p *Provider) input(now reliability.Time, frame []byte) {
	if len(frame) > nic.OffKind && frame[nic.OffKind] >= MinDatagramKind {
		p.datagramInput(frame)
		return
	}
	var h reliability.Header
	if err := reliability.Parse(frame, &h); err != nil {
		p.stats.BadFrames++
		return
	}
	if h.Dst != p.mac || h.DstEP != p.ep || h.JobKey != p.opts.JobKey || h.EtherType != p.opts.EtherType {
		p.stats.Strays++
		return
	}
	switch h.Kind {
	case reliability.KindConnReq:
		p.onConnReq(now, &h)
		return
	case reliability.KindPeerReq:
		p.onPeerReq(now, &h)
		return
	}
	var v *VI
	if int(h.DstVI) < len(p.vis) && h.DstVI != 0 {
		v = p.vis[h.DstVI]
	}
	if v == nil {
		p.stats.Strays++
		return
	}
	switch h.Kind {
	case reliability.KindConnAccept, reliability.KindConnReject:
		v.onConnReply(now, &h)
		return
	}
	if v.conn == nil || h.Source() != v.remoteAddr || h.SrcVI != v.remoteVI || h.ConnID != v.localConnID {
		p.stats.Strays++
		p.noConnection(now, &h, v)
		return
	}
	v.onFrame(now, &h, frame)
}

// noConnection answers a frame that matches no connection with a
// Disconnect when it can name the sender's connection, at most once a
// millisecond, so a peer that lost us learns it before its peer timeout:
// an Accept for a request we gave up on carries the acceptor's nonce, and a
// frame of the VI's previous connection matches what the VI remembers.
func (p *Provider) noConnection(now reliability.Time, h *reliability.Header, v *VI) {
	if v == nil || h.Kind == reliability.KindDisconnect || h.Kind == reliability.KindConnReject ||
		now-p.lastNoConn < reliability.Time(time.Millisecond) {
		return
	}
	r := reliability.Header{Dst: h.Src, Src: p.mac, DstEP: h.SrcEP, SrcEP: p.ep, EtherType: p.opts.EtherType, JobKey: p.opts.JobKey,
		Kind: reliability.KindDisconnect, DstVI: h.SrcVI, SrcVI: h.DstVI, Msg: uint32(reliability.ReasonNoConnection)}
	switch {
	case h.Kind == reliability.KindConnAccept:
		r.ConnID = h.Imm
	case v.prev.remoteConnID != 0 && h.Source() == v.prev.remoteAddr && h.SrcVI == v.prev.remoteVI && h.ConnID == v.prev.localConnID:
		r.ConnID = v.prev.remoteConnID
		r.Msg = uint32(v.prev.reason)
	default:
		return
	}
	p.lastNoConn = now
	b := p.mgmtBuf()
	reliability.Put(b, &r)
	p.appendTx(b)
}

// ---- waiting ----

// wait returns once ready (called with p.mu held) reports true, driving
// progress meanwhile: it spins for SpinTime, then blocks on the device (if
// it can take the poll token) or on wake, never past the next timer.
func (p *Provider) wait(ctx context.Context, wake chan struct{}, ready func() bool) error {
	spinning, blocking := false, false
	var spinUntil reliability.Time
	defer func() {
		if spinning {
			p.stopSpin()
		}
		if blocking {
			p.blockers.Add(-1)
		}
	}()
	for {
		p.mu.Lock()
		if ready() {
			p.mu.Unlock()
			return nil
		}
		if p.closed {
			p.mu.Unlock()
			return ErrClosed
		}
		p.progressLocked()
		if ready() {
			p.mu.Unlock()
			return nil
		}
		next := p.nextDeadline
		p.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
		now := p.now()
		if p.opts.SpinTime > 0 {
			if spinUntil == 0 {
				spinUntil = now.Add(p.opts.SpinTime)
				spinning = true
				p.spinners.Add(1)
			}
			if now < spinUntil {
				continue
			}
		}
		if spinning {
			spinning = false
			p.stopSpin()
		}
		if !blocking {
			// The background goroutine leaves the device to a blocked
			// waiter, which runs the timers itself. Taking it over, it
			// made every wake-up pass through a second thread (and,
			// with many ranks per CPU, its blocking system call kept
			// the process's sysmon busy: see nic.ThreadWaiter).
			blocking = true
			p.blockers.Add(1)
		}
		dl := min(next, now.Add(p.opts.MaxBlock))
		if d, ok := ctx.Deadline(); ok {
			if c := reliability.Time(d.Sub(p.epoch)) + 1; c < dl {
				dl = c
			}
		}
		if p.pollMu.TryLock() {
			var err error
			if p.threadDev != nil && ctxdl.HoldsThread(ctx) {
				// Nothing else runs on this P until the wait ends: let
				// what is runnable (a connecting goroutine, say) go first.
				runtime.Gosched()
				err = p.threadDev.WaitThread(p.wallClock(dl)) // see ctxdl.SetHoldThread
			} else {
				err = p.dev.Wait(p.wallClock(dl))
			}
			p.pollMu.Unlock()
			if err != nil && errors.Is(err, nic.ErrClosed) {
				p.mu.Lock()
				p.deviceFailed(p.now(), err)
				p.mu.Unlock()
			}
		} else {
			t := p.timers.Get()
			t.Reset(timeUntil(int64(dl), int64(now)))
			select {
			case <-wake:
			// dl bounds the sleep by ctx's deadline: only a cancel
			// needs the channel (a *ctxdl.Context arms no timer).
			case <-ctxdl.Cancellation(ctx):
			case <-t.C:
			case <-p.done:
			}
			p.timers.Put(t)
		}
		spinUntil = 0
	}
}

// Poll makes progress without waiting: it takes in what the device holds,
// sends what is due and runs the timers, queueing completions on their
// CQs, and reports how many frames its first look at the device found
// (0: the device had nothing). A caller that looks at several CQs of the
// provider polls once and then takes each one's completions with
// CQ.Ready.
func (p *Provider) Poll() (frames int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0
	}
	return p.pollLocked()
}

// Block sleeps in the device until frames may have arrived, Interrupt is
// called, the deadline or the provider's next timer passes, so that a
// caller that drives progress itself (a bond, through CQ.Done) can sleep
// in the kernel, where an arriving frame wakes it directly, instead of
// waiting for a goroutine that another wake-up must run first. It reports
// false at once, without sleeping, when another goroutine holds the device
// (a blocking wait, the background goroutine) or the device cannot be
// interrupted: the caller must then wait some other way. The caller makes
// progress afterwards (CQ.Done); Block only sleeps.
func (p *Provider) Block(deadline time.Time) bool {
	if _, ok := p.dev.(nic.Interrupter); !ok || !p.pollMu.TryLock() {
		return false
	}
	// The background goroutine leaves the device to a blocker, as to a
	// spinner: it polls as soon as it wakes.
	p.blockers.Add(1)
	defer p.blockers.Add(-1)
	p.mu.Lock()
	next := p.nextDeadline
	p.mu.Unlock()
	if next != never {
		if dl := p.wallClock(next); deadline.IsZero() || dl.Before(deadline) {
			deadline = dl
		}
	}
	err := p.dev.Wait(deadline)
	p.pollMu.Unlock()
	p.lastActive.Store(int64(p.now()))
	if err != nil && errors.Is(err, nic.ErrClosed) {
		p.mu.Lock()
		p.deviceFailed(p.now(), err)
		p.mu.Unlock()
	}
	return true
}

// Interrupt ends a Block under way (or the next one) at once. It never
// blocks; on a device that cannot be interrupted it does nothing, and Block
// never sleeps there.
func (p *Provider) Interrupt() {
	if in, ok := p.dev.(nic.Interrupter); ok {
		in.Interrupt()
	}
}

func (p *Provider) stopSpin() {
	p.lastActive.Store(int64(p.now()))
	p.spinners.Add(-1)
}

// background runs timers and progress while nobody polls. While callers
// poll, or have polled lately (bgNap), it leaves the device to them and
// only keeps the timers: waking it for every frame would take a CPU from
// the pollers.
func (p *Provider) background() {
	defer close(p.bgDone)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		default:
		}
		now := p.now()
		last := reliability.Time(p.lastActive.Load())
		spinning := p.spinners.Load() > 0 || p.blockers.Load() > 0
		p.mu.Lock()
		next := p.nextDeadline
		p.mu.Unlock()
		if wait, ok := p.opts.bgNap(now, last, next, spinning); ok || p.opts.BackgroundNaps {
			if !ok {
				wait = p.opts.PollGrace
			}
			t.Reset(wait)
			select {
			case <-t.C:
			case <-p.done:
				return
			}
			p.mu.Lock()
			if !ok {
				p.drainLocked() // nobody polls: empty the device
			} else if p.now() >= p.nextDeadline {
				p.progressLocked()
			}
			p.mu.Unlock()
			continue
		}
		p.pollMu.Lock()
		if p.spinners.Load() > 0 || p.blockers.Load() > 0 {
			// A caller came while we waited for the device: it is
			// theirs (see the blocking waiter in wait).
			p.pollMu.Unlock()
			continue
		}
		p.mu.Lock()
		p.progressLocked()
		next = p.nextDeadline
		failed := p.devErr != nil || p.closed
		p.mu.Unlock()
		if failed {
			p.pollMu.Unlock()
			t.Reset(p.opts.MaxBlock)
			select {
			case <-p.done:
				return
			case <-t.C:
			}
			continue
		}
		dl := min(next, p.now().Add(4*p.opts.MaxBlock))
		if err := p.dev.Wait(p.wallClock(dl)); err != nil && errors.Is(err, nic.ErrClosed) {
			p.mu.Lock()
			p.deviceFailed(p.now(), err)
			p.mu.Unlock()
		}
		p.pollMu.Unlock()
		p.mu.Lock()
		p.progressLocked()
		p.mu.Unlock()
	}
}

// nonce returns a random nonzero 32-bit value. p.mu is held.
func (p *Provider) nonce() uint32 {
	for {
		if n := p.rng.Uint32(); n != 0 {
			return n
		}
	}
}

// bgNap says whether the background goroutine leaves the device to the
// callers, who polled last at last (or are spinning or blocked in it now),
// and if so how long it naps before it looks again; next is when the
// earliest timer is due.
func (o Options) bgNap(now, last, next reliability.Time, spinning bool) (time.Duration, bool) {
	active := max(o.MaxBlock, o.PollGrace)
	if !spinning && now-last >= reliability.Time(active) {
		return 0, false
	}
	wait := timeUntil(int64(next), int64(now))
	if spinning || now-last < reliability.Time(o.PollGrace) {
		// A poller runs the timers as it polls; waking for them (an
		// acknowledgement due in microseconds, say) would only take a
		// CPU from it. Should it stop, they run at most PollGrace late.
		wait = max(wait, o.PollGrace)
	}
	return min(wait, active), true
}
