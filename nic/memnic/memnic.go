// Package memnic is an in-process Ethernet switch whose ports are nic.Devices.
//
// It is the driver for unit tests and the fallback when the process is not
// root. Faults (loss, duplication, reordering, one-byte corruption, delay and
// jitter) are drawn from a random source per link (sender port, receiver
// port) seeded from the switch seed, so the faults one sender's frames meet
// on their way to one receiver depend only on the seed and on that sender's
// sequence of frames, not on how goroutines interleave.
package memnic

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethervia/ethervia/nic"
)

// Faults are the impairments a port applies to frames delivered to it.
type Faults struct {
	Loss      float64 // probability a frame is dropped
	Duplicate float64 // probability a frame is delivered twice
	Reorder   float64 // probability a frame is held back behind the next one
	Corrupt   float64 // probability one byte at offset >= 14 is flipped
	// Delay is added to every frame; Jitter adds a uniform random extra in
	// [0, Jitter), which also reorders frames.
	Delay, Jitter time.Duration
	// HoldLimit bounds how long a frame held back for reordering waits for a
	// successor before it is delivered anyway. Zero means 200µs.
	HoldLimit time.Duration
}

func (f Faults) validate() error {
	for _, p := range []float64{f.Loss, f.Duplicate, f.Reorder, f.Corrupt} {
		if !(p >= 0 && p <= 1) {
			return fmt.Errorf("memnic: fault probability %v outside [0,1]", p)
		}
	}
	if f.Delay < 0 || f.Jitter < 0 || f.HoldLimit < 0 {
		return fmt.Errorf("memnic: negative delay")
	}
	return nil
}

func (f Faults) holdLimit() time.Duration {
	if f.HoldLimit == 0 {
		return 200 * time.Microsecond
	}
	return f.HoldLimit
}

// PortConfig configures one port.
type PortConfig struct {
	nic.Config
	// MTU defaults to 1500. Up to 65535 is allowed, as on veth.
	MTU int
	// QueueLen bounds the frames waiting at the port; more are dropped and
	// counted in RxDropped. Zero means 4096.
	QueueLen int
	// Faults applied to frames delivered to this port.
	Faults Faults
	// Promiscuous ports see every frame, not only theirs and broadcast.
	Promiscuous bool
	// ShareWith, if set, makes the port another endpoint of that port's
	// NIC: it takes the same MAC, and a unicast frame to that MAC reaches
	// every port that shares it (each keeps the frames for its own
	// nic.Config.Endpoint), as on a real NIC with several AF_PACKET
	// sockets. A frame one of them sends reaches the others too.
	ShareWith *Port
	// MaxMulticast is the number of multicast groups the port can join
	// (nic.Multicaster); zero means nic.DefaultMaxMulticast and a negative
	// value none at all, like a NIC without a multicast filter.
	MaxMulticast int
}

// Switch connects ports. It is safe for concurrent use.
type Switch struct {
	seed uint64

	mu    sync.RWMutex
	ports []*Port
	byMAC map[[6]byte][]*Port // the ports of one MAC: a NIC's endpoints
}

// NewSwitch returns an empty switch whose faults are drawn from seed.
func NewSwitch(seed uint64) *Switch {
	return &Switch{seed: seed, byMAC: make(map[[6]byte][]*Port)}
}

// Counters are what a port's fault stage did.
type Counters struct {
	Delivered, Lost, Duplicated, Reordered, Corrupted uint64
}

