package bonding

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/rdma"
	"github.com/ethervia/ethervia/vi"
)

// PTag is a bond protection tag: one protection tag on every rail.
type PTag = vi.PTag

// Access is the remote access a bond memory region grants.
type Access = vi.Access

// AccessRDMAWrite lets peers RDMA-write a region (vi.AccessRDMAWrite).
const AccessRDMAWrite = vi.AccessRDMAWrite

// Bond is k opened NICs (rails) used as one: it owns one vi.Provider per
// rail, and the bonded VIs, CQs, protection tags and memory registrations
// made on it. Each rail should be a network of its own. It is safe for
// concurrent use.
type Bond struct {
	opts  Options
	rails []*vi.Provider
	macs  []net.HardwareAddr
	epoch time.Time

	// blocked counts the waiters sleeping in each rail's device
	// (VI.sleep); whoever publishes a completion interrupts those.
	blocked [maxRails]atomic.Int32
	// cqRound numbers the progress rounds of CQ polls; polled holds, per
	// rail, the round in which a VI last polled that rail's device, so
	// that the other VIs of the round only drain what it delivered (one
	// system call per rail and round, not one per peer).
	cqRound atomic.Uint64
	polled  [maxRails]atomic.Uint64
	// loud counts the VIs that are not quiet (VI.setQuiet), note is
	// signalled by every completion on a rail of any VI, and firstRails
	// has a bit for the first live rail of each VI that went quiet: while
	// no VI is loud and no note came, a CQ round polls those rails'
	// devices and nothing else (CQ.quietRound).
	loud       atomic.Int32
	note       chan struct{}
	firstRails atomic.Uint32
	// railBusy holds, per rail, the last CQ round in which a device poll
	// of that round found frames (Bond.pollRail): quiet rounds keep
	// polling such a rail, which may be taking in an RDMA write.
	railBusy [maxRails]atomic.Uint64

	mu      sync.RWMutex
	closed  bool
	ptags   [][maxRails]vi.PTag // bond tag t is index t-1
	regions map[descriptors.MemHandle]*region
	vis     map[*VI]struct{}
}

// region is a bond memory registration: the same buffer registered on
// every rail. Its bond handle is its handle on rail 0.
type region struct {
	// regs are the rails' regions: rail 0's for bounds checks, every
	// rail's for grants.
	regs   [maxRails]*rdma.Region
	buf    []byte
	ptag   PTag
	access Access
	rail   [maxRails]descriptors.MemHandle
	inUse  atomic.Int64 // posted bond descriptors that use it
}

// MaxEndpoint bounds the endpoint (nic.Config.Endpoint) of a bond.
const MaxEndpoint = 2048

// Open opens one vi.Provider per device with opts and bonds them. The bond
// does not own the devices: close the bond before them.
func Open(devs []nic.Device, opts Options) (*Bond, error) {
	o, err := opts.withDefaults(len(devs))
	if err != nil {
		return nil, err
	}
	if o.Endpoint >= MaxEndpoint {
		return nil, fmt.Errorf("bonding: endpoint %d (a bond's rail discriminators hold endpoints below %d)", o.Endpoint, MaxEndpoint)
	}
	// Rail RDMA pieces and blocks must fit the rails' descriptors.
	ro := o.Options
	need := max(o.BlockSize+hdrLen, o.RDMAPiece)
	if ro.MaxTransfer < need {
		ro.MaxTransfer = need
	}
	if ro.MaxTransfer > vi.MaxMaxTransfer {
		ro.MaxTransfer = vi.MaxMaxTransfer
		if need > ro.MaxTransfer {
			return nil, fmt.Errorf("bonding: block size %d or RDMA piece %d above %d", o.BlockSize, o.RDMAPiece, vi.MaxMaxTransfer)
		}
	}
	ro.QueueDepth = max(ro.QueueDepth, 2*o.RailSlots)
	// The rails never spin: a bonded VI's rail waiters block on the rails'
	// CQs, and the bond's own waiters spin for SpinTime.
	ro.SpinTime = -1
	b := &Bond{opts: o, epoch: time.Now(), regions: make(map[descriptors.MemHandle]*region), vis: make(map[*VI]struct{}), note: make(chan struct{}, 1)}
	for i, d := range devs {
		p, err := vi.Open(d, ro)
		if err != nil {
			b.closeRails()
			return nil, fmt.Errorf("bonding: rail %d: %w", i, err)
		}
		b.rails = append(b.rails, p)
		b.macs = append(b.macs, p.Attributes().HardwareAddr)
	}
	return b, nil
}

func (b *Bond) closeRails() {
	for _, p := range b.rails {
		p.Close()
	}
}

// Rails is the number of rails.
func (b *Bond) Rails() int { return len(b.rails) }

// Provider returns rail i's provider, for its counters and attributes.
func (b *Bond) Provider(i int) *vi.Provider { return b.rails[i] }

// Received returns the number of frames the rails' providers have taken
// from their devices (vi.Provider.Received, summed): for pollers that keep
// polling while traffic flows.
func (b *Bond) Received() uint64 {
	var n uint64
	for _, p := range b.rails {
		n += p.Received()
	}
	return n
}

// HardwareAddrs returns the rails' MAC addresses, in rail order: what a
// peer passes in Peer.MACs.
func (b *Bond) HardwareAddrs() []net.HardwareAddr {
	out := make([]net.HardwareAddr, len(b.macs))
	for i, m := range b.macs {
		out[i] = append(net.HardwareAddr(nil), m...)
	}
	return out
}

// Options returns the bond's options with their defaults filled in.
func (b *Bond) Options() Options { return b.opts }

