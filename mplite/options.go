package mplite

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/vi"
)

// Defaults of the options.
const (
	// DefaultEagerLimit is the largest message sent eagerly. MP_Lite used
	// about 12 KB on M-VIA, where a copy beat a registration below 8 KB.
	// Here registration is cheap (no pages to pin: vi's
	// BenchmarkRegisterVsCopy) but the handshake's round trip is not, and
	// on this project's machine the handshake stopped being slower than
	// eager sends at 64 KiB (bench/eager.sh, docs/performance.md), so the
	// switch sits there and the throughput curve has no dip. Each
	// connection holds 2*DefaultRecvDepth buffers of this size.
	DefaultEagerLimit = 64 << 10
	// DefaultRecvDepth is the number of receive (and send) buffers per
	// connection: the credits a peer may use before this rank re-posts.
	DefaultRecvDepth = 32
	// DefaultUnexpectedLimit bounds the bytes of unexpected eager messages
	// copied aside before senders are throttled.
	DefaultUnexpectedLimit = 64 << 20
	// DefaultSpinTime is how long a waiting call polls before it blocks.
	DefaultSpinTime = 50 * time.Microsecond
	// YieldSpinTime is the spin time under WithProcessYield unless one is
	// chosen: a rank that yields as it polls costs the others little, and
	// one that blocks pays a wake-up per message (8 ranks on 2 CPUs: an
	// 8-byte allreduce took about 450 us with 50 us of spin, 310-390 us
	// with 1 ms or 10 ms).
	YieldSpinTime = time.Millisecond
	// DefaultPeerTimeout is how long a silent peer lives.
	DefaultPeerTimeout = vi.DefaultPeerTimeout
	// DefaultDiscoveryTimeout bounds the bootstrap of Init.
	DefaultDiscoveryTimeout = 60 * time.Second
	// MaxEagerLimit is the largest eager limit accepted.
	MaxEagerLimit = 1 << 20
)

// Option configures Init, NewComm and NewLocalWorld.
type Option func(*config) error

type config struct {
	eagerLimit       int
	eagerSet         bool // WithEagerLimit chose it: MPLITE_EAGER_LIMIT is ignored
	recvDepth        int
	recvDepthSet     bool // WithRecvDepth chose it: it does not shrink with the job
	unexpectedLimit  int64
	spin             time.Duration
	yield            bool
	osYield          bool // yield to other processes too (sched_yield)
	sharedCPUs       int  // every rank of the job shares this many CPUs (0: one each)
	spinSet          bool // an option chose spin: MPLITE_SPIN is ignored
	yieldSet         bool // an option chose yield: MPLITE_YIELD is ignored
	lockedCallers    bool // callers run on locked OS threads: never Gosched
	peerTimeout      time.Duration
	connectTimeout   time.Duration
	discoveryTimeout time.Duration
	driver           string
	etherType        uint16
	jobKey           uint32
	jobKeySet        bool
	mtu              int
	perHost          int          // NewLocalWorld's ranks per host (WithLocalRanksPerHost)
	shm              bool         // ranks of one host talk through shared memory
	lane             bool         // bonded connections send small messages on lanes (lane.go)
	laneSet          bool         // WithBondLane chose: MPLITE_BOND_LANE is ignored
	shmSet           bool         // WithSharedMemory chose shm: MPLITE_SHM is ignored
	shmTag           string       // names the world's inboxes (default: the job key)
	shmCopies        bool         // writes go through the rings even where the peer could read ours (tests)
	secret           *auth.Secret // the job's shared secret (WithSecret, MPLITE_SECRET)
	authOff          bool         // frames go without authentication tags
	authSet          bool         // WithAuthentication chose: MPLITE_AUTH is ignored
	authKey          *auth.Key    // derived from secret and jobKey once, by authenticate
	eps              []uint16     // NewComm's and NewBondedComm's endpoints (WithEndpoints)
	rails            int
	faults           memnic.Faults
	seed             uint64
	maxTransfer      int
	layoutStaged     bool // long layout messages always go through a staging copy
	layoutSet        bool // WithLayoutRDMA chose: MPLITE_LAYOUT_RDMA is ignored
	cacheEntries     int
	cacheBytes       int64
	// collectives
	algos       map[string]string // overrides by collective
	algoSet     []string          // collectives overridden by WithAlgorithm
	tuning      Tuning
	tuneMeasure bool
	tuneSet     bool // an option chose the tuning: MPLITE_TUNING is ignored
	rateSet     bool // WithPortRate or MPLITE_RATE chose tuning.Rate
	phasedTh    int
	phasedAuto  bool
}

