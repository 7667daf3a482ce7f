// Package testbed builds a cluster on one machine: hosts are network
// namespaces joined by veth pairs, either directly (Pair) or through one Linux
// bridge per rail, each bridge in a namespace of its own (Switch).
//
// Everything is made with netlink (github.com/vishvananda/netlink) and netns
// (github.com/vishvananda/netns); nothing shells out to ip or tc. Every link
// is created directly inside its namespace, so a testbed never puts a link in
// the caller's namespace and deleting its namespaces removes all of it.
//
// Names carry the builder's pid, so Sweep can remove what a killed process
// left behind:
//
//	namespace of host i:      ev[run]-<tag>-<pid>-<rand>-h<i>
//	namespace of rail r:      ev[run]-<tag>-<pid>-<rand>-sw<r>   (Switch only)
//	host interface on rail r: eth<r>                       (inside the host)
//	bridge of rail r:         br0                          (inside sw<r>)
//	bridge port to host i:    h<i>                         (inside sw<r>)
//
// Hosts get fixed, locally administered MAC addresses 02:45:56:<r>:<i>
// (host index as two bytes) and, unless Config.NoIPv4, the address
// 198.18.<r>.<i+1>/24 on rail r. IPv6 is disabled in every namespace so that
// no DAD, router solicitation or MLD frames appear on the links.
//
// A port is (host, rail): the path that carries frames to that host on that
// rail. In the Switch topology rate limits, faults and link flaps act on the
// bridge-side veth (its egress towards the host), which every frame forwarded
// by the bridge crosses whatever driver sent it. In the Pair topology faults
// act on the host's own veth ingress, and rate limits and flaps on the peer
// host's veth (its egress towards the host); there a sender that bypasses its
// qdisc (PACKET_QDISC_BYPASS, AF_XDP) is not rate limited, and frames an XDP
// program redirects to AF_XDP never reach tc ingress.
package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/bpf"
	"github.com/ethervia/ethervia/nic"
)

// Topology is how the hosts of a testbed are joined.
type Topology int

const (
	// Pair joins exactly two hosts with one veth pair per rail.
	Pair Topology = iota
	// Switch gives each rail a Linux bridge in a namespace of its own, with
	// one veth per host into it.
	Switch
)

// String returns "pair" or "switch".
func (t Topology) String() string {
	switch t {
	case Pair:
		return "pair"
	case Switch:
		return "switch"
	}
	return fmt.Sprintf("Topology(%d)", int(t))
}

// Limits of a Config.
const (
	MaxRails = 8
	MaxHosts = 253 // the host part of 198.18.<rail>.<host+1> stays below 255
	MaxTag   = 16
)

// Config describes a testbed. The zero value of every field but Hosts has a
// useful default.
type Config struct {
	// Hosts is the number of hosts, at least 2 (exactly 2 for Pair).
	Hosts int
	// Rails is the number of NICs per host, 1 to MaxRails; 0 means 1.
	Rails int
	// Topology is Pair (the zero value) or Switch.
	Topology Topology
	// MTU of every link; 0 means 1500. The kernel sets the upper bound
	// (65535 for veth); a value it refuses makes New fail and clean up.
	MTU int
	// Rate is the per-port tbf rate limit in bit/s applied at build time;
	// 0 means none. ParseRate reads tc-style strings.
	Rate uint64
	// RailRates, when set, gives each rail its own rate (bit/s, 0 for
	// none) in place of Rate: bonds over unequal NICs. Its length must be
	// Rails.
	RailRates []uint64
	// Name is a short tag (letters and digits, up to MaxTag) in every
	// namespace name; "" means "tb".
	Name string
	// IPv4 is kept for source compatibility: every host interface gets
	// 198.18.<rail>.<host+1>/24 by default, whether IPv4 is set or not.
	IPv4 bool
	// NoIPv4 leaves the host interfaces without IPv4 addresses. Setting it
	// together with IPv4 is an error.
	NoIPv4 bool
	// Duplex makes a port's rate limit (Rate, RailRates, SetRate) shape
	// both directions, as a full-duplex link of that rate: what the host
	// sends into the port as well as what the port sends to the host.
	// Without it only the direction towards the host is limited, and a
	// host sends at the veth's speed.
	Duplex bool
	// FaultEtherType is the EtherType the fault injector acts on; other
	// frames pass untouched. 0 means nic.DefaultEtherType. Use AllEtherTypes
	// to fault every frame.
	FaultEtherType uint16
}

