package reliability

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/ethervia/ethervia/internal/seq"
	"github.com/ethervia/ethervia/nic"
)

// Time is a point on a monotonic clock, in nanoseconds. The state machine
// never reads a clock: every call that needs the time is given it, so tests
// can drive it with a simulated clock.
type Time int64

// Add returns t advanced by d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Reason says why a connection ended. It travels in Disconnect frames.
type Reason uint32

// Reasons.
const (
	ReasonNormal         Reason = 0 // the consumer disconnected
	ReasonLength         Reason = 1 // a receive descriptor was too small
	ReasonRDMAProtection Reason = 2 // an RDMA access was refused
	ReasonTransport      Reason = 3 // the peer stopped answering
	ReasonProtocol       Reason = 4 // a frame broke the protocol
	ReasonNoDescriptor   Reason = 5 // a message arrived with no receive descriptor
	ReasonClosed         Reason = 6 // the provider was closed
	ReasonNoConnection   Reason = 7 // the frame names no connection
)

var reasonNames = [...]string{"disconnected", "receive descriptor too small", "RDMA protection", "transport failure", "protocol violation", "no receive descriptor", "provider closed", "no such connection"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint32(r))
}

// ErrPeerTimeout means nothing valid arrived from the peer for PeerTimeout,
// or a frame went unacknowledged that long.
var ErrPeerTimeout = errors.New("reliability: peer timed out")

// DisconnectError says how a connection ended.
type DisconnectError struct {
	Reason Reason
	Remote bool // the peer ended the connection
	Seq    Seq  // the frame that failed, when HasSeq
	HasSeq bool
}

func (e *DisconnectError) Error() string {
	if !e.Remote && e.Reason == ReasonTransport {
		return ErrPeerTimeout.Error()
	}
	who := "local"
	if e.Remote {
		who = "remote"
	}
	if e.HasSeq {
		return fmt.Sprintf("reliability: %s disconnect: %v (frame %d)", who, e.Reason, e.Seq)
	}
	return fmt.Sprintf("reliability: %s disconnect: %v", who, e.Reason)
}

// Is makes a transport-reason disconnect match ErrPeerTimeout.
func (e *DisconnectError) Is(target error) bool {
	return target == ErrPeerTimeout && e.Reason == ReasonTransport && !e.Remote
}

// Defaults of Config's acknowledgement delay and retransmission floor.
const (
	DefaultAckDelay = 100 * time.Microsecond
	DefaultRTOMin   = time.Millisecond
)

// Config tunes a connection. Zero fields take the defaults.
type Config struct {
	Level Level
	// FrameCap is the size of every frame buffer; required.
	FrameCap int
	// Window is the most unacknowledged frames in flight, rounded up to a
	// power of two (default 256). The effective window is the smaller of this
	// and the peer's RecvWindow.
	Window int
	// RecvWindow is how far beyond the cumulative acknowledgement frames are
	// accepted, rounded up to a power of two (default 256).
	RecvWindow int
	// Retransmission timeout bounds (defaults 5ms initial, 1ms min, 200ms max).
	RTOInit, RTOMin, RTOMax time.Duration
	// AckDelay bounds how long an acknowledgement may wait for a frame to
	// ride on (default 100µs).
	AckDelay time.Duration
	// AckReqDelay lets the acknowledgement that the last frame of a send
	// asks for (FlagAckReq, sent by ReliableReception so that the send can
	// complete) wait this long for a frame of ours to ride on, usually the
	// reply a ping-pong is about to send; zero (the default) sends it at
	// once. RDMA writes and reads, retransmissions and probes are always
	// answered at once.
	AckReqDelay time.Duration
	// AckEvery forces an acknowledgement after this many frames (default
	// RecvWindow/8).
	AckEvery int
	// PeerTimeout breaks the connection when the peer is silent this long or
	// a frame stays unacknowledged this long (default 5s).
	PeerTimeout time.Duration
	// Keepalive is the longest we stay silent (default PeerTimeout/5).
	Keepalive time.Duration
	// ReorderThreshold: a frame is presumed lost once a frame sent this many
	// transmissions after it is acknowledged (default 3).
	ReorderThreshold int
	// TxPool is the number of transmit buffers of an unreliable connection
	// (default 64).
	TxPool int
}

