package rdma

import "testing"

// A slice inside a registered buffer is a hit on its region, and one that
// runs past the region's end is not.
func TestCacheInteriorHit(t *testing.T) {
	tb := NewTable(Limits{})
	c := NewCache(tb, 1, RemoteWrite, 4, 0)
	buf := make([]byte, 4096)
	r, err := c.Get(buf)
	if err != nil {
		t.Fatal(err)
	}
	c.Put(r)
	in, err := c.Get(buf[100:200])
	if err != nil {
		t.Fatal(err)
	}
	if in != r || !in.Contains(buf[100:200]) {
		t.Fatal("a slice inside a cached buffer missed its region")
	}
	if c.State(buf) != InUse {
		t.Fatal("interior hit did not mark the region in use")
	}
	c.Put(in)
	big := make([]byte, 8192)
	rb, _ := c.Get(big[:4096])
	c.Put(rb)
	over, err := c.Get(big[2048:6144]) // starts inside, ends past it
	if err != nil {
		t.Fatal(err)
	}
	if over == rb || !over.Contains(big[2048:6144]) {
		t.Fatal("a slice running past a region's end was served by it")
	}
	if s := c.Stats(); s.Hits != 1 || s.Misses != 3 {
		t.Fatalf("stats %+v, want 1 hit and 3 misses", s)
	}
}

// A hit and its Put allocate nothing: the cache sits on the handshake's hot
// path.
func TestCacheHitAllocatesNothing(t *testing.T) {
	tb := NewTable(Limits{})
	c := NewCache(tb, 1, RemoteWrite, 4, 0)
	buf := make([]byte, 1<<20)
	r, err := c.Get(buf)
	if err != nil {
		t.Fatal(err)
	}
	c.Put(r)
	allocs := testing.AllocsPerRun(1000, func() {
		r, err := c.Get(buf[:4096])
		if err != nil {
			t.Fatal(err)
		}
		c.Put(r)
	})
	if allocs != 0 {
		t.Fatalf("Get+Put of a cached buffer: %v allocations, want 0", allocs)
	}
}