func defaultConfig() config {
	return config{
		eagerLimit:       DefaultEagerLimit,
		recvDepth:        DefaultRecvDepth,
		unexpectedLimit:  DefaultUnexpectedLimit,
		spin:             DefaultSpinTime,
		peerTimeout:      DefaultPeerTimeout,
		discoveryTimeout: DefaultDiscoveryTimeout,
		etherType:        nic.DefaultEtherType,
		mtu:              9000,
		seed:             1,
		cacheEntries:     64,
		cacheBytes:       1 << 30,
		tuning:           DefaultTuning(),
		phasedTh:         DefaultPhasedThreshold,
		shm:              true,
		lane:             true,
	}
}

func buildConfig(opts []Option) (config, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	if cfg.connectTimeout == 0 {
		cfg.connectTimeout = cfg.peerTimeout
	}
	if err := cfg.collEnv(os.Getenv); err != nil {
		return cfg, err
	}
	if err := cfg.layoutEnv(os.Getenv); err != nil {
		return cfg, err
	}
	if err := cfg.eagerEnv(os.Getenv); err != nil {
		return cfg, err
	}
	if err := cfg.pollEnv(os.Getenv); err != nil {
		return cfg, err
	}
	if err := envSwitch(os.Getenv, "MPLITE_SHM", cfg.shmSet, &cfg.shm); err != nil {
		return cfg, err
	}
	if err := cfg.authEnv(os.Getenv); err != nil {
		return cfg, err
	}
	if err := envSwitch(os.Getenv, "MPLITE_BOND_LANE", cfg.laneSet, &cfg.lane); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// pollEnv applies MPLITE_SPIN (a Go duration; negative: block at once) and
// MPLITE_YIELD (1: polling yields to other goroutines and processes, 0:
// it does not) unless options chose them. mprun sets MPLITE_YIELD=1 when
// it runs more ranks than the machine has CPUs, as Open MPI yields when
// oversubscribed: a rank that spins there takes the CPU from the rank it
// waits for.
func (c *config) pollEnv(getenv func(string) string) error {
	spinChosen := c.spinSet
	if s := getenv("MPLITE_SPIN"); s != "" && !c.spinSet {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%w: MPLITE_SPIN=%q is not a duration (e.g. 20us)", ErrEnvironment, s)
		}
		c.spin, spinChosen = d, true
	}
	if s := getenv("MPLITE_CPUS"); s != "" && c.sharedCPUs == 0 {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("%w: MPLITE_CPUS=%q is not a CPU count", ErrEnvironment, s)
		}
		c.sharedCPUs = n
	}
	if err := envSwitch(getenv, "MPLITE_YIELD", c.yieldSet, &c.osYield); err != nil {
		return err
	}
	if !c.yieldSet {
		c.yield = c.osYield // no option chose either: the variable sets both
	}
	if c.osYield && !spinChosen {
		c.spin = YieldSpinTime
	}
	return nil
}

// grace is how long the communicator's progress goroutine leaves progress
// to waiting calls after their last poll (openProvider sets the
// provider's).
func (c *config) grace() time.Duration {
	if c.osYield {
		return sharedGrace
	}
	return bgGrace
}