func pow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// WithDefaults returns c with defaults filled in and windows rounded.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Window <= 0 {
		c.Window = 256
	}
	c.Window = pow2(c.Window)
	if c.RecvWindow <= 0 {
		c.RecvWindow = 256
	}
	c.RecvWindow = pow2(c.RecvWindow)
	def(&c.RTOInit, 5*time.Millisecond)
	def(&c.RTOMin, DefaultRTOMin)
	def(&c.RTOMax, 200*time.Millisecond)
	if c.RTOMax < c.RTOMin {
		c.RTOMax = c.RTOMin
	}
	def(&c.AckDelay, DefaultAckDelay)
	if c.AckEvery <= 0 {
		c.AckEvery = max(1, c.RecvWindow/8)
	}
	def(&c.PeerTimeout, 5*time.Second)
	def(&c.Keepalive, c.PeerTimeout/5)
	if c.ReorderThreshold <= 0 {
		c.ReorderThreshold = 3
	}
	if c.TxPool <= 0 {
		c.TxPool = 64
	}
	return c
}

// Endpoint is what both ends agreed on when the connection was made.
type Endpoint struct {
	Local, Remote   [6]byte // MAC addresses
	LocalEP         uint16  // endpoints on the two NICs
	RemoteEP        uint16
	EtherType       uint16
	JobKey          uint32
	LocalVI         uint16
	RemoteVI        uint16
	LocalConnID     uint32 // our nonce: frames for us carry it
	RemoteConnID    uint32 // the peer's nonce: frames we send carry it
	ISN             Seq    // our first sequence number
	PeerISN         Seq    // the peer's first sequence number
	PeerCredit      uint32 // the credit limit the peer advertised
	PeerRecvWindow  int    // the peer's RecvWindow
	InitialRecvCred uint32 // the credit limit we advertised
}

// Verdict is what Input found in a frame; a bit set.
type Verdict uint8

// Verdict bits.
const (
	// Accept: a new sequenced frame. Place its payload, then call Deliver.
	Accept Verdict = 1 << iota
	// Acked: the peer acknowledged frames; SndUna moved and the window opened.
	Acked
	// Credit: the peer's credit limit grew.
	Credit
	// Closed: the peer ended the connection; Err says why.
	Closed
)

// Completion is a message that has fully arrived in order: the last frame of
// a message (FlagLast) that the cumulative acknowledgement point has passed.
type Completion struct {
	Kind  Kind
	Flags Flags
	Aux   uint32 // the frame's Msg field
	Seq   Seq
}

// Frag describes a frame being queued; the connection fills in the
// addressing, sequence and acknowledgement fields.
type Frag struct {
	Kind   Kind
	Flags  Flags // FlagFirst, FlagLast, FlagImm, FlagAckReq, FlagShort
	Length int   // payload bytes, already written at PayloadOffset(Kind, Flags)
	Msg    uint32
	MsgLen uint32
	Offset uint32
	Imm    uint32
	RKey   uint32
	RAddr  uint64
}

// Stats count what a connection did.
type Stats struct {
	FramesSent      uint64 // data frames transmitted, first time
	Retransmits     uint64 // data frames transmitted again
	Timeouts        uint64 // retransmission timeouts
	FastRetransmits uint64 // frames presumed lost from later acknowledgements
	AcksSent        uint64 // stand-alone acknowledgement frames
	Probes          uint64 // credit probes
	FramesAccepted  uint64 // new sequenced frames received
	Duplicates      uint64 // sequenced frames received again
	OutOfWindow     uint64 // sequenced frames beyond the receive window
	StaleAcks       uint64 // acknowledgements of nothing we had sent
	// Idle counts unsequenced frames that changed nothing: keepalives,
	// repeated acknowledgements and replays of old ones.
	Idle uint64
}

// Add returns s plus o, field by field: a VI sums the counters of its
// connections.
func (s Stats) Add(o Stats) Stats {
	s.FramesSent += o.FramesSent
	s.Retransmits += o.Retransmits
	s.Timeouts += o.Timeouts
	s.FastRetransmits += o.FastRetransmits
	s.AcksSent += o.AcksSent
	s.Probes += o.Probes
	s.FramesAccepted += o.FramesAccepted
	s.Duplicates += o.Duplicates
	s.OutOfWindow += o.OutOfWindow
	s.StaleAcks += o.StaleAcks
	s.Idle += o.Idle
	return s
}

type txSlot struct {
	buf    []byte
	n      int
	flags  Flags
	first  Time
	sentAt Time
	txn    uint32
	tries  uint32
	sacked bool
	lost   bool
}

