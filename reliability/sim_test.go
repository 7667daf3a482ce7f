package reliability

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
)

// link is a simulated wire with seeded faults and a fixed delay, driven by a
// simulated clock.
type link struct {
	rng                           *rand.Rand
	loss, dup, reorder, corrupt   float64
	delay                         time.Duration
	down                          bool
	inflight                      []flight
	lost, dups, reords, corrupted int
}

type flight struct {
	at  Time
	buf []byte
}

func (l *link) send(now Time, f []byte) {
	if l.down {
		return
	}
	if l.rng.Float64() < l.loss {
		l.lost++
		return
	}
	n := 1
	if l.rng.Float64() < l.dup {
		n = 2
		l.dups++
	}
	for i := 0; i < n; i++ {
		b := append([]byte(nil), f...)
		if l.rng.Float64() < l.corrupt {
			b[14+l.rng.IntN(len(b)-14)] ^= byte(1 + l.rng.IntN(255))
			l.corrupted++
		}
		at := now.Add(l.delay)
		if l.rng.Float64() < l.reorder {
			at = at.Add(3 * l.delay)
			l.reords++
		}
		l.inflight = append(l.inflight, flight{at, b})
	}
}

// due removes and returns the frames that have arrived by now, in arrival
// order.
func (l *link) due(now Time) [][]byte {
	var out [][]byte
	keep := l.inflight[:0]
	for _, f := range l.inflight {
		if f.at <= now {
			out = append(out, f.buf)
		} else {
			keep = append(keep, f)
		}
	}
	l.inflight = keep
	return out
}

// end is one side of a simulated connection: a Conn plus a toy consumer that
// sends messages made of frames and checks what arrives.
type end struct {
	t        testing.TB
	c        *Conn
	sendMsgs [][]byte // messages to send, in order
	nextMsg  int      // next message to start
	off      int      // bytes of nextMsg already queued
	msgSeq   []Seq    // last sequence number of each message started
	recv     map[uint32][]byte
	got      [][]byte // completed messages, in order
	posted   uint32   // receive credits granted so far
	noGrant  bool     // do not repost receive credit after a completion
	short    bool     // send with the short header (FlagShort)
	shorts   int      // short-header frames received
	verdicts Verdict
}

const simMTU = 1500

func (e *end) pump(now Time) {
	for e.nextMsg < len(e.sendMsgs) {
		m := e.sendMsgs[e.nextMsg]
		if e.off == 0 && !e.c.CanSendMessage() {
			e.c.WaitCredit(now)
			return
		}
		f := e.c.NewFrame()
		if f == nil {
			return
		}
		var msn uint32
		if e.off == 0 {
			msn = e.c.TakeMessage()
			if int(msn) != e.nextMsg {
				e.t.Fatalf("message number %d for message %d", msn, e.nextMsg)
			}
		}
		fr := Frag{Kind: KindData, Msg: uint32(e.nextMsg), MsgLen: uint32(len(m)), Offset: uint32(e.off)}
		if e.short {
			fr.Flags |= FlagShort
		}
		n := copy(f[PayloadOffset(KindData, fr.Flags):simMTU+14], m[e.off:])
		fr.Length = n
		if e.off == 0 {
			fr.Flags |= FlagFirst
		}
		e.off += n
		if e.off == len(m) {
			fr.Flags |= FlagLast
		}
		s := e.c.Queue(f, &fr)
		if e.off == len(m) {
			e.msgSeq = append(e.msgSeq, s)
			e.nextMsg++
			e.off = 0
		}
	}
}

