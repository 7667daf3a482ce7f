package afxdp

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// desc is what a ring carries: a UMEM address (fill and completion rings) or
// a packet descriptor (rx and tx rings).
type desc interface {
	uint64 | unix.XDPDesc
}

// ring is one single-producer, single-consumer ring shared with the kernel.
// The same type serves both roles: a producer uses reserve/submit, a consumer
// uses peek/release. The indices run freely and wrap at 2^32; only the slot
// number is masked. The index that belongs to the other side is read with an
// atomic load (acquire) and ours is published with an atomic store (release),
// in the order libbpf uses: descriptors are written before the producer index
// is stored, and read before the consumer index is stored.
//
// A ring is used by one goroutine at a time; the caller serializes.
type ring[T desc] struct {
	prod, cons *atomic.Uint32
	flags      *atomic.Uint32
	descs      []T
	mask, size uint32
	// Our cached copies: for a producer, cachedProd is ours and cachedCons
	// the kernel's last seen value; the other way round for a consumer.
	cachedProd, cachedCons uint32
}

// newRing lays a ring over mem (an mmapped region) at the kernel's offsets.
func newRing[T desc](mem []byte, off unix.XDPRingOffset, size uint32) (ring[T], error) {
	var r ring[T]
	if size == 0 || size&(size-1) != 0 {
		return r, fmt.Errorf("ring size %d is not a power of two", size)
	}
	var zero T
	need := off.Desc + uint64(size)*uint64(unsafe.Sizeof(zero))
	for _, o := range []uint64{off.Producer, off.Consumer, off.Flags} {
		if o%4 != 0 || o+4 > uint64(len(mem)) {
			return r, fmt.Errorf("ring offset %d outside a %d-byte mapping", o, len(mem))
		}
	}
	if off.Desc%8 != 0 || need > uint64(len(mem)) {
		return r, fmt.Errorf("ring descriptors end at %d, past the %d-byte mapping", need, len(mem))
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	r.prod = (*atomic.Uint32)(unsafe.Add(base, off.Producer))
	r.cons = (*atomic.Uint32)(unsafe.Add(base, off.Consumer))
	r.flags = (*atomic.Uint32)(unsafe.Add(base, off.Flags))
	r.descs = unsafe.Slice((*T)(unsafe.Add(base, off.Desc)), size)
	r.mask, r.size = size-1, size
	r.cachedProd = r.prod.Load()
	r.cachedCons = r.cons.Load()
	return r, nil
}

// needWakeup reports whether the kernel asked to be kicked for this ring
// (XDP_USE_NEED_WAKEUP).
func (r *ring[T]) needWakeup() bool {
	return r.flags.Load()&unix.XDP_RING_NEED_WAKEUP != 0
}

// reserve returns the index of the first of k free slots, k <= n, for a
// producer. It refreshes the consumer index only when the cached one shows
// too little room.
func (r *ring[T]) reserve(n uint32) (idx, k uint32) {
	free := r.size - (r.cachedProd - r.cachedCons)
	if free < n {
		r.cachedCons = r.cons.Load()
		free = r.size - (r.cachedProd - r.cachedCons)
	}
	return r.cachedProd, min(n, free)
}

// at returns the slot for free-running index i.
func (r *ring[T]) at(i uint32) *T { return &r.descs[i&r.mask] }

// submit publishes k reserved slots to the kernel.
func (r *ring[T]) submit(k uint32) {
	r.cachedProd += k
	r.prod.Store(r.cachedProd)
}

// peek returns the index of the first of k filled slots, k <= n, for a
// consumer. It refreshes the producer index only when the cached one shows
// fewer than n entries.
func (r *ring[T]) peek(n uint32) (idx, k uint32) {
	avail := r.cachedProd - r.cachedCons
	if avail < n {
		r.cachedProd = r.prod.Load()
		avail = r.cachedProd - r.cachedCons
	}
	return r.cachedCons, min(n, avail)
}

// release hands k consumed slots back to the kernel.
func (r *ring[T]) release(k uint32) {
	r.cachedCons += k
	r.cons.Store(r.cachedCons)
}

// pending reports, from any goroutine, how many entries the producer has
// published that the consumer has not yet taken. It reads only the shared
// indices.
func (r *ring[T]) pending() uint32 { return r.prod.Load() - r.cons.Load() }

// freeList is a stack of free UMEM chunk addresses. Its capacity is fixed at
// construction, so push and pop never allocate.
type freeList struct {
	addrs []uint64
	n     int
}

func newFreeList(capacity int) freeList { return freeList{addrs: make([]uint64, capacity)} }

func (f *freeList) len() int { return f.n }

// push adds a chunk; it reports false (and drops nothing) if the list is
// full, which would mean a chunk was freed twice.
func (f *freeList) push(a uint64) bool {
	if f.n == len(f.addrs) {
		return false
	}
	f.addrs[f.n] = a
	f.n++
	return true
}

func (f *freeList) pop() (uint64, bool) {
	if f.n == 0 {
		return 0, false
	}
	f.n--
	return f.addrs[f.n], true
}

// umemLayout is the geometry of a UMEM: count chunks of chunk bytes each.
// The kernel writes received frames at rxOffset into a chunk (its
// XDP_PACKET_HEADROOM plus our headroom, zero); we write frames to send at
// the start of a chunk.
type umemLayout struct {
	chunk, count uint64
}

// size is the UMEM length in bytes.
func (l umemLayout) size() uint64 { return l.chunk * l.count }

// base is the start of the chunk that holds addr (aligned chunk mode).
func (l umemLayout) base(addr uint64) uint64 { return addr &^ (l.chunk - 1) }

// maxRxFrame is the longest frame the kernel can write into one chunk.
func (l umemLayout) maxRxFrame() int { return int(l.chunk) - unix.XDP_PACKET_HEADROOM }

// frame checks a descriptor the kernel handed us and returns the frame's
// place in the UMEM. A descriptor must lie inside one chunk; the kernel never
// produces anything else, so a failure means a bug or a corrupted ring, and
// the chunk is not trusted further.
func (l umemLayout) frame(d unix.XDPDesc) (off, n uint64, ok bool) {
	if d.Addr >= l.size() || d.Len == 0 {
		return 0, 0, false
	}
	end := d.Addr + uint64(d.Len)
	if end > l.base(d.Addr)+l.chunk {
		return 0, 0, false
	}
	return d.Addr, uint64(d.Len), true
}
