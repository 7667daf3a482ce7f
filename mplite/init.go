package mplite

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/ethervia/ethervia/mplite/bootstrap"
	"github.com/ethervia/ethervia/mplite/pmi"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/afpacket"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/nic/memnic"
)

// rankFromEnv returns the rank and size the launcher set; found is false
// when no launcher variable is set at all.
func rankFromEnv(getenv func(string) string) (rank, size int, found bool, err error) {
	// In the order they are looked at: mprun, MPICH's Hydra (PMI), Open
	// MPI, Slurm.
	rankVars := [...][2]string{
		{"MPLITE_RANK", "MPLITE_SIZE"},
		{"PMI_RANK", "PMI_SIZE"},
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
		{"SLURM_PROCID", "SLURM_NTASKS"},
	}
	for _, v := range rankVars {
		rs, ss := getenv(v[0]), getenv(v[1])
		if rs == "" && ss == "" {
			continue
		}
		if rs == "" || ss == "" {
			return 0, 0, true, fmt.Errorf("%w: %s=%q but %s=%q", ErrEnvironment, v[0], rs, v[1], ss)
		}
		rank, err1 := strconv.Atoi(strings.TrimSpace(rs))
		size, err2 := strconv.Atoi(strings.TrimSpace(ss))
		if err1 != nil || err2 != nil || size < 1 || rank < 0 || rank >= size {
			return 0, 0, true, fmt.Errorf("%w: %s=%q, %s=%q is not a rank of a job", ErrEnvironment, v[0], rs, v[1], ss)
		}
		return rank, size, true, nil
	}
	return 0, 0, false, nil
}

// envConfig is what Init reads besides the rank.
type envConfig struct {
	rank, size int
	ifaces     []string
	job        uint32
	driver     string
	hostfile   string
	// endpoint is this rank's endpoint on its NICs, local the number of
	// the job's ranks that use them (1: this one alone).
	endpoint uint16
	local    int
	// AF_XDP on NICs with several receive queues: the queue to bind
	// (MPLITE_XDP_QUEUE) and whether to ask for a flow rule that steers
	// our EtherType there (MPLITE_XDP_FLOWRULE=1).
	xdpQueue    int
	xdpQueueSet bool
	xdpFlowRule bool
	noRing      bool // MPLITE_AFPACKET_RING=0: recvmmsg(2) instead of the receive ring
}

// readEnv reads the launcher's variables; l is the launcher's PMI session,
// if it offers one, which then gives the rank and size.
func readEnv(ctx context.Context, getenv func(string) string, cfg *config, l *pmi.Client, ni netInfo) (envConfig, bool, error) {
	var e envConfig
	var rank, size int
	found := l != nil
	if found {
		rank, size = l.Rank(), l.Size()
	} else {
		var err error
		rank, size, found, err = rankFromEnv(getenv)
		if err != nil || !found {
			return e, found, err
		}
	}
	e.rank, e.size = rank, size
	if s := getenv("MPLITE_IFACES"); s != "" {
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f != "" {
				e.ifaces = append(e.ifaces, f)
			}
		}
	}
	if size > 1 && len(e.ifaces) == 0 {
		name, _, err := chooseIface(ctx, getenv, l, ni)
		if err != nil {
			return e, true, err
		}
		e.ifaces = []string{name}
	}
	switch s := getenv("MPLITE_JOB"); {
	case cfg.jobKeySet:
		e.job = cfg.jobKey
	case s != "":
		k, err := strconv.ParseUint(strings.TrimSpace(s), 0, 32)
		if err != nil {
			return e, true, fmt.Errorf("%w: MPLITE_JOB=%q is not a 32-bit job key", ErrEnvironment, s)
		}
		e.job = uint32(k)
	case jobIdentity(getenv, l) != "":
		e.job = jobKeyOf(jobIdentity(getenv, l))
	case size > 1:
		return e, true, fmt.Errorf("%w: MPLITE_JOB (the job key) is not set, and no launcher names the job", ErrEnvironment)
	}
	e.driver = cfg.driver
	if e.driver == "" {
		e.driver = getenv("MPLITE_DRIVER")
	}
	if e.driver == "" {
		e.driver = driverAuto
	}
	if !knownDriver(e.driver) {
		return e, true, fmt.Errorf("%w: MPLITE_DRIVER=%q (auto, afpacket or afxdp)", ErrEnvironment, e.driver)
	}
	e.hostfile = getenv("MPLITE_HOSTFILE")
	var err error
	if e.endpoint, e.local, err = endpointFromEnv(getenv); err != nil {
		return e, true, err
	}
	if e.sharesNIC() && e.driver == driverAFXDP {
		return e, true, fmt.Errorf("%w: ranks share this host's NICs, which the afxdp driver cannot (one XDP socket per queue): use afpacket", ErrEnvironment)
	}
	if s := getenv("MPLITE_XDP_QUEUE"); s != "" {
		q, err := strconv.Atoi(s)
		if err != nil || q < 0 {
			return e, true, fmt.Errorf("%w: MPLITE_XDP_QUEUE=%q is not a queue number", ErrEnvironment, s)
		}
		e.xdpQueue, e.xdpQueueSet = q, true
	}
	switch s := getenv("MPLITE_XDP_FLOWRULE"); s {
	case "", "0":
	case "1":
		e.xdpFlowRule = true
	default:
		return e, true, fmt.Errorf("%w: MPLITE_XDP_FLOWRULE=%q (0 or 1)", ErrEnvironment, s)
	}
	switch s := getenv("MPLITE_AFPACKET_RING"); s {
	case "", "1":
	case "0":
		e.noRing = true
	default:
		return e, true, fmt.Errorf("%w: MPLITE_AFPACKET_RING=%q (0 or 1)", ErrEnvironment, s)
	}
	return e, true, nil
}

