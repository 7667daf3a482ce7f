package mplite

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ethervia/ethervia/internal/ctxdl"
	"github.com/ethervia/ethervia/mplite/pmi"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/rdma"
	"github.com/ethervia/ethervia/reliability"
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
	// besides its data: its queue entry.
	umsgCost = int64(unsafe.Sizeof(umsg{}))
	// umsgKeep bounds the queue entries kept for reuse after a burst.
	umsgKeep = 4096
	// connPollEvery is how often pending connection requests are looked at
	// while some peer is not connected.
	connPollEvery = int64(time.Millisecond)
	// bgBlock bounds one blocking wait while something must be looked at
	// by the clock: a peer's promised connection, or a connection request
	// the fabric does not wake a waiter for (see blockBound).
	bgBlock = 2 * time.Millisecond
	// idleBlock bounds one blocking wait otherwise: only a completion or a
	// connection request, which end the wait, can change anything. Each
	// rank that wakes for nothing takes a CPU from one with work: with
	// 128 ranks on 2 CPUs, waking every bgBlock kept both CPUs busy.
	idleBlock = 100 * time.Millisecond
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

// peerBufferBudget bounds the receive and send buffers a rank registers for
// connections to every other rank, unless WithRecvDepth chose the depth:
// each connection holds 2·depth slots of an eager message each. With 32
// slots of 64 KiB a 64 KiB Alltoall over 64 ranks touched 65 MB of them per
// rank (of 250 MB reserved), and 1 024 ranks would reserve 4 GB each. The
// budget keeps 32 slots up to 64 ranks, 16 at 128, 8 from 256.
const peerBufferBudget = 256 << 20

// minScaledDepth is the least depth the budget shrinks a connection to: a
// few messages in flight per pair, which is what collectives at that scale
// keep.
const minScaledDepth = 8