type rxMeta struct {
	kind  Kind
	flags Flags
	aux   uint32
}

// Conn is the reliability state machine of one connection. It is driven by
// Input/Deliver (frames in), Queue (frames to send) and Output (frames out,
// timers); it never blocks, reads no clock and starts no goroutine.
//
// A Conn is not safe for concurrent use. Frames returned by Output stay
// valid, and must not be modified, until the next call to NewFrame or Output.
type Conn struct {
	cfg Config
	ep  Endpoint
	tpl Header // prefix and addressing of frames we send

	closed       bool
	remoteClosed bool
	err          error
	discOwed     bool
	discAt       Time
	discSeq      Seq
	discHas      bool
	reason       Reason

	// send side
	win             int
	slots           []txSlot
	una, sent, nxt  Seq // [una,sent) in flight, [sent,nxt) queued
	lost            int
	txn, ackedTxn   uint32
	srtt, rttvar    time.Duration
	hasRTT          bool
	rto             time.Duration
	backoff         time.Duration
	rtoAt           Time
	msn, peerCredit uint32
	wantCredit      bool
	probe           bool
	probeAt         Time
	probeIvl        time.Duration
	pool            [][]byte
	poolN, poolSent int

	// receive side
	rcvNxt     Seq
	rbits      []uint64
	meta       []rxMeta
	comps      []Completion
	compHead   int
	compN      int
	ooo        int
	ackOwed    int
	ackNow     bool
	ackAt      Time
	echo       uint32 // highest transmission number received
	limit      uint32 // credit limit we advertise
	advertised uint32 // last credit limit sent
	peerMsn    uint32 // one past the highest message number seen
	uTop       Seq
	uBits      uint64

	lastHeard, lastSent Time
	ackBuf              []byte
	stats               Stats
}

// NewConn returns an open connection. now is the time it was established.
func NewConn(cfg Config, ep Endpoint, now Time) (*Conn, error) {
	cfg = cfg.WithDefaults()
	if !cfg.Level.Valid() {
		return nil, fmt.Errorf("reliability: invalid level %v", cfg.Level)
	}
	if cfg.FrameCap < HeaderLen {
		return nil, fmt.Errorf("reliability: frame capacity %d below header length %d", cfg.FrameCap, HeaderLen)
	}
	c := &Conn{cfg: cfg, ep: ep}
	c.tpl = Header{Dst: ep.Remote, Src: ep.Local, DstEP: ep.RemoteEP, SrcEP: ep.LocalEP, EtherType: ep.EtherType, JobKey: ep.JobKey,
		DstVI: ep.RemoteVI, SrcVI: ep.LocalVI, ConnID: ep.RemoteConnID}
	c.win = cfg.Window
	if ep.PeerRecvWindow > 0 && ep.PeerRecvWindow < c.win {
		c.win = pow2(ep.PeerRecvWindow+1) / 2 // largest power of two <= peer window
	}
	if cfg.Level.Reliable() {
		c.slots = make([]txSlot, c.win)
		c.rbits = make([]uint64, (cfg.RecvWindow+63)/64)
		c.meta = make([]rxMeta, cfg.RecvWindow)
		c.comps = make([]Completion, 2*cfg.RecvWindow)
	} else {
		c.pool = make([][]byte, cfg.TxPool)
	}
	c.una, c.sent, c.nxt = ep.ISN, ep.ISN, ep.ISN
	c.rcvNxt = ep.PeerISN
	c.uTop, c.uBits = ep.PeerISN-1, 1
	c.peerCredit = ep.PeerCredit
	c.limit, c.advertised = ep.InitialRecvCred, ep.InitialRecvCred
	c.rto = cfg.RTOInit
	c.lastHeard, c.lastSent = now, now
	c.ackBuf = make([]byte, HeaderLen)
	return c, nil
}

// Config returns the connection's configuration with defaults applied.
func (c *Conn) Config() Config { return c.cfg }

// Endpoint returns what the connection was made with.
func (c *Conn) Endpoint() Endpoint { return c.ep }

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats { return c.stats }

// Err returns why the connection ended, or nil while it is open.
func (c *Conn) Err() error { return c.err }

// IsClosed reports whether the connection has ended.
func (c *Conn) IsClosed() bool { return c.closed }

// SndUna is the oldest unacknowledged sequence number: every frame before it
// has been acknowledged (for ReliableReception: placed at the peer).
func (c *Conn) SndUna() Seq { return c.una }