// railRate is the rate of rail r's ports: RailRates[r] if RailRates is set,
// else Rate.
func (c Config) railRate(r int) uint64 {
	if c.RailRates != nil {
		return c.RailRates[r]
	}
	return c.Rate
}

// AllEtherTypes as Config.FaultEtherType makes the fault injector act on
// every frame. (0x0000 is not a real EtherType, so nothing is lost.)
const AllEtherTypes = 0xFFFF

// withDefaults checks c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Rails == 0 {
		c.Rails = 1
	}
	if c.MTU == 0 {
		c.MTU = 1500
	}
	if c.Name == "" {
		c.Name = "tb"
	}
	if c.FaultEtherType == 0 {
		c.FaultEtherType = nic.DefaultEtherType
	}
	switch c.Topology {
	case Pair:
		if c.Hosts != 2 {
			return c, fmt.Errorf("testbed: pair topology needs exactly 2 hosts, not %d", c.Hosts)
		}
	case Switch:
		if c.Hosts < 2 || c.Hosts > MaxHosts {
			return c, fmt.Errorf("testbed: switch topology needs 2 to %d hosts, not %d", MaxHosts, c.Hosts)
		}
	default:
		return c, fmt.Errorf("testbed: unknown topology %d", int(c.Topology))
	}
	if c.Rails < 1 || c.Rails > MaxRails {
		return c, fmt.Errorf("testbed: rails must be 1 to %d, not %d", MaxRails, c.Rails)
	}
	// 68 is the IPv4 minimum and the veth minimum; the kernel checks the top.
	if c.MTU < 68 {
		return c, fmt.Errorf("testbed: MTU %d below 68", c.MTU)
	}
	if !validTag(c.Name) {
		return c, fmt.Errorf("testbed: name tag %q: want 1 to %d letters or digits", c.Name, MaxTag)
	}
	if c.IPv4 && c.NoIPv4 {
		return c, errors.New("testbed: IPv4 and NoIPv4 both set")
	}
	if c.RailRates != nil && len(c.RailRates) != c.Rails {
		return c, fmt.Errorf("testbed: %d rail rates for %d rails", len(c.RailRates), c.Rails)
	}
	for r := 0; r < c.Rails; r++ {
		if rate := c.railRate(r); rate != 0 {
			if _, err := tbfParams(rate, c.MTU); err != nil {
				return c, fmt.Errorf("testbed: rail %d: %w", r, err)
			}
		}
	}
	return c, nil
}

// ErrClosed is returned by the methods of a closed Testbed and its Hosts.
var ErrClosed = errors.New("testbed: closed")

// Testbed is a built cluster. Its methods are safe for concurrent use.
type Testbed struct {
	cfg   Config
	base  string // "ev[run]-<tag>-<pid>-<rand>", see Prefix
	hosts []*Host

	mu       sync.Mutex
	closed   bool
	spaces   []*space // every namespace made, hosts first, in order made
	switches []*space // per rail, Switch only
	faults   map[portKey]*bpf.TCFault
	procs    []*os.Process
	spawner  spawner
}

// space is one namespace the testbed made.
type space struct {
	name string
	ns   netns.NsHandle  // open while the testbed is; -1 if not yet open
	nl   *netlink.Handle // netlink sockets inside ns
	made bool            // the bind mount exists and must be removed
}

type portKey struct{ host, rail int }

// Host is one host of a testbed: a network namespace with one interface per
// rail. Its fields are read-only.
type Host struct {
	// Index is the host's position in the testbed, from 0.
	Index int
	// Name is the namespace name (as in /run/netns).
	Name string
	// Ifaces holds the interface name per rail, inside the namespace.
	Ifaces []string
	// MACs holds the interface's hardware address per rail.
	MACs []net.HardwareAddr
	// IPs holds the interface's IPv4 address per rail; nil with NoIPv4.
	IPs []net.IP

	tb *Testbed
	sp *space
}

