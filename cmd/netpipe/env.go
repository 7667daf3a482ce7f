package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/ethervia/ethervia/bpf"
	"github.com/ethervia/ethervia/cmd/netpipe/internal/netpipe"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/afpacket"
	"github.com/ethervia/ethervia/nic/afxdp"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/testbed"
	"golang.org/x/sys/unix"
)

// modules lists the -module choices: the library's raw and tcp, plus the
// layers wired in as they are built. Names mapped to nil are known but not
// built yet, and -module rejects them with a clear error.
func modules() netpipe.Modules {
	return netpipe.DefaultModules()
}

func randomJobKey() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:]) | 1 // never 0, so it is visibly set
}

func (o *options) filter() nic.Filter {
	return nic.Filter{EtherType: uint16(o.ethertype), JobKey: uint32(o.job)}
}

func (o *options) endpoint(role netpipe.Role) netpipe.Endpoint {
	return netpipe.Endpoint{
		Role: role, Filter: o.filter(), Spin: o.spin, Window: o.window, Bond: o.bond,
		Timeout: o.timeout, Integrity: o.integrity,
	}
}

// memEnv runs both ends in this process: frame modules over one memnic
// switch per link, tcp over loopback.
func memEnv(o *options, mod netpipe.Module) (*environment, error) {
	env := &environment{kind: "mem", driver: "memnic", mtu: o.mtu}
	if env.mtu == 0 {
		env.mtu = 1500
	}
	tx, rx := o.endpoint(netpipe.Transmitter), o.endpoint(netpipe.Receiver)
	tx.Yield, rx.Yield = true, true
	if !mod.Frames() {
		env.driver = "kernel"
		env.mtu = 65536 // loopback's
		if o.drop != 0 || o.corrupt != 0 || o.links != 1 || o.set["mtu"] {
			return nil, errors.New("-mem runs tcp over loopback: -drop, -corrupt, -links and -mtu do not apply")
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("mem: tcp over loopback: %w", err)
		}
		env.closers = append(env.closers, func() error { ln.Close(); return nil })
		rx.Listener, tx.Addr = ln, ln.Addr().String()
		env.describe = "in process, tcp over loopback (127.0.0.1)"
		env.notes = append(env.notes, "-mem: the tcp module runs over loopback (127.0.0.1), not over a memnic link")
		env.ends = []end{{ep: tx}, {ep: rx}}
		return env, nil
	}
	if o.set["driver"] {
		env.notes = append(env.notes, fmt.Sprintf("-mem: -driver %s ignored, frames go over memnic", o.driver))
	}
	faults := memnic.Faults{Loss: o.drop, Corrupt: o.corrupt}
	for l := range o.links {
		sw := memnic.NewSwitch(o.seed + uint64(l))
		var ports [2]*memnic.Port
		for i := range ports {
			p, err := sw.NewPort(memnic.PortConfig{
				Config: nic.Config{EtherType: uint16(o.ethertype), JobKey: uint32(o.job)},
				MTU:    env.mtu, Faults: faults,
			})
			if err != nil {
				env.close()
				return nil, fmt.Errorf("mem: link %d: %w", l, err)
			}
			env.closers = append(env.closers, p.Close)
			ports[i] = p
		}
		var devs [2]nic.Device
		for i, p := range ports {
			d, err := o.authenticate(mod, p)
			if err != nil {
				env.close()
				return nil, fmt.Errorf("mem: link %d: %w", l, err)
			}
			devs[i] = d
		}
		tx.Devices = append(tx.Devices, devs[0])
		rx.Devices = append(rx.Devices, devs[1])
		tx.PeerMACs = append(tx.PeerMACs, ports[1].HardwareAddr())
		rx.PeerMACs = append(rx.PeerMACs, ports[0].HardwareAddr())
	}
	env.describe = "in process over memnic"
	env.ends = []end{{ep: tx}, {ep: rx}}
	return env, nil
}

// openDevice opens the driver on one interface in the calling thread's
// namespace.
func openDevice(o *options, iface string, ep uint16) (nic.Device, error) {
	cfg := nic.Config{EtherType: uint16(o.ethertype), JobKey: uint32(o.job), Endpoint: ep}
	switch o.driver {
	case "afpacket":
		shared := o.sameHost || o.set["endpoint"] || o.set["peer-endpoint"]
		return afpacket.Open(afpacket.Config{Config: cfg, Iface: iface, Shared: shared})
	case "afxdp":
		return afxdp.Open(afxdp.Config{Config: cfg, Iface: iface})
	}
	return nil, fmt.Errorf("unknown driver %q", o.driver)
}

// faultSetter is testbed's fault injector, present once package bpf's tc
// program is built into it.
type faultSetter interface {
	SetFault(host, rail int, c bpf.FaultConfig) error
}