// Init builds the world communicator from the environment a launcher set.
//
// The rank and size come from MPLITE_RANK and MPLITE_SIZE, else PMI_RANK and
// PMI_SIZE (MPICH's Hydra), OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE
// (Open MPI), or SLURM_PROCID and SLURM_NTASKS (Slurm); with none of them
// the process is a world of one. When the launcher offers PMI (PMI_FD or
// PMI_PORT: Hydra's mpiexec, srun --mpi=pmi2 or pmi1, mprun) and MPLITE_RANK
// is not set, the rank, size and job come from the PMI session instead (see
// package pmi).
//
// MPLITE_IFACES lists the interfaces, one per rail; with more than one the
// connections are bonded over them (see Rails in the package
// documentation). Without it one interface is chosen: the one the
// launcher reached us on, else the one of the default route, else the only
// Ethernet interface that is up. MPLITE_JOB is the job key; without it the
// key is derived from the launcher's job identity (the PMI job id, Slurm's
// job and step, Open MPI's job id). MPLITE_DRIVER picks the frame driver:
// auto (the default) takes afxdp for a rank alone on its host (the
// launcher's local size is 1) and afpacket for ranks that share their
// NICs, or wherever afxdp does not open; afpacket or afxdp force one. For afxdp, MPLITE_XDP_QUEUE is the receive queue to
// bind (default 0) and MPLITE_XDP_FLOWRULE=1 asks the NIC for a rule that
// steers our EtherType to it (afxdp.Config.FlowRule). The devices are opened in the process's network
// namespace. Every rank's address is then read from MPLITE_HOSTFILE if set,
// exchanged through the launcher's PMI key-value store if there is one, or
// discovered by raw-Ethernet announcements under the job key (bounded by
// WithDiscoveryTimeout).
//
// Every frame is authenticated under the job's secret (package nic/auth):
// MPLITE_SECRET (64 hex digits, as mprun sets), else, under PMI, one rank 0
// draws and hands on through the key-value store. Without either Init
// fails with ErrNoSecret, unless MPLITE_AUTH=0 (or WithAuthentication(false))
// turns authentication off for a trusted fabric.
func Init(opts ...Option) (*Comm, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.discoveryTimeout)
	defer cancel()
	l, err := openLauncher(ctx, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("mplite: init: %w", err)
	}
	c, err := initWith(ctx, l, cfg)
	if err != nil {
		closeLauncher(l, false)
		return nil, err
	}
	c.launcher = l
	return c, nil
}

