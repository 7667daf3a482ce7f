package mplite

// A rank talks through a fabric: one VI provider on one NIC, or a bond
// striped over several (MPLITE_IFACES with more than one interface). The
// protocols above see the same work queues either way.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/ethervia/ethervia/bonding"
	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/rdma"
	"github.com/ethervia/ethervia/reliability"
	"github.com/ethervia/ethervia/vi"
)

// fabric is what a rank needs of its transport.
type fabric interface {
	maxTransfer() int
	register(buf []byte) (descriptors.MemHandle, error)
	deregister(h descriptors.MemHandle) error
	newCache(access vi.Access, entries int, bytes int64) (*rdma.Cache, error)
	// grant opens a receive region (vi.AccessGrantedWrite) to the
	// writes of a transfer from p, or closes it once more (on false).
	grant(reg *rdma.Region, p *peer, on bool)
	newLink(qdepth int) (link, error) // called with c.mu held
	// pollRequest returns a connection request waiting for this rank,
	// without blocking.
	pollRequest() (connRequest, bool)
	// acceptBlocks says that accepting takes a round trip (a bond
	// connects its other rails), so it is done outside the lock.
	acceptBlocks() bool
	done() (completion, bool)
	// wait returns a completion, or one with connReq set when a
	// connection request arrived meanwhile (fabrics whose wakesOnRequest
	// is true), or an error when ctx ends. The progress goroutine's wait
	// (background) also ends, as for a request, once callers (see
	// setCallers) wait: the device and its completions are theirs.
	wait(ctx context.Context, background bool) (completion, error)
	// setCallers tells the fabric how to see that calls are waiting.
	setCallers(waiting func() bool)
	wakesOnRequest() bool
	// received counts the frames taken from the devices: a waiter spins
	// on while it moves (see spinWindow).
	received() uint64
	// linkID names the link a completion came from (c.byVI's index),
	// or -1; called with c.mu held.
	linkID(comp completion) int
	openDatagram(kind uint8, depth int) (*vi.DatagramPort, error)
	// fillMemory is the target side of a write that came another way (from
	// a rank of the same host): it checks region h as a remote write would
	// be checked and lets put place the n bytes at off.
	fillMemory(h descriptors.MemHandle, who rdma.Grantee, off uint64, n int, put func([]byte) error) error
	// alsoWake makes wait return (as for a connection request) once
	// pending reports true; interrupt wakes a wait under way to look.
	alsoWake(pending func() bool)
	interrupt()
	close() error
}

// completion is one work queue's completion: raw is the *vi.VI or
// *bonding.VI.
type completion struct {
	raw     any
	recv    bool
	lane    bool // raw is a bonded connection's lane (lane.go)
	connReq bool // no work queue's: a connection request is waiting
}

// link is one connection's VI.
type link interface {
	PostSend(*descriptors.Descriptor) error
	PostRecv(*descriptors.Descriptor) error
	SendDone() (*descriptors.Descriptor, bool)
	RecvDone() (*descriptors.Descriptor, bool)
	Err() error
	Disconnect() error
	id() int
	raw() any
	// connect asks the rank at macs (one per rail) and endpoint ep to
	// accept.
	connect(ctx context.Context, macs []net.HardwareAddr, ep uint16) error
	// railEvents counts the times a rail of the link died and came back.
	railEvents() (failures, reconnects uint64)
	// transport sums the reliability counters of the link's connections
	// on the wire (none for a link through shared memory).
	transport() reliability.Stats
}

// connRequest is a peer's request to connect.
type connRequest interface {
	remote() nic.Addr // on rail 0
	accept(ctx context.Context, l link, macs []net.HardwareAddr, ep uint16) error
	reject() error
}

// ---- one NIC ----