// SndNxt is the sequence number the next queued frame gets.
func (c *Conn) SndNxt() Seq { return c.nxt }

// RTO is the current retransmission timeout.
func (c *Conn) RTO() time.Duration { return c.rto }

// Window is the effective send window in frames.
func (c *Conn) Window() int { return c.win }

func (c *Conn) slot(s Seq) *txSlot { return &c.slots[int(uint32(s))&(c.win-1)] }

// ---- send side ----

// Room is how many more frames can be queued now.
func (c *Conn) Room() int {
	if c.closed {
		return 0
	}
	if c.cfg.Level.Reliable() {
		return c.win - c.nxt.Sub(c.una)
	}
	if c.poolSent == c.poolN {
		return len(c.pool)
	}
	return len(c.pool) - c.poolN
}

// NewFrame returns a buffer of FrameCap bytes for the next frame, or nil
// when Room is zero. Write the payload at PayloadOffset of the frame's kind
// and flags, then call Queue.
func (c *Conn) NewFrame() []byte {
	if c.closed {
		return nil
	}
	if c.cfg.Level.Reliable() {
		if c.nxt.Sub(c.una) >= c.win {
			return nil
		}
		s := c.slot(c.nxt)
		if s.buf == nil {
			s.buf = make([]byte, c.cfg.FrameCap)
		}
		return s.buf
	}
	if c.poolSent == c.poolN { // everything queued went out: reuse the pool
		c.poolN, c.poolSent = 0, 0
	}
	if c.poolN >= len(c.pool) {
		return nil
	}
	if c.pool[c.poolN] == nil {
		c.pool[c.poolN] = make([]byte, c.cfg.FrameCap)
	}
	return c.pool[c.poolN]
}

// Queue assigns the frame from NewFrame the next sequence number and queues
// it for Output. It returns the sequence number.
func (c *Conn) Queue(frame []byte, f *Frag) Seq {
	h := c.tpl
	h.Kind = f.Kind
	h.Flags = f.Flags
	h.Seq = c.nxt
	h.Length = f.Length
	h.Msg, h.MsgLen, h.Offset, h.Imm, h.RKey, h.RAddr = f.Msg, f.MsgLen, f.Offset, f.Imm, f.RKey, f.RAddr
	l := put(frame, &h)
	seq := c.nxt
	c.nxt++
	if c.cfg.Level.Reliable() {
		s := c.slot(seq)
		s.n = l.payload + f.Length
		s.flags = f.Flags
		s.sacked, s.lost, s.tries, s.txn = false, false, 0, 0
	} else {
		c.poolN++
	}
	return seq
}

// CanSendMessage reports whether the peer has a receive descriptor for one
// more message (a send, or an RDMA write with immediate data).
func (c *Conn) CanSendMessage() bool { return seq.Less(c.msn, c.peerCredit) }

// TakeMessage uses one credit and returns the message's sequence number.
// Call it only when CanSendMessage is true.
func (c *Conn) TakeMessage() uint32 {
	m := c.msn
	c.msn++
	return m
}

// WaitCredit notes that a message is waiting for credit, so the connection
// probes the peer if no credit arrives.
func (c *Conn) WaitCredit(now Time) {
	if c.wantCredit {
		return
	}
	c.wantCredit = true
	c.probeIvl = c.rto
	c.probeAt = now.Add(c.probeIvl)
}

// ---- receive side ----

// SetRecvLimit sets the credit limit advertised to the peer: the peer may
// start messages numbered below limit. It is the next message number to
// complete plus the receive descriptors posted beyond it.
func (c *Conn) SetRecvLimit(now Time, limit uint32) {
	if c.setLimit(limit) {
		c.ackAt = now.Add(c.cfg.AckDelay)
	}
}

// SetRecvLimitClock is SetRecvLimit for a caller whose clock is costly to
// read: now is called only when the acknowledgement timer must be armed.
func (c *Conn) SetRecvLimitClock(now func() Time, limit uint32) {
	if c.setLimit(limit) {
		c.ackAt = now().Add(c.cfg.AckDelay)
	}
}

// setLimit records a new credit limit and reports whether its
// acknowledgement must be timed (one now is set ackNow instead).
func (c *Conn) setLimit(limit uint32) bool {
	if limit == c.limit {
		return false
	}
	c.limit = limit
	if seq.Diff(c.advertised, c.peerMsn) <= 1 {
		c.ackNow = true // the peer may be waiting for this credit
		return false
	}
	return c.ackAt == 0
}

