package mplite

import (
	"context"
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

// Wildcards for Recv, Irecv, Probe and Iprobe.
const AnySource, AnyTag = -1, -1

// Status describes a received (or probed) message: its source, its tag
// and its length in bytes as delivered.
type Status struct{ Source, Tag, Count int }

// Communicator contexts: user messages never match internal ones.
const (
	ctxWorld     uint16 = 0
	ctxInternal  uint16 = 1 // Finalize
	ctxWorldColl uint16 = 2 // the world's collectives
	ctxFirstFree uint16 = 3 // Dup and Split take pairs from here
)

const (
	// discriminator is the VI discriminator every rank listens on ("mpli").
	discriminator = 0x6d706c69
	// maxChunks bounds the RDMA write descriptors in flight per connection,
	// so an eager message never queues behind more than this much bulk.
	maxChunks = 4
	// umsgCost is what an unexpected message counts against the bound
	// besides its data.
	umsgCost = 64
	// connPollEvery is how often pending connection requests are looked at
	// while some peer is not connected.
	connPollEvery = int64(time.Millisecond)
	// bgBlock bounds one blocking wait of the progress goroutine.
	bgBlock = 2 * time.Millisecond
	// bgGrace is how long after the last poll the progress goroutine
	// takes over.
	bgGrace = time.Millisecond
	// sharedGrace replaces bgGrace, and the provider's PollGrace and
	// MaxBlock, under WithProcessYield: with more ranks than CPUs every
	// wake-up of a background goroutine takes a CPU from a rank (8 ranks
	// on 2 CPUs: a 1 ms grace and the provider's 200 us made an 8-byte
	// allreduce about 20 % slower).
	sharedGrace = 10 * time.Millisecond
)

// Comm is a communicator: a group of ranks with its own message space, as
// seen by one rank. The world (from Init, NewComm or NewLocalWorld) holds
// every rank of the job; Dup and Split derive others, which share the
// world's connections but never match its messages, nor each other's.
// Point-to-point methods are safe for concurrent use; the collectives of one
// communicator must be called by its members in the same order, one at a
// time per communicator.
type Comm struct {
	*endpoint
	// crank and csize are this rank's number and the size of this
	// communicator (the endpoint's rank and size are the world's).
	crank, csize int
	// group maps the communicator's ranks to world ranks and inv back
	// (-1: not a member); both nil for the world.
	group []int
	inv   []int
	// pctx carries point-to-point traffic, cctx collective traffic.
	pctx, cctx uint16
	world      *Comm
	freed      atomic.Bool
	coll       collState
}

// endpoint is one rank's connection state, shared by all its
// communicators.
type endpoint struct {
	cfg    config
	rank   int
	size   int
	dev    nic.Device   // rail 0's: multicast joins there
	devs   []nic.Device // one per rail
	ownDev bool
	fab    fabric // nil in a world of one (fabric.go)
	macs   [][6]byte
	chunk  int // bytes per RDMA write descriptor
	qdepth int
	slot   int // bytes per eager buffer: envelope and payload
	epoch  time.Time

	mu      sync.Mutex
	cond    sync.Cond // on mu: a request completed or something changed
	peers   []*peer   // by rank; the own rank's entry has no VI
	byVI    []*peer   // by VI number
	posted  []rlist   // posted receives by source
	anyPost rlist     // posted receives from AnySource
	unexp   []ulist   // unexpected messages by source
	anyNext int       // where an AnySource receive starts looking
	postSeq uint64
	// unexpected-message memory
	unexpBytes int64
	tmpFree    [][]byte
	umsgFree   []*umsg
	reqFree    []*Request
	// handshakes in progress, by id
	sendIDs              map[uint32]*Request
	recvIDs              map[uint32]*Request
	nextID               uint32
	sendCache, recvCache *rdma.Cache
	anyErr               error // fails receives from AnySource once a peer died
	unconnected          int   // peers neither connected nor gone
	lastConnPoll         int64
	timed                int  // waiters with a deadline: wake them now and then
	changed              bool // something a waiter may care about happened
	finalizing           bool
	finalized            bool
	stats                Stats
	ctxUsed              ctxSet // the context pairs this rank's communicators hold
	tune                 Tuning // the cost model's parameters, once tuned
	tuned                bool
	mc                   mcastEP // multicast groups and datagrams (mcast.go)

	pollers  atomic.Int32 // calls polling right now: the progress goroutine steps aside
	lastPoll atomic.Int64 // when a call last stopped polling (nanos)
	blocked  atomic.Int32 // calls blocked on cond: the progress goroutine must run
	bgStop   chan struct{}
	bgDone   chan struct{}
	bgCtx    pollCtx
	// leader is set while a waiting call blocks on the completion queue
	// (under mu); leaderCtx is its deadline.
	leader    bool
	leaderCtx pollCtx
	stopped   atomic.Bool
	ctx       context.Context // cancelled when the communicator closes
	cancel    context.CancelFunc
	conns     sync.WaitGroup
}

// Stats count what a communicator did.
type Stats struct {
	EagerSent, HandshakeSent         uint64
	EagerReceived, HandshakeReceived uint64
	// Unexpected counts messages that arrived before their receive;
	// Held counts those left in their receive buffers (throttling the
	// sender) because the unexpected bound was reached.
	Unexpected, Held uint64
	// CacheHits and CacheMisses count registration-cache lookups of user
	// buffers (both sides of handshakes).
	CacheHits, CacheMisses uint64
	// Offered counts receive buffers offered to their sender before the
	// message came (a receiver-initiated handshake); OffersUsed counts the
	// messages that arrived straight in such a buffer, and OffersTaken the
	// messages this rank wrote into a peer's offer.
	Offered, OffersUsed, OffersTaken uint64
	// BadEnvelopes counts malformed messages from peers (dropped).
	BadEnvelopes uint64
	// UnexpectedBytes is what unexpected messages hold against the bound
	// now (data copied aside plus a small cost per message);
	// UnexpectedPeak is its highest value so far.
	UnexpectedBytes, UnexpectedPeak int64
	// Rails is the number of rails (NICs) the rank's connections use;
	// above one they are bonded. RailFailures and RailReconnects sum, over
	// the bonded connections, the times one of their rails died (or was
	// down when the connection opened) and came back.
	Rails                        int
	RailFailures, RailReconnects uint64
}

type peerState uint8

const (
	stNone       peerState = iota // no connection yet
	stConnecting                  // our connection request is under way
	stAwaiting                    // our request lost to the lower rank's; waiting for it
	stConnected
	stDead   // failed: operations on it fail with PeerError
	stClosed // finalized normally
)

// peer is this rank's state for one other rank.
type peer struct {
	rank       int
	macs       []net.HardwareAddr // one per rail
	v          link
	state      peerState
	attempt    int
	awaitUntil int64
	err        error

	area []byte // registered: recvDepth receive slots, then as many send slots
	h    descriptors.MemHandle
	rd   []descriptors.Descriptor
	sd   []descriptors.Descriptor
	wd   [maxChunks]descriptors.Descriptor
	rpos ring // receive slots posted, in order
	sfre []int
	wfre []int
	sops opRing // sends posted, in order

	sendq rlist // sends not yet posted (eager copy or RTS), in order
	// Receiver-initiated handshakes (offer.go): messages counted each way,
	// the receive offered to this peer, and the offer it made us.
	msgsSent, msgsRecv uint32
	offered            *Request
	offer              envelope
	hasOffer           bool
	rdmaq              rlist // handshake sends with a CTS and data left to post
	ctrlq              []envelope
	ctrlH              int

	finRecv, finAcked, finSent bool
}

// NewComm builds the world communicator of rank over an opened device,
// given every rank's MAC address on that device's network (macs[rank] is
// this device's). Init and NewLocalWorld use it; call it directly to
// bootstrap some other way. The caller keeps the device and closes it after
// Finalize. Set the job key with WithJobKey.
func NewComm(dev nic.Device, rank int, macs []net.HardwareAddr, opts ...Option) (*Comm, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if dev == nil {
		return newComm(nil, false, rank, oneRail(macs), cfg)
	}
	return newComm([]nic.Device{dev}, false, rank, oneRail(macs), cfg)
}

// NewBondedComm is NewComm over several rails, one device per rail, each
// rail a network of its own: the connections are bonded (package bonding),
// striping large messages over every rail and surviving the loss of all
// but one. macs[rank][r] is rank's address on rail r; devs[r] must be this
// rank's. With one device it is NewComm.
func NewBondedComm(devs []nic.Device, rank int, macs [][]net.HardwareAddr, opts ...Option) (*Comm, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, errors.New("mplite: a bonded world needs at least one device")
	}
	return newComm(devs, false, rank, macs, cfg)
}