// localEnv builds a private two-host testbed and runs one end in each
// host's namespace.
func localEnv(ctx context.Context, o *options, mod netpipe.Module) (*environment, error) {
	topo := testbed.Pair
	if o.rates != nil || o.drop != 0 {
		topo = testbed.Switch // rate limits and faults sit on the switch ports
	}
	cfg := testbed.Config{Hosts: 2, Rails: o.links, Topology: topo, MTU: o.mtu, Name: "np"}
	if o.rates != nil {
		if err := cfg.SetRates(o.rates); err != nil {
			return nil, fmt.Errorf("-rate: %w", err)
		}
	}
	tb, err := testbed.NewContext(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("-local: %w", err)
	}
	env := &environment{kind: "local", driver: o.driver, mtu: tb.Config().MTU}
	env.closers = append(env.closers, tb.Close)
	env.describe = fmt.Sprintf("local testbed (%s topology", topo)
	switch {
	case len(o.rates) > 1:
		env.describe += ", links at " + o.rate
	case o.rate != "":
		env.describe += ", " + o.rate + " per link"
	}
	if o.drop != 0 {
		env.describe += fmt.Sprintf(", drop %g", o.drop)
	}
	env.describe += ")"
	if o.drop != 0 {
		fs, ok := any(tb).(faultSetter)
		if !ok {
			env.close()
			return nil, errors.New("-drop needs the testbed's fault injector, which is not built yet")
		}
		for h := range 2 {
			for r := range o.links {
				if err := fs.SetFault(h, r, bpf.FaultConfig{Drop: o.drop}); err != nil {
					env.close()
					return nil, fmt.Errorf("local testbed: -drop: %w", err)
				}
			}
		}
	}
	hosts := []*testbed.Host{tb.Host(0), tb.Host(1)}
	eps := []netpipe.Endpoint{o.endpoint(netpipe.Transmitter), o.endpoint(netpipe.Receiver)}
	if o.sameHost {
		// Two ranks of one node: both ends share host 0's NICs as
		// endpoints 0 and 1.
		hosts[1] = hosts[0]
		eps[0].Endpoint, eps[0].PeerEndpoint = 0, 1
		eps[1].Endpoint, eps[1].PeerEndpoint = 1, 0
		env.describe += ", both ends on one host sharing its NIC"
	}
	if mod.Frames() {
		for i, h := range hosts {
			if o.procs && i == 1 {
				break // the receiver process opens its own
			}
			err := h.Do(func() error {
				for _, iface := range h.Ifaces {
					d, err := openDevice(o, iface, eps[i].Endpoint)
					if err != nil {
						return err
					}
					env.closers = append(env.closers, d.Close)
					if d, err = o.authenticate(mod, d); err != nil {
						return err
					}
					eps[i].Devices = append(eps[i].Devices, d)
				}
				return nil
			})
			if err != nil {
				env.close()
				return nil, fmt.Errorf("local testbed: host %d: %w", i, err)
			}
			eps[i].PeerMACs = hosts[1-i].MACs
		}
	} else {
		env.driver = "kernel"
		if len(hosts[1].IPs) == 0 {
			env.close()
			return nil, errors.New("local testbed: hosts have no IPv4 addresses for tcp")
		}
		addr := net.JoinHostPort(hosts[1].IPs[0].String(), strconv.Itoa(o.port))
		eps[0].Addr, eps[1].Addr = addr, addr
		if o.links > 1 {
			env.notes = append(env.notes, "tcp uses the first link only")
		}
	}
	for i, h := range hosts {
		goIn := h.Go
		if o.pin {
			goIn = pinned(h.Go, i)
		}
		env.ends = append(env.ends, end{ep: eps[i], goIn: goIn})
		if o.procs {
			if err := startReceiver(o, env, h); err != nil {
				env.close()
				return nil, err
			}
			env.describe += ", the receiver in a process of its own"
			break
		}
	}
	return env, nil
}

// receiverEnv marks a -procs receiver's environment: a test binary started
// as one (os.Executable is the test then) runs netpipe instead of its tests.
const receiverEnv = "NETPIPE_PROCS_RECEIVER"

// startReceiver runs the receiver end (-procs) as this program in two-machine
// mode in host h's namespace, as endpoint 1 of h's NICs, bound to the second
// CPU as the in-process end would be (with -pin and more than one CPU). The
// environment's closers wait for it.
func startReceiver(o *options, env *environment, h *testbed.Host) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("-procs: %w", err)
	}
	macs := make([]string, len(h.MACs))
	for i, m := range h.MACs {
		macs[i] = m.String()
	}
	args := []string{"-iface", strings.Join(h.Ifaces, ","), "-r", "-module", o.module, "-driver", o.driver,
		"-endpoint", "1", "-peer-endpoint", "0", "-peer", strings.Join(macs, ","), "-job", strconv.FormatUint(uint64(o.job), 10),
		"-o", "", "-progress", "off"}
	cmd := exec.Command(exe, append(args, o.childArgs...)...)
	// The secret not on the command line, where ps shows it.
	cmd.Env = append(os.Environ(), "MPLITE_SECRET="+o.secret.Hex(), receiverEnv+"=1")
	var errOut bytes.Buffer // read once it has exited
	cmd.Stderr = &errOut
	cpu, err := cpuOf(1)
	if err != nil {
		return fmt.Errorf("-procs: %w", err)
	}
	if cpu < 0 || !o.pin {
		err = h.Start(cmd)
	} else {
		err = h.StartOnCPU(cmd, cpu)
	}
	if err != nil {
		return fmt.Errorf("-procs: start the receiver: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	env.closers = append(env.closers, func() error {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("the receiver process: %w: %s", err, bytes.TrimSpace(errOut.Bytes()))
			}
			return nil
		case <-time.After(2 * o.timeout):
			_ = cmd.Process.Kill()
			<-done
			return errors.New("the receiver process did not end; killed")
		}
	})
	return nil
}