// Input processes the header of a frame that belongs to this connection
// (the caller matched addresses, VI numbers and ConnID and checked the CRC).
// For a new sequenced frame it returns Accept; the caller then places the
// payload and calls Deliver before the next Input, or calls Close if the
// frame cannot be placed.
func (c *Conn) Input(now Time, h *Header) Verdict {
	if c.closed {
		if !c.remoteClosed && h.Kind != KindDisconnect && c.discAt.Add(c.cfg.RTOMin) <= now {
			c.discOwed = true // the peer still talks to us: tell it again
		}
		return 0
	}
	c.lastHeard = now
	var v Verdict
	if h.Flags&FlagAck != 0 && c.cfg.Level.Reliable() {
		v |= c.onAck(now, h.Ack, h.SACK, h.Echo)
	}
	if seq.Less(c.peerCredit, h.Credit) && !seq.Less(c.msn+1<<30, h.Credit) {
		c.peerCredit = h.Credit
		v |= Credit
		if c.wantCredit && c.CanSendMessage() {
			c.wantCredit = false
		}
	}
	if h.Flags&FlagAckReq != 0 {
		c.ackRequested(now, h)
	}
	if h.Kind == KindDisconnect {
		c.closed, c.remoteClosed = true, true
		c.err = &DisconnectError{Reason: Reason(h.Msg), Remote: true, Seq: h.Seq, HasSeq: h.Flags&FlagErrSeq != 0}
		return v | Closed
	}
	if !h.Kind.Sequenced() {
		if v == 0 {
			c.stats.Idle++
		}
		return v
	}
	if c.cfg.Level.Reliable() {
		d := h.Seq.Sub(c.rcvNxt)
		if d < c.cfg.RecvWindow && seq.Less(c.echo, h.Txn) {
			c.echo = h.Txn
		}
		switch {
		case d < 0:
			c.stats.Duplicates++
			c.ackNow = true // our acknowledgement was lost
			return v
		case d >= c.cfg.RecvWindow:
			c.stats.OutOfWindow++
			return v
		case c.rbit(h.Seq):
			c.stats.Duplicates++
			c.ackNow = true
			return v
		}
		return v | Accept
	}
	d := h.Seq.Sub(c.uTop)
	if d <= -64 || (d <= 0 && c.uBits&(1<<uint(-d)) != 0) {
		c.stats.Duplicates++
		return v
	}
	return v | Accept
}

// Deliver records the frame Input accepted as received, after its payload
// was placed. Completions may then be waiting.
func (c *Conn) Deliver(now Time, h *Header) {
	if c.closed {
		return
	}
	c.stats.FramesAccepted++
	if (h.Kind == KindData || h.Kind == KindWrite && h.Flags&FlagImm != 0) && !seq.Less(h.Msg, c.peerMsn) {
		c.peerMsn = h.Msg + 1
	}
	if !c.cfg.Level.Reliable() {
		d := h.Seq.Sub(c.uTop)
		if d > 0 {
			if d >= 64 {
				c.uBits = 1
			} else {
				c.uBits = c.uBits<<uint(d) | 1
			}
			c.uTop = h.Seq
		} else if d > -64 {
			c.uBits |= 1 << uint(-d)
		}
		return
	}
	d := h.Seq.Sub(c.rcvNxt)
	if d < 0 || d >= c.cfg.RecvWindow || c.rbit(h.Seq) {
		return
	}
	i := int(uint32(h.Seq)) & (c.cfg.RecvWindow - 1)
	c.rbits[i>>6] |= 1 << (i & 63)
	c.meta[i] = rxMeta{kind: h.Kind, flags: h.Flags, aux: h.Msg}
	if d > 0 {
		c.ooo++
		c.ackNow = true // tell the sender about the gap
	} else {
		filled := c.ooo > 0
		for first := true; c.rbit(c.rcvNxt); first = false {
			j := int(uint32(c.rcvNxt)) & (c.cfg.RecvWindow - 1)
			c.rbits[j>>6] &^= 1 << (j & 63)
			if m := c.meta[j]; m.flags&FlagLast != 0 || m.kind == KindReadReq {
				c.pushCompletion(Completion{Kind: m.kind, Flags: m.flags, Aux: m.aux, Seq: c.rcvNxt})
			}
			if !first {
				c.ooo--
			}
			c.rcvNxt++
		}
		if filled {
			c.ackNow = true
		}
	}
	c.ackOwed++
	if c.ackOwed >= c.cfg.AckEvery {
		c.ackNow = true
	} else if c.ackAt == 0 {
		c.ackAt = now.Add(c.cfg.AckDelay)
	}
}

