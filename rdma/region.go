// Package rdma is VIA's memory model: buffers registered under a protection
// tag with access rights, named by unguessable 32-bit handles, and the checks
// a target makes before any byte of a remote write or read moves.
//
// A Table belongs to one provider. Handles come from crypto/rand, are never
// zero and are never given to two live regions at once. Every remote access
// goes through CopyIn or CopyOut, which check the handle, the protection tag,
// the access right and the bounds, and copy under the table's lock so that a
// region deregistered mid-transfer is refused rather than written.
package rdma

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"
)

// PTag is a protection tag. A VI may touch only regions of its own tag.
type PTag uint32

// Handle names a registered region on the wire.
type Handle uint32

// Access is a set of rights on a region.
type Access uint8

// Access rights. Local read is always allowed.
const (
	LocalWrite Access = 1 << iota
	RemoteWrite
	RemoteRead
	// GrantedWrite lets a peer write the region remotely only while it
	// is granted to that peer (Region.Grant): a receive buffer open to the
	// one sender whose transfer the receiver agreed to, closed to everyone
	// the rest of the time.
	GrantedWrite
)

func (a Access) String() string {
	s := ""
	for _, r := range []struct {
		bit  Access
		name string
	}{{LocalWrite, "local-write"}, {RemoteWrite, "remote-write"}, {RemoteRead, "remote-read"}, {GrantedWrite, "granted-write"}} {
		if a&r.bit != 0 {
			if s != "" {
				s += "|"
			}
			s += r.name
		}
	}
	if s == "" {
		return "local-read"
	}
	return s
}

// Errors. Protection failures wrap ErrProtection so callers can map them to
// VIA's RDMA protection error with one errors.Is.
var (
	ErrProtection = errors.New("rdma: protection violation")
	ErrNoRegion   = fmt.Errorf("%w: no such region", ErrProtection)
	ErrPTag       = fmt.Errorf("%w: protection tag mismatch", ErrProtection)
	ErrAccess     = fmt.Errorf("%w: access right not granted", ErrProtection)
	ErrNotGranted = fmt.Errorf("%w: remote write outside a grant", ErrAccess)
	ErrBounds     = fmt.Errorf("%w: outside the region", ErrProtection)
	ErrInUse      = errors.New("rdma: region in use by posted descriptors")
	ErrLimit      = errors.New("rdma: registration limit reached")
	ErrEmpty      = errors.New("rdma: cannot register an empty buffer")
)

// Limits bound what a Table will register. Zero means no limit.
type Limits struct {
	MaxRegions int
	MaxBytes   int64
}

// Stats count a table's regions and refused accesses.
type Stats struct {
	Regions int
	Bytes   int64
	// Refused remote accesses, by reason.
	NoRegion, PTagMismatch, AccessDenied, OutOfBounds uint64
}

// Refused is the number of remote accesses refused, for every reason.
func (s Stats) Refused() uint64 {
	return s.NoRegion + s.PTagMismatch + s.AccessDenied + s.OutOfBounds
}

// Region is a registered buffer.
type Region struct {
	handle Handle
	tag    PTag
	access Access
	buf    []byte
	inUse  atomic.Int64
	live   atomic.Bool

	gmu    sync.Mutex // guards grants
	grants []grant    // GrantedWrite: who may write now
	// sole is the one writer grants admit, plus one, while there is
	// exactly one (a receive from one peer): the check of every
	// fragment reads it without the lock. 0 sends the check to grants.
	sole atomic.Uint64
}

// Grantee names the one writer a grant admits: the number of the VI the
// writes arrive on, or an identity the caller of Fill passes for writes
// that come another way.
type Grantee uint32

// AnyWriter is the writer of a remote write into a region registered
// with RemoteWrite: grants do not apply.
const AnyWriter Grantee = 0xFFFFFFFF

type grant struct {
	who Grantee
	n   int32
}

// Handle returns the region's wire name.
func (r *Region) Handle() Handle { return r.handle }

// PTag returns the region's protection tag.
func (r *Region) PTag() PTag { return r.tag }

// Access returns the region's rights.
func (r *Region) Access() Access { return r.access }

// Len returns the region's size in bytes.
func (r *Region) Len() int { return len(r.buf) }

// Bytes returns the registered buffer itself, for local use.
func (r *Region) Bytes() []byte { return r.buf }

// Live reports whether the region is still registered.
func (r *Region) Live() bool { return r.live.Load() }

// InUse returns how many posted descriptors hold the region.
func (r *Region) InUse() int64 { return r.inUse.Load() }

