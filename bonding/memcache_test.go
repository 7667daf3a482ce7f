package bonding

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/vi"
)

// TestMemoryCache: a cached buffer is registered on every rail under one
// bond handle, a peer RDMA-writes into it through that handle, a second
// lookup hits, and a flush deregisters it from every rail.
func TestMemoryCache(t *testing.T) {
	a, b := memPair(t, 2, 1500, memnic.Faults{}, testOptions(), 1<<16)
	va := a.newVI(t, Attributes{EnableRDMAWrite: true})
	vb := b.newVI(t, Attributes{EnableRDMAWrite: true})
	connect(t, a, b, va, vb, 9)

	if _, err := b.b.NewMemoryCache(PTag(99), AccessRDMAWrite, 4, 0); !errors.Is(err, vi.ErrMemory) {
		t.Fatalf("cache under an unknown tag: %v, want vi.ErrMemory", err)
	}
	cache, err := b.b.NewMemoryCache(b.ptag, AccessRDMAWrite, 4, 0)
	mustf(t, err, "new cache")
	dst := make([]byte, 20000)
	reg, err := cache.Get(dst)
	mustf(t, err, "cache get")
	h := descriptors.MemHandle(reg.Handle())
	b.b.mu.RLock()
	rg := b.b.lookup(h)
	b.b.mu.RUnlock()
	if rg == nil || &rg.buf[0] != &dst[0] {
		t.Fatalf("handle %#x is not a bond region over the buffer", uint32(h))
	}
	for r := range b.b.Rails() {
		if _, err := b.b.Provider(r).QueryMemory(rg.rail[r]); err != nil {
			t.Fatalf("rail %d: %v", r, err)
		}
	}

	ctx := ctxT(t, 10*time.Second)
	src := a.buf(t, len(dst))
	pattern(7, src.Buf)
	rd := &descriptors.Descriptor{}
	mustf(t, vb.PostRecv(rd), "post recv")
	sd := &descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMAWrite, Immediate: true, ImmData: 5},
		Segments: []descriptors.Segment{src},
		Address:  descriptors.AddressSegment{Handle: h}}
	mustf(t, va.PostSend(sd), "post write")
	if d, err := va.SendWait(ctx); err != nil || d.Status != descriptors.StatusDone {
		t.Fatalf("write: %v %v (%v)", d, err, va.Err())
	}
	if _, err := vb.RecvWait(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, src.Buf) {
		t.Fatalf("written bytes differ at %d", firstDiff(dst, src.Buf))
	}

	cache.Put(reg)
	if again, err := cache.Get(dst[:100]); err != nil || again != reg {
		t.Fatalf("second get: %v %v, want the cached region", again, err)
	}
	cache.Put(reg)
	if st := cache.Stats(); st.Hits != 1 || st.Misses != 1 {
		t.Fatalf("stats %+v, want 1 hit and 1 miss", st)
	}
	mustf(t, cache.Flush(), "flush")
	for r := range b.b.Rails() {
		if _, err := b.b.Provider(r).QueryMemory(rg.rail[r]); err == nil {
			t.Fatalf("rail %d still has the region after a flush", r)
		}
	}
}