// scaledRecvDepth is the receive depth per connection for a job of size
// ranks with slots of slot bytes: depth, or less where connections to every
// other rank would exceed peerBufferBudget, but not below minScaledDepth.
func scaledRecvDepth(depth, size, slot int) int {
	if size < 2 {
		return depth
	}
	fit := peerBufferBudget / (2 * slot * (size - 1))
	return max(min(depth, minScaledDepth), min(depth, fit))
}

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
	// local is an intercommunicator view's own group (world ranks; group
	// is then the remote one), nil otherwise.
	local []int
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
	tables *algoTables // the collectives' algorithms (algo.go)
	rank   int
	size   int
	dev    nic.Device   // rail 0's: multicast joins there
	devs   []nic.Device // one per rail
	ownDev bool
	// launcher is the PMI session Init opened, finalized with the world.
	launcher *pmi.Client
	fab      fabric     // nil in a world of one (fabric.go)
	shmEP    *localEP   // shared memory with the ranks of this host, or nil (local.go)
	addrs    []nic.Addr // every rank's rail-0 MAC and endpoint
	chunk    int        // bytes per RDMA write descriptor
	qdepth   int
	// laneBytes is the longest message, envelope included, that goes on a
	// lane (lane.go).
	laneBytes int
	slot      int // bytes per eager buffer: envelope and payload
	epoch     time.Time

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
	tmp        tmpPool // copies of unexpected data and early envelopes
	umsgFree   []*umsg
	reqFree    []*Request
	stages     [][]byte // staging copies of layout requests, for reuse
	// handshakes in progress, by id
	sendIDs              map[uint32]*Request
	recvIDs              map[uint32]*Request
	nextID               uint32
	sendCache, recvCache *rdma.Cache
	anyErr               error // fails receives from AnySource once a peer died
	unconnected          int   // peers neither connected nor gone
	awaiting             int   // peers in stAwaiting: checkAwaiting watches them
	lastConnPoll         int64
	connRounds           uint64 // progress rounds with a peer unconnected (clockEvery)
	connClock            bool   // the next such round looks at the clock: its caller blocked
	timed                int    // waiters with a deadline (Finalize's drain)
	timedBy              int64  // the earliest of their deadlines (c.nanos)
	changed              bool   // something a waiter may care about happened
	finalizing           bool
	finalized            bool
	stats                Stats
	ctxUsed              ctxSet // the context pairs this rank's communicators hold
	tune                 Tuning // the cost model's parameters, once tuned
	tuned                bool
	mc                   mcastEP // multicast groups and datagrams (mcast.go)

	// polls: the calls polling right now (low 32 bits; the progress
	// goroutine steps aside) and how many stopped (high 32 bits): a count,
	// not a time, so that ending a wait costs no look at the clock, and
	// one word, so that it costs one atomic operation.
	polls atomic.Uint64
	// bgWaiting: the progress goroutine is in (or about to enter) a wait
	// on the fabric, which a call that starts to wait interrupts.
	bgWaiting atomic.Bool
	bgYields  atomic.Uint64 // its waits that a call ended (tests)
	blocked   atomic.Int32  // calls blocked on cond: the progress goroutine must run
	bgStop    chan struct{}
	bgDone    chan struct{}
	bgCtx     ctxdl.Context // the progress goroutine's cq wait deadline
	// leader is set while a waiting call blocks on the completion queue
	// (under mu); leaderCtx is its deadline.
	leader    bool
	leaderCtx ctxdl.Context
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
	// Staged counts the staging copies layout messages needed (longer than
	// the eager limit, or to self); a RunLayout with few long runs needs
	// none.
	Staged uint64
	// SharedMemory counts the ring entries (messages and pieces of
	// writes) taken from ranks of this host, which bypass the NIC.
	SharedMemory uint64
	// SharedCopies counts the long writes from ranks of this host that
	// this rank copied with their sender's help (each end copying part,
	// shm.Entry.Share); SharedCopyHelps counts the ones this rank helped
	// copy, as their sender.
	SharedCopies, SharedCopyHelps uint64
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
	// LaneFailovers counts the bonded connections whose lane (the plain
	// VI on the first NIC that carries small messages) broke, so that they
	// went on through the bond alone; LaneResent counts the messages sent
	// again through the bond then, and LaneDuplicates the messages that
	// came twice (by lane and by bond) and were dropped. LaneReordered
	// counts the messages that overtook an earlier one (a short one on the
	// lane, a long one through the bond) and waited for it.
	LaneFailovers, LaneResent, LaneDuplicates, LaneReordered uint64
	// Driver is the frame driver Init opened the rank's NICs with,
	// "afxdp" or "afpacket" (see Init for how the default chooses); empty
	// for devices the caller opened (NewComm, NewBondedComm) and worlds
	// without a network.
	Driver string
	// DeviceDropped sums the frames the rank's NICs lost before it read
	// them (nic.Stats.RxDropped: full receive rings, the kernel's own
	// drops): what a rank that does not get a CPU in time loses.
	DeviceDropped uint64
	// Transport sums the reliability counters of the rank's connections
	// over the network (every rail of a bonded one, and its lane): data
	// frames sent and sent again, retransmission timeouts, stand-alone
	// acknowledgements, duplicates. Connections through shared memory
	// have none. A collective that runs slower than its frames' wire
	// time shows here whether frames were lost.
	Transport reliability.Stats
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
		return newComm(nil, false, rank, oneRail(macs), cfg.eps, cfg)
	}
	devs := []nic.Device{dev}
	if err := cfg.authenticate(devs); err != nil {
		return nil, fmt.Errorf("mplite: %w", err)
	}
	return newComm(devs, false, rank, oneRail(macs), cfg.eps, cfg)
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
	devs = slices.Clone(devs)
	if err := cfg.authenticate(devs); err != nil {
		return nil, fmt.Errorf("mplite: %w", err)
	}
	return newComm(devs, false, rank, macs, cfg.eps, cfg)
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
func newComm(devs []nic.Device, ownDev bool, rank int, macs [][]net.HardwareAddr, eps []uint16, cfg config) (*Comm, error) {
	size := len(macs)
	if eps != nil && len(eps) != size {
		return nil, fmt.Errorf("mplite: %d endpoints for %d ranks", len(eps), size)
	}
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("mplite: rank %d of %d: %w", rank, size, ErrRank)
	}
	var dev nic.Device
	if len(devs) > 0 {
		dev = devs[0]
	}
	if !cfg.recvDepthSet {
		cfg.recvDepth = scaledRecvDepth(cfg.recvDepth, size, envLen+cfg.eagerLimit)
	}
	slot := envLen + cfg.eagerLimit
	c := &Comm{endpoint: &endpoint{cfg: cfg, tables: newAlgoTables(), rank: rank, size: size, dev: dev, devs: devs, ownDev: ownDev, epoch: time.Now(),
		peers: make([]*peer, size), posted: make([]rlist, size), unexp: make([]ulist, size),
		sendIDs: make(map[uint32]*Request), recvIDs: make(map[uint32]*Request),
		slot: slot, qdepth: cfg.recvDepth + maxChunks + 4,
		tmp: newTmpPool(slot, max(4*int64(slot), cfg.unexpectedLimit/8))},
		crank: rank, csize: size, pctx: ctxWorld, cctx: ctxWorldColl}
	c.world = c
	// With more ranks than CPUs, a call's own goroutine blocks without
	// handing its P on: each hand-off kept the process's sysmon thread
	// polling every 20µs (nic.ThreadWaiter).
	c.leaderCtx.SetHoldThread(cfg.osYield)
	c.cond.L = &c.mu
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.addrs = make([]nic.Addr, size)
	rails := max(1, len(devs))
	for i, ms := range macs {
		if len(ms) != rails {
			c.cancel()
			return nil, fmt.Errorf("mplite: rank %d has %d addresses for %d rails", i, len(ms), rails)
		}
		p := &peer{rank: i}
		var ep uint16
		if eps != nil {
			ep = eps[i]
		}
		for r, m := range ms {
			mac, ok := nic.MAC(m)
			if !ok {
				c.cancel()
				return nil, fmt.Errorf("mplite: rank %d's address %v on rail %d is not a MAC-48", i, m, r)
			}
			p.macs = append(p.macs, append(net.HardwareAddr(nil), mac[:]...))
		}
		mac, _ := nic.MAC(ms[0])
		a := nic.Addr{MAC: mac, EP: ep}
		for j := 0; j < i; j++ {
			if c.addrs[j] == a {
				c.cancel()
				return nil, fmt.Errorf("mplite: ranks %d and %d share the address %v", j, i, a)
			}
		}
		c.addrs[i] = a
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
	if err := c.openLocal(); err != nil {
		c.cancel()
		c.fab.close()
		return nil, err
	}
	c.bgStop = make(chan struct{})
	c.bgDone = make(chan struct{})
	go c.background()
	return c, nil
}