// NewPort adds a port with a MAC address derived from its index.
func (s *Switch) NewPort(cfg PortConfig) (*Port, error) {
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	if cfg.MTU < 68 || cfg.MTU > 65535 {
		return nil, fmt.Errorf("memnic: MTU %d outside [68, 65535]", cfg.MTU)
	}
	if cfg.QueueLen == 0 {
		cfg.QueueLen = 4096
	}
	if cfg.QueueLen < 1 {
		return nil, fmt.Errorf("memnic: queue length %d", cfg.QueueLen)
	}
	if err := cfg.Faults.validate(); err != nil {
		return nil, err
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 64
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := len(s.ports)
	p := &Port{
		sw:      s,
		index:   idx,
		cfg:     cfg,
		filter:  cfg.Config.Filter(),
		mac:     [6]byte{0x02, 0x45, 0x56, byte(idx >> 16), byte(idx >> 8), byte(idx)},
		notify:  make(chan struct{}, 1),
		closed:  make(chan struct{}),
		timer:   time.NewTimer(time.Hour),
		faults:  cfg.Faults,
		capBuf:  nic.FrameCap(cfg.MTU),
		queue:   make([]entry, 0, cfg.QueueLen),
		up:      true,
		started: time.Now(),
		mcast:   nic.NewMulticastSet(maxMulticast(cfg.MaxMulticast)),
	}
	p.timer.Stop()
	if o := cfg.ShareWith; o != nil {
		if o.sw != s {
			return nil, fmt.Errorf("memnic: ShareWith names a port of another switch")
		}
		p.mac = o.mac
	}
	s.ports = append(s.ports, p)
	s.byMAC[p.mac] = append(s.byMAC[p.mac], p)
	// One link state per (sender, receiver), seeded from the switch seed and
	// both indices, so each link's fault sequence is independent.
	for _, q := range s.ports {
		q.linkMu.Lock()
		for len(q.links) < len(s.ports) {
			from := len(q.links)
			q.links = append(q.links, &link{rng: rand.New(rand.NewPCG(s.seed, uint64(from)<<32|uint64(q.index)))})
		}
		q.linkMu.Unlock()
	}
	return p, nil
}

// Port returns port i, or nil.
func (s *Switch) Port(i int) *Port {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i < 0 || i >= len(s.ports) {
		return nil
	}
	return s.ports[i]
}

// link is the fault state of frames from one sender to one receiver.
type link struct {
	rng     *rand.Rand
	held    []byte // a frame held back for reordering
	heldLen int
	heldDue int64
}

type entry struct {
	due int64 // nanoseconds since the port started; 0 = now
	seq uint64
	buf []byte
	n   int
}

// Port is one switch port; it implements nic.Device.
type Port struct {
	sw     *Switch
	index  int
	cfg    PortConfig
	filter nic.Filter
	mac    [6]byte
	capBuf int

	notify    chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
	waitMu    sync.Mutex
	timer     *time.Timer
	started   time.Time

	linkMu sync.Mutex
	links  []*link // by sender index

	mu     sync.Mutex // guards everything below
	faults Faults
	up     bool
	queue  []entry // min-heap by (due, seq)
	seq    uint64
	free   [][]byte
	held   int // frames held in links for reordering

	txFrames, txBytes, txErrors      atomic.Uint64
	rxFrames, rxBytes, rxDropped     atomic.Uint64
	recvCalls                        atomic.Uint64
	rxForeign                        atomic.Uint64
	delivered, lost, dup, reord, cor atomic.Uint64

	mcMu  sync.Mutex
	mcast *nic.MulticastSet // joined groups (multicast.go)
}

var _ nic.Device = (*Port)(nil)

// Index is the port's number on its switch.
func (p *Port) Index() int { return p.index }

// SetFaults changes the impairments of frames delivered to the port.
func (p *Port) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	p.mu.Lock()
	p.faults = f
	p.mu.Unlock()
	return nil
}

// SetUp takes the port's link up or down. A down port neither sends nor
// receives; frames to it are lost and counted.
func (p *Port) SetUp(up bool) {
	p.mu.Lock()
	p.up = up
	p.mu.Unlock()
}

// Counters returns what the fault stage did to frames delivered to the port.
func (p *Port) Counters() Counters {
	return Counters{
		Delivered:  p.delivered.Load(),
		Lost:       p.lost.Load(),
		Duplicated: p.dup.Load(),
		Reordered:  p.reord.Load(),
		Corrupted:  p.cor.Load(),
	}
}

// MTU implements nic.Device.
func (p *Port) MTU() int { return p.cfg.MTU }

// HardwareAddr implements nic.Device. It returns a fresh copy.
func (p *Port) HardwareAddr() net.HardwareAddr {
	return net.HardwareAddr(append([]byte(nil), p.mac[:]...))
}

// BatchSize implements nic.Device.
func (p *Port) BatchSize() int { return p.cfg.BatchSize }

// Stats implements nic.Device.
func (p *Port) Stats() nic.Stats {
	return nic.Stats{
		TxFrames: p.txFrames.Load(), TxBytes: p.txBytes.Load(), TxErrors: p.txErrors.Load(),
		RxFrames: p.rxFrames.Load(), RxBytes: p.rxBytes.Load(),
		RxDropped: p.rxDropped.Load(), RxForeign: p.rxForeign.Load(),
	}
}

func (p *Port) isClosed() bool {
	select {
	case <-p.closed:
		return true
	default:
		return false
	}
}

// Switch is the switch the port is on.
func (p *Port) Switch() *Switch { return p.sw }