type viFabric struct {
	p    *vi.Provider
	ptag vi.PTag
	cq   *vi.CQ
	// seenReqs is the provider's request count at the last pollRequest:
	// wait ends when it moves.
	seenReqs atomic.Uint64
	// requestWaiting as a func value, made once: a closure per wait would
	// allocate on every blocking wait.
	stopWait func() bool
	// extra is alsoWake's pending, or nil.
	extra func() bool
	// stopBG is the progress goroutine's stop function (setCallers), made
	// once.
	stopBG func() bool
}

func (f *viFabric) setCallers(waiting func() bool) {
	f.stopBG = func() bool { return waiting() || f.requestWaiting() }
}

// requestWaiting reports a connection request that came after the last
// pollRequest, or other work for the waiter (called with the provider's
// lock held: atomics only).
func (f *viFabric) requestWaiting() bool {
	return f.p.ConnRequests() != f.seenReqs.Load() || f.extra != nil && f.extra()
}

func (f *viFabric) alsoWake(pending func() bool) { f.extra = pending }

func (f *viFabric) interrupt() { f.cq.Interrupt() }

func (f *viFabric) fillMemory(h descriptors.MemHandle, who rdma.Grantee, off uint64, n int, put func([]byte) error) error {
	return f.p.FillMemory(h, f.ptag, who, off, n, put)
}

// localGrantee is the writer identity of a rank of this host, whose
// writes come through shared memory: above every VI number.
func localGrantee(rank int) rdma.Grantee { return rdma.Grantee(1<<16 + rank) }

func (f *viFabric) maxTransfer() int { return f.p.Attributes().MaxTransfer }

func (f *viFabric) register(buf []byte) (descriptors.MemHandle, error) {
	return f.p.RegisterMemory(buf, f.ptag, 0)
}

func (f *viFabric) deregister(h descriptors.MemHandle) error { return f.p.DeregisterMemory(h) }

func (f *viFabric) grant(reg *rdma.Region, p *peer, on bool) {
	who := localGrantee(p.rank)
	if l, ok := p.v.(viLink); ok {
		who = l.Grantee()
	}
	if on {
		reg.Grant(who)
	} else {
		reg.Revoke(who)
	}
}

func (f *viFabric) newCache(access vi.Access, entries int, bytes int64) (*rdma.Cache, error) {
	return f.p.NewMemoryCache(f.ptag, access, entries, bytes)
}

func (f *viFabric) newLink(qdepth int) (link, error) {
	v, err := f.p.NewVI(vi.Attributes{Reliability: vi.ReliableDelivery, PTag: f.ptag, EnableRDMAWrite: true,
		SendCQ: f.cq, RecvCQ: f.cq, QueueDepth: qdepth})
	if err != nil {
		return nil, err
	}
	return viLink{v}, nil
}

func (f *viFabric) pollRequest() (connRequest, bool) {
	f.seenReqs.Store(f.p.ConnRequests())
	req, ok := f.p.PollConnect(discriminator)
	if !ok {
		return nil, false
	}
	return viRequest{req}, true
}

func (f *viFabric) acceptBlocks() bool { return false }

func (f *viFabric) done() (completion, bool) {
	comp, ok := f.cq.Done()
	return completion{raw: comp.VI, recv: comp.Recv}, ok
}

func (f *viFabric) received() uint64 { return f.p.Received() }

func (f *viFabric) wait(ctx context.Context, background bool) (completion, error) {
	stop := f.stopWait
	if background && f.stopBG != nil {
		stop = f.stopBG
	}
	comp, ok, err := f.cq.WaitOr(ctx, stop)
	if err == nil && !ok {
		return completion{connReq: true}, nil
	}
	return completion{raw: comp.VI, recv: comp.Recv}, err
}

func (f *viFabric) wakesOnRequest() bool { return true }

func (f *viFabric) linkID(comp completion) int {
	v, ok := comp.raw.(*vi.VI)
	if !ok || v == nil {
		return -1
	}
	return int(v.ID())
}

