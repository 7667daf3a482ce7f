package pingpong

import (
	"testing"

	"github.com/ethervia/ethervia/descriptors"
)

// loop is an Endpoint whose sends land in its peer's oldest posted
// receive at once; a send completes one poll later, like an acknowledged
// one.
type loop struct {
	peer           *loop
	posted, recvd  []*descriptors.Descriptor
	sent, acked    []*descriptors.Descriptor
	sends, polls   int
	maxOutstanding int
}

func (l *loop) PostSend(d *descriptors.Descriptor) error {
	r := l.peer.posted[0]
	l.peer.posted = l.peer.posted[1:]
	r.Length = copy(r.Segments[0].Buf, d.Segments[0].Buf)
	r.Status = descriptors.StatusDone
	l.peer.recvd = append(l.peer.recvd, r)
	l.sent = append(l.sent, d)
	l.sends++
	l.maxOutstanding = max(l.maxOutstanding, len(l.sent)+len(l.acked))
	return nil
}

func (l *loop) PostRecv(d *descriptors.Descriptor) error {
	l.posted = append(l.posted, d)
	return nil
}

func (l *loop) SendDone() (*descriptors.Descriptor, bool) {
	l.polls++
	if len(l.acked) > 0 {
		d := l.acked[0]
		l.acked = l.acked[1:]
		return d, true
	}
	l.acked, l.sent = append(l.acked, l.sent...), l.sent[:0]
	return nil, false
}

func (l *loop) RecvDone() (*descriptors.Descriptor, bool) {
	l.polls++
	if len(l.recvd) == 0 {
		return nil, false
	}
	d := l.recvd[0]
	l.recvd = l.recvd[1:]
	return d, true
}

func TestPolled(t *testing.T) {
	var a, e loop
	seg := func(n int) descriptors.Segment { return descriptors.Segment{Buf: make([]byte, n)} }
	var n int
	res := testing.Benchmark(func(b *testing.B) {
		a, e = loop{peer: &e}, loop{peer: &a}
		n = b.N
		Polled(b, &a, &e, seg(3), seg(3), seg(3), seg(3))
	})
	if res.N == 0 || n != res.N {
		t.Fatalf("benchmark ran %d round trips (last run %d)", res.N, n)
	}
	// 100 untimed round trips first, then b.N; one message each way per
	// round trip, never more than two sends outstanding, and every
	// receive re-posted (eight stay posted).
	if a.sends != 100+n || e.sends != 100+n {
		t.Errorf("sends %d and %d, want %d each", a.sends, e.sends, 100+n)
	}
	if a.maxOutstanding > 2 || e.maxOutstanding > 2 {
		t.Errorf("up to %d and %d sends outstanding, want at most 2", a.maxOutstanding, e.maxOutstanding)
	}
	if len(a.posted) != 8 || len(e.posted) != 8 {
		t.Errorf("%d and %d receives posted at the end, want 8 each", len(a.posted), len(e.posted))
	}
}
