package vi

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic/memnic"
)

// These tests check the rows of the VIA reliability table (digest
// section 2, table 5.1), one test per row, at every level where the row
// promises something that could fail.

var allLevels = []Level{Unreliable, ReliableDelivery, ReliableReception}

// link is two connected VIs on a fresh switch.
type link struct {
	a, b   *host
	va, vb *VI
}

func newLink(t *testing.T, level Level, f memnic.Faults, o Options) *link {
	t.Helper()
	sw := memnic.NewSwitch(42)
	l := &link{a: newHost(t, sw, 1500, f, o, 1<<24), b: newHost(t, sw, 1500, f, o, 1<<24)}
	l.va = l.a.newVI(t, Attributes{Reliability: level})
	l.vb = l.b.newVI(t, Attributes{Reliability: level})
	// Connect over a clean wire; the faults apply afterwards.
	l.a.port.SetFaults(memnic.Faults{})
	l.b.port.SetFaults(memnic.Faults{})
	connectCS(t, l.a, l.b, l.va, l.vb, 1)
	l.a.port.SetFaults(f)
	l.b.port.SetFaults(f)
	return l
}

// msg builds send descriptor i of size n over a's arena: its bytes are
// pattern(i) and its immediate data is i.
func (l *link) msg(t *testing.T, i, n int) *descriptors.Descriptor {
	s := l.a.buf(t, n)
	pattern(uint64(i), s.Buf)
	return &descriptors.Descriptor{Segments: []descriptors.Segment{s},
		Control: descriptors.Control{Immediate: true, ImmData: uint32(i)}}
}

func (l *link) recvs(t *testing.T, k, n int) []*descriptors.Descriptor {
	ds := make([]*descriptors.Descriptor, k)
	for i := range ds {
		ds[i] = &descriptors.Descriptor{Segments: []descriptors.Segment{l.b.buf(t, n)}}
		mustf(t, l.vb.PostRecv(ds[i]), "post recv")
	}
	return ds
}

// exchange sends n messages of size bytes a→b, reposting receives, and
// returns the immediate data of what arrived intact, in arrival order. It
// fails the test on a damaged message. For unreliable levels it stops when
// nothing arrives for a while.
func (l *link) exchange(t *testing.T, n, size int) []int {
	t.Helper()
	rds := l.recvs(t, 16, size)
	_ = rds
	sds := make([]*descriptors.Descriptor, n)
	for i := range sds {
		sds[i] = l.msg(t, i, size)
	}
	done := make(chan []int)
	go func() {
		var got []int
		want := make([]byte, size)
		for {
			timeout := 10 * time.Second
			if l.vb.Attributes().Reliability == Unreliable {
				timeout = 300 * time.Millisecond
			}
			d, err := l.vb.RecvWait(ctxT(t, timeout))
			if err != nil {
				done <- got
				return
			}
			if d.Status.Failed() {
				t.Errorf("receive failed: %v", d.Status)
				done <- got
				return
			}
			i := int(d.ImmData)
			pattern(uint64(i), want)
			if d.Length != size || !bytes.Equal(d.Segments[0].Buf, want) {
				t.Errorf("message %d arrived damaged", i)
			}
			got = append(got, i)
			if len(got) == n {
				done <- got
				return
			}
			d.Reset()
			if err := l.vb.PostRecv(d); err != nil {
				t.Errorf("repost: %v", err)
			}
		}
	}()
	for i := 0; i < n; i++ {
		mustf(t, l.va.PostSend(sds[i]), "post send %d", i)
		if i >= 8 {
			d, err := l.va.SendWait(ctxT(t, 10*time.Second))
			mustf(t, err, "send wait")
			if d.Status.Failed() {
				t.Fatalf("send failed: %v", d.Status)
			}
		}
	}
	return <-done
}

// Row "corrupt data detected": yes at every level. A corrupt frame never
// delivers damaged bytes (exchange checks every byte).
func TestRowCorruptDataDetected(t *testing.T) {
	for _, level := range allLevels {
		t.Run(level.String(), func(t *testing.T) {
			l := newLink(t, level, memnic.Faults{Corrupt: 0.2}, Options{})
			got := l.exchange(t, 300, 3000)
			bad := l.b.p.Stats().BadFrames
			if bad == 0 {
				t.Fatalf("no corrupt frame was detected")
			}
			if level.Reliable() && len(got) != 300 {
				t.Fatalf("%d of 300 messages arrived", len(got))
			}
			t.Logf("%d corrupt frames dropped, %d messages arrived intact", bad, len(got))
		})
	}
}

