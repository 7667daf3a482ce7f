package bonding

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/reliability"
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
	MACs []net.HardwareAddr
	// Endpoint is the peer's endpoint on its NICs, the same on every rail
	// (nic.Config.Endpoint).
	Endpoint      uint16
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
	// Refused counts bond messages dropped as malformed, beyond the
	// credit we gave, or queries beyond what the control queue holds.
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

// VI is a bonded virtual interface: one endpoint of one connection, striped
// over the bond's rails, with a send and a receive work queue used like a
// vi.VI's. It is safe for concurrent use.
type VI struct {
	b *Bond
	// changed says a rail descriptor completed since the last full
	// progress round (see progressLocked); the VI's lock guards it.
	changed     bool
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
	// SendDone; CQ.Done counts its own): a caller that polls in its own
	// loop, as mplite's progress engine does, is a spinner the rail
	// goroutines cannot see in pollers, and they step aside for it too.
	polls atomic.Uint64
	// quiet says the last CQ round left the VI idle (idleLocked), so that
	// CQ rounds skip it until note, which every rail completion signals,
	// or a post clears it; first is then its first live rail.
	quiet atomic.Bool
	note  chan struct{}
	first atomic.Int32
	// counted says the bond's loud count includes this VI while it is not
	// quiet: from the end of NewVI to Close. Under mu.
	counted  bool
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
	v.note = make(chan struct{}, 1)
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
	v.mu.Lock()
	v.counted = true // loud, as it starts
	b.loud.Add(1)
	v.mu.Unlock()
	return v, nil
}

// maxBlocks bounds the blocks of one eager message: start cuts a message
// into one block per live rail or into BlockSize blocks.
func maxBlocks(o Options) int {
	return max(maxRails, (o.MaxTransfer+o.BlockSize-1)/o.BlockSize)
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

// TransportStats sums the reliability counters of the rails' current
// connections: frames sent and resent, timeouts, acknowledgements.
func (v *VI) TransportStats() reliability.Stats {
	v.mu.Lock()
	defer v.mu.Unlock()
	var s reliability.Stats
	for _, rl := range v.rails {
		if rl.v != nil {
			s = s.Add(rl.v.Stats().Stats)
		}
	}
	return s
}

// RailVI returns rail r's VI, for its counters.
func (v *VI) RailVI(r int) *vi.VI { return v.rails[r].v }

// Close destroys the VI, disconnecting it first (aborting a connection
// attempt under way, as Disconnect does), and its rail VIs.
// Descriptors still queued complete as flushed; Done and Wait still return
// them.
func (v *VI) Close() error {
	v.mu.Lock()
	v.setQuiet(false)
	if v.state != closedVI {
		v.abortConnect(ErrClosed)
	}
	if v.state == closedVI {
		v.mu.Unlock()
		return nil
	}
	v.failLocked(errors.New("closed"), 0, 0, true)
	v.state = closedVI
	v.flushRecvs()
	if v.counted {
		v.counted = false
		v.b.loud.Add(-1)
	}
	v.mu.Unlock()
	v.wg.Wait()
	v.destroyRails()
	for _, cq := range []*CQ{v.attrs.SendCQ, v.attrs.RecvCQ} {
		if cq != nil {
			cq.detach(v, v.attrs.QueueDepth)
		}
	}
	v.b.mu.Lock()
	delete(v.b.vis, v)
	v.b.mu.Unlock()
	return nil
}