// New builds a testbed and returns once every port forwards frames. On any
// failure it removes everything it built and returns the error. The caller
// must Close the testbed. It gives up waiting for links after 30 s; see
// NewContext.
func New(cfg Config) (*Testbed, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	return NewContext(ctx, cfg)
}

// NewContext is New with a context that bounds the wait for the links to
// come up.
func NewContext(ctx context.Context, cfg Config) (*Testbed, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	tb := &Testbed{cfg: cfg, faults: make(map[portKey]*bpf.TCFault),
		spawner: spawner{reqs: make(chan spawnReq), quit: make(chan struct{}), dead: make(chan struct{})}}
	if err := tb.build(ctx); err != nil {
		if cerr := tb.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("testbed: cleanup after failed build: %w", cerr))
		}
		return nil, err
	}
	return tb, nil
}

func (tb *Testbed) build(ctx context.Context) error {
	cfg := tb.cfg
	var err error
	tb.base, err = tb.makeSpaces()
	if err != nil {
		return err
	}
	if cfg.Topology == Switch {
		for _, sw := range tb.switches {
			if err := setupBridge(sw, cfg.MTU); err != nil {
				return err
			}
		}
	}
	for _, h := range tb.hosts {
		for r := 0; r < cfg.Rails; r++ {
			h.Ifaces[r] = hostIface(r)
			h.MACs[r] = hostMAC(h.Index, r)
			if h.IPs != nil {
				h.IPs[r] = HostIP(h.Index, r)
			}
		}
	}
	switch cfg.Topology {
	case Pair:
		a, b := tb.hosts[0], tb.hosts[1]
		for r := 0; r < cfg.Rails; r++ {
			if err := addVeth(a.sp, b.sp, hostIface(r), hostIface(r), a.MACs[r], b.MACs[r], cfg.MTU); err != nil {
				return err
			}
		}
	case Switch:
		for _, h := range tb.hosts {
			for r, sw := range tb.switches {
				if err := addVeth(h.sp, sw, hostIface(r), portIface(h.Index), h.MACs[r], switchMAC(h.Index, r), cfg.MTU); err != nil {
					return err
				}
				if err := attachPort(sw, portIface(h.Index)); err != nil {
					return err
				}
			}
		}
	}
	for _, h := range tb.hosts {
		for r := 0; r < cfg.Rails; r++ {
			var ip net.IP
			if h.IPs != nil {
				ip = h.IPs[r]
			}
			if err := upHostIface(h.sp, h.Ifaces[r], ip); err != nil {
				return err
			}
		}
	}
	var ls []link
	for _, h := range tb.hosts {
		for r := 0; r < cfg.Rails; r++ {
			ls = append(ls, tb.links(h.Index, r)...)
		}
	}
	if err := waitLinks(ctx, ls); err != nil {
		return err
	}
	for _, h := range tb.hosts {
		for r := 0; r < cfg.Rails; r++ {
			if rate := cfg.railRate(r); rate != 0 {
				if err := tb.setRate(h.Index, r, rate); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// makeSpaces creates every namespace under a fresh base name and returns it.
func (tb *Testbed) makeSpaces() (string, error) {
	cfg := tb.cfg
	var lastErr error
	for try := 0; try < 8; try++ {
		base, err := baseName(cfg.Name, os.Getpid())
		if err != nil {
			return "", err
		}
		// The first namespace claims the base name: O_EXCL on its mount
		// point fails if another testbed drew the same random part.
		sp, err := makeSpace(hostNS(base, 0))
		if errors.Is(err, os.ErrExist) {
			lastErr = err
			continue
		}
		if sp != nil {
			tb.spaces = append(tb.spaces, sp)
		}
		if err != nil {
			return "", err
		}
		names := make([]string, 0, cfg.Hosts+cfg.Rails)
		for i := 1; i < cfg.Hosts; i++ {
			names = append(names, hostNS(base, i))
		}
		if cfg.Topology == Switch {
			for r := 0; r < cfg.Rails; r++ {
				names = append(names, switchNS(base, r))
			}
		}
		for _, n := range names {
			sp, err := makeSpace(n)
			if sp != nil {
				tb.spaces = append(tb.spaces, sp)
			}
			if err != nil {
				return "", err
			}
		}
		for i := 0; i < cfg.Hosts; i++ {
			tb.hosts = append(tb.hosts, &Host{
				Index:  i,
				Name:   tb.spaces[i].name,
				Ifaces: make([]string, cfg.Rails),
				MACs:   make([]net.HardwareAddr, cfg.Rails),
				IPs:    make([]net.IP, cfg.Rails),
				tb:     tb,
				sp:     tb.spaces[i],
			})
			if cfg.NoIPv4 {
				tb.hosts[i].IPs = nil
			}
		}
		tb.switches = tb.spaces[cfg.Hosts:]
		return base, nil
	}
	return "", fmt.Errorf("testbed: no free namespace name after 8 tries: %w", lastErr)
}

// makeSpace creates the named namespace, disables IPv6 in it, brings lo up
// and opens a netlink handle inside. On error it returns what it made, for
// cleanup, or nil.
func makeSpace(name string) (*space, error) {
	sp := &space{name: name, ns: -1}
	if err := sharedNetnsDir(); err != nil {
		return nil, err
	}
	err := runFresh(func() error {
		ns, err := netns.NewNamed(name)
		if err != nil {
			// NewNamed may have left its mount point behind; one that
			// existed before (another testbed's) is not ours to remove.
			if !errors.Is(err, os.ErrExist) {
				_ = deleteNamed(name)
			}
			return fmt.Errorf("testbed: create namespace %s: %w", name, err)
		}
		sp.ns, sp.made = ns, true
		// Before any link exists, so every link is born without IPv6.
		for _, f := range []string{"all", "default"} {
			p := "/proc/sys/net/ipv6/conf/" + f + "/disable_ipv6"
			if err := os.WriteFile(p, []byte("1\n"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("testbed: namespace %s: disable IPv6: %w", name, err)
			}
		}
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("testbed: namespace %s: netlink: %w", name, err)
		}
		sp.nl = h
		lo, err := h.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("testbed: namespace %s: find lo: %w", name, err)
		}
		if err := h.LinkSetUp(lo); err != nil {
			return fmt.Errorf("testbed: namespace %s: lo up: %w", name, err)
		}
		return nil
	})
	if !sp.made {
		return nil, err
	}
	return sp, err
}

// release closes the namespace's handles; the namespace itself stays.
func (sp *space) release() {
	if sp.nl != nil {
		sp.nl.Close()
		sp.nl = nil
	}
	if sp.ns >= 0 {
		sp.ns.Close()
		sp.ns = -1
	}
}

// setupBridge creates br0 in sw: STP off, forward delay 0, no multicast
// snooping (so everything floods like a dumb switch), up.
func setupBridge(sw *space, mtu int) error {
	off := false
	ageing := uint32(300 * 100) // 300 s in USER_HZ, the usual
	br := &netlink.Bridge{
		LinkAttrs:         netlink.LinkAttrs{Name: bridgeName, MTU: mtu},
		MulticastSnooping: &off,
		AgeingTime:        &ageing,
	}
	if err := sw.nl.LinkAdd(br); err != nil {
		return fmt.Errorf("testbed %s: add bridge: %w", sw.name, err)
	}
	link, err := sw.nl.LinkByName(bridgeName)
	if err != nil {
		return fmt.Errorf("testbed %s: find bridge: %w", sw.name, err)
	}
	if err := setBridgeTimers(sw, link.Attrs().Index); err != nil {
		return err
	}
	if err := sw.nl.LinkSetUp(link); err != nil {
		return fmt.Errorf("testbed %s: bridge up: %w", sw.name, err)
	}
	return nil
}

// addVeth creates a veth pair with end a (named an) in namespace sa and end b
// (named bn) in namespace sb; the link is made inside sa, so it never exists
// in the caller's namespace.
func addVeth(sa, sb *space, an, bn string, amac, bmac net.HardwareAddr, mtu int) error {
	v := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: an, MTU: mtu, HardwareAddr: amac},
		PeerName:         bn,
		PeerHardwareAddr: bmac,
		PeerMTU:          uint32(mtu),
		PeerNamespace:    netlink.NsFd(int(sb.ns)),
	}
	if err := sa.nl.LinkAdd(v); err != nil {
		return fmt.Errorf("testbed: veth %s/%s - %s/%s (mtu %d): %w", sa.name, an, sb.name, bn, mtu, err)
	}
	return nil
}

// attachPort enslaves the port to the bridge and brings it up.
func attachPort(sw *space, port string) error {
	br, err := sw.nl.LinkByName(bridgeName)
	if err != nil {
		return fmt.Errorf("testbed %s: find bridge: %w", sw.name, err)
	}
	p, err := sw.nl.LinkByName(port)
	if err != nil {
		return fmt.Errorf("testbed %s: find port %s: %w", sw.name, port, err)
	}
	if err := sw.nl.LinkSetMasterByIndex(p, br.Attrs().Index); err != nil {
		return fmt.Errorf("testbed %s: enslave %s: %w", sw.name, port, err)
	}
	if err := sw.nl.LinkSetUp(p); err != nil {
		return fmt.Errorf("testbed %s: %s up: %w", sw.name, port, err)
	}
	return nil
}

// upHostIface gives the host interface its address and brings it up.
func upHostIface(sp *space, name string, ip net.IP) error {
	l, err := sp.nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("testbed %s: find %s: %w", sp.name, name, err)
	}
	if ip != nil {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(24, 32)}}
		if err := sp.nl.AddrAdd(l, a); err != nil {
			return fmt.Errorf("testbed %s: address %s on %s: %w", sp.name, a.IPNet, name, err)
		}
	}
	if err := sp.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("testbed %s: %s up: %w", sp.name, name, err)
	}
	return nil
}