func initWith(ctx context.Context, l *pmi.Client, cfg config) (*Comm, error) {
	e, found, err := readEnv(ctx, os.Getenv, &cfg, l, hostNetInfo())
	if err != nil {
		return nil, fmt.Errorf("mplite: init: %w", err)
	}
	if !found || e.size == 1 {
		// A world of one needs no network.
		return newComm(nil, false, 0, [][]net.HardwareAddr{{{0x02, 0, 0, 0, 0, 1}}}, nil, cfg)
	}
	// Only the key-value exchange can hand on rank 0's secret.
	if !cfg.authOff && cfg.secret == nil && (l == nil || e.hostfile != "") {
		return nil, fmt.Errorf("mplite rank %d: init: %w", e.rank, ErrNoSecret)
	}
	cfg.jobKey = e.job
	ncfg := nic.Config{EtherType: cfg.etherType, JobKey: e.job, Endpoint: e.endpoint}
	devs, driver, err := openDevices(e.ifaces, driverOrder(e.driver, e.sharesNIC(), e.driver != driverAuto || e.xdpQueueKnown()), deviceOpener(e, ncfg, &cfg))
	if err != nil {
		return nil, fmt.Errorf("mplite rank %d: init: %w", e.rank, err)
	}
	cfg.driver = driver // Stats.Driver
	closeDevs := func() {
		for _, d := range devs {
			d.Close()
		}
	}
	// With a secret at hand even the discovery is authenticated; under a
	// launcher without one, rank 0's comes with the addresses.
	if err := cfg.authenticate(devs); err != nil {
		closeDevs()
		return nil, fmt.Errorf("mplite rank %d: init: %w", e.rank, err)
	}
	macs, eps, err := findPeers(ctx, devs, e, &cfg, l)
	if err == nil && !cfg.authOff && cfg.secret == nil {
		if cfg.secret, err = kvsSecretRead(ctx, l); err == nil {
			err = cfg.authenticate(devs)
		}
	}
	if err != nil {
		closeDevs()
		return nil, fmt.Errorf("mplite rank %d: init: %w", e.rank, err)
	}
	c, err := newComm(devs, true, e.rank, macs, eps, cfg)
	if err != nil {
		closeDevs()
		return nil, err
	}
	return c, nil
}

// findPeers reads the hostfile, asks the launcher's key-value store, or
// runs the bootstrap discovery on every rail at once. It returns every
// rank's address on every rail.
func findPeers(ctx context.Context, devs []nic.Device, e envConfig, cfg *config, l *pmi.Client) ([][]net.HardwareAddr, []uint16, error) {
	if e.hostfile != "" {
		f, err := os.Open(e.hostfile)
		if err != nil {
			return nil, nil, fmt.Errorf("hostfile: %w", err)
		}
		defer f.Close()
		tab, eps, err := bootstrap.ParseHostfile(f, e.size, len(e.ifaces))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.hostfile, err)
		}
		if eps[e.rank] != e.endpoint {
			return nil, nil, fmt.Errorf("%w: %s gives rank %d endpoint %d, the environment %d", ErrEnvironment, e.hostfile, e.rank, eps[e.rank], e.endpoint)
		}
		return tab, eps, nil
	}
	if l != nil {
		if !cfg.authOff && cfg.secret == nil {
			if err := kvsSecretPublish(ctx, l, e.rank); err != nil {
				return nil, nil, err
			}
		}
		return kvsPeers(ctx, l, e.rank, e.size, e.endpoint, devs)
	}
	byRail := make([][]nic.Addr, len(devs))
	errs := make([]error, len(devs))
	var wg sync.WaitGroup
	for r, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			byRail[r], errs[r] = bootstrap.Discover(ctx, d, bootstrap.Config{Rank: e.rank, Size: e.size, Rail: r,
				EtherType: cfg.etherType, JobKey: e.job, Endpoint: e.endpoint})
			if errs[r] != nil {
				errs[r] = fmt.Errorf("rail %d (%s): %w", r, e.ifaces[r], errs[r])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	macs := make([][]net.HardwareAddr, e.size)
	eps := make([]uint16, e.size)
	for rank := range macs {
		eps[rank] = byRail[0][rank].EP
		for r := range devs {
			a := byRail[r][rank]
			if a.EP != eps[rank] {
				return nil, nil, fmt.Errorf("%w: rank %d has endpoint %d on rail 0 and %d on rail %d", ErrEnvironment, rank, eps[rank], a.EP, r)
			}
			macs[rank] = append(macs[rank], net.HardwareAddr(a.MAC[:]))
		}
	}
	return macs, eps, nil
}