// ackRequested answers a frame's FlagAckReq: at once, or for the last
// frame of a send (sent the first time) within AckReqDelay. A send lands
// in a receive the peer's program waits on, which often answers it; an
// RDMA write does not, and its writer usually waits for its completion.
func (c *Conn) ackRequested(now Time, h *Header) {
	if c.cfg.AckReqDelay <= 0 || h.Flags&(FlagLast|FlagRetx) != FlagLast || h.Kind != KindData {
		c.ackNow = true
		return
	}
	if at := now.Add(c.cfg.AckReqDelay); c.ackAt == 0 || at < c.ackAt {
		c.ackAt = at
	}
}

func (c *Conn) rbit(s Seq) bool {
	i := int(uint32(s)) & (c.cfg.RecvWindow - 1)
	return c.rbits[i>>6]&(1<<(i&63)) != 0
}

func (c *Conn) pushCompletion(x Completion) {
	if c.compN == len(c.comps) {
		return // unreachable while the caller drains after each Deliver
	}
	c.comps[(c.compHead+c.compN)%len(c.comps)] = x
	c.compN++
}

// NextCompletion returns the next message that fully arrived in order.
// Drain it after every Deliver. Unreliable connections have none: the caller
// reassembles their messages itself.
func (c *Conn) NextCompletion() (Completion, bool) {
	if c.compN == 0 {
		return Completion{}, false
	}
	x := c.comps[c.compHead]
	c.compHead = (c.compHead + 1) % len(c.comps)
	c.compN--
	return x, true
}

// RcvNxt is the next sequence number expected in order from the peer.
func (c *Conn) RcvNxt() Seq { return c.rcvNxt }

// sack returns the bitmap of frames received beyond rcvNxt: bit i is
// rcvNxt+1+i.
func (c *Conn) sack() uint64 {
	if c.ooo == 0 {
		return 0
	}
	var m uint64
	n := min(64, c.cfg.RecvWindow-1)
	for i := 0; i < n; i++ {
		if c.rbit(c.rcvNxt + 1 + Seq(i)) {
			m |= 1 << i
		}
	}
	return m
}

// onAck applies a cumulative acknowledgement and SACK bitmap.
// echo is the highest transmission number the peer has received: every
// frame transmitted well before that one and still unacknowledged is
// presumed lost (RACK). Unlike the sequence numbers, transmission numbers
// tell a retransmission from the original.
func (c *Conn) onAck(now Time, ack Seq, sack uint64, echo uint32) Verdict {
	if ack.Less(c.una) || c.sent.Less(ack) {
		c.stats.StaleAcks++
		return 0
	}
	var v Verdict
	var newest uint32
	var sample time.Duration = -1
	note := func(s *txSlot) {
		if newest == 0 || seq.Less(newest, s.txn) {
			newest = s.txn
			if s.tries == 1 {
				sample = time.Duration(now - s.sentAt)
			} else {
				sample = -1 // Karn: no sample from a retransmitted frame
			}
		}
	}
	advanced := false
	for c.una != ack {
		s := c.slot(c.una)
		if !s.sacked {
			note(s)
		}
		if s.lost {
			c.lost--
		}
		s.sacked, s.lost = false, false
		c.una++
		advanced = true
	}
	for i := 0; sack != 0 && i < 64; i, sack = i+1, sack>>1 {
		if sack&1 == 0 {
			continue
		}
		q := ack + 1 + Seq(i)
		if !q.Less(c.sent) {
			break
		}
		s := c.slot(q)
		if !s.sacked {
			s.sacked = true
			note(s)
			if s.lost {
				s.lost = false
				c.lost--
			}
		}
	}
	if sample >= 0 {
		c.rttSample(sample)
	}
	if seq.Less(c.ackedTxn, echo) && !seq.Less(c.txn, echo) {
		c.ackedTxn = echo
		k := uint32(c.cfg.ReorderThreshold)
		// Only frames the SACK bitmap covers: beyond it, silence says
		// nothing about arrival.
		end := c.una + 65
		if c.sent.Less(end) {
			end = c.sent
		}
		for q := c.una; q != end; q++ {
			s := c.slot(q)
			if !s.sacked && !s.lost && !seq.Less(c.ackedTxn, s.txn+k) {
				s.lost = true
				c.lost++
				c.stats.FastRetransmits++
			}
		}
	}
	if advanced {
		v |= Acked
		c.backoff = 0
		c.rto = c.computeRTO()
		if c.una == c.sent {
			c.rtoAt = 0
		} else {
			c.rtoAt = now.Add(c.rto)
		}
	}
	return v
}