func (e *end) input(now Time, frame []byte) {
	var h Header
	if err := Parse(frame, &h); err != nil {
		return // corrupt: dropped
	}
	if h.Flags&FlagShort != 0 {
		e.shorts++
	}
	v := e.c.Input(now, &h)
	e.verdicts |= v
	if v&Accept != 0 {
		if h.Kind == KindData {
			b := e.recv[h.Msg]
			if b == nil {
				b = make([]byte, h.MsgLen)
				e.recv[h.Msg] = b
			}
			copy(b[h.Offset:], Payload(frame, &h))
		}
		e.c.Deliver(now, &h)
	}
	for {
		x, ok := e.c.NextCompletion()
		if !ok {
			break
		}
		if x.Kind != KindData {
			e.t.Fatalf("completion of kind %v", x.Kind)
		}
		if int(x.Aux) != len(e.got) {
			e.t.Fatalf("message %d completed when %d was next", x.Aux, len(e.got))
		}
		e.got = append(e.got, e.recv[x.Aux])
		delete(e.recv, x.Aux)
		if e.noGrant {
			continue
		}
		e.posted++
		e.c.SetRecvLimit(now, e.posted)
	}
}

type sim struct {
	now    Time
	a, b   *end
	ab, ba *link
	out    [][]byte
}

func newSim(t testing.TB, level Level, seed uint64, credits uint32, tweak func(*Config)) *sim {
	cfg := Config{Level: level, FrameCap: simMTU + 18, Window: 64, RecvWindow: 64,
		PeerTimeout: time.Second, RTOInit: 2 * time.Millisecond, RTOMin: 500 * time.Microsecond}
	if tweak != nil {
		tweak(&cfg)
	}
	now := Time(1)
	ea := Endpoint{Local: [6]byte{2, 0, 0, 0, 0, 1}, Remote: [6]byte{2, 0, 0, 0, 0, 2}, EtherType: nic.DefaultEtherType, JobKey: 9,
		LocalVI: 1, RemoteVI: 2, LocalConnID: 11, RemoteConnID: 22, ISN: 0xfffffff0, PeerISN: 100,
		PeerCredit: credits, PeerRecvWindow: 64, InitialRecvCred: credits}
	eb := Endpoint{Local: ea.Remote, Remote: ea.Local, EtherType: ea.EtherType, JobKey: 9,
		LocalVI: 2, RemoteVI: 1, LocalConnID: 22, RemoteConnID: 11, ISN: 100, PeerISN: 0xfffffff0,
		PeerCredit: credits, PeerRecvWindow: 64, InitialRecvCred: credits}
	ca, err := NewConn(cfg, ea, now)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := NewConn(cfg, eb, now)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	s := &sim{now: now,
		a:   &end{t: t, c: ca, recv: map[uint32][]byte{}, posted: credits},
		b:   &end{t: t, c: cb, recv: map[uint32][]byte{}, posted: credits},
		ab:  &link{rng: rand.New(rand.NewPCG(seed, 2)), delay: 20 * time.Microsecond},
		ba:  &link{rng: rand.New(rand.NewPCG(seed, 3)), delay: 20 * time.Microsecond},
		out: make([][]byte, 0, 16),
	}
	_ = rng
	return s
}

func (s *sim) faults(loss, dup, reorder, corrupt float64) {
	for _, l := range []*link{s.ab, s.ba} {
		l.loss, l.dup, l.reorder, l.corrupt = loss, dup, reorder, corrupt
	}
}

// step advances the clock to the next event and runs both ends once.
func (s *sim) step() {
	next := s.now.Add(time.Millisecond)
	for _, e := range []*end{s.a, s.b} {
		if d := e.c.Deadline(); d != 0 && d < next {
			next = d
		}
	}
	for _, l := range []*link{s.ab, s.ba} {
		for _, f := range l.inflight {
			if f.at < next {
				next = f.at
			}
		}
	}
	if next > s.now {
		s.now = next
	}
	for _, f := range s.ab.due(s.now) {
		s.b.input(s.now, f)
	}
	for _, f := range s.ba.due(s.now) {
		s.a.input(s.now, f)
	}
	for _, p := range []struct {
		e *end
		l *link
	}{{s.a, s.ab}, {s.b, s.ba}} {
		for {
			p.e.pump(s.now)
			var more bool
			s.out, more = p.e.c.Output(s.now, s.out[:0])
			for _, f := range s.out {
				p.l.send(s.now, f)
			}
			if !more && (len(s.out) == 0 || p.e.c.Room() == 0 || p.e.nextMsg == len(p.e.sendMsgs)) {
				break
			}
		}
	}
}