func (f *viFabric) openDatagram(kind uint8, depth int) (*vi.DatagramPort, error) {
	p, err := f.p.OpenDatagram(kind, depth)
	if err != nil {
		return nil, err
	}
	// Completion messages end the multicast protocols' waits as
	// datagrams do.
	p.WatchCQ(f.cq)
	return p, nil
}

func (f *viFabric) close() error { return f.p.Close() }

type viLink struct{ *vi.VI }

func (l viLink) id() int { return int(l.ID()) }

func (l viLink) railEvents() (uint64, uint64) { return 0, 0 }

func (l viLink) transport() reliability.Stats { return l.Stats().Stats }

func (l viLink) raw() any { return l.VI }
func (l viLink) connect(ctx context.Context, macs []net.HardwareAddr, ep uint16) error {
	return l.ConnectRequest(ctx, vi.Address{MAC: macs[0], Endpoint: ep, Discriminator: discriminator})
}

type viRequest struct{ *vi.ConnRequest }

func (r viRequest) remote() nic.Addr {
	a := r.Remote()
	m, _ := nic.MAC(a.MAC)
	return nic.Addr{MAC: m, EP: a.Endpoint}
}
func (r viRequest) reject() error { return r.Reject() }
func (r viRequest) accept(_ context.Context, l link, _ []net.HardwareAddr, _ uint16) error {
	v, ok := l.(viLink)
	if !ok {
		return fmt.Errorf("accept: %T is not a VI link", l)
	}
	return r.Accept(v.VI)
}

// ---- a bond over several NICs ----

type bondFabric struct {
	b    *bonding.Bond
	ptag bonding.PTag
	cq   *bonding.CQ

	ids map[*bonding.VI]int // guarded by c.mu, under which newLink and linkID run
	// extra is alsoWake's pending, or nil.
	extra func() bool
	// stopFG and stopBG are the stop functions of the callers' waits and
	// of the progress goroutine's (setCallers).
	stopFG, stopBG func() bool

	// Lanes (lane.go): a plain VI per connection on rail 0, all on lcq
	// (nil without lanes), their protection tag there, and the link id
	// of each (guarded as ids is).
	lcq     *vi.CQ
	lptag   vi.PTag
	laneIDs map[*vi.VI]int
	// laneTiming is the lanes' own acknowledgement timing (lineOptions).
	laneTiming vi.Attributes
}

func (f *bondFabric) alsoWake(pending func() bool) { f.extra = pending }

func (f *bondFabric) setCallers(waiting func() bool) {
	f.stopFG = func() bool { return f.laneWaiting() || f.extra != nil && f.extra() }
	f.stopBG = func() bool { return waiting() || f.laneWaiting() || f.extra != nil && f.extra() }
}

// laneWaiting reports a lane completion to take: the bond's CQ does not
// poll the lanes' queue, its waits only wake for it (Follow).
func (f *bondFabric) laneWaiting() bool { return f.lcq != nil && f.lcq.Queued() }

func (f *bondFabric) interrupt() { f.cq.Interrupt() }

func (f *bondFabric) fillMemory(h descriptors.MemHandle, who rdma.Grantee, off uint64, n int, put func([]byte) error) error {
	return f.b.FillMemory(h, f.ptag, who, off, n, put)
}

func (f *bondFabric) maxTransfer() int { return f.b.Options().MaxTransfer }

func (f *bondFabric) register(buf []byte) (descriptors.MemHandle, error) {
	return f.b.RegisterMemory(buf, f.ptag, 0)
}

func (f *bondFabric) deregister(h descriptors.MemHandle) error { return f.b.DeregisterMemory(h) }

func (f *bondFabric) grant(reg *rdma.Region, p *peer, on bool) {
	// The handle is the cache's own region's: it cannot be unknown.
	h := descriptors.MemHandle(reg.Handle())
	if l, ok := p.v.(*bondLink); ok {
		_ = f.b.GrantMemory(h, l.VI, 0, on)
		return
	}
	_ = f.b.GrantMemory(h, nil, localGrantee(p.rank), on)
}