// Close implements nic.Device.
func (p *Port) Close() error {
	p.closeOnce.Do(func() {
		close(p.closed)
		p.sw.mu.Lock()
		same := p.sw.byMAC[p.mac]
		for i, q := range same {
			if q == p {
				same = append(same[:i:i], same[i+1:]...)
				break
			}
		}
		if len(same) == 0 {
			delete(p.sw.byMAC, p.mac)
		} else {
			p.sw.byMAC[p.mac] = same
		}
		p.sw.mu.Unlock()
	})
	return nil
}

// Send implements nic.Device. Frames go to the port owning the destination
// MAC; broadcast frames go to every other port, multicast frames to the
// other ports that joined the group (and promiscuous ones).
func (p *Port) Send(frames [][]byte) (int, error) {
	if p.isClosed() {
		return 0, fmt.Errorf("memnic port %d: send: %w", p.index, nic.ErrClosed)
	}
	p.mu.Lock()
	up := p.up
	p.mu.Unlock()
	s := p.sw
	s.mu.RLock()
	defer s.mu.RUnlock()
	for i, f := range frames {
		if len(f) < nic.EthHeaderLen || len(f) > p.capBuf {
			p.txErrors.Add(1)
			return i, fmt.Errorf("memnic port %d: send %d bytes: %w", p.index, len(f), nic.ErrFrameSize)
		}
		p.txFrames.Add(1)
		p.txBytes.Add(uint64(len(f)))
		if !up {
			continue
		}
		if f[0]&1 != 0 { // group address: flood broadcast, filter multicast
			bcast := isBroadcast(f)
			for _, q := range s.ports {
				if q != p && (bcast || q.cfg.Promiscuous || q.joined(f)) {
					q.deliver(p.index, f)
				}
			}
			continue
		}
		var dst [6]byte
		copy(dst[:], f[:6])
		for _, q := range s.byMAC[dst] {
			if q != p {
				q.deliver(p.index, f)
			}
		}
		for _, q := range s.ports {
			if q.cfg.Promiscuous && q != p && q.mac != dst {
				q.deliver(p.index, f)
			}
		}
	}
	return len(frames), nil
}

func (p *Port) now() int64 { return int64(time.Since(p.started)) }

// deliver runs frame f from port `from` through this port's faults and
// queues it. The switch read lock is held.
func (p *Port) deliver(from int, f []byte) {
	if p.isClosed() {
		return
	}
	p.linkMu.Lock()
	l := p.links[from]
	p.linkMu.Unlock()

	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.up {
		p.lost.Add(1)
		return
	}
	ft := p.faults
	// Draw every decision in a fixed order so the sequence depends only on
	// the seed and the frames.
	rng := l.rng
	lose := ft.Loss > 0 && rng.Float64() < ft.Loss
	dup := ft.Duplicate > 0 && rng.Float64() < ft.Duplicate
	reorder := ft.Reorder > 0 && rng.Float64() < ft.Reorder
	corrupt := ft.Corrupt > 0 && rng.Float64() < ft.Corrupt
	var corruptAt int
	var corruptMask byte
	if corrupt {
		corruptAt = nic.EthHeaderLen
		if len(f) > nic.EthHeaderLen {
			corruptAt += rng.IntN(len(f) - nic.EthHeaderLen)
		}
		corruptMask = byte(1 + rng.IntN(255))
	}
	var jitter time.Duration
	if ft.Jitter > 0 {
		jitter = time.Duration(rng.Int64N(int64(ft.Jitter)))
	}
	if lose {
		p.lost.Add(1)
		return
	}
	var due int64
	if d := ft.Delay + jitter; d > 0 {
		due = p.now() + int64(d)
	}
	copies := 1
	if dup {
		copies = 2
		p.dup.Add(1)
	}
	for c := 0; c < copies; c++ {
		buf := p.getBuf()
		n := copy(buf, f)
		if corrupt && corruptAt < n {
			buf[corruptAt] ^= corruptMask
			if c == 0 {
				p.cor.Add(1)
			}
		}
		if reorder && c == 0 && l.held == nil {
			// Hold this frame until the next one on the link passes it.
			l.held, l.heldLen = buf, n
			l.heldDue = p.now() + int64(ft.holdLimit())
			p.held++
			p.reord.Add(1)
			continue
		}
		p.push(entry{due: due, buf: buf, n: n})
		if l.held != nil {
			p.releaseHeld(l, due)
		}
	}
}

func (p *Port) releaseHeld(l *link, due int64) {
	p.push(entry{due: due, buf: l.held, n: l.heldLen})
	l.held = nil
	p.held--
}