func randomMessages(rng *rand.Rand, n, maxLen int) [][]byte {
	ms := make([][]byte, n)
	for i := range ms {
		m := make([]byte, rng.IntN(maxLen+1))
		for j := range m {
			m[j] = byte(rng.Uint32())
		}
		ms[i] = m
	}
	return ms
}

func (s *sim) runUntil(t testing.TB, limit time.Duration, done func() bool) {
	end := s.now.Add(limit)
	for !done() {
		if s.now > end {
			t.Fatalf("not done after %v simulated: a sent %d/%d got %d/%d; a %+v b %+v",
				limit, s.a.nextMsg, len(s.a.sendMsgs), len(s.b.got), len(s.a.sendMsgs), s.a.c.Stats(), s.b.c.Stats())
		}
		s.step()
	}
}

func checkSame(t testing.TB, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d messages arrived, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("message %d (%d bytes) arrived damaged (%d bytes)", i, len(want[i]), len(got[i]))
		}
	}
}

func TestTransferUnderFaults(t *testing.T) {
	cases := []faultCase{
		{"clean", 0, 0, 0, 0},
		{"loss1", 0.01, 0, 0, 0},
		{"loss10", 0.10, 0, 0, 0},
		{"loss30", 0.30, 0, 0, 0},
		{"dup", 0, 0.2, 0, 0},
		{"reorder", 0, 0, 0.2, 0},
		{"corrupt", 0, 0, 0, 0.1},
		{"everything", 0.1, 0.1, 0.1, 0.1},
	}
	for _, level := range []Level{ReliableDelivery, ReliableReception} {
		for i, c := range cases {
			for _, short := range []bool{false, true} {
				name := fmt.Sprintf("%v/%s", level, c.name)
				if short {
					name += "/short"
				}
				t.Run(name, func(t *testing.T) { transferUnderFaults(t, level, i, c, short) })
			}
		}
	}
}

// faultCase is a link's fault rates.
type faultCase struct {
	name                        string
	loss, dup, reorder, corrupt float64
}

// transferUnderFaults runs case c (number i) of TestTransferUnderFaults,
// with the full or the short header on the data frames.
func transferUnderFaults(t *testing.T, level Level, i int, c faultCase, short bool) {
	s := newSim(t, level, uint64(i+1), 4, nil)
	s.a.short, s.b.short = short, short
	s.faults(c.loss, c.dup, c.reorder, c.corrupt)
	rng := rand.New(rand.NewPCG(uint64(i), 9))
	s.a.sendMsgs = randomMessages(rng, 200, 20000)
	s.b.sendMsgs = randomMessages(rng, 100, 3000)
	s.runUntil(t, 60*time.Second, func() bool {
		return len(s.b.got) == len(s.a.sendMsgs) && len(s.a.got) == len(s.b.sendMsgs)
	})
	checkSame(t, s.b.got, s.a.sendMsgs)
	checkSame(t, s.a.got, s.b.sendMsgs)
	// Everything is acknowledged in the end.
	s.runUntil(t, 10*time.Second, func() bool { return s.a.c.SndUna() == s.a.c.SndNxt() && s.b.c.SndUna() == s.b.c.SndNxt() })
	st := s.a.c.Stats()
	if c.loss > 0 && st.Retransmits == 0 {
		t.Errorf("no retransmissions at %v loss: %+v", c.loss, st)
	}
	if c.loss == 0 && c.corrupt == 0 && c.reorder == 0 && c.dup == 0 && st.Retransmits != 0 {
		t.Errorf("retransmissions on a clean link: %+v", st)
	}
	if s.a.c.Err() != nil || s.b.c.Err() != nil {
		t.Fatalf("connection broke: %v / %v", s.a.c.Err(), s.b.c.Err())
	}
	if got := s.b.shorts > 0; got != short {
		t.Errorf("%d short-header frames arrived; short headers sent: %v", s.b.shorts, short)
	}
}

