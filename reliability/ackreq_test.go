package reliability

import (
	"math/rand/v2"
	"testing"
	"time"
)

// sendOne queues one single-frame message on a and returns the frame a
// puts on the wire for it, and its header.
func sendOne(t *testing.T, s *sim, seed uint64) ([]byte, Header) {
	t.Helper()
	s.a.sendMsgs = append(s.a.sendMsgs, randomMessages(rand.New(rand.NewPCG(seed, 1)), 1, 100)...)
	s.a.pump(s.now)
	s.out, _ = s.a.c.Output(s.now, s.out[:0])
	if len(s.out) != 1 {
		t.Fatalf("%d frames for a one-frame message", len(s.out))
	}
	var h Header
	if err := Parse(s.out[0], &h); err != nil {
		t.Fatal(err)
	}
	if h.Flags&(FlagAckReq|FlagLast) != FlagAckReq|FlagLast {
		t.Fatalf("reliable reception's last frame has flags %#x, want an acknowledgement request", h.Flags)
	}
	return append([]byte(nil), s.out[0]...), h
}

// ackFrames returns the stand-alone acknowledgements b sends at now.
func ackFrames(t *testing.T, s *sim) int {
	t.Helper()
	s.out, _ = s.b.c.Output(s.now, s.out[:0])
	n := 0
	for _, f := range s.out {
		var h Header
		if err := Parse(f, &h); err != nil {
			t.Fatal(err)
		}
		if h.Kind == KindAck {
			n++
		}
	}
	return n
}

func TestAckRequestAnsweredAtOnceByDefault(t *testing.T) {
	s := newSim(t, ReliableReception, 1, 8, nil)
	f, _ := sendOne(t, s, 1)
	s.b.input(s.now, f)
	if !s.b.c.Pending() || ackFrames(t, s) != 1 {
		t.Fatal("without AckReqDelay the requested acknowledgement did not go out at once")
	}
}

func TestAckRequestWaitsForReply(t *testing.T) {
	const delay = 30 * time.Microsecond
	s := newSim(t, ReliableReception, 1, 8, func(c *Config) { c.AckReqDelay = delay })
	f, _ := sendOne(t, s, 1)
	s.b.input(s.now, f)
	if s.b.c.Pending() || ackFrames(t, s) != 0 {
		t.Fatal("the requested acknowledgement went out before AckReqDelay")
	}
	if d := s.b.c.Deadline(); d == 0 || d > s.now.Add(delay) {
		t.Fatalf("deadline %v, want at most AckReqDelay (%v) from now", time.Duration(d-s.now), delay)
	}
	// A reply within the delay carries the acknowledgement: a's message
	// is acknowledged with no frame of its own.
	s.now = s.now.Add(delay / 2)
	s.b.sendMsgs = randomMessages(rand.New(rand.NewPCG(7, 1)), 1, 100)
	s.b.pump(s.now)
	s.out, _ = s.b.c.Output(s.now, s.out[:0])
	if len(s.out) != 1 {
		t.Fatalf("b sent %d frames for its one-frame reply, want 1 (no separate acknowledgement)", len(s.out))
	}
	una := s.a.c.SndUna()
	var h Header
	if err := Parse(s.out[0], &h); err != nil {
		t.Fatal(err)
	}
	if h.Kind != KindData || h.Flags&FlagAck == 0 {
		t.Fatalf("reply %v flags %#x carries no acknowledgement", h.Kind, h.Flags)
	}
	if v := s.a.c.Input(s.now, &h); v&Acked == 0 || s.a.c.SndUna() == una {
		t.Fatalf("the reply did not acknowledge a's message (verdict %v)", v)
	}
	if s.b.c.Stats().AcksSent != 0 {
		t.Fatalf("b sent %d stand-alone acknowledgements", s.b.c.Stats().AcksSent)
	}

	// No reply: the acknowledgement goes out once the delay is over.
	f, _ = sendOne(t, s, 2)
	s.b.input(s.now, f)
	s.now = s.now.Add(delay - time.Microsecond)
	if n := ackFrames(t, s); n != 0 {
		t.Fatalf("%d acknowledgements before the delay ended", n)
	}
	s.now = s.now.Add(time.Microsecond)
	if n := ackFrames(t, s); n != 1 {
		t.Fatalf("%d acknowledgements once the delay ended, want 1", n)
	}
}

func TestAckRequestOfRetransmissionAnsweredAtOnce(t *testing.T) {
	s := newSim(t, ReliableReception, 1, 8, func(c *Config) { c.AckReqDelay = time.Millisecond })
	_, h := sendOne(t, s, 1)
	h.Flags |= FlagRetx
	if v := s.b.c.Input(s.now, &h); v&Accept == 0 {
		t.Fatalf("verdict %v", v)
	}
	s.b.c.Deliver(s.now, &h)
	if !s.b.c.Pending() || ackFrames(t, s) != 1 {
		t.Fatal("a retransmission's acknowledgement request waited for AckReqDelay")
	}
}

func TestAckRequestOfRDMAWriteAnsweredAtOnce(t *testing.T) {
	s := newSim(t, ReliableReception, 1, 8, func(c *Config) { c.AckReqDelay = time.Millisecond })
	_, h := sendOne(t, s, 1)
	h.Kind = KindWrite // the last frame of an RDMA write: nobody answers it
	s.b.c.Input(s.now, &h)
	if !s.b.c.Pending() || ackFrames(t, s) != 1 {
		t.Fatal("an RDMA write's acknowledgement request waited for AckReqDelay")
	}
}