func (c *Conn) rttSample(r time.Duration) {
	if !c.hasRTT {
		c.srtt, c.rttvar, c.hasRTT = r, r/2, true
	} else {
		d := c.srtt - r
		if d < 0 {
			d = -d
		}
		c.rttvar = (3*c.rttvar + d) / 4
		c.srtt = (7*c.srtt + r) / 8
	}
	if c.backoff == 0 {
		c.rto = c.computeRTO()
	}
}

func (c *Conn) computeRTO() time.Duration {
	if !c.hasRTT {
		return c.cfg.RTOInit
	}
	r := c.srtt + max(4*c.rttvar, 50*time.Microsecond)
	return min(max(r, c.cfg.RTOMin), c.cfg.RTOMax)
}

// ---- output and timers ----

// Close ends the connection from our side: Output then sends one Disconnect
// frame carrying reason. When hasSeq is set, seq names the frame that failed
// and the Disconnect acknowledges only what came before it.
func (c *Conn) Close(now Time, reason Reason, seq Seq, hasSeq bool) {
	if c.closed {
		return
	}
	c.closed = true
	c.reason = reason
	c.discSeq, c.discHas = seq, hasSeq
	c.discOwed = true
	c.err = &DisconnectError{Reason: reason, Seq: seq, HasSeq: hasSeq}
}

// Deadline is when Output must next be called for the timers, or 0 for
// never. Output is also due at once whenever Pending reports true.
func (c *Conn) Deadline() Time {
	if c.closed {
		return 0
	}
	d := c.lastHeard.Add(c.cfg.PeerTimeout)
	d = min(d, c.lastSent.Add(c.cfg.Keepalive))
	if c.rtoAt != 0 {
		d = min(d, c.rtoAt)
	}
	if c.ackAt != 0 {
		d = min(d, c.ackAt)
	}
	if c.wantCredit {
		d = min(d, c.probeAt)
	}
	return d
}

// Pending reports whether Output has frames to send right now.
func (c *Conn) Pending() bool {
	if c.closed {
		return c.discOwed
	}
	return c.ackNow || c.lost > 0 || c.sent != c.nxt || c.probe
}

func (c *Conn) timers(now Time) {
	if now-c.lastHeard >= Time(c.cfg.PeerTimeout) {
		c.Close(now, ReasonTransport, 0, false)
		return
	}
	if c.rtoAt != 0 && now >= c.rtoAt {
		if c.una != c.sent && now-c.slot(c.una).first >= Time(c.cfg.PeerTimeout) {
			c.Close(now, ReasonTransport, 0, false)
			return
		}
		c.stats.Timeouts++
		// Resend only the oldest frame not known to have arrived. Its
		// acknowledgement (it asks for one) carries the SACK bitmap, from
		// which the frames sent after it are judged; a spurious timeout
		// then costs one frame, not a window.
		for q := c.una; q != c.sent; q++ {
			s := c.slot(q)
			if !s.sacked {
				if !s.lost {
					s.lost = true
					c.lost++
				}
				break
			}
		}
		if c.backoff == 0 {
			c.backoff = c.rto
		}
		c.backoff = min(2*c.backoff, c.cfg.RTOMax)
		c.rto = c.backoff
		c.rtoAt = now.Add(c.rto)
	}
	if c.ackAt != 0 && now >= c.ackAt {
		c.ackNow = true
	}
	if now-c.lastSent >= Time(c.cfg.Keepalive) {
		c.ackNow = true
	}
	if c.wantCredit && now >= c.probeAt {
		c.probe = true
		c.probeIvl = min(2*c.probeIvl, c.cfg.Keepalive)
		c.probeAt = now.Add(c.probeIvl)
	}
}