// eagerEnv applies MPLITE_EAGER_LIMIT (bytes) unless an option set the
// limit: like MPI libraries' eager-limit variables, it lets a launcher or a
// benchmark move the protocol switch without a rebuild.
func (c *config) eagerEnv(getenv func(string) string) error {
	s := getenv("MPLITE_EAGER_LIMIT")
	if s == "" || c.eagerSet {
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > MaxEagerLimit {
		return fmt.Errorf("%w: MPLITE_EAGER_LIMIT=%q is not a byte count in [0, %d]", ErrEnvironment, s, MaxEagerLimit)
	}
	c.eagerLimit = n
	return nil
}

// WithLayoutRDMA says whether a message longer than the eager limit whose
// memory is a RunLayout moves by RDMA straight from and into its runs
// (the default, true) or through a staging copy, as other layouts do.
// MPLITE_LAYOUT_RDMA=0 turns it off for a whole job (to compare).
func WithLayoutRDMA(on bool) Option {
	return func(c *config) error {
		c.layoutStaged, c.layoutSet = !on, true
		return nil
	}
}

// layoutEnv applies MPLITE_LAYOUT_RDMA (0 or 1).
func (c *config) layoutEnv(getenv func(string) string) error {
	switch s := getenv("MPLITE_LAYOUT_RDMA"); {
	case s == "" || c.layoutSet:
	case s == "0" || s == "1":
		c.layoutStaged = s == "0"
	default:
		return fmt.Errorf("%w: MPLITE_LAYOUT_RDMA=%q is not 0 or 1", ErrEnvironment, s)
	}
	return nil
}

// WithEagerLimit sets the largest message sent eagerly (copied into a
// registered buffer); longer ones go by handshake and RDMA write. All ranks
// must use the same limit. Zero is allowed: then every non-empty message
// goes by handshake.
func WithEagerLimit(n int) Option {
	return func(c *config) error {
		if n < 0 || n > MaxEagerLimit {
			return fmt.Errorf("mplite: eager limit %d outside [0, %d]", n, MaxEagerLimit)
		}
		c.eagerLimit, c.eagerSet = n, true
		return nil
	}
}

// WithRecvDepth sets the receive buffers posted per connection (the
// peer's credits) and the send buffers per connection. Without it a job of
// more than 64 ranks posts fewer than DefaultRecvDepth, so that the buffers
// of connections to every other rank stay within peerBufferBudget (at least
// minScaledDepth per connection).
func WithRecvDepth(n int) Option {
	return func(c *config) error {
		if n < 2 || n > 1024 {
			return fmt.Errorf("mplite: receive depth %d outside [2, 1024]", n)
		}
		c.recvDepth, c.recvDepthSet = n, true
		return nil
	}
}

// WithSharedMemory chooses whether ranks that share a NIC (ranks of one
// host) exchange messages through shared memory (the default) or through
// the NIC like ranks of different hosts. It overrides MPLITE_SHM (0 or 1).
func WithSharedMemory(on bool) Option {
	return func(c *config) error {
		c.shm, c.shmSet = on, true
		return nil
	}
}

// envSwitch applies environment variable name, a switch ("1" on, "0"
// off), to *dst unless an option chose (chosen); unset or empty leaves it.
// Anything else is an error.
func envSwitch(getenv func(string) string, name string, chosen bool, dst *bool) error {
	if chosen {
		return nil
	}
	switch v := getenv(name); v {
	case "":
	case "0", "1":
		*dst = v == "1"
	default:
		return fmt.Errorf("%w: %s=%q (0 or 1)", ErrEnvironment, name, v)
	}
	return nil
}

// WithBondLane chooses whether a rank with several NICs sends its small
// messages (envelopes and eager data up to the bond's stripe threshold) on
// a plain VI of its first NIC, beside the bond that carries the RDMA
// writes (the default), or through the bond like everything else. It
// overrides MPLITE_BOND_LANE (0 or 1). See "Bonded ranks" in the package
// documentation.
func WithBondLane(on bool) Option {
	return func(c *config) error {
		c.lane, c.laneSet = on, true
		return nil
	}
}

// WithUnexpectedLimit bounds the bytes of unexpected eager messages this
// rank copies aside; past it they stay in their receive buffers and the
// senders run out of credits until receives are posted.
func WithUnexpectedLimit(bytes int64) Option {
	return func(c *config) error {
		if bytes < 0 {
			return fmt.Errorf("mplite: unexpected limit %d is negative", bytes)
		}
		c.unexpectedLimit = bytes
		return nil
	}
}

// WithSpinTime sets how long a waiting call polls before it blocks;
// negative means never poll-wait (block at once).
func WithSpinTime(d time.Duration) Option {
	return func(c *config) error {
		c.spin, c.spinSet = d, true
		return nil
	}
}

// WithLockedCallers says that the calls come from goroutines locked to
// their OS threads, as every call from C through cgo is (libmpich.so.12):
// polls then never call runtime.Gosched, which on a locked thread hands
// the processor to another thread and takes it back, tens of microseconds
// each time (a round trip from C through cgo took 55 us instead of 4 with
// it). Yielding to other processes (WithProcessYield, MPLITE_YIELD=1) is
// unchanged.
func WithLockedCallers() Option {
	return func(c *config) error {
		c.lockedCallers = true
		return nil
	}
}

// WithYield makes polling calls yield the processor between polls. Set it
// when several ranks share one process's processors (NewLocalWorld sets
// it), where a spinning rank would starve the rank it waits for; leave it
// off for ranks on locked OS threads, where a yield costs tens of
// microseconds.
func WithYield(yield bool) Option {
	return func(c *config) error {
		c.yield, c.yieldSet = yield, true
		return nil
	}
}

// WithSharedCPUs tells the collective selector that every rank of the job
// runs on the same cpus processors (mprun's testbed on one machine), so an
// algorithm cannot finish faster than the whole job's messages and bytes
// spread over them; it then prefers fewer messages over a shorter chain.
// MPLITE_CPUS sets it from the environment; mprun sets that when ranks
// outnumber CPUs.
func WithSharedCPUs(cpus int) Option {
	return func(c *config) error {
		if cpus < 0 {
			return fmt.Errorf("mplite: %d shared CPUs", cpus)
		}
		c.sharedCPUs = cpus
		return nil
	}
}

// WithProcessYield makes polling calls also give the processor to other
// processes (sched_yield) between polls, as Open MPI's yield_when_idle
// does: for more ranks than CPUs on one machine. It implies WithYield.
// MPLITE_YIELD=1 sets both. Unless a spin time is chosen, waiting calls
// then spin for YieldSpinTime, and the background goroutines look in only
// every 10 ms while calls wait: each of their wake-ups would take a CPU
// from some rank.
func WithProcessYield(yield bool) Option {
	return func(c *config) error {
		c.osYield, c.yieldSet = yield, true
		if yield {
			c.yield = true
		}
		return nil
	}
}

// WithPeerTimeout sets how long a silent peer lives before its operations
// fail with ErrPeerDead (the VI layer's PeerTimeout).
func WithPeerTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("mplite: peer timeout %v is not positive", d)
		}
		c.peerTimeout = d
		return nil
	}
}