// Acquire marks the region as used by one more posted descriptor; it fails
// once the region is deregistered.
func (r *Region) Acquire() error {
	r.inUse.Add(1)
	if !r.live.Load() {
		r.inUse.Add(-1)
		return fmt.Errorf("region %#x: %w", r.handle, ErrNoRegion)
	}
	return nil
}

// Release undoes one Acquire.
func (r *Region) Release() { r.inUse.Add(-1) }

// Grant opens a GrantedWrite region to remote writes by who until the
// matching Revoke; grants nest (two transfers from one writer need two).
func (r *Region) Grant(who Grantee) {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	for i := range r.grants {
		if r.grants[i].who == who {
			r.grants[i].n++
			return
		}
	}
	r.grants = append(r.grants, grant{who: who, n: 1})
	r.setSole()
}

// Revoke undoes one Grant to who; without one it does nothing.
func (r *Region) Revoke(who Grantee) {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	for i := range r.grants {
		if r.grants[i].who == who {
			if r.grants[i].n--; r.grants[i].n == 0 {
				r.grants = append(r.grants[:i], r.grants[i+1:]...)
				r.setSole()
			}
			return
		}
	}
}

// Granted reports whether the region is granted to anyone.
func (r *Region) Granted() bool {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	return len(r.grants) > 0
}

// setSole records the sole writer, if there is one; r.gmu is held.
func (r *Region) setSole() {
	if len(r.grants) == 1 {
		r.sole.Store(uint64(r.grants[0].who) + 1)
	} else {
		r.sole.Store(0)
	}
}

// GrantedTo reports whether who may write the region now.
func (r *Region) GrantedTo(who Grantee) bool {
	if s := r.sole.Load(); s != 0 {
		return s == uint64(who)+1
	}
	r.gmu.Lock()
	defer r.gmu.Unlock()
	for _, g := range r.grants {
		if g.who == who {
			return true
		}
	}
	return false
}

// rights is what the region allows who now: GrantedWrite is RemoteWrite
// while granted to who.
func (r *Region) rights(who Grantee) Access {
	if r.access&GrantedWrite != 0 && who != AnyWriter && r.GrantedTo(who) {
		return r.access | RemoteWrite
	}
	return r.access
}