// Row "delivered at most once": yes at every level.
func TestRowAtMostOnce(t *testing.T) {
	for _, level := range allLevels {
		t.Run(level.String(), func(t *testing.T) {
			l := newLink(t, level, memnic.Faults{Duplicate: 0.5}, Options{})
			got := l.exchange(t, 300, 2000)
			seen := map[int]bool{}
			for _, i := range got {
				if seen[i] {
					t.Fatalf("message %d delivered twice", i)
				}
				seen[i] = true
			}
			if l.b.port.Counters().Duplicated == 0 {
				t.Fatal("the switch duplicated nothing")
			}
		})
	}
}

// Row "delivered exactly once" and "data loss detected": the reliable
// levels repair loss; unreliable does not.
func TestRowExactlyOnce(t *testing.T) {
	for _, level := range allLevels {
		t.Run(level.String(), func(t *testing.T) {
			l := newLink(t, level, memnic.Faults{Loss: 0.1, Duplicate: 0.1}, Options{})
			got := l.exchange(t, 300, 4000)
			if !level.Reliable() {
				if len(got) == 300 {
					t.Fatalf("every message arrived over a lossy unreliable link: was the loss repaired?")
				}
				return
			}
			if len(got) != 300 {
				t.Fatalf("%d of 300 messages arrived", len(got))
			}
			for i, g := range got {
				if g != i {
					t.Fatalf("arrival %d is message %d", i, g)
				}
			}
			if l.va.Stats().Retransmits == 0 {
				t.Fatal("nothing was retransmitted")
			}
		})
	}
}

// Row "order guaranteed": yes at the reliable levels, even when the wire
// reorders.
func TestRowOrder(t *testing.T) {
	for _, level := range allLevels {
		t.Run(level.String(), func(t *testing.T) {
			l := newLink(t, level, memnic.Faults{Reorder: 0.3, Jitter: 50 * time.Microsecond}, Options{})
			got := l.exchange(t, 300, 1000)
			last := -1
			for _, g := range got {
				if g <= last {
					if level.Reliable() {
						t.Fatalf("message %d arrived after %d", g, last)
					}
				}
				last = g
			}
			if l.b.port.Counters().Reordered == 0 {
				t.Fatal("the switch reordered nothing")
			}
		})
	}
}

// Row "connection broken on error": a receive descriptor too small gives a
// length error; the reliable levels break the connection, unreliable
// carries on.
func TestRowBrokenOnError(t *testing.T) {
	for _, level := range allLevels {
		t.Run(level.String(), func(t *testing.T) {
			l := newLink(t, level, memnic.Faults{}, Options{})
			small := &descriptors.Descriptor{Segments: []descriptors.Segment{l.b.buf(t, 100)}}
			mustf(t, l.vb.PostRecv(small), "post")
			big := &descriptors.Descriptor{Segments: []descriptors.Segment{l.b.buf(t, 5000)}}
			mustf(t, l.vb.PostRecv(big), "post")
			mustf(t, l.va.PostSend(l.msg(t, 0, 3000)), "send")
			mustf(t, l.va.PostSend(l.msg(t, 1, 3000)), "send")
			d, err := l.vb.RecvWait(ctxT(t, 5*time.Second))
			mustf(t, err, "recv")
			if d != small || !errors.Is(d.Status.Err(), descriptors.ErrLength) {
				t.Fatalf("first receive: %v, want a length error", d.Status)
			}
			d, err = l.vb.RecvWait(ctxT(t, 5*time.Second))
			mustf(t, err, "recv")
			if level.Reliable() {
				if d.Status&descriptors.StatusFlushed == 0 {
					t.Fatalf("second receive after the error: %v, want flushed", d.Status)
				}
				if l.vb.State() != Error {
					t.Fatalf("receiver state %v, want error", l.vb.State())
				}
				// The sender learns it too.
				waitState(t, l.va, Error)
				if !errors.Is(l.va.Err(), ErrBroken) {
					t.Fatalf("sender error %v", l.va.Err())
				}
			} else {
				if d.Status != descriptors.StatusDone|descriptors.StatusImmediate || d.ImmData != 1 {
					t.Fatalf("second receive: %v imm %d, want message 1", d.Status, d.ImmData)
				}
				if l.vb.State() != Connected || l.va.State() != Connected {
					t.Fatalf("unreliable VI left connected state: %v %v", l.va.State(), l.vb.State())
				}
			}
		})
	}
}

func waitState(t *testing.T, v *VI, want State) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for v.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("VI state %v, want %v", v.State(), want)
		}
		v.SendDone() // drive progress
		time.Sleep(time.Millisecond)
	}
}

