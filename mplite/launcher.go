package mplite

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ethervia/ethervia/internal/localaddr"
	"github.com/ethervia/ethervia/mplite/pmi"
	"github.com/ethervia/ethervia/nic"
)

// openLauncher connects to the launcher's PMI server when the environment
// offers one (PMI_FD or PMI_PORT) and mprun's own variables are not set.
// It returns nil, nil when there is none.
func openLauncher(ctx context.Context, getenv func(string) string) (*pmi.Client, error) {
	if getenv("MPLITE_RANK") != "" || !pmi.Offered(getenv) {
		return nil, nil
	}
	c, err := pmi.FromEnv(ctx, getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEnvironment, err)
	}
	return c, nil
}

// jobIdentity is the launcher's name for this job, the same in every rank
// and different in every job (and step): the source of the job key when
// MPLITE_JOB is not set. "" when no launcher names the job.
func jobIdentity(getenv func(string) string, l *pmi.Client) string {
	if l != nil {
		return "pmi:" + l.JobID()
	}
	if j := getenv("SLURM_JOB_ID"); j != "" {
		return "slurm:" + j + "." + getenv("SLURM_STEP_ID")
	}
	if j := getenv("OMPI_MCA_ess_base_jobid"); j != "" {
		return "ompi:" + j
	}
	if j := getenv("PMIX_NAMESPACE"); j != "" {
		return "pmix:" + j
	}
	return ""
}

// jobKeyOf hashes a job identity into a job key. 0 is avoided so that a
// derived key never looks unset.
func jobKeyOf(identity string) uint32 {
	sum := sha256.Sum256([]byte("ethervia job key\x00" + identity))
	if k := binary.BigEndian.Uint32(sum[:4]); k != 0 {
		return k
	}
	return 1
}

// netInfo is what chooseIface asks of the host; tests replace it.
type netInfo struct {
	interfaces func() ([]net.Interface, error)
	addrs      func(net.Interface) ([]net.Addr, error)
	routeTable func() (io.ReadCloser, error)
	// routeTo returns the local address the kernel would use towards ip.
	routeTo func(ip net.IP) (net.IP, error)
	lookup  func(ctx context.Context, host string) ([]net.IP, error)
}

func hostNetInfo() netInfo {
	return netInfo{
		interfaces: net.Interfaces,
		addrs:      func(i net.Interface) ([]net.Addr, error) { return i.Addrs() },
		routeTable: func() (io.ReadCloser, error) { return os.Open("/proc/net/route") },
		routeTo:    localaddr.Toward,
		lookup: func(ctx context.Context, host string) ([]net.IP, error) {
			return net.DefaultResolver.LookupIP(ctx, "ip", host)
		},
	}
}

// chooseIface picks the interface of a one-rail job when MPLITE_IFACES is
// not set, in this order: the interface Hydra's -iface names
// (MPIR_CVAR_NEMESIS_TCP_NETWORK_IFACE); the interface holding the address
// our PMI_PORT connection came from; the one holding the address the launcher knows us
// by (Hydra's MPIR_CVAR_CH3_INTERFACE_HOSTNAME); the one that routes to the
// launcher's own address (Open MPI's HNP URI, Slurm's launch node); the one
// that carries the default route; and the only Ethernet interface that is
// up. why says which rule chose it.
func chooseIface(ctx context.Context, getenv func(string) string, l *pmi.Client, ni netInfo) (name, why string, err error) {
	byIP := func(ip net.IP) string {
		if ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
			return ""
		}
		ifs, err := ni.interfaces()
		if err != nil {
			return ""
		}
		for _, ifc := range ifs {
			addrs, _ := ni.addrs(ifc)
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) && len(ifc.HardwareAddr) == 6 {
					return ifc.Name
				}
			}
		}
		return ""
	}
	if n := getenv("MPIR_CVAR_NEMESIS_TCP_NETWORK_IFACE"); n != "" {
		return n, "the launcher's -iface", nil
	}
	if l != nil {
		if a, ok := l.LocalAddr().(*net.TCPAddr); ok {
			if n := byIP(a.IP); n != "" {
				return n, "the address of the PMI connection", nil
			}
		}
	}
	if h := getenv("MPIR_CVAR_CH3_INTERFACE_HOSTNAME"); h != "" {
		ips := []net.IP{net.ParseIP(h)}
		if ips[0] == nil {
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			ips, _ = ni.lookup(lctx, h)
			cancel()
		}
		for _, ip := range ips {
			if n := byIP(ip); n != "" {
				return n, "the launcher's name for this host", nil
			}
		}
	}
	for _, s := range []string{launcherURIHost(getenv("OMPI_MCA_orte_hnp_uri")), getenv("SLURM_LAUNCH_NODE_IPADDR")} {
		if ip := net.ParseIP(s); ip != nil && !ip.IsLoopback() {
			if local, err := ni.routeTo(ip); err == nil {
				if n := byIP(local); n != "" {
					return n, "the route to the launcher", nil
				}
			}
		}
	}
	if n := defaultRouteIface(ni); n != "" {
		return n, "the default route", nil
	}
	ifs, err := ni.interfaces()
	if err != nil {
		return "", "", err
	}
	var up []string
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp != 0 && ifc.Flags&net.FlagLoopback == 0 && len(ifc.HardwareAddr) == 6 {
			up = append(up, ifc.Name)
		}
	}
	if len(up) == 1 {
		return up[0], "the only Ethernet interface that is up", nil
	}
	return "", "", fmt.Errorf("%w: MPLITE_IFACES is not set, and no launcher address, default route or single interface names one (up: %v)",
		ErrEnvironment, up)
}