func TestUnreliableDropsButNeverDuplicates(t *testing.T) {
	s := newSim(t, Unreliable, 7, 1<<20, nil)
	s.faults(0.05, 0.3, 0.2, 0.05)
	rng := rand.New(rand.NewPCG(3, 3))
	s.a.sendMsgs = randomMessages(rng, 300, 1400) // one frame each
	s.b.c.SetRecvLimit(s.now, 1<<20)
	s.runUntil(t, 10*time.Second, func() bool { return s.a.nextMsg == len(s.a.sendMsgs) && len(s.ab.inflight) == 0 })
	// The toy consumer completes only reliable levels through
	// NextCompletion; here count accepted frames instead.
	st := s.b.c.Stats()
	if st.Duplicates == 0 {
		t.Errorf("duplicates were not detected: %+v", st)
	}
	if st.FramesAccepted >= 300 || st.FramesAccepted < 200 {
		t.Errorf("accepted %d of 300 frames at 5%% loss", st.FramesAccepted)
	}
	if s.a.c.Stats().Retransmits != 0 {
		t.Errorf("unreliable connection retransmitted")
	}
}

func TestCreditsBoundMessages(t *testing.T) {
	s := newSim(t, ReliableDelivery, 1, 2, nil)
	s.a.sendMsgs = randomMessages(rand.New(rand.NewPCG(1, 1)), 5, 100)
	// b never grants more: only two messages may go.
	s.b.noGrant = true
	for i := 0; i < 200; i++ {
		s.step()
		if got := len(s.b.got); got > 2 {
			t.Fatalf("%d messages arrived with 2 credits", got)
		}
	}
	if len(s.b.got) != 2 {
		t.Fatalf("%d messages arrived, want 2", len(s.b.got))
	}
}

func TestCreditUpdateLostIsProbed(t *testing.T) {
	s := newSim(t, ReliableDelivery, 5, 1, nil)
	s.a.sendMsgs = randomMessages(rand.New(rand.NewPCG(2, 1)), 20, 10)
	// Lose every frame from b to a for a while: the credit updates vanish.
	s.ba.loss = 1
	for i := 0; i < 50; i++ {
		s.step()
	}
	s.ba.loss = 0
	s.runUntil(t, 5*time.Second, func() bool { return len(s.b.got) == 20 })
	checkSame(t, s.b.got, s.a.sendMsgs)
	if s.a.c.Stats().Probes == 0 {
		t.Errorf("no credit probe was sent")
	}
}

func TestPeerTimeout(t *testing.T) {
	for _, level := range []Level{Unreliable, ReliableDelivery, ReliableReception} {
		s := newSim(t, level, 1, 4, nil)
		s.a.sendMsgs = randomMessages(rand.New(rand.NewPCG(1, 1)), 3, 5000)
		s.runUntil(t, time.Second, func() bool { return len(s.b.got) == 3 || level == Unreliable })
		s.ab.down, s.ba.down = true, true
		start := s.now
		s.runUntil(t, 5*time.Second, func() bool { return s.a.c.IsClosed() && s.b.c.IsClosed() })
		if !errors.Is(s.a.c.Err(), ErrPeerTimeout) {
			t.Fatalf("%v: error %v, want a peer timeout", level, s.a.c.Err())
		}
		if took := time.Duration(s.now - start); took > time.Second+100*time.Millisecond {
			t.Fatalf("%v: peer timeout took %v, configured 1s", level, took)
		}
	}
}