// twoMachineEnv runs one end on real interfaces in this namespace.
func twoMachineEnv(o *options, mod netpipe.Module) (*environment, error) {
	role := netpipe.Transmitter
	if o.receiver {
		role = netpipe.Receiver
	}
	env := &environment{kind: "two-machine", driver: o.driver}
	ep := o.endpoint(role)
	if mod.Frames() {
		if !o.set["job"] {
			env.notes = append(env.notes, "two-machine mode: job key 0; give both ends the same -job to share a LAN with other jobs")
		}
		ep.Endpoint, ep.PeerEndpoint = uint16(o.endpointNum), uint16(o.peerEndpoint)
		for _, iface := range o.ifaces {
			d, err := openDevice(o, iface, ep.Endpoint)
			if err != nil {
				env.close()
				return nil, err
			}
			env.closers = append(env.closers, d.Close)
			if d, err = o.authenticate(mod, d); err != nil {
				env.close()
				return nil, err
			}
			ep.Devices = append(ep.Devices, d)
			if env.mtu == 0 || d.MTU() < env.mtu {
				env.mtu = d.MTU()
			}
		}
		ep.PeerMACs = o.peerMACs
		ep.Announce = role == netpipe.Transmitter
	} else {
		env.driver = "kernel"
		host := o.host
		if host == "" {
			host = "0.0.0.0"
		}
		ep.Addr = net.JoinHostPort(host, strconv.Itoa(o.port))
		if ifi, err := net.InterfaceByName(o.ifaces[0]); err == nil {
			env.mtu = ifi.MTU
		}
	}
	env.describe = fmt.Sprintf("two-machine %s on %v", role, o.ifaces)
	env.ends = []end{{ep: ep}}
	return env, nil
}

// pinned wraps goIn so that end i's thread runs on CPU i (modulo the CPUs
// this process may use). Two ends of one process are two hosts: left to the
// scheduler, its wake-up placement often puts both spinning threads on one
// CPU, where each spins out its window while the other waits for the CPU,
// and every message then takes about the spin time.
func pinned(goIn func(func() error) <-chan error, i int) func(func() error) <-chan error {
	return func(fn func() error) <-chan error {
		return goIn(func() error {
			if err := pinThread(i); err != nil {
				return err
			}
			return fn()
		})
	}
}

// pinThread binds the calling (locked) thread to the i-th CPU of the
// process's affinity mask. With a single CPU it does nothing.
func pinThread(i int) error {
	cpu, err := cpuOf(i)
	if err != nil || cpu < 0 {
		return err
	}
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return fmt.Errorf("pin end %d to CPU %d: %w", i, cpu, err)
	}
	return nil
}

// cpuOf is the i-th CPU (modulo their number) of the process's affinity
// mask, or -1 when it has a single one.
func cpuOf(i int) (int, error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return 0, fmt.Errorf("pin end %d: %w", i, err)
	}
	var cpus []int
	for c := range 1024 {
		if all.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return -1, nil
	}
	return cpus[i%len(cpus)], nil
}

// setSecret fixes the job secret: -secret's, MPLITE_SECRET's, or, where
// both ends run here, a fresh one.
func (o *options) setSecret(mod netpipe.Module) error {
	if !authenticates(o, mod) {
		return nil
	}
	text := o.secretHex
	if text == "" {
		text = os.Getenv("MPLITE_SECRET")
	}
	if text == "" {
		if o.twoMachine {
			return errors.New("two-machine mode authenticates frames: give both ends the same -secret (64 hex digits) or MPLITE_SECRET, or -auth=false")
		}
		s, err := auth.NewSecret()
		if err != nil {
			return err
		}
		o.secret = s
		return nil
	}
	s, err := auth.ParseSecret(text)
	if err != nil {
		return fmt.Errorf("-secret: %w", err)
	}
	o.secret = s
	return nil
}

// authenticate puts d behind the job's frame authentication, unless it is
// off or mod is raw (which measures the driver alone).
func (o *options) authenticate(mod netpipe.Module, d nic.Device) (nic.Device, error) {
	if !authenticates(o, mod) {
		return d, nil
	}
	key, err := auth.NewKey(o.secret, uint32(o.job))
	if err != nil {
		return nil, err
	}
	return auth.Wrap(d, key, auth.Config{})
}

// authenticates reports whether mod's frames carry tags: every frame
// module's but raw's, unless -auth=false.
func authenticates(o *options, mod netpipe.Module) bool {
	return o.auth && mod.Frames() && mod.Name() != "raw"
}
