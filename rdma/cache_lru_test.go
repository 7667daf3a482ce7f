package rdma

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// getPut registers (or finds) b and returns it to the cache at once.
func getPut(t *testing.T, c *Cache, b []byte) {
	t.Helper()
	r, err := c.Get(b)
	if err != nil {
		t.Fatal(err)
	}
	c.Put(r)
}

// TestCacheLRUOrder: with room for four entries, every new buffer evicts
// exactly the least recently used cached one, in the order of last use.
func TestCacheLRUOrder(t *testing.T) {
	tb := NewTable(Limits{})
	c := NewCache(tb, 1, RemoteWrite, 4, 0)
	old := make([][]byte, 4)
	for i := range old {
		old[i] = make([]byte, 16)
		getPut(t, c, old[i])
	}
	// Use them in the order 2, 0, 3, 1: that is the eviction order.
	for _, i := range []int{2, 0, 3, 1} {
		getPut(t, c, old[i])
	}
	for k, want := range []int{2, 0, 3, 1} {
		getPut(t, c, make([]byte, 16))
		for i := range old {
			evicted := i == want || k > 0 && contains([]int{2, 0, 3, 1}[:k], i)
			if got := c.State(old[i]); (got == Invalid) != evicted {
				t.Fatalf("after %d new buffers: buffer %d is %v, evicted should be %v", k+1, i, got, evicted)
			}
		}
		if s := c.Stats(); s.Entries != 4 || s.Evictions != uint64(k+1) {
			t.Fatalf("after %d new buffers: %+v", k+1, s)
		}
	}
}

func contains(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestCacheByteBound: a registration that does not fit the byte bound
// evicts least recently used entries until it does, skipping those in use.
func TestCacheByteBound(t *testing.T) {
	tb := NewTable(Limits{})
	c := NewCache(tb, 1, RemoteWrite, 0, 100)
	held := make([]byte, 30)
	rh, err := c.Get(held) // in use throughout: 30 bytes pinned
	if err != nil {
		t.Fatal(err)
	}
	a, b, d := make([]byte, 20), make([]byte, 20), make([]byte, 20)
	for _, x := range [][]byte{a, b, d} {
		getPut(t, c, x)
	}
	// 90 bytes; 45 more need two evictions: a, then b.
	getPut(t, c, make([]byte, 45))
	if c.State(a) != Invalid || c.State(b) != Invalid || c.State(d) != Cached || c.State(held) != InUse {
		t.Fatalf("states a %v b %v d %v held %v", c.State(a), c.State(b), c.State(d), c.State(held))
	}
	s := c.Stats()
	if s.Bytes != 95 || s.Entries != 3 || s.Evictions != 2 {
		t.Fatalf("stats %+v", s)
	}
	if ts := tb.Stats(); ts.Bytes != s.Bytes || ts.Regions != s.Entries {
		t.Fatalf("table %+v disagrees with the cache %+v", ts, s)
	}
	// 71 bytes cannot fit beside the pinned 30 even with all else gone.
	if _, err := c.Get(make([]byte, 71)); !errors.Is(err, ErrCacheFull) {
		t.Fatalf("71 bytes beside 30 in use under a 100-byte bound: %v", err)
	}
	if _, ok := tb.Lookup(rh.Handle()); !ok || c.State(held) != InUse {
		t.Fatal("the entry in use was evicted")
	}
	c.Put(rh)
}

// TestCacheGrowsEntry: a longer buffer at the same address replaces the
// cached registration, but not while it is in use.
func TestCacheGrowsEntry(t *testing.T) {
	tb := NewTable(Limits{})
	c := NewCache(tb, 1, RemoteWrite, 0, 0)
	buf := make([]byte, 100)
	r, err := c.Get(buf[:10])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(buf); !errors.Is(err, ErrCacheFull) {
		t.Fatalf("growing an entry in use: %v", err)
	}
	c.Put(r)
	r2, err := c.Get(buf)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Len() != 100 || r.Live() {
		t.Fatalf("grown region %d bytes, old region live %v", r2.Len(), r.Live())
	}
	if s := c.Stats(); s.Misses != 2 || s.Hits != 0 || s.Entries != 1 || s.Bytes != 100 {
		t.Fatalf("stats %+v", s)
	}
	c.Put(r2)
}

// TestCacheBoundsRandom drives the cache with random gets and puts over a
// pool of buffers and checks after every step that both bounds hold, that
// every entry in use is registered, that the table holds exactly the
// cache's regions, and that hits plus misses count every get.
func TestCacheBoundsRandom(t *testing.T) {
	const maxEntries, maxBytes = 6, 3000
	rng := rand.New(rand.NewPCG(1, 2))
	tb := NewTable(Limits{})
	c := NewCache(tb, 1, RemoteWrite, maxEntries, maxBytes)
	pool := make([][]byte, 20)
	for i := range pool {
		pool[i] = make([]byte, 50+rng.IntN(900))
	}
	var held []*Region
	gets, attempts := uint64(0), uint64(0)
	for step := 0; step < 20000; step++ {
		if len(held) > 0 && (rng.IntN(2) == 0 || len(held) > 4) {
			k := rng.IntN(len(held))
			c.Put(held[k])
			held = append(held[:k], held[k+1:]...)
		} else {
			attempts++
			r, err := c.Get(pool[rng.IntN(len(pool))])
			switch {
			case errors.Is(err, ErrCacheFull):
			case err != nil:
				t.Fatalf("step %d: %v", step, err)
			default:
				gets++
				held = append(held, r)
			}
		}
		s := c.Stats()
		if s.Entries > maxEntries || s.Bytes > maxBytes {
			t.Fatalf("step %d: bounds exceeded: %+v", step, s)
		}
		// A get that missed and then found no room counts as a miss.
		if n := s.Hits + s.Misses; n < gets || n > attempts {
			t.Fatalf("step %d: %d hits + %d misses for %d gets (%d tried)", step, s.Hits, s.Misses, gets, attempts)
		}
		if ts := tb.Stats(); ts.Regions != s.Entries || ts.Bytes != s.Bytes {
			t.Fatalf("step %d: table %+v, cache %+v", step, ts, s)
		}
		for _, r := range held {
			if !r.Live() || c.State(r.Bytes()) != InUse {
				t.Fatalf("step %d: a region in use was evicted", step)
			}
		}
	}
	if s := c.Stats(); s.Evictions == 0 || s.Hits == 0 {
		t.Fatalf("the workload neither hit nor evicted: %+v", s)
	}
}