func TestKeepaliveHoldsIdleConnection(t *testing.T) {
	s := newSim(t, ReliableDelivery, 1, 4, nil)
	s.runUntil(t, 20*time.Second, func() bool { return s.now > Time(10*time.Second) })
	if s.a.c.IsClosed() || s.b.c.IsClosed() {
		t.Fatalf("idle connection broke: %v %v", s.a.c.Err(), s.b.c.Err())
	}
}

func TestRetransmissionBacksOff(t *testing.T) {
	s := newSim(t, ReliableDelivery, 1, 4, func(c *Config) { c.PeerTimeout = 10 * time.Second })
	s.a.sendMsgs = randomMessages(rand.New(rand.NewPCG(1, 1)), 1, 100)
	s.ab.down = true
	s.runUntil(t, 3*time.Second, func() bool { return s.now > Time(2*time.Second) })
	st := s.a.c.Stats()
	// 2ms doubling to the 200ms cap: about 15 timeouts in 2s, far fewer than
	// the 1000 a fixed 2ms timer would give.
	if st.Timeouts < 5 || st.Timeouts > 30 {
		t.Fatalf("%d timeouts in 2s", st.Timeouts)
	}
	if s.a.c.RTO() != 200*time.Millisecond {
		t.Fatalf("RTO %v after repeated timeouts, want the 200ms cap", s.a.c.RTO())
	}
	s.ab.down = false
	s.runUntil(t, time.Second, func() bool { return len(s.b.got) == 1 })
}

func TestRTTEstimate(t *testing.T) {
	s := newSim(t, ReliableDelivery, 1, 64, func(c *Config) { c.RTOMin = time.Microsecond; c.RTOInit = 50 * time.Millisecond })
	s.ab.delay, s.ba.delay = 3*time.Millisecond, 3*time.Millisecond
	s.a.sendMsgs = randomMessages(rand.New(rand.NewPCG(1, 1)), 50, 3000)
	s.runUntil(t, 5*time.Second, func() bool { return len(s.b.got) == 50 && s.a.c.SndUna() == s.a.c.SndNxt() })
	if st := s.a.c.Stats(); st.Retransmits != 0 {
		t.Fatalf("retransmissions on a clean link: %+v", st)
	}
	rto := s.a.c.RTO()
	// RTT is 6ms plus up to AckDelay; the RTO must sit above it but not far.
	if rto < 6*time.Millisecond || rto > 20*time.Millisecond {
		t.Fatalf("RTO %v for a 6ms round trip", rto)
	}
}

func TestDisconnectAcksOnlyBeforeFailure(t *testing.T) {
	s := newSim(t, ReliableReception, 1, 8, nil)
	s.a.sendMsgs = randomMessages(rand.New(rand.NewPCG(1, 1)), 3, 4000) // 3 frames each
	s.runUntil(t, time.Second, func() bool { return len(s.b.got) == 3 })
	s.runUntil(t, time.Second, func() bool { return s.a.c.SndUna() == s.a.c.SndNxt() })
	base := s.a.c.SndUna()
	// b refuses the first frame of the next message: it closes with that
	// frame's sequence number.
	s.a.sendMsgs = append(s.a.sendMsgs, randomMessages(rand.New(rand.NewPCG(2, 1)), 2, 4000)...)
	s.a.pump(s.now)
	s.out, _ = s.a.c.Output(s.now, s.out[:0])
	var h Header
	if err := Parse(s.out[0], &h); err != nil {
		t.Fatal(err)
	}
	if h.Seq != base {
		t.Fatalf("first new frame %d, want %d", h.Seq, base)
	}
	frames := append([][]byte(nil), s.out...)
	// Deliver the other frames, then fail on the first.
	for _, f := range frames[1:] {
		s.b.input(s.now, f)
	}
	if v := s.b.c.Input(s.now, &h); v&Accept == 0 {
		t.Fatalf("verdict %v", v)
	}
	s.b.c.Close(s.now, ReasonLength, h.Seq, true)
	s.out, _ = s.b.c.Output(s.now, s.out[:0])
	if len(s.out) != 1 {
		t.Fatalf("%d frames after Close, want one Disconnect", len(s.out))
	}
	var d Header
	if err := Parse(s.out[0], &d); err != nil || d.Kind != KindDisconnect || Reason(d.Msg) != ReasonLength ||
		d.Flags&FlagErrSeq == 0 || d.Seq != base || d.Ack != base {
		t.Fatalf("disconnect %+v (%v)", d, err)
	}
	v := s.a.c.Input(s.now, &d)
	if v&Closed == 0 || s.a.c.SndUna() != base {
		t.Fatalf("sender after disconnect: verdict %v una %d want %d", v, s.a.c.SndUna(), base)
	}
	var de *DisconnectError
	if !errors.As(s.a.c.Err(), &de) || !de.Remote || de.Reason != ReasonLength || de.Seq != base {
		t.Fatalf("sender error %v", s.a.c.Err())
	}
}