func oneRail(macs []net.HardwareAddr) [][]net.HardwareAddr {
	out := make([][]net.HardwareAddr, len(macs))
	for i, m := range macs {
		out[i] = []net.HardwareAddr{m}
	}
	return out
}

// newComm builds a world over devs (nil: a world of one); macs[rank][r] is
// rank's address on rail r.
func newComm(devs []nic.Device, ownDev bool, rank int, macs [][]net.HardwareAddr, cfg config) (*Comm, error) {
	size := len(macs)
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("mplite: rank %d of %d: %w", rank, size, ErrRank)
	}
	var dev nic.Device
	if len(devs) > 0 {
		dev = devs[0]
	}
	c := &Comm{endpoint: &endpoint{cfg: cfg, rank: rank, size: size, dev: dev, devs: devs, ownDev: ownDev, epoch: time.Now(),
		peers: make([]*peer, size), posted: make([]rlist, size), unexp: make([]ulist, size),
		sendIDs: make(map[uint32]*Request), recvIDs: make(map[uint32]*Request),
		slot: envLen + cfg.eagerLimit, qdepth: cfg.recvDepth + maxChunks + 4},
		crank: rank, csize: size, pctx: ctxWorld, cctx: ctxWorldColl}
	c.world = c
	c.cond.L = &c.mu
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.macs = make([][6]byte, size)
	rails := max(1, len(devs))
	for i, ms := range macs {
		if len(ms) != rails {
			c.cancel()
			return nil, fmt.Errorf("mplite: rank %d has %d addresses for %d rails", i, len(ms), rails)
		}
		p := &peer{rank: i}
		for r, m := range ms {
			mac, ok := nic.MAC(m)
			if !ok {
				c.cancel()
				return nil, fmt.Errorf("mplite: rank %d's address %v on rail %d is not a MAC-48", i, m, r)
			}
			p.macs = append(p.macs, append(net.HardwareAddr(nil), mac[:]...))
		}
		mac, _ := nic.MAC(ms[0])
		for j := 0; j < i; j++ {
			if c.macs[j] == mac {
				c.cancel()
				return nil, fmt.Errorf("mplite: ranks %d and %d share the address %v", j, i, ms[0])
			}
		}
		c.macs[i] = mac
		c.peers[i] = p
	}
	c.peers[rank].state = stConnected
	c.unconnected = size - 1
	if dev == nil {
		if size > 1 {
			c.cancel()
			return nil, errors.New("mplite: a world of more than one rank needs a device")
		}
		return c, nil
	}
	for r, d := range devs {
		if hw, ok := nic.MAC(d.HardwareAddr()); !ok || hw != [6]byte(c.peers[rank].macs[r]) {
			c.cancel()
			return nil, fmt.Errorf("mplite: rank %d's device on rail %d has address %v, the world says %v", rank, r, d.HardwareAddr(), macs[rank][r])
		}
	}
	if err := c.openProvider(); err != nil {
		c.cancel()
		return nil, err
	}
	c.bgStop = make(chan struct{})
	c.bgDone = make(chan struct{})
	c.bgCtx.done = c.bgStop
	c.leaderCtx.done = c.bgStop
	go c.background()
	return c, nil
}