// Close closes every bonded VI and the rail providers. It does not close
// the devices. It is idempotent.
func (b *Bond) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	vis := make([]*VI, 0, len(b.vis))
	for v := range b.vis {
		vis = append(vis, v)
	}
	b.mu.Unlock()
	for _, v := range vis {
		v.Close()
	}
	b.closeRails()
	return nil
}

// ErrClosed is returned after Bond.Close or VI.Close.
var ErrClosed = errors.New("bonding: closed")

// NewPTag returns a new protection tag, made of one tag on every rail.
func (b *Bond) NewPTag() PTag {
	b.mu.Lock()
	defer b.mu.Unlock()
	var t [maxRails]vi.PTag
	for i, p := range b.rails {
		t[i] = p.NewPTag()
	}
	b.ptags = append(b.ptags, t)
	return PTag(len(b.ptags))
}

// railTag returns rail r's tag of bond tag t. b.mu is held.
func (b *Bond) railTag(t PTag, r int) (vi.PTag, bool) {
	if t == 0 || int(t) > len(b.ptags) {
		return 0, false
	}
	return b.ptags[t-1][r], true
}

// RailPTag returns rail r's protection tag of bond tag t, for a plain VI
// on that rail's provider that shares the bond's memory.
func (b *Bond) RailPTag(t PTag, r int) (vi.PTag, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if r < 0 || r >= len(b.rails) {
		return 0, false
	}
	return b.railTag(t, r)
}

// RailMemory returns rail r's handle of bond memory handle h: a plain VI on
// that rail's provider (Provider) names it in its descriptors.
func (b *Bond) RailMemory(h descriptors.MemHandle, r int) (descriptors.MemHandle, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	rg := b.lookup(h)
	if rg == nil || r < 0 || r >= len(b.rails) {
		return 0, false
	}
	return rg.rail[r], true
}

// RegisterMemory registers buf on every rail under ptag with the given
// remote access, and returns one handle valid for the bond: local
// descriptors name it in their segments, and a peer names it in the address
// segment of an RDMA write. The peer's bonded VI learns the rail handles
// behind it with one query the first time it writes to it.
func (b *Bond) RegisterMemory(buf []byte, ptag PTag, access Access) (descriptors.MemHandle, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, ErrClosed
	}
	if _, ok := b.railTag(ptag, 0); !ok {
		return 0, fmt.Errorf("bonding: register memory: %w: unknown protection tag %d", vi.ErrMemory, ptag)
	}
	rg := &region{buf: buf, ptag: ptag, access: access}
	for i, p := range b.rails {
		t, _ := b.railTag(ptag, i)
		h, err := p.RegisterMemory(buf, t, access)
		if err != nil {
			for j := range i {
				b.rails[j].DeregisterMemory(rg.rail[j])
			}
			return 0, fmt.Errorf("bonding: register memory on rail %d: %w", i, err)
		}
		rg.rail[i] = h
	}
	for i, p := range b.rails {
		r, err := p.QueryMemory(rg.rail[i])
		if err != nil {
			for j := range b.rails {
				b.rails[j].DeregisterMemory(rg.rail[j])
			}
			return 0, fmt.Errorf("bonding: register memory: %w", err)
		}
		rg.regs[i] = r
	}
	b.regions[rg.rail[0]] = rg
	return rg.rail[0], nil
}

// GrantMemory opens a region registered with vi.AccessGrantedWrite to
// remote writes on every rail (on), or undoes one such grant (off): to
// the rail VIs of v, or, with v nil, to who (the writer FillMemory names).
func (b *Bond) GrantMemory(h descriptors.MemHandle, v *VI, who rdma.Grantee, on bool) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	rg := b.lookup(h)
	if rg == nil {
		return fmt.Errorf("bonding: grant memory: %w: unknown handle %#x", vi.ErrMemory, uint32(h))
	}
	for i := range b.rails {
		r := rg.regs[i]
		w := who
		if v != nil {
			w = v.rails[i].v.Grantee()
		}
		if on {
			r.Grant(w)
		} else {
			r.Revoke(w)
		}
	}
	return nil
}

// DeregisterMemory removes a registration from every rail. It fails with an
// error matching rdma.ErrInUse while posted descriptors use the region.
func (b *Bond) DeregisterMemory(h descriptors.MemHandle) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	rg, ok := b.regions[h]
	if !ok {
		return fmt.Errorf("bonding: deregister: %w: unknown handle %#x", vi.ErrMemory, uint32(h))
	}
	if n := rg.inUse.Load(); n > 0 {
		return fmt.Errorf("bonding: deregister %#x: %w: %d posted descriptors", uint32(h), rdma.ErrInUse, n)
	}
	var first error
	for i, p := range b.rails {
		if err := p.DeregisterMemory(rg.rail[i]); err != nil && first == nil {
			first = fmt.Errorf("bonding: deregister on rail %d: %w", i, err)
		}
	}
	delete(b.regions, h)
	return first
}

// lookup returns the region of bond handle h. b.mu is held for reading.
func (b *Bond) lookup(h descriptors.MemHandle) *region {
	return b.regions[h]
}

// now is nanoseconds since the bond opened.
func (b *Bond) now() int64 { return int64(time.Since(b.epoch)) + 1 }

// interruptBlocked wakes the waiters sleeping in a rail's device: something
// they may wait for has happened elsewhere. It costs nothing while none is.
func (b *Bond) interruptBlocked() {
	for r, p := range b.rails {
		if b.blocked[r].Load() > 0 {
			p.Interrupt()
		}
	}
}