// lineWindowTime is how much of the line rate a connection may have in
// flight: the window that keeps a port's queue short. With the default 256
// frames (384 KB at MTU 1500) a sender fills 30 ms of a 100 Mbit/s port's
// queue, and every message of the next step of a collective waits behind
// it: a 1 MiB pairwise Alltoall on 8 ranks took 780 ms with 256 frames,
// 660 with 32 (the wire's minimum is 587).
const lineWindowTime = 4 * time.Millisecond

// lineOptions sets the window and acknowledgement timing of connections
// on ports of rate bit/s (0: unknown, vi's defaults) over rails NICs, and
// returns the timing of a bond's lanes (lane.go) in VI attributes.
//
// The acknowledgement timing goes on one NIC's provider and on the lanes,
// not on a bond's rails: the bond sends a short message on its first rail
// only while what that rail holds unacknowledged drains within smallQueue,
// and acknowledgements held a millisecond sent them to the other rails (8
// ranks over two 100 Mbit/s NICs, 1 KiB, no lanes: Allreduce 292-322 ->
// 368-374 µs); with lanes, the bond's 1 MiB collectives ran 3-8 % slower
// with it (2026-11-28).
func lineOptions(o *vi.Options, rate uint64, mtu, rails int) (lane vi.Attributes) {
	if rate == 0 {
		return lane
	}
	o.Window = lineWindow(rate, mtu)
	delay, rto := lineAckTiming(rate, mtu)
	if rails == 1 {
		o.AckDelay, o.RTOMin = delay, rto
		return lane
	}
	// A lane (reliable reception) asks for an acknowledgement of every
	// message: it waits as long for the next message to carry it.
	lane.AckDelay, lane.AckReqDelay, lane.RTOMin = delay, delay, rto
	return lane
}

// lineAckFrames: at a known line rate an acknowledgement that has no frame
// of ours to ride on waits as long as the line takes to carry this many full
// frames, about a millisecond at 100 Mbit/s. A collective's connections
// carry a message one way and the next only with the next call: at the
// default 100 µs every message cost the receiver's port an acknowledgement
// frame of its own (120 bytes of line), where a longer wait lets the next
// call's message carry it. 8 ranks at 100 Mbit/s, 1 KiB (2026-11-28):
// Allgather 660 -> 635 µs, Alltoall 690-717 -> 648, Allreduce 351-363 ->
// 278-283 (3 ms measured the same as 1 ms).
const lineAckFrames = 8