func TestAcksOfUnsentFramesIgnored(t *testing.T) {
	s := newSim(t, ReliableReception, 1, 8, nil)
	s.a.sendMsgs = randomMessages(rand.New(rand.NewPCG(1, 1)), 1, 4000)
	s.a.pump(s.now)
	s.out, _ = s.a.c.Output(s.now, s.out[:0])
	una := s.a.c.SndUna()
	h := Header{Kind: KindAck, Flags: FlagAck, Ack: una + 100}
	if v := s.a.c.Input(s.now, &h); v&Acked != 0 || s.a.c.SndUna() != una {
		t.Fatalf("an acknowledgement beyond what was sent moved SndUna")
	}
	h.Ack = una - 5
	if v := s.a.c.Input(s.now, &h); v&Acked != 0 || s.a.c.SndUna() != una {
		t.Fatalf("an old acknowledgement moved SndUna")
	}
}

func TestSeqWraps(t *testing.T) {
	a := Seq(0xfffffffe)
	b := a.Add(5)
	if !a.Less(b) || b.Less(a) || b.Sub(a) != 5 || a.Sub(b) != -5 || !a.LessEq(a) {
		t.Fatal("serial arithmetic wrong across wrap-around")
	}
}

func TestNoAllocationsSteadyState(t *testing.T) {
	s := newSim(t, ReliableDelivery, 1, 1<<30, nil)
	msg := make([]byte, 3000)
	rb := make([]byte, 3000)
	warm := func() {
		// a queues one 3-frame message; b receives it and acknowledges.
		for off := 0; off < len(msg); {
			f := s.a.c.NewFrame()
			n := copy(f[HeaderLen:simMTU+14], msg[off:])
			fr := Frag{Kind: KindData, Length: n, Msg: s.a.c.TakeMessage(), MsgLen: 3000, Offset: uint32(off)}
			off += n
			if off == len(msg) {
				fr.Flags = FlagLast
			}
			s.a.c.Queue(f, &fr)
		}
		s.now += Time(time.Microsecond)
		s.out, _ = s.a.c.Output(s.now, s.out[:0])
		var h Header
		for _, f := range s.out {
			if Parse(f, &h) == nil && s.b.c.Input(s.now, &h)&Accept != 0 {
				copy(rb[h.Offset:], Payload(f, &h))
				s.b.c.Deliver(s.now, &h)
			}
			for {
				if _, ok := s.b.c.NextCompletion(); !ok {
					break
				}
			}
		}
		s.now += Time(time.Millisecond)
		s.out, _ = s.b.c.Output(s.now, s.out[:0])
		for _, f := range s.out {
			if Parse(f, &h) == nil {
				s.a.c.Input(s.now, &h)
			}
		}
	}
	for i := 0; i < 200; i++ {
		warm()
	}
	if n := testing.AllocsPerRun(500, warm); n != 0 {
		t.Fatalf("%v allocations per message", n)
	}
	if s.a.c.SndUna() != s.a.c.SndNxt() {
		t.Fatalf("not everything acknowledged")
	}
}