func (c *Comm) openProvider() error {
	maxT := c.cfg.maxTransfer
	if maxT == 0 {
		maxT = vi.DefaultMaxTransfer
	}
	maxT = max(maxT, c.slot)
	qd := max(vi.DefaultQueueDepth, c.qdepth)
	o := vi.Options{
		Config:      nic.Config{EtherType: c.cfg.etherType, JobKey: c.cfg.jobKey},
		MaxTransfer: maxT,
		QueueDepth:  qd,
		MaxVIs:      max(vi.DefaultMaxVIs, c.size+8),
		// The communicator polls and spins itself; the provider's waits
		// (only the progress goroutine's) block at once.
		SpinTime:    -1,
		PeerTimeout: c.cfg.peerTimeout,
	}
	if c.cfg.osYield {
		o.PollGrace, o.MaxBlock = sharedGrace, sharedGrace
	}
	f, err := openFabric(c.devs, o, 2*c.qdepth*max(1, c.size-1))
	if err != nil {
		return fmt.Errorf("mplite rank %d: %w", c.rank, err)
	}
	c.fab = f
	c.chunk = f.maxTransfer()
	// MP_Lite's dynamic registration: user buffers of the handshake are
	// looked up before they are registered.
	if c.sendCache, err = f.newCache(0, c.cfg.cacheEntries, c.cfg.cacheBytes); err == nil {
		c.recvCache, err = f.newCache(vi.AccessRDMAWrite, c.cfg.cacheEntries, c.cfg.cacheBytes)
	}
	if err != nil {
		f.close()
		return fmt.Errorf("mplite rank %d: registration cache: %w", c.rank, err)
	}
	return nil
}

// Rank is this rank's number in the communicator, in [0, Size).
func (c *Comm) Rank() int { return c.crank }