// WithConnectTimeout bounds how long opening a connection may take before
// the peer is declared dead (default: the peer timeout).
func WithConnectTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("mplite: connect timeout %v is not positive", d)
		}
		c.connectTimeout = d
		return nil
	}
}

// WithDiscoveryTimeout bounds Init's raw-Ethernet discovery of the other
// ranks.
func WithDiscoveryTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("mplite: discovery timeout %v is not positive", d)
		}
		c.discoveryTimeout = d
		return nil
	}
}

// WithDriver chooses Init's frame driver, "auto", "afpacket" or "afxdp",
// overriding MPLITE_DRIVER (see Init).
func WithDriver(name string) Option {
	return func(c *config) error {
		if !knownDriver(name) {
			return fmt.Errorf("mplite: unknown driver %q (auto, afpacket or afxdp)", name)
		}
		c.driver = name
		return nil
	}
}

// WithJobKey sets the job key of NewComm and NewLocalWorld (Init takes it
// from MPLITE_JOB unless this is given).
func WithJobKey(key uint32) Option {
	return func(c *config) error {
		c.jobKey, c.jobKeySet = key, true
		return nil
	}
}

// WithEtherType sets the EtherType of every frame (default 0x88B5).
func WithEtherType(t uint16) Option {
	return func(c *config) error {
		if t < 0x0600 {
			return fmt.Errorf("mplite: EtherType %#04x is a length, not a type", t)
		}
		c.etherType = t
		return nil
	}
}