// Output runs the timers and appends the frames to send now to out, at most
// cap(out)-len(out) of them: retransmissions first, then queued frames,
// then a stand-alone acknowledgement if one is owed and no frame carried it.
// more reports that frames are left for another call.
func (c *Conn) Output(now Time, out [][]byte) (frames [][]byte, more bool) {
	if !c.closed {
		c.timers(now)
	}
	if c.closed {
		if c.discOwed && len(out) < cap(out) {
			out = append(out, c.disconnectFrame())
			c.discOwed = false
			c.discAt = now
		}
		return out, c.discOwed
	}
	reliable := c.cfg.Level.Reliable()
	if reliable && c.lost > 0 {
		for q := c.una; q != c.sent && len(out) < cap(out) && c.lost > 0; q++ {
			s := c.slot(q)
			if !s.lost {
				continue
			}
			s.lost = false
			c.lost--
			c.stats.Retransmits++
			out = append(out, c.emit(now, s, FlagRetx|FlagAckReq))
			c.rtoAt = now.Add(c.rto)
		}
	}
	for c.sent != c.nxt && len(out) < cap(out) {
		q := c.sent
		c.sent++
		c.stats.FramesSent++
		if !reliable {
			b := c.pool[c.poolSent]
			c.poolSent++
			out = append(out, c.emitUnreliable(now, b))
			continue
		}
		s := c.slot(q)
		s.first = now
		var extra Flags
		if c.nxt.Sub(c.una) >= c.win && c.sent == c.nxt {
			extra = FlagAckReq // window full: ask for room
		} else if c.cfg.Level == ReliableReception && c.sent == c.nxt {
			extra = FlagAckReq // tail: completions wait for this acknowledgement
		}
		out = append(out, c.emit(now, s, extra))
		if c.rtoAt == 0 {
			c.rtoAt = now.Add(c.rto)
		}
	}
	if now >= c.ackAt && c.ackAt != 0 {
		c.ackNow = true
	}
	if (c.ackNow || c.probe) && len(out) < cap(out) {
		out = append(out, c.ackFrame(now))
	}
	return out, c.Pending()
}

func (c *Conn) ackFields() (Flags, Seq, uint64) {
	if !c.cfg.Level.Reliable() {
		return 0, 0, 0
	}
	return FlagAck, c.rcvNxt, c.sack()
}

func (c *Conn) acked(now Time) {
	c.ackNow, c.ackOwed, c.ackAt = false, 0, 0
	c.advertised = c.limit
	c.lastSent = now
}

func (c *Conn) emit(now Time, s *txSlot, extra Flags) []byte {
	f, ack, sack := c.ackFields()
	c.txn++
	if sack != 0 && s.flags&FlagShort != 0 {
		// No room for the bitmap, and Echo without it would make the peer
		// presume lost what arrived out of order: a stand-alone
		// acknowledgement follows at once and carries both.
		putAck(s.buf[:s.n], s.flags|extra, c.txn, 0, 0, 0, c.limit)
		c.advertised = c.limit
		c.lastSent = now
		c.ackNow = true
	} else {
		putAck(s.buf[:s.n], s.flags|extra|f, c.txn, ack, c.echo, sack, c.limit)
		c.acked(now)
	}
	s.txn = c.txn
	s.tries++
	s.sentAt = now
	return s.buf[:s.n]
}

func (c *Conn) emitUnreliable(now Time, b []byte) []byte {
	n := frameBytes(b)
	putAck(b[:n], Flags(binary.BigEndian.Uint16(b[nic.OffFlags:])), 0, 0, 0, 0, c.limit)
	c.acked(now)
	return b[:n]
}

func (c *Conn) ackFrame(now Time) []byte {
	h := c.tpl
	h.Kind = KindAck
	f, ack, sack := c.ackFields()
	h.Flags = f
	if c.probe {
		h.Flags |= FlagAckReq
		c.probe = false
		c.stats.Probes++
	}
	h.Ack, h.SACK, h.Credit = ack, sack, c.limit
	h.Seq = c.nxt
	if f&FlagAck != 0 {
		h.Echo = c.echo
	}
	Put(c.ackBuf, &h)
	c.acked(now)
	c.stats.AcksSent++
	return c.ackBuf
}

func (c *Conn) disconnectFrame() []byte {
	h := c.tpl
	h.Kind = KindDisconnect
	h.Msg = uint32(c.reason)
	if c.cfg.Level.Reliable() {
		h.Flags = FlagAck
		h.Ack = c.rcvNxt
		if c.discHas && c.discSeq.Less(h.Ack) {
			h.Ack = c.discSeq
		}
	}
	if c.discHas {
		h.Flags |= FlagErrSeq
		h.Seq = c.discSeq
	}
	h.Credit = c.limit
	Put(c.ackBuf, &h)
	return c.ackBuf
}
