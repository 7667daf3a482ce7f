package vi

// This file is the provider's memory registration, over an rdma.Table: the
// local checks of posted descriptors (and the region references they hold
// while posted) and the target-side checks of remote accesses.

import (
	"errors"
	"fmt"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/rdma"
)

// PTag is a protection tag. Memory and VIs carry one; a VI may only touch
// memory registered under its own tag. It is rdma.PTag: the provider's
// regions live in an rdma.Table.
type PTag = rdma.PTag

// Access is the remote access a memory region grants. It is rdma.Access.
// Local access by VIs of the same protection tag is always allowed, as in
// VIA: RegisterMemory adds rdma.LocalWrite to every region.
type Access = rdma.Access

// Access rights.
const (
	AccessRDMAWrite = rdma.RemoteWrite // peers may RDMA-write the region
	AccessRDMARead  = rdma.RemoteRead  // peers may RDMA-read the region
	// AccessGrantedWrite: peers may RDMA-write the region only while it
	// is granted (rdma.Region.Grant on the region QueryMemory returns).
	AccessGrantedWrite = rdma.GrantedWrite
)

// ErrMemory means a handle names no registered region or the arguments of a
// registration are wrong. Errors of a registration limit also match
// rdma.ErrLimit, and a deregistration refused because posted descriptors
// still use the region matches rdma.ErrInUse.
var ErrMemory = errors.New("vi: memory registration")

// NewPTag returns a new protection tag.
func (p *Provider) NewPTag() PTag {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ptags++
	return p.ptags
}

// validTag reports whether t was handed out by NewPTag. p.mu is held.
func (p *Provider) validTag(t PTag) bool { return t != 0 && t <= p.ptags }

func (p *Provider) checkRegistration(ptag PTag, access Access) error {
	if access&^(AccessRDMAWrite|AccessRDMARead|AccessGrantedWrite|rdma.LocalWrite) != 0 {
		return fmt.Errorf("%w: unknown access %#x", ErrMemory, uint8(access))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if !p.validTag(ptag) {
		return fmt.Errorf("%w: unknown protection tag %d", ErrMemory, ptag)
	}
	return nil
}

// RegisterMemory registers buf under ptag with the given remote access and
// returns its handle, an unguessable nonzero key drawn from crypto/rand and
// never given to two live regions at once (VipRegisterMem). The buffer must
// stay reachable and unmoved (any Go slice does) until DeregisterMemory.
// It fails with an error matching rdma.ErrLimit when Options.MaxRegions or
// Options.MaxRegisteredBytes would be exceeded.
func (p *Provider) RegisterMemory(buf []byte, ptag PTag, access Access) (descriptors.MemHandle, error) {
	if len(buf) == 0 {
		return 0, fmt.Errorf("%w: empty buffer", ErrMemory)
	}
	if err := p.checkRegistration(ptag, access); err != nil {
		return 0, err
	}
	// Registration draws from crypto/rand: keep it outside p.mu.
	r, err := p.mem.Register(buf, ptag, access|rdma.LocalWrite)
	if err != nil {
		return 0, fmt.Errorf("vi: register memory: %w", err)
	}
	return descriptors.MemHandle(r.Handle()), nil
}

// DeregisterMemory removes a registration (VipDeregisterMem). It fails with
// an error matching rdma.ErrInUse while posted descriptors use the region:
// a descriptor holds the regions of its segments from PostSend or PostRecv
// until it completes. Once it returns, remote accesses through the handle
// are refused, even those of a transfer under way.
func (p *Provider) DeregisterMemory(h descriptors.MemHandle) error {
	r, ok := p.mem.Lookup(rdma.Handle(h))
	if !ok {
		return fmt.Errorf("%w: unknown handle %#x", ErrMemory, uint32(h))
	}
	if err := p.mem.Deregister(r); err != nil {
		if errors.Is(err, rdma.ErrNoRegion) { // lost a race with another deregistration
			return fmt.Errorf("%w: unknown handle %#x", ErrMemory, uint32(h))
		}
		return fmt.Errorf("vi: deregister memory: %w", err)
	}
	return nil
}

// QueryMemory returns the registered region named h (VipQueryMem): its
// protection tag, rights, length and the number of posted descriptors that
// hold it.
func (p *Provider) QueryMemory(h descriptors.MemHandle) (*rdma.Region, error) {
	r, ok := p.mem.Lookup(rdma.Handle(h))
	if !ok {
		return nil, fmt.Errorf("%w: unknown handle %#x", ErrMemory, uint32(h))
	}
	return r, nil
}

// NewMemoryCache returns a registration cache (MP_Lite's dynamic
// registration) over this provider's regions: rdma.Cache.Get registers a
// buffer under ptag with the given access, or finds it registered, and the
// handle of the region it returns goes in descriptors as
// descriptors.MemHandle(r.Handle()). The cache holds at most maxEntries
// regions and maxBytes bytes (zero: no bound); they also count against the
// provider's limits.
func (p *Provider) NewMemoryCache(ptag PTag, access Access, maxEntries int, maxBytes int64) (*rdma.Cache, error) {
	if err := p.checkRegistration(ptag, access); err != nil {
		return nil, err
	}
	return rdma.NewCache(p.mem, ptag, access|rdma.LocalWrite, maxEntries, maxBytes), nil
}

// acquire checks that every segment lies inside memory registered under
// ptag (with local write when the provider writes into it) and holds the
// regions until release, so they cannot be deregistered while the
// descriptor is posted. Empty segments need no registration. On failure it
// holds nothing.
func (p *Provider) acquire(segs []descriptors.Segment, ptag PTag, write bool) error {
	for i := range segs {
		s := &segs[i]
		if len(s.Buf) == 0 {
			continue
		}
		r, ok := p.mem.Lookup(rdma.Handle(s.Handle))
		if !ok || r.PTag() != ptag || !r.Contains(s.Buf) || write && r.Access()&rdma.LocalWrite == 0 || r.Acquire() != nil {
			p.release(segs[:i])
			return descriptors.ErrProtection
		}
	}
	return nil
}

// release undoes acquire. A held region cannot have been deregistered, so
// its handle still names it.
func (p *Provider) release(segs []descriptors.Segment) {
	for i := range segs {
		s := &segs[i]
		if len(s.Buf) == 0 {
			continue
		}
		if r, ok := p.mem.Lookup(rdma.Handle(s.Handle)); ok {
			r.Release()
		}
	}
}

// FillMemory is the target side of an RDMA write made outside the
// provider, by a transport between processes of one host: it checks a
// write of n bytes at offset off of region h as a remote write by who from
// a VI of protection tag ptag would be checked, then lets fill place the
// bytes.
func (p *Provider) FillMemory(h descriptors.MemHandle, ptag PTag, who rdma.Grantee, off uint64, n int, fill func(dst []byte) error) error {
	if err := p.mem.Fill(rdma.Handle(h), ptag, who, off, n, fill); err != nil {
		return fmt.Errorf("vi: fill region %#x: %w", uint32(h), err)
	}
	return nil
}