// Row "send state when request completes": in flight for unreliable and
// reliable delivery (the send completes although the data cannot have
// arrived), completed at the remote end for reliable reception (it waits
// until the data is placed).
func TestRowSendCompletion(t *testing.T) {
	for _, level := range allLevels {
		t.Run(level.String(), func(t *testing.T) {
			l := newLink(t, level, memnic.Faults{}, Options{})
			r := l.recvs(t, 1, 5000)[0]
			l.b.port.SetUp(false) // nothing reaches b
			s := l.msg(t, 0, 5000)
			mustf(t, l.va.PostSend(s), "send")
			time.Sleep(20 * time.Millisecond)
			d, done := l.va.SendDone()
			if level == ReliableReception {
				if done {
					t.Fatalf("send completed (%v) before the data was placed", d.Status)
				}
				l.b.port.SetUp(true)
				d, err := l.va.SendWait(ctxT(t, 5*time.Second))
				mustf(t, err, "send wait")
				if d != s || d.Status != descriptors.StatusDone {
					t.Fatalf("send: %v", d.Status)
				}
				// Completed means placed: the receive is already done.
				if rd, ok := l.vb.RecvDone(); !ok || rd != r || rd.Status.Failed() {
					t.Fatal("the send completed before its receive")
				}
				return
			}
			if !done || d != s || d.Status != descriptors.StatusDone {
				t.Fatalf("send did not complete while in flight: %v", done)
			}
			if _, ok := l.vb.RecvDone(); ok {
				t.Fatal("data arrived through a downed port")
			}
			if level == ReliableDelivery {
				// Still delivered once the wire comes back.
				l.b.port.SetUp(true)
				rd, err := l.vb.RecvWait(ctxT(t, 5*time.Second))
				mustf(t, err, "recv")
				if rd != r || rd.Status.Failed() || rd.Length != 5000 {
					t.Fatalf("receive: %v", rd.Status)
				}
			}
		})
	}
}

// Row "send state on error": for reliable reception the failing send
// reports the error and no later one is delivered; for reliable delivery
// the state of the failing one is unknown but the connection breaks and
// every send completes; unreliable reports nothing to the sender.
func TestRowSendStateOnError(t *testing.T) {
	for _, level := range allLevels {
		t.Run(level.String(), func(t *testing.T) {
			l := newLink(t, level, memnic.Faults{}, Options{})
			rds := []*descriptors.Descriptor{
				{Segments: []descriptors.Segment{l.b.buf(t, 5000)}},
				{Segments: []descriptors.Segment{l.b.buf(t, 100)}}, // too small for message 1
				{Segments: []descriptors.Segment{l.b.buf(t, 5000)}},
				{Segments: []descriptors.Segment{l.b.buf(t, 5000)}},
			}
			for _, d := range rds {
				mustf(t, l.vb.PostRecv(d), "post recv")
			}
			sds := make([]*descriptors.Descriptor, 4)
			for i := range sds {
				sds[i] = l.msg(t, i, 3000)
				mustf(t, l.va.PostSend(sds[i]), "send")
			}
			var sendSt []descriptors.Status
			for range sds {
				d, err := l.va.SendWait(ctxT(t, 5*time.Second))
				mustf(t, err, "send wait")
				sendSt = append(sendSt, d.Status)
			}
			var recvSt []descriptors.Status
			for range rds {
				d, err := l.vb.RecvWait(ctxT(t, 5*time.Second))
				mustf(t, err, "recv wait")
				recvSt = append(recvSt, d.Status)
			}
			t.Logf("sends %v; receives %v", sendSt, recvSt)
			if recvSt[0].Failed() || !errors.Is(recvSt[1].Err(), descriptors.ErrLength) {
				t.Fatalf("receives %v: want ok, length error", recvSt)
			}
			switch level {
			case ReliableReception:
				if sendSt[0] != descriptors.StatusDone {
					t.Fatalf("send 0: %v, want done", sendSt[0])
				}
				if !errors.Is(sendSt[1].Err(), descriptors.ErrRemoteDescriptor) {
					t.Fatalf("send 1: %v, want a remote descriptor error", sendSt[1])
				}
				for i := 2; i < 4; i++ {
					if sendSt[i]&descriptors.StatusFlushed == 0 || recvSt[i]&descriptors.StatusFlushed == 0 {
						t.Fatalf("send/receive %d after the error: %v / %v, want flushed (not delivered)", i, sendSt[i], recvSt[i])
					}
				}
			case ReliableDelivery:
				if sendSt[0] != descriptors.StatusDone {
					t.Fatalf("send 0: %v", sendSt[0])
				}
				for i := 2; i < 4; i++ {
					if !recvSt[i].Failed() {
						t.Fatalf("receive %d delivered after a broken connection", i)
					}
				}
				waitState(t, l.va, Error)
			case Unreliable:
				for i, s := range sendSt {
					if s != descriptors.StatusDone {
						t.Fatalf("unreliable send %d: %v", i, s)
					}
				}
				if recvSt[2].Failed() || recvSt[3].Failed() {
					t.Fatalf("unreliable receives after the error: %v", recvSt[2:])
				}
			}
		})
	}
}