// Contains reports whether b lies entirely inside the region's buffer.
func (r *Region) Contains(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(r.buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= start && p+uintptr(len(b)) <= start+uintptr(len(r.buf))
}

// Table holds one provider's registered regions. It is safe for concurrent
// use.
type Table struct {
	limits Limits

	mu      sync.RWMutex
	regions map[Handle]*Region
	bytes   int64

	noRegion, ptag, access, bounds atomic.Uint64
}

// NewTable returns an empty table with the given limits.
func NewTable(l Limits) *Table {
	return &Table{limits: l, regions: make(map[Handle]*Region)}
}

// Register registers buf under tag with the given rights. The buffer must
// stay untouched by the garbage collector's reach only in the usual Go sense:
// the region keeps it alive.
func (t *Table) Register(buf []byte, tag PTag, acc Access) (*Region, error) {
	if len(buf) == 0 {
		return nil, ErrEmpty
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.limits.MaxRegions > 0 && len(t.regions) >= t.limits.MaxRegions {
		return nil, fmt.Errorf("%w: %d regions (limit %d)", ErrLimit, len(t.regions), t.limits.MaxRegions)
	}
	if t.limits.MaxBytes > 0 && t.bytes+int64(len(buf)) > t.limits.MaxBytes {
		return nil, fmt.Errorf("%w: %d + %d bytes exceeds %d", ErrLimit, t.bytes, len(buf), t.limits.MaxBytes)
	}
	var h Handle
	var rnd [4]byte
	for {
		if _, err := rand.Read(rnd[:]); err != nil {
			return nil, fmt.Errorf("rdma: register: handle: %w", err)
		}
		h = Handle(binary.LittleEndian.Uint32(rnd[:]))
		if _, taken := t.regions[h]; h != 0 && !taken {
			break
		}
	}
	r := &Region{handle: h, tag: tag, access: acc, buf: buf}
	r.live.Store(true)
	t.regions[h] = r
	t.bytes += int64(len(buf))
	return r, nil
}

// Deregister removes r. It fails with ErrInUse while posted descriptors
// hold the region; afterwards every access through its handle is refused.
func (t *Table) Deregister(r *Region) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.regions[r.handle] != r {
		return fmt.Errorf("rdma: deregister %#x: %w", r.handle, ErrNoRegion)
	}
	r.live.Store(false)
	if n := r.inUse.Load(); n > 0 {
		r.live.Store(true)
		return fmt.Errorf("rdma: deregister %#x: %w (%d descriptors)", r.handle, ErrInUse, n)
	}
	delete(t.regions, r.handle)
	t.bytes -= int64(len(r.buf))
	return nil
}

// Lookup returns the live region named h.
func (t *Table) Lookup(h Handle) (*Region, bool) {
	t.mu.RLock()
	r, ok := t.regions[h]
	t.mu.RUnlock()
	return r, ok
}

// Stats returns the table's counters.
func (t *Table) Stats() Stats {
	t.mu.RLock()
	n, b := len(t.regions), t.bytes
	t.mu.RUnlock()
	return Stats{Regions: n, Bytes: b,
		NoRegion: t.noRegion.Load(), PTagMismatch: t.ptag.Load(),
		AccessDenied: t.access.Load(), OutOfBounds: t.bounds.Load()}
}

// check validates a remote access of n bytes at off by who; t.mu is held.
func (t *Table) check(h Handle, tag PTag, need Access, off, n uint64, who Grantee) (*Region, error) {
	r, ok := t.regions[h]
	switch {
	case !ok:
		t.noRegion.Add(1)
		return nil, ErrNoRegion
	case r.tag != tag:
		t.ptag.Add(1)
		return nil, ErrPTag
	case r.rights(who)&need != need:
		t.access.Add(1)
		if need&RemoteWrite != 0 && r.access&GrantedWrite != 0 {
			return nil, ErrNotGranted
		}
		return nil, ErrAccess
	case off > uint64(len(r.buf)) || n > uint64(len(r.buf))-off:
		// Written so that off+n cannot overflow.
		t.bounds.Add(1)
		return nil, ErrBounds
	}
	return r, nil
}

// size converts a length that may be negative; a negative one is refused
// as out of bounds.
func size(n int) uint64 {
	if n < 0 {
		return math.MaxUint64
	}
	return uint64(n)
}

// Check validates a remote access without moving data, counting refusals.
func (t *Table) Check(h Handle, tag PTag, need Access, off uint64, n int) error {
	t.mu.RLock()
	_, err := t.check(h, tag, need, off, size(n), AnyWriter)
	t.mu.RUnlock()
	return err
}

// CopyIn is the target side of an RDMA write by who: it checks, then copies
// data to offset off of region h. A refused access writes nothing.
func (t *Table) CopyIn(h Handle, tag PTag, who Grantee, off uint64, data []byte) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, err := t.check(h, tag, RemoteWrite, off, uint64(len(data)), who)
	if err != nil {
		return err
	}
	copy(r.buf[off:], data)
	return nil
}

// CopyInAt is the target side of one fragment of an RDMA write that covers
// total bytes at offset off of region h: data goes to byte at of the write.
// It checks the whole write, not just the fragment, so that every fragment
// of a write that is refused is refused, whichever arrives first, and none
// of it lands. A fragment that does not lie inside its write is refused as
// out of bounds. Like CopyIn, it writes nothing when it fails.
func (t *Table) CopyInAt(h Handle, tag PTag, who Grantee, off, total, at uint64, data []byte) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, err := t.check(h, tag, RemoteWrite, off, total, who)
	if err != nil {
		return err
	}
	if at > total || uint64(len(data)) > total-at {
		t.bounds.Add(1)
		return ErrBounds
	}
	copy(r.buf[off+at:], data)
	return nil
}

// CopyOut is the target side of an RDMA read: it checks, then copies len(dst)
// bytes from offset off of region h into dst.
func (t *Table) CopyOut(h Handle, tag PTag, off uint64, dst []byte) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, err := t.check(h, tag, RemoteRead, off, uint64(len(dst)), AnyWriter)
	if err != nil {
		return err
	}
	copy(dst, r.buf[off:])
	return nil
}

// Fill is the target side of an RDMA write whose bytes arrive some other
// way than in frames (from another process of the host, say): it checks a
// write of n bytes at offset off of region h as CopyIn does, then lets fill
// place them. The region cannot be deregistered while fill runs. fill's
// error is returned as it is.
func (t *Table) Fill(h Handle, tag PTag, who Grantee, off uint64, n int, fill func(dst []byte) error) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, err := t.check(h, tag, RemoteWrite, off, size(n), who)
	if err != nil {
		return err
	}
	return fill(r.buf[off : off+uint64(n) : off+uint64(n)])
}