func (f *bondFabric) newCache(access vi.Access, entries int, bytes int64) (*rdma.Cache, error) {
	return f.b.NewMemoryCache(f.ptag, access, entries, bytes)
}

func (f *bondFabric) received() uint64 { return f.b.Received() }

func (f *bondFabric) newLink(qdepth int) (link, error) {
	v, err := f.b.NewVI(bonding.Attributes{PTag: f.ptag, EnableRDMAWrite: true, SendCQ: f.cq, RecvCQ: f.cq, QueueDepth: qdepth})
	if err != nil {
		return nil, err
	}
	id := len(f.ids)
	f.ids[v] = id
	l := &bondLink{VI: v, n: id}
	if f.lcq != nil {
		a := f.laneTiming
		a.Reliability, a.PTag, a.SendCQ, a.RecvCQ, a.QueueDepth = vi.ReliableReception, f.lptag, f.lcq, f.lcq, qdepth
		lv, err := f.b.Provider(0).NewVI(a)
		if err != nil {
			delete(f.ids, v)
			v.Close()
			return nil, fmt.Errorf("lane: %w", err)
		}
		l.lane = lv
		f.laneIDs[lv] = id
	}
	return l, nil
}

// laneLimit is the longest message, envelope included, a lane carries (0:
// no lanes): what the bond would send on one rail anyway. Longer ones go
// through the bond, striped.
func (f *bondFabric) laneLimit() int {
	if f.lcq == nil {
		return 0
	}
	return f.b.Options().StripeThreshold
}

// laneMemory is rail 0's handle of bond memory h, for a lane's slots.
func (f *bondFabric) laneMemory(h descriptors.MemHandle) (descriptors.MemHandle, bool) {
	return f.b.RailMemory(h, 0)
}

func (f *bondFabric) pollRequest() (connRequest, bool) {
	req, ok := f.b.PollConnect(discriminator)
	if !ok {
		return nil, false
	}
	return bondRequest{req}, true
}

func (f *bondFabric) acceptBlocks() bool { return true }

// wakesOnRequest: a bond's requests arrive on its own goroutines, which do
// not end a CQ wait; a rank with unconnected peers looks every bgBlock.
func (f *bondFabric) wakesOnRequest() bool { return false }

// done looks at the lanes, then the bond (whose poll of rail 0 also takes
// the lanes' frames), then the lanes again.
func (f *bondFabric) done() (completion, bool) {
	if c, ok := f.laneDone(); ok {
		return c, true
	}
	if comp, ok := f.cq.Done(); ok {
		return completion{raw: comp.VI, recv: comp.Recv}, true
	}
	return f.laneDone()
}

func (f *bondFabric) laneDone() (completion, bool) {
	if f.lcq == nil {
		return completion{}, false
	}
	c, ok := f.lcq.Ready()
	return completion{raw: c.VI, recv: c.Recv, lane: true}, ok
}

func (f *bondFabric) wait(ctx context.Context, background bool) (completion, error) {
	stop := f.stopFG
	if background {
		stop = f.stopBG
	}
	comp, ok, err := f.cq.WaitOr(ctx, stop)
	if err == nil && !ok {
		if c, ok := f.laneDone(); ok {
			return c, nil
		}
		return completion{connReq: true}, nil
	}
	return completion{raw: comp.VI, recv: comp.Recv}, err
}

func (f *bondFabric) linkID(comp completion) int {
	if comp.lane {
		v, ok := comp.raw.(*vi.VI)
		if !ok || v == nil {
			return -1
		}
		if id, ok := f.laneIDs[v]; ok {
			return id
		}
		return -1
	}
	v, ok := comp.raw.(*bonding.VI)
	if !ok || v == nil {
		return -1
	}
	id, ok := f.ids[v]
	if !ok {
		return -1
	}
	return id
}