// launcherURIHost returns the IPv4 host of Open MPI's
// "jobid;tcp://host:port;..." URI, or "".
func launcherURIHost(uri string) string {
	for _, part := range strings.Split(uri, ";") {
		if rest, ok := strings.CutPrefix(part, "tcp://"); ok {
			if h, _, err := net.SplitHostPort(rest); err == nil {
				return h
			}
		}
	}
	return ""
}

// defaultRouteIface reads the IPv4 routing table for the interface of the
// default route (destination and mask 0), or "".
func defaultRouteIface(ni netInfo) string {
	f, err := ni.routeTable()
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if len(f) >= 8 && f[1] == "00000000" && f[7] == "00000000" {
			return f[0]
		}
	}
	return ""
}

// kvsKey is where rank r publishes its addresses.
func kvsKey(r int) string { return "ethervia-mac-" + strconv.Itoa(r) }

// kvsPeers publishes this rank's MAC on every rail and its endpoint
// ("MAC[,MAC...]/EP") through the launcher's key-value store and reads every
// rank's: nothing goes on the wire.
func kvsPeers(ctx context.Context, l *pmi.Client, rank, size int, ep uint16, devs []nic.Device) ([][]net.HardwareAddr, []uint16, error) {
	mine := make([]string, len(devs))
	for r, d := range devs {
		mine[r] = d.HardwareAddr().String()
	}
	if err := l.Put(ctx, kvsKey(rank), strings.Join(mine, ",")+"/"+strconv.Itoa(int(ep))); err != nil {
		return nil, nil, fmt.Errorf("publish addresses: %w", err)
	}
	if err := l.Fence(ctx); err != nil {
		return nil, nil, fmt.Errorf("exchange addresses: %w", err)
	}
	macs := make([][]net.HardwareAddr, size)
	eps := make([]uint16, size)
	for r := range size {
		v, err := l.Get(ctx, kvsKey(r))
		if err != nil {
			return nil, nil, fmt.Errorf("addresses of rank %d: %w", r, err)
		}
		if macs[r], eps[r], err = parseKVSAddrs(v, len(devs)); err != nil {
			return nil, nil, fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return macs, eps, nil
}

// parseKVSAddrs reads one rank's "MAC[,MAC...]/EP" entry.
func parseKVSAddrs(v string, rails int) ([]net.HardwareAddr, uint16, error) {
	list, epStr, ok := strings.Cut(v, "/")
	ep, err := strconv.ParseUint(epStr, 10, 16)
	if !ok || err != nil || ep == nic.EndpointAll {
		return nil, 0, fmt.Errorf("%w: published %q, want MAC[,MAC...]/ENDPOINT", ErrEnvironment, v)
	}
	parts := strings.Split(list, ",")
	if len(parts) != rails {
		return nil, 0, fmt.Errorf("%w: published %d addresses, this rank has %d rails", ErrEnvironment, len(parts), rails)
	}
	macs := make([]net.HardwareAddr, 0, rails)
	for _, p := range parts {
		hw, err := net.ParseMAC(p)
		if err != nil || len(hw) != 6 {
			return nil, 0, fmt.Errorf("%w: published %q", ErrEnvironment, v)
		}
		macs = append(macs, hw)
	}
	return macs, uint16(ep), nil
}

// closeLauncher ends the PMI session: finalize after an orderly end, a
// plain close otherwise.
func closeLauncher(l *pmi.Client, orderly bool) error {
	if l == nil {
		return nil
	}
	if !orderly {
		return l.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Finalize(ctx); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("mplite: launcher: %w", err)
	}
	return nil
}

// endpointFromEnv returns this rank's endpoint on its host's NICs and how
// many ranks of the job share them (1: none but this one; at least the
// endpoint plus one): MPLITE_ENDPOINT and
// MPLITE_LOCAL_SIZE (mprun), else the launcher's local rank and local size
// (Hydra's MPI_LOCALRANKID and MPI_LOCALNRANKS, Open MPI's
// OMPI_COMM_WORLD_LOCAL_RANK and _SIZE, Slurm's SLURM_LOCALID and
// SLURM_STEP_TASKS_PER_NODE). Without any, endpoint 0 alone.
func endpointFromEnv(getenv func(string) string) (ep uint16, local int, err error) {
	num := func(name string, limit uint64) (uint64, bool, error) {
		s := strings.TrimSpace(getenv(name))
		if s == "" {
			return 0, false, nil
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v >= limit {
			return 0, false, fmt.Errorf("%w: %s=%q", ErrEnvironment, name, s)
		}
		return v, true, nil
	}
	for _, pair := range [...][2]string{
		{"MPLITE_ENDPOINT", "MPLITE_LOCAL_SIZE"},
		{"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
		{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
		{"SLURM_LOCALID", ""},
	} {
		v, ok, err := num(pair[0], nic.EndpointAll)
		if err != nil {
			return 0, 0, err
		}
		if !ok {
			continue
		}
		var n uint64
		if pair[1] != "" {
			if n, _, err = num(pair[1], 1<<20); err != nil {
				return 0, 0, err
			}
		} else {
			n = slurmMaxTasksPerNode(getenv("SLURM_STEP_TASKS_PER_NODE"))
		}
		return uint16(v), int(max(n, v+1)), nil
	}
	return 0, 1, nil
}

// slurmMaxTasksPerNode reads Slurm's "2(x3),1" form: the most tasks any
// node of the step runs.
func slurmMaxTasksPerNode(s string) uint64 {
	var most uint64
	for _, part := range strings.Split(s, ",") {
		n, _ := strconv.ParseUint(strings.TrimSpace(strings.SplitN(part, "(", 2)[0]), 10, 32)
		most = max(most, n)
	}
	return most
}