// Hosts returns the hosts in index order. The slice is a copy.
func (tb *Testbed) Hosts() []*Host {
	return append([]*Host(nil), tb.hosts...)
}

// Host returns host i, or nil if there is none.
func (tb *Testbed) Host(i int) *Host {
	if i < 0 || i >= len(tb.hosts) {
		return nil
	}
	return tb.hosts[i]
}

// Config returns the testbed's configuration with defaults filled in.
func (tb *Testbed) Config() Config { return tb.cfg }

// Namespaces returns the names of every namespace the testbed made: the
// hosts', then (Switch) the rails'.
func (tb *Testbed) Namespaces() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	names := make([]string, len(tb.spaces))
	for i, sp := range tb.spaces {
		names[i] = sp.name
	}
	return names
}

// SwitchNamespace returns the name of rail r's bridge namespace, or "" in the
// Pair topology.
func (tb *Testbed) SwitchNamespace(r int) string {
	if r < 0 || r >= len(tb.switches) {
		return ""
	}
	return tb.switches[r].name
}

// Close kills the processes started with Host.Start that still run, detaches
// fault injectors and deletes every namespace the testbed made, which
// destroys its veths and bridges (the kernel finishes that in the
// background). It is idempotent; later calls return nil.
func (tb *Testbed) Close() error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		return nil
	}
	tb.closed = true
	close(tb.spawner.quit)
	var errs []error
	for _, p := range tb.procs {
		// A process left running would keep its namespace, and so its
		// links, alive. Signal is safe after Wait (pidfd), so nothing
		// that is not ours is hit.
		if err := p.Signal(unix.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("testbed: kill pid %d: %w", p.Pid, err))
		}
	}
	tb.procs = nil
	for k, f := range tb.faults {
		if err := f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("testbed: close fault injector of host %d rail %d: %w", k.host, k.rail, err))
		}
		delete(tb.faults, k)
	}
	for _, sp := range tb.spaces {
		sp.release()
	}
	for _, sp := range tb.spaces {
		if sp.made {
			if err := deleteNamed(sp.name); err != nil {
				errs = append(errs, err)
				continue
			}
			sp.made = false
		}
	}
	return errors.Join(errs...)
}

// addProc records a started child for Close.
func (tb *Testbed) addProc(p *os.Process) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		// Close ran while the child was starting; its namespace is gone.
		_ = p.Signal(unix.SIGKILL)
		return
	}
	tb.procs = append(tb.procs, p)
}