// Size is the number of ranks in the communicator.
func (c *Comm) Size() int { return c.csize }

// Stats returns the communicator's counters.
func (c *Comm) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.UnexpectedBytes = c.unexpBytes
	if c.sendCache != nil {
		ss, rs := c.sendCache.Stats(), c.recvCache.Stats()
		s.CacheHits = ss.Hits + rs.Hits
		s.CacheMisses = ss.Misses + rs.Misses
	}
	s.Rails = max(1, len(c.devs))
	for _, p := range c.peers {
		if p.v != nil {
			f, r := p.v.railEvents()
			s.RailFailures += f
			s.RailReconnects += r
		}
	}
	return s
}

func (c *Comm) nanos() int64 { return int64(time.Since(c.epoch)) }

// ---- connections ----

// setState moves p to s, keeping the count of unconnected peers.
func (c *Comm) setState(p *peer, s peerState) {
	wasOpen := p.state == stNone || p.state == stConnecting || p.state == stAwaiting
	isOpen := s == stNone || s == stConnecting || s == stAwaiting
	if wasOpen && !isOpen {
		c.unconnected--
	} else if !wasOpen && isOpen {
		c.unconnected++
	}
	p.state = s
	c.changed = true
}

// setupPeer creates p's VI, its buffers and posts its receives; they are
// credits from the moment the connection exists.
func (c *Comm) setupPeer(p *peer) error {
	if p.v != nil {
		return nil
	}
	r := c.cfg.recvDepth
	area := make([]byte, 2*r*c.slot)
	h, err := c.fab.register(area)
	if err != nil {
		return fmt.Errorf("register buffers: %w", err)
	}
	v, err := c.fab.newLink(c.qdepth)
	if err != nil {
		_ = c.fab.deregister(h)
		return fmt.Errorf("new VI: %w", err)
	}
	p.area, p.h, p.v = area, h, v
	p.rd = make([]descriptors.Descriptor, r)
	p.sd = make([]descriptors.Descriptor, r)
	p.rpos = newRing(r)
	p.sops = newOpRing(r + maxChunks)
	p.sfre = make([]int, 0, r)
	p.wfre = make([]int, 0, maxChunks)
	segs := make([]descriptors.Segment, 2*r+maxChunks)
	for i := range r {
		p.rd[i].Segments = segs[i : i+1 : i+1]
		p.rd[i].Segments[0] = descriptors.Segment{Buf: p.recvSlot(c, i), Handle: h}
		p.sd[i].Segments = segs[r+i : r+i+1 : r+i+1]
		p.sd[i].Segments[0].Handle = h
		p.sfre = append(p.sfre, r-1-i)
	}
	for i := range maxChunks {
		p.wd[i].Segments = segs[2*r+i : 2*r+i+1 : 2*r+i+1]
		p.wfre = append(p.wfre, i)
	}
	for id := v.id(); len(c.byVI) <= id; {
		c.byVI = append(c.byVI, nil)
	}
	c.byVI[v.id()] = p
	for i := range r {
		if err := v.PostRecv(&p.rd[i]); err != nil {
			return fmt.Errorf("post receive: %w", err)
		}
		p.rpos.push(i)
	}
	return nil
}

func (p *peer) recvSlot(c *Comm, i int) []byte {
	return p.area[i*c.slot : (i+1)*c.slot : (i+1)*c.slot]
}

func (p *peer) sendSlot(c *Comm, i int) []byte {
	o := (len(p.rd) + i) * c.slot
	return p.area[o : o+c.slot : o+c.slot]
}

// ensureConn starts connecting to p if nothing has yet.
func (c *Comm) ensureConn(p *peer) {
	if p.state != stNone || c.fab == nil {
		return
	}
	if err := c.setupPeer(p); err != nil {
		c.peerFailed(p, err, true)
		return
	}
	c.setState(p, stConnecting)
	p.attempt++
	attempt, v := p.attempt, p.v
	c.conns.Add(1)
	go func() {
		defer c.conns.Done()
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.connectTimeout)
		err := v.connect(ctx, p.macs)
		cancel()
		c.mu.Lock()
		c.connectResult(p, attempt, err)
		c.mu.Unlock()
		c.cond.Broadcast()
	}()
}

// connectResult handles the end of our connection request to p.
func (c *Comm) connectResult(p *peer, attempt int, err error) {
	if p.attempt != attempt || p.state != stConnecting {
		return // superseded: we accepted p's request instead
	}
	switch {
	case err == nil:
		c.connected(p)
	case errors.Is(err, vi.ErrRejected) && c.rank > p.rank:
		// Both asked at once and the lower rank's request wins: it
		// is on its way.
		c.setState(p, stAwaiting)
		p.awaitUntil = c.nanos() + int64(c.cfg.connectTimeout)
	default:
		c.peerFailed(p, fmt.Errorf("connect: %w", err), true)
	}
}

