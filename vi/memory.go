package vi

// This file is the provider's minimal memory registration table. It is kept
// apart on purpose: package rdma will replace it with full memory
// registration, and the rest of vi only uses checkLocal and remote.

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ethervia/ethervia/descriptors"
)

// PTag is a protection tag. Memory and VIs carry one; a VI may only touch
// memory registered under its own tag.
type PTag uint32

// Access is the remote access a memory region grants. Local access by VIs
// of the same protection tag is always allowed.
type Access uint8

// Access rights.
const (
	AccessRDMAWrite Access = 1 << iota // peers may RDMA-write the region
	AccessRDMARead                     // peers may RDMA-read the region
)

// ErrMemory means a handle names no registered region or the arguments of a
// registration are wrong.
var ErrMemory = errors.New("vi: memory registration")

type region struct {
	buf       []byte
	base, end uintptr
	ptag      PTag
	access    Access
}

type memTable struct {
	regions map[descriptors.MemHandle]*region
	ptags   PTag // the last protection tag handed out
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// NewPTag returns a new protection tag.
func (p *Provider) NewPTag() PTag {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mem.ptags++
	return p.mem.ptags
}

func (m *memTable) validTag(t PTag) bool { return t != 0 && t <= m.ptags }

// RegisterMemory registers buf under ptag with the given remote access and
// returns its handle, an unguessable nonzero key. The buffer must stay
// reachable and unmoved (any Go slice does) until DeregisterMemory.
func (p *Provider) RegisterMemory(buf []byte, ptag PTag, access Access) (descriptors.MemHandle, error) {
	if len(buf) == 0 {
		return 0, fmt.Errorf("%w: empty buffer", ErrMemory)
	}
	if access&^(AccessRDMAWrite|AccessRDMARead) != 0 {
		return 0, fmt.Errorf("%w: unknown access %#x", ErrMemory, access)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrClosed
	}
	if !p.mem.validTag(ptag) {
		return 0, fmt.Errorf("%w: unknown protection tag %d", ErrMemory, ptag)
	}
	if p.mem.regions == nil {
		p.mem.regions = make(map[descriptors.MemHandle]*region)
	}
	var h descriptors.MemHandle
	for h == 0 || p.mem.regions[h] != nil {
		h = descriptors.MemHandle(p.rng.Uint32())
	}
	a := addr(buf)
	p.mem.regions[h] = &region{buf: buf, base: a, end: a + uintptr(len(buf)), ptag: ptag, access: access}
	return h, nil
}

// DeregisterMemory removes a registration. Descriptors posted over the region
// must have completed.
func (p *Provider) DeregisterMemory(h descriptors.MemHandle) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mem.regions[h] == nil {
		return fmt.Errorf("%w: unknown handle %#x", ErrMemory, uint32(h))
	}
	delete(p.mem.regions, h)
	return nil
}

// checkLocal verifies that every segment lies inside memory registered
// under ptag. Empty segments need no registration.
func (m *memTable) checkLocal(segs []descriptors.Segment, ptag PTag) error {
	for i := range segs {
		s := &segs[i]
		if len(s.Buf) == 0 {
			continue
		}
		r := m.regions[s.Handle]
		if r == nil || r.ptag != ptag {
			return descriptors.ErrProtection
		}
		a := addr(s.Buf)
		if a < r.base || a+uintptr(len(s.Buf)) > r.end {
			return descriptors.ErrProtection
		}
	}
	return nil
}

// remote returns bytes [off, off+n) of the region h if ptag and access
// allow it, or nil.
func (m *memTable) remote(h uint32, ptag PTag, access Access, off uint64, n int) ([]byte, bool) {
	r := m.regions[descriptors.MemHandle(h)]
	if r == nil || r.ptag != ptag || r.access&access == 0 {
		return nil, false
	}
	if off > uint64(len(r.buf)) || uint64(n) > uint64(len(r.buf))-off {
		return nil, false
	}
	return r.buf[off : off+uint64(n)], true
}
