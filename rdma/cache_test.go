package rdma

import (
	"errors"
	"testing"
)

func TestCacheHitMissAndStates(t *testing.T) {
	tb := NewTable(Limits{})
	c := NewCache(tb, 3, RemoteWrite, 4, 0)
	buf := make([]byte, 1000)
	if c.State(buf) != Invalid {
		t.Fatal("fresh buffer not invalid")
	}
	r1, err := c.Get(buf)
	if err != nil {
		t.Fatal(err)
	}
	if c.State(buf) != InUse || r1.PTag() != 3 || r1.Access() != RemoteWrite {
		t.Fatal("entry not in use with the cache's tag and rights")
	}
	r2, _ := c.Get(buf[:500]) // same start, shorter: a hit
	if r2 != r1 {
		t.Fatal("shorter view of a cached buffer missed")
	}
	c.Put(r1)
	if c.State(buf) != InUse {
		t.Fatal("entry left use while still held once")
	}
	c.Put(r2)
	if c.State(buf) != Cached {
		t.Fatal("entry not cached after last Put")
	}
	if s := c.Stats(); s.Hits != 1 || s.Misses != 1 || s.Entries != 1 || s.Bytes != 1000 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCacheEvictsLRUNeverInUse(t *testing.T) {
	tb := NewTable(Limits{})
	c := NewCache(tb, 1, 0, 3, 0)
	bufs := [][]byte{make([]byte, 10), make([]byte, 10), make([]byte, 10), make([]byte, 10)}
	held, _ := c.Get(bufs[0]) // stays in use
	for _, b := range bufs[1:3] {
		r, _ := c.Get(b)
		c.Put(r)
	}
	// bufs[1] is least recently used; touch it so bufs[2] becomes LRU.
	r, _ := c.Get(bufs[1])
	c.Put(r)
	if _, err := c.Get(bufs[3]); err != nil {
		t.Fatal(err)
	}
	if c.State(bufs[2]) != Invalid {
		t.Fatal("LRU cached entry not evicted")
	}
	if c.State(bufs[0]) != InUse || c.State(bufs[1]) != Cached {
		t.Fatal("wrong entry evicted")
	}
	if _, ok := tb.Lookup(held.Handle()); !ok {
		t.Fatal("in-use region deregistered")
	}
	if s := c.Stats(); s.Evictions != 1 {
		t.Fatalf("evictions %d", s.Evictions)
	}
}

func TestCacheFullOfInUse(t *testing.T) {
	tb := NewTable(Limits{})
	c := NewCache(tb, 1, 0, 0, 100)
	if _, err := c.Get(make([]byte, 80)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(make([]byte, 30)); !errors.Is(err, ErrCacheFull) {
		t.Fatalf("over byte bound with all in use: %v", err)
	}
	if s := c.Stats(); s.Bytes != 80 {
		t.Fatalf("bytes %d", s.Bytes)
	}
}

func TestCacheFlush(t *testing.T) {
	tb := NewTable(Limits{})
	c := NewCache(tb, 1, 0, 0, 0)
	a, b := make([]byte, 10), make([]byte, 10)
	ra, _ := c.Get(a)
	rb, _ := c.Get(b)
	c.Put(rb)
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if c.State(b) != Invalid || c.State(a) != InUse || tb.Stats().Regions != 1 {
		t.Fatal("flush must drop cached entries only")
	}
	c.Put(ra)
}

// TestCacheTakesABufferLargerThanItsBound: a buffer that could never fit
// under the bytes bound is registered anyway (a 2 GB message must move),
// and evicted first once released; one that could fit but for entries in
// use is still refused.
func TestCacheTakesABufferLargerThanItsBound(t *testing.T) {
	c := NewCache(NewTable(Limits{}), 1, RemoteWrite, 8, 1000)
	small := make([]byte, 600)
	rs, err := c.Get(small)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 5000)
	rb, err := c.Get(big)
	if err != nil {
		t.Fatalf("a buffer over the bound by itself: %v", err)
	}
	if _, err := c.Get(make([]byte, 500)); !errors.Is(err, ErrCacheFull) {
		t.Fatalf("a buffer that fits but for entries in use: %v", err)
	}
	c.Put(rb)
	c.Put(rs)
	if _, err := c.Get(make([]byte, 900)); err != nil {
		t.Fatalf("after releasing: %v", err)
	}
	if c.State(big) != Invalid {
		t.Fatal("the oversized entry was kept over the bound")
	}
}
