package bonding

import (
	"fmt"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/rdma"
	"github.com/ethervia/ethervia/vi"
)

// NewMemoryCache returns a registration cache (MP_Lite's dynamic
// registration) over the bond: rdma.Cache.Get registers a buffer on every
// rail under ptag with the given remote access, or finds it registered, and
// the handle of the region it returns is the bond handle to put in
// descriptors, descriptors.MemHandle(r.Handle()). The region is rail 0's
// (the bond handle is its handle), so its bounds and use counts are the
// bond's. The cache holds at most maxEntries regions and maxBytes bytes
// (zero: no bound).
func (b *Bond) NewMemoryCache(ptag PTag, access Access, maxEntries int, maxBytes int64) (*rdma.Cache, error) {
	b.mu.RLock()
	_, ok := b.railTag(ptag, 0)
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if !ok {
		return nil, fmt.Errorf("bonding: memory cache: %w: unknown protection tag %d", vi.ErrMemory, ptag)
	}
	return rdma.NewCache(bondRegistry{b}, ptag, access, maxEntries, maxBytes), nil
}

// bondRegistry registers a cache's buffers on every rail.
type bondRegistry struct{ b *Bond }

func (r bondRegistry) Register(buf []byte, tag rdma.PTag, acc rdma.Access) (*rdma.Region, error) {
	h, err := r.b.RegisterMemory(buf, tag, acc)
	if err != nil {
		return nil, err
	}
	r.b.mu.RLock()
	rg := r.b.lookup(h)
	r.b.mu.RUnlock()
	if rg == nil {
		return nil, fmt.Errorf("bonding: memory cache: %w: handle %#x vanished", vi.ErrMemory, uint32(h))
	}
	return rg.regs[0], nil
}

func (r bondRegistry) Deregister(reg *rdma.Region) error {
	return r.b.DeregisterMemory(descriptors.MemHandle(reg.Handle()))
}

// FillMemory is the target side of an RDMA write made outside the bond (by
// a transport between processes of one host): it checks a write of n
// bytes at offset off of bond region h under ptag, then lets fill place
// the bytes.
func (b *Bond) FillMemory(h descriptors.MemHandle, ptag PTag, who rdma.Grantee, off uint64, n int, fill func(dst []byte) error) error {
	b.mu.RLock()
	rg := b.lookup(h)
	var t vi.PTag
	ok := false
	if rg != nil && rg.ptag == ptag {
		t, ok = b.railTag(ptag, 0)
	}
	b.mu.RUnlock()
	if !ok {
		return fmt.Errorf("bonding: fill region %#x: %w", uint32(h), rdma.ErrNoRegion)
	}
	return b.rails[0].FillMemory(rg.rail[0], t, who, off, n, fill)
}
