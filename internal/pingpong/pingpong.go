// Package pingpong drives a polled ping-pong between two endpoints for the
// benchmarks of vi and bonding: one goroutine polls both ends in turn, so
// over memnic, which delivers as it sends, a round trip has no waits and no
// wake-ups and its time is the CPU cost of the layers.
package pingpong

import (
	"testing"

	"github.com/ethervia/ethervia/descriptors"
)

// Endpoint is what a ping-pong needs of a VI (vi.VI and bonding.VI).
type Endpoint interface {
	PostSend(*descriptors.Descriptor) error
	PostRecv(*descriptors.Descriptor) error
	SendDone() (*descriptors.Descriptor, bool)
	RecvDone() (*descriptors.Descriptor, bool)
}

// side is one end: two send descriptors used in turn (a send completes on
// its acknowledgement, which rides on the reply) and receives kept posted.
type side struct {
	v    Endpoint
	sd   [2]descriptors.Descriptor
	rd   [8]descriptors.Descriptor
	out  int
	next int
}

func (s *side) init(tb testing.TB, v Endpoint, send, recv descriptors.Segment) {
	s.v = v
	for i := range s.sd {
		s.sd[i].Segments = []descriptors.Segment{send}
	}
	// Receives stay posted, as in netpipe and MPI's eager slots: a receive
	// posted just before its message would also cost a bond a credit
	// message first.
	for i := range s.rd {
		s.rd[i].Segments = []descriptors.Segment{recv}
		if err := v.PostRecv(&s.rd[i]); err != nil {
			tb.Fatal(err)
		}
	}
}

func (s *side) reap() {
	if _, ok := s.v.SendDone(); ok {
		s.out--
	}
}

// oneWay sends a message from s to r and polls until r has it.
func oneWay(tb testing.TB, s, r *side, size int) {
	for s.out == len(s.sd) {
		s.reap()
		r.reap()
		r.v.RecvDone()
	}
	if err := s.v.PostSend(&s.sd[s.next]); err != nil {
		tb.Fatal(err)
	}
	s.next, s.out = (s.next+1)%len(s.sd), s.out+1
	for {
		if d, ok := r.v.RecvDone(); ok {
			if d.Status != descriptors.StatusDone || d.Length != size {
				tb.Fatalf("receive: status %v length %d, want done and %d", d.Status, d.Length, size)
			}
			if err := r.v.PostRecv(d); err != nil {
				tb.Fatal(err)
			}
			return
		}
		s.reap()
	}
}

// Polled runs b.N round trips between a (sending sa, receiving into ra)
// and e (sb, rb), after 100 untimed ones. Both ends must be connected and
// idle, with sa and sb of the same length.
func Polled(b *testing.B, a, e Endpoint, sa, ra, sb, rb descriptors.Segment) {
	var x, y side
	x.init(b, a, sa, ra)
	y.init(b, e, sb, rb)
	round := func() {
		oneWay(b, &x, &y, len(sa.Buf))
		oneWay(b, &y, &x, len(sb.Buf))
	}
	for range 100 {
		round()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		round()
	}
}