// lineAckTiming is the acknowledgement delay and retransmission floor of a
// connection on a port of rate bit/s: lineAckFrames frames' time, where that
// is longer than reliability's default, with a floor for retransmissions
// twice that, so that a held acknowledgement never passes for a lost frame;
// zero (the defaults) on faster lines.
func lineAckTiming(rate uint64, mtu int) (ackDelay, rtoMin time.Duration) {
	d := time.Duration(uint64(8*lineAckFrames*nic.FrameCap(mtu)) * uint64(time.Second) / rate)
	if d <= reliability.DefaultAckDelay {
		return 0, 0
	}
	return d, max(2*d, reliability.DefaultRTOMin)
}

// lineWindow is the window in frames for a port of rate bit/s: what the
// line carries in lineWindowTime, rounded down to a power of two, at least
// 16 and at most vi's default.
func lineWindow(rate uint64, mtu int) int {
	frames := float64(rate) / 8 * lineWindowTime.Seconds() / float64(nic.FrameCap(mtu))
	w := 16
	for w*2 <= int(frames) && w*2 <= vi.DefaultWindow {
		w *= 2
	}
	return w
}

func (c *Comm) openProvider() error {
	maxT := c.cfg.maxTransfer
	if maxT == 0 {
		maxT = vi.DefaultMaxTransfer
	}
	maxT = max(maxT, c.slot)
	qd := max(vi.DefaultQueueDepth, c.qdepth)
	o := vi.Options{
		Config:      nic.Config{EtherType: c.cfg.etherType, JobKey: c.cfg.jobKey, Endpoint: c.addrs[c.rank].EP},
		MaxTransfer: maxT,
		QueueDepth:  qd,
		MaxVIs:      max(vi.DefaultMaxVIs, 2*c.size+8), // rail 0 of a bond also holds the lanes
		// The communicator polls and spins itself; the provider's waits
		// (only the progress goroutine's) block at once.
		SpinTime:    -1,
		PeerTimeout: c.cfg.peerTimeout,
	}
	var lane *vi.Attributes
	if len(c.devs) > 0 {
		l := lineOptions(&o, c.cfg.tuning.Rate, c.devs[0].MTU(), len(c.devs))
		if c.cfg.lane {
			lane = &l
		}
	}
	if c.cfg.osYield {
		o.PollGrace, o.MaxBlock, o.BackgroundNaps = sharedGrace, sharedGrace, true
	}
	f, err := openFabric(c.devs, o, c.cfg.yield, lane, 2*c.qdepth*max(1, c.size-1))
	if err != nil {
		return fmt.Errorf("mplite rank %d: %w", c.rank, err)
	}
	c.fab = f
	f.setCallers(c.polling)
	if bf, ok := f.(*bondFabric); ok {
		c.laneBytes = bf.laneLimit()
	}
	c.chunk = f.maxTransfer()
	// MP_Lite's dynamic registration: user buffers of the handshake are
	// looked up before they are registered.
	if c.sendCache, err = f.newCache(0, c.cfg.cacheEntries, c.cfg.cacheBytes); err == nil {
		// Receive buffers stay registered between messages, but open to
		// remote writes only while a transfer into them is granted.
		c.recvCache, err = f.newCache(vi.AccessGrantedWrite, c.cfg.cacheEntries, c.cfg.cacheBytes)
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
	for _, d := range c.devs {
		s.DeviceDropped += d.Stats().RxDropped
	}
	if c.ownDev {
		s.Driver = c.cfg.driver
	}
	for _, p := range c.peers {
		if p.v != nil {
			f, r := p.v.railEvents()
			s.RailFailures += f
			s.RailReconnects += r
			s.Transport = s.Transport.Add(p.v.transport())
		}
		if sl, ok := p.v.(*shmLink); ok {
			s.SharedCopies += sl.filler.shared
			s.SharedCopyHelps += sl.helped
		}
	}
	return s
}

func (c *Comm) nanos() int64 { return int64(time.Since(c.epoch)) }
