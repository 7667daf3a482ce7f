package mplite

import (
	"testing"

	"github.com/ethervia/ethervia/nic"
)

func TestTmpPoolClasses(t *testing.T) {
	const slot = envLen + 64<<10
	p := newTmpPool(slot, 1<<20)
	for _, c := range []struct{ n, size int }{
		{1, 256}, {256, 256}, {257, 512}, {1000, 1024}, {4096, 4096}, {4097, 8192},
		{65536, 65536}, {65537, slot}, {slot, slot},
	} {
		if got := p.size(c.n); got != c.size {
			t.Errorf("size(%d) = %d, want %d", c.n, got, c.size)
		}
		b := p.get(c.n)
		if len(b) != c.n || cap(b) != c.size {
			t.Errorf("get(%d): len %d cap %d, want %d and %d", c.n, len(b), cap(b), c.n, c.size)
		}
		p.put(b)
		if again := p.get(c.n); &again[:1][0] != &b[:1][0] {
			t.Errorf("get(%d) after put did not reuse the buffer", c.n)
		}
	}
	if p.buffers() != 0 || p.kept != 0 {
		t.Fatalf("%d buffers, %d bytes kept after every one was taken again", p.buffers(), p.kept)
	}
}

// What a burst frees beyond keep goes to the garbage collector, and a
// buffer that is not the pool's is never kept.
func TestTmpPoolKeepBound(t *testing.T) {
	p := newTmpPool(envLen+64<<10, 4096)
	var bs [][]byte
	for range 40 {
		bs = append(bs, p.get(200))
	}
	for _, b := range bs {
		p.put(b)
	}
	if p.buffers() != 16 || p.kept != 4096 {
		t.Fatalf("kept %d buffers (%d bytes), want 16 (4096)", p.buffers(), p.kept)
	}
	p.put(make([]byte, 300)) // not a class size
	if p.buffers() != 16 {
		t.Fatalf("kept a foreign buffer")
	}
}

func TestTmpPoolReuseAllocatesNothing(t *testing.T) {
	p := newTmpPool(envLen+64<<10, 1<<20)
	p.put(p.get(8))
	if n := testing.AllocsPerRun(100, func() { p.put(p.get(8)) }); n != 0 {
		t.Fatalf("%v allocations per get and put", n)
	}
}

// Queue entries freed after a burst are kept for reuse only up to umsgKeep.
func TestUmsgKeepBound(t *testing.T) {
	c := &Comm{endpoint: &endpoint{tmp: newTmpPool(envLen+64<<10, 1<<20)}}
	ms := make([]*umsg, umsgKeep+10)
	for i := range ms {
		ms[i] = c.newUmsg()
	}
	for _, m := range ms {
		c.releaseUmsg(m)
	}
	if len(c.umsgFree) != umsgKeep {
		t.Fatalf("%d queue entries kept, want %d", len(c.umsgFree), umsgKeep)
	}
	if c.newUmsg() != ms[umsgKeep-1] {
		t.Fatal("newUmsg did not reuse a kept entry")
	}
}

// A later operation's datagram that finds the stash full is counted as
// dropped, not lost silently.
func TestMcastStashFullCounted(t *testing.T) {
	var m mcastEP
	m.stash = make([]mcStashed, mcastStash)
	for i := range m.stash {
		m.stash[i].b = make([]byte, 64)
	}
	for range mcastStash + 3 {
		m.stashIt(nil, []byte("chunk"), nic.Addr{})
	}
	if m.stats.Stashed != mcastStash || m.stats.Dropped != 3 {
		t.Fatalf("stashed %d, dropped %d; want %d and 3", m.stats.Stashed, m.stats.Dropped, mcastStash)
	}
}

// A NAK after a silence names only chunks a later one passed; the root's
// poll, or the ACK protocol's silence, lets feedback name every chunk.
func TestMcastFeedbackLimit(t *testing.T) {
	for _, tc := range []struct {
		nak, poll, timedOut bool
		want                int
	}{
		{true, false, false, 10}, {true, false, true, 10}, {true, true, false, 100}, {true, true, true, 100},
		{false, false, false, 10}, {false, false, true, 100}, {false, true, false, 100},
	} {
		o := mcOp{nak: tc.nak, poll: tc.poll, k: 100, highest: 10}
		if got := o.feedbackLimit(tc.timedOut); got != tc.want {
			t.Errorf("nak %v, poll %v, timed out %v: limit %d, want %d", tc.nak, tc.poll, tc.timedOut, got, tc.want)
		}
	}
}