func (c *Comm) connected(p *peer) {
	c.setState(p, stConnected)
	c.pumpPeer(p)
}

// connectAll starts connections to every peer (a receive from AnySource
// must notice any dead rank).
func (c *Comm) connectAll() {
	if c.unconnected == 0 {
		return
	}
	for _, p := range c.peers {
		c.ensureConn(p)
	}
}

// pollConnRequests answers the connection requests waiting at the
// provider. The rule for two simultaneous requests: the lower rank's wins.
func (c *Comm) pollConnRequests() {
	for {
		req, ok := c.fab.pollRequest()
		if !ok {
			return
		}
		c.onConnRequest(req)
	}
}

func (c *Comm) rankOf(mac net.HardwareAddr) int {
	m, ok := nic.MAC(mac)
	if !ok {
		return -1
	}
	for i := range c.macs {
		if c.macs[i] == m {
			return i
		}
	}
	return -1
}

func (c *Comm) onConnRequest(req connRequest) {
	q := c.rankOf(req.remote())
	if q < 0 || q == c.rank || c.finalized {
		_ = req.reject()
		return
	}
	p := c.peers[q]
	switch p.state {
	case stNone, stAwaiting:
	case stConnecting:
		if c.rank < q {
			_ = req.reject() // ours wins; q will accept it
			return
		}
		// q is lower: its request wins. Abandon ours (its goroutine
		// finds itself superseded) and accept on the same VI; the
		// accept also abandons our request if its goroutine only now
		// started it.
		_ = p.v.Disconnect()
	default:
		_ = req.reject()
		return
	}
	if err := c.setupPeer(p); err != nil {
		_ = req.reject()
		c.peerFailed(p, err, true)
		return
	}
	p.attempt++
	if !c.fab.acceptBlocks() {
		if err := req.accept(p.v, p.macs); err != nil {
			c.peerFailed(p, fmt.Errorf("accept: %w", err), true)
			return
		}
		c.connected(p)
		return
	}
	// A bond's accept waits for the other rails' requests: not under
	// c.mu. The peer counts as connecting meanwhile, so neither our own
	// request nor a second accept starts.
	c.setState(p, stConnecting)
	attempt, v := p.attempt, p.v
	c.conns.Add(1)
	go func() {
		defer c.conns.Done()
		err := req.accept(v, p.macs)
		c.mu.Lock()
		if err != nil {
			err = fmt.Errorf("accept: %w", err)
		}
		c.connectResult(p, attempt, err)
		c.mu.Unlock()
		c.cond.Broadcast()
	}()
}

// checkAwaiting fails peers whose promised connection never came.
func (c *Comm) checkAwaiting(now int64) {
	for _, p := range c.peers {
		if p.state == stAwaiting && now > p.awaitUntil {
			c.peerFailed(p, fmt.Errorf("rank %d never connected after rejecting our request", p.rank), true)
		}
	}
}

// peerFailed handles the loss of p: every pending operation on it fails
// and, if it died rather than finalized, so do receives from AnySource.
func (c *Comm) peerFailed(p *peer, cause error, dead bool) {
	if p.state == stDead || p.state == stClosed {
		return
	}
	if p.finRecv {
		dead = false // it said it was done: this is its Finalize
		cause = errPeerFinalized
	}
	pe := &PeerError{Rank: p.rank, Err: cause}
	p.err = pe
	if dead {
		c.setState(p, stDead)
		if c.anyErr == nil {
			c.anyErr = pe
		}
		for r := c.anyPost.head; r != nil; {
			next := r.next
			c.anyPost.remove(r)
			c.complete(r, pe)
			r = next
		}
	} else {
		c.setState(p, stClosed)
	}
	for _, l := range []*rlist{&p.sendq, &p.rdmaq, &c.posted[p.rank]} {
		for r := l.head; r != nil; {
			next := r.next
			l.remove(r)
			c.complete(r, pe)
			r = next
		}
	}
	for id, r := range c.sendIDs {
		if r.peer == p.rank {
			delete(c.sendIDs, id)
			c.completeHandshake(r, pe)
		}
	}
	for id, r := range c.recvIDs {
		if r.st.Source == p.rank {
			delete(c.recvIDs, id)
			c.completeHandshake(r, pe)
		}
	}
	p.ctrlq, p.ctrlH = p.ctrlq[:0], 0
}