// openDatagram opens the multicast port on rail 0. The bond's completion
// queue cannot wake its waits, so a multicast wait notices completions
// within mcastPoll.
func (f *bondFabric) openDatagram(kind uint8, depth int) (*vi.DatagramPort, error) {
	return f.b.Provider(0).OpenDatagram(kind, depth)
}

func (f *bondFabric) close() error {
	err := f.b.Close()
	if errors.Is(err, bonding.ErrClosed) {
		return nil
	}
	return err
}

type bondLink struct {
	*bonding.VI
	n int
	// lane is the connection's lane (nil without lanes); laneUp says it
	// connected, set by the connecting goroutine before c.mu is taken.
	lane   *vi.VI
	laneUp bool
}

func (l *bondLink) id() int { return l.n }

func (l *bondLink) railEvents() (failures, reconnects uint64) {
	for _, rs := range l.Stats().Rails {
		failures += rs.Failures
		reconnects += rs.Reconnects
	}
	return failures, reconnects
}

// transport sums the rails' connections and the lane's.
func (l *bondLink) transport() reliability.Stats {
	s := l.TransportStats()
	if l.lane != nil {
		s = s.Add(l.lane.Stats().Stats)
	}
	return s
}

func (l *bondLink) raw() any { return l.VI }
func (l *bondLink) connect(ctx context.Context, macs []net.HardwareAddr, ep uint16) error {
	if err := l.ConnectRequest(ctx, bonding.Peer{MACs: macs, Endpoint: ep, Discriminator: discriminator}); err != nil {
		return err
	}
	l.laneUp = connectLane(ctx, l.lane, macs[0], ep)
	return nil
}

type bondRequest struct{ *bonding.ConnRequest }

func (r bondRequest) remote() nic.Addr {
	p := r.Remote()
	m, _ := nic.MAC(p.MACs[0])
	return nic.Addr{MAC: m, EP: p.Endpoint}
}
func (r bondRequest) reject() error { return r.Reject() }
func (r bondRequest) accept(ctx context.Context, l link, macs []net.HardwareAddr, ep uint16) error {
	v, ok := l.(*bondLink)
	if !ok {
		return fmt.Errorf("accept: %T is not a bonded link", l)
	}
	if err := r.AcceptPeer(v.VI, bonding.Peer{MACs: macs, Endpoint: ep, Discriminator: discriminator}); err != nil {
		return err
	}
	v.laneUp = connectLane(ctx, v.lane, macs[0], ep)
	return nil
}

// openFabric opens the rank's provider on one device, or a bond on
// several, with lanes (lane.go) of lane's timing unless lane is nil.
func openFabric(devs []nic.Device, o vi.Options, yield bool, lane *vi.Attributes, cqDepth int) (fabric, error) {
	if len(devs) == 1 {
		p, err := vi.Open(devs[0], o)
		if err != nil {
			return nil, fmt.Errorf("open provider: %w", err)
		}
		f := &viFabric{p: p, ptag: p.NewPTag()}
		f.stopWait = f.requestWaiting
		if f.cq, err = p.NewCQ(cqDepth); err != nil {
			p.Close()
			return nil, err
		}
		return f, nil
	}
	b, err := bonding.Open(devs, bonding.Options{Options: o, Yield: yield})
	if err != nil {
		return nil, fmt.Errorf("open bond of %d rails: %w", len(devs), err)
	}
	f := &bondFabric{b: b, ptag: b.NewPTag(), ids: make(map[*bonding.VI]int)}
	if f.cq, err = b.NewCQ(cqDepth); err != nil {
		b.Close()
		return nil, err
	}
	if lane != nil {
		f.laneTiming = *lane
		f.lptag, _ = b.RailPTag(f.ptag, 0)
		if f.lcq, err = b.Provider(0).NewCQ(cqDepth); err != nil {
			b.Close()
			return nil, err
		}
		f.laneIDs = make(map[*vi.VI]int)
		f.cq.Follow(f.lcq)
	}
	return f, nil
}