// WithLocalRails gives NewLocalWorld k rails, each a memnic switch of its
// own, and bonds every rank over them (default 1: no bonding).
func WithLocalRails(k int) Option {
	return func(c *config) error {
		if k < 1 || k > 8 {
			return fmt.Errorf("mplite: %d local rails, want 1 to 8", k)
		}
		c.rails = k
		return nil
	}
}

// WithLocalMTU sets the MTU of NewLocalWorld's memnic ports (default 9000).
func WithLocalMTU(mtu int) Option {
	return func(c *config) error {
		if mtu < 256 || mtu > 65535 {
			return fmt.Errorf("mplite: local MTU %d outside [256, 65535]", mtu)
		}
		c.mtu = mtu
		return nil
	}
}

// WithEndpoints gives NewComm and NewBondedComm every rank's endpoint on
// its NICs (nic.Config.Endpoint), indexed by rank, for ranks that share a
// host's NICs; each rank's own device must have been opened with its
// endpoint (and, for AF_PACKET, afpacket.Config.Shared). Without it every
// rank is endpoint 0.
func WithEndpoints(eps []uint16) Option {
	return func(c *config) error {
		for r, ep := range eps {
			if ep == nic.EndpointAll {
				return fmt.Errorf("mplite: rank %d: endpoint %#x is every endpoint, not one", r, ep)
			}
		}
		c.eps = append([]uint16(nil), eps...)
		return nil
	}
}

// WithLocalRanksPerHost makes NewLocalWorld put n consecutive ranks on
// each host: their ports share one MAC per rail (memnic.PortConfig.
// ShareWith) and the ranks are the host's endpoints 0 to n-1, as ranks that
// share a node's NICs are.
func WithLocalRanksPerHost(n int) Option {
	return func(c *config) error {
		if n < 1 || n >= nic.EndpointAll {
			return fmt.Errorf("mplite: %d ranks per host", n)
		}
		c.perHost = n
		return nil
	}
}

// WithLocalFaults makes NewLocalWorld's memnic ports lose, duplicate,
// reorder or corrupt frames, drawn from seed, so that tests are
// deterministic in what the switch does.
func WithLocalFaults(seed uint64, f memnic.Faults) Option {
	return func(c *config) error {
		c.seed, c.faults = seed, f
		return nil
	}
}

// WithMaxTransfer sets the largest VI descriptor (one RDMA write of a
// handshake message; default: the provider's, 1 MiB).
func WithMaxTransfer(n int) Option {
	return func(c *config) error {
		if n < 0 || n > vi.MaxMaxTransfer {
			return fmt.Errorf("mplite: max transfer %d outside [0, %d]", n, vi.MaxMaxTransfer)
		}
		c.maxTransfer = n
		return nil
	}
}

// WithRegistrationCache bounds the registration cache of user buffers used
// by the handshake protocol (default 64 entries, 1 GiB).
func WithRegistrationCache(entries int, bytes int64) Option {
	return func(c *config) error {
		if entries < 1 || bytes < 1 {
			return fmt.Errorf("mplite: registration cache of %d entries, %d bytes", entries, bytes)
		}
		c.cacheEntries, c.cacheBytes = entries, bytes
		return nil
	}
}