// NewLocalWorld builds n ranks in this process, joined by an in-process
// memnic switch: for tests and examples without root. Run each rank in its
// own goroutine and Finalize every one. Polling calls yield the processor
// (WithYield) unless an option says otherwise; WithLocalFaults and
// WithLocalMTU shape the switch.
func NewLocalWorld(n int, opts ...Option) ([]*Comm, error) {
	if n < 1 {
		return nil, fmt.Errorf("mplite: local world of %d ranks: %w", n, ErrRank)
	}
	cfg, err := buildConfig(append([]Option{WithYield(true)}, opts...))
	if err != nil {
		return nil, err
	}
	if !cfg.jobKeySet {
		cfg.jobKey = 0x6d706c6c // "mpll"
	}
	cfg.shmTag = randomTag() // worlds of one process share the job key
	if !cfg.authOff && cfg.secret == nil {
		s, err := auth.NewSecret()
		if err != nil {
			return nil, err
		}
		cfg.secret = &s
	}
	k := max(1, cfg.rails)
	perHost := max(1, cfg.perHost)
	ports := make([][]*memnic.Port, n)
	macs := make([][]net.HardwareAddr, n)
	eps := make([]uint16, n)
	closeAll := func(comms []*Comm) {
		for _, c := range comms {
			if c != nil {
				c.teardown()
			}
		}
		for _, ps := range ports {
			for _, p := range ps {
				p.Close()
			}
		}
	}
	for r := range k {
		// Each rail a network of its own, as bonding wants.
		sw := memnic.NewSwitch(cfg.seed + uint64(r))
		for i := range ports {
			eps[i] = uint16(i % perHost)
			pc := memnic.PortConfig{Config: nic.Config{EtherType: cfg.etherType, JobKey: cfg.jobKey, Endpoint: eps[i]},
				MTU: cfg.mtu, Faults: cfg.faults}
			if eps[i] > 0 {
				pc.ShareWith = ports[i-int(eps[i])][r] // the host's endpoint 0
			}
			p, err := sw.NewPort(pc)
			if err != nil {
				closeAll(nil)
				return nil, fmt.Errorf("mplite: local world: rail %d: %w", r, err)
			}
			ports[i] = append(ports[i], p)
			macs[i] = append(macs[i], p.HardwareAddr())
		}
	}
	comms := make([]*Comm, n)
	for i := range comms {
		devs := make([]nic.Device, k)
		for r, p := range ports[i] {
			devs[r] = p
		}
		if err := cfg.authenticate(devs); err != nil {
			closeAll(comms)
			return nil, fmt.Errorf("mplite: local world: %w", err)
		}
		c, err := newComm(devs, true, i, macs, eps, cfg)
		if err != nil {
			closeAll(comms)
			return nil, err
		}
		comms[i] = c
	}
	return comms, nil
}

// sharesNIC reports that other ranks of the job use this rank's NICs
// (afpacket.Config.Shared).
func (e *envConfig) sharesNIC() bool { return e.local > 1 }

// ringSize is the AF_PACKET receive ring of one of n ranks that share a
// NIC, or a CPU: the default ring divided among them, but at least
// minRing. The kernel zeroes and pins each ring: 128 ranks with 8 MiB each
// spent a fifth of their start-up's CPU clearing pages, while the traffic
// between ranks of a host goes through shared memory, not these rings,
// and ranks that take turns on a CPU cannot drain more than their share.
func ringSize(n int) int {
	return max(minRing, afpacket.DefaultRingSize/max(1, n))
}

// ranksPerCPU is how many of a job's size ranks take turns on each CPU
// when they all share cpus of them (MPLITE_CPUS; 0: a CPU each).
func ranksPerCPU(size, cpus int) int {
	if cpus <= 0 {
		return 1
	}
	return (size + cpus - 1) / cpus
}

// minRing is the smallest ring ringSize gives a rank: 512 frames of a
// standard MTU.
const minRing = 1 << 20