func (p *Port) getBuf() []byte {
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		return b
	}
	return make([]byte, p.capBuf)
}

// push queues e, dropping it when the queue is full. p.mu is held.
func (p *Port) push(e entry) {
	if len(p.queue) >= p.cfg.QueueLen {
		p.rxDropped.Add(1)
		p.free = append(p.free, e.buf)
		return
	}
	p.seq++
	e.seq = p.seq
	p.queue = append(p.queue, e)
	p.up_(len(p.queue) - 1)
	p.delivered.Add(1)
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

func less(a, b *entry) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	return a.seq < b.seq
}

func (p *Port) up_(i int) {
	q := p.queue
	for i > 0 {
		parent := (i - 1) / 2
		if !less(&q[i], &q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

func (p *Port) pop() entry {
	q := p.queue
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = entry{}
	q = q[:last]
	p.queue = q
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q) && less(&q[l], &q[m]) {
			m = l
		}
		if r < len(q) && less(&q[r], &q[m]) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	return top
}

// flushHeld releases held frames whose hold limit has passed. p.mu is held.
func (p *Port) flushHeld(now int64) {
	if p.held == 0 {
		return
	}
	p.linkMu.Lock()
	defer p.linkMu.Unlock()
	for _, l := range p.links {
		if l.held != nil && l.heldDue <= now {
			p.releaseHeld(l, 0)
		}
	}
}

// nextEvent returns the earliest time something becomes receivable, or -1.
// p.mu is held.
func (p *Port) nextEvent() int64 {
	next := int64(-1)
	if len(p.queue) > 0 {
		next = p.queue[0].due
	}
	if p.held > 0 {
		p.linkMu.Lock()
		for _, l := range p.links {
			if l.held != nil && (next < 0 || l.heldDue < next) {
				next = l.heldDue
			}
		}
		p.linkMu.Unlock()
	}
	return next
}

// RecvCalls returns how many times Recv was called: the polls a driver
// would make as system calls, for tests of how often layers above poll.
func (p *Port) RecvCalls() uint64 { return p.recvCalls.Load() }

// Recv implements nic.Device.
func (p *Port) Recv(bufs [][]byte, lens []int) (int, error) {
	p.recvCalls.Add(1)
	if p.isClosed() {
		return 0, fmt.Errorf("memnic port %d: recv: %w", p.index, nic.ErrClosed)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var now int64
	if p.held > 0 || (len(p.queue) > 0 && p.queue[0].due > 0) {
		now = p.now()
		p.flushHeld(now)
	}
	n := 0
	for n < len(bufs) && len(p.queue) > 0 && p.queue[0].due <= now {
		e := p.pop()
		frame := e.buf[:e.n]
		if err := p.filter.Check(frame); err != nil {
			if !errors.Is(err, nic.ErrEndpoint) { // a neighbour's frame is not foreign
				p.rxForeign.Add(1)
			}
			p.free = append(p.free, e.buf)
			continue
		}
		c := copy(bufs[n], frame)
		p.free = append(p.free, e.buf)
		if c < e.n {
			p.rxDropped.Add(1) // truncated: the caller's buffer is too small
			continue
		}
		lens[n] = c
		p.rxFrames.Add(1)
		p.rxBytes.Add(uint64(c))
		n++
	}
	return n, nil
}

// Interrupt implements nic.Interrupter: Wait already returns on the
// arrival token, which this hands out without a frame.
func (p *Port) Interrupt() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// Wait implements nic.Device.
func (p *Port) Wait(deadline time.Time) error {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	for {
		if p.isClosed() {
			return fmt.Errorf("memnic port %d: wait: %w", p.index, nic.ErrClosed)
		}
		p.mu.Lock()
		next := p.nextEvent()
		now := p.now()
		p.mu.Unlock()
		if next >= 0 && next <= now {
			return nil
		}
		var wake time.Duration = -1
		if next >= 0 {
			wake = time.Duration(next - now)
		}
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				// The bare sentinel: a timeout is routine for a progress
				// engine and must not allocate.
				return nic.ErrTimeout
			}
			if wake < 0 || d < wake {
				wake = d
			}
		}
		var timeC <-chan time.Time
		if wake >= 0 {
			p.timer.Reset(wake)
			timeC = p.timer.C
		}
		select {
		case <-p.notify:
			p.timer.Stop()
			return nil
		case <-p.closed:
			p.timer.Stop()
		case <-timeC:
		}
	}
}
