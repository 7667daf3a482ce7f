package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethervia/ethervia/cmd/netpipe/internal/netpipe"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/testbed"
)

// defaultUpper is the default -u. NetPIPE 3 has no upper bound and stops
// when one transfer takes a second; on veth links that would mean messages
// of gigabytes, so the default range ends at 8 MiB. -u sets any other.
const defaultUpper = 8 << 20

// The default run is NetPIPE's schedule with fewer and shorter trials, so
// that the first run takes about a minute, as NPtcp's does; -full runs
// NetPIPE 3's FINAL method (netpipe.Trials trials of netpipe.RunTime).
const (
	quickTrials  = 3
	quickRunTime = 50 * time.Millisecond
)

// defaultModule is the default -module: reliable, so a busy machine that
// drops frames slows the run down instead of failing it.
const defaultModule = "mplite"

// options are the parsed flags.
type options struct {
	auth       bool        // frames carry tags under secret (package nic/auth)
	secretHex  string      // -secret, or MPLITE_SECRET
	secret     auth.Secret // the job's: -secret's, or drawn for the run
	local, mem bool
	sameHost   bool
	procs      bool // -same-host: the receiver in a process of its own
	// endpointNum and peerEndpoint: two-machine mode's endpoints on a NIC
	// that other processes share (either set: the device is opened
	// shared).
	endpointNum, peerEndpoint uint
	// childArgs: the flags a -procs receiver is started with, as given.
	childArgs          []string
	module, driver     string
	links              int
	pin                bool
	bond               bool
	rate               string
	mtu                int
	drop, corrupt      float64
	lower, upper, pert int
	stream, bidir      bool
	integrity          bool
	out, plot          string
	json               bool
	iface, peer, host  string
	receiver           bool
	port               int
	repeats, trials    int
	runtime, spin      time.Duration
	timeout            time.Duration
	window             int
	job                uint
	ethertype          uint
	seed               uint64
	progress           string
	cpuprofile         string
	full, sweep        bool
	retries            int
	tcp                string
	set                map[string]bool
	rates              []uint64 // from -rate: one for every link, or one per link
	isRoot             bool
	modules            netpipe.Modules
	stdout, stderr     io.Writer
	stderrIsTerminal   bool
	twoMachine         bool
	ifaces             []string
	peerMACs           []net.HardwareAddr
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("netpipe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: netpipe [flags]\n       netpipe plot A.out [B.out ...] -o cmp.svg|png\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.BoolVar(&o.local, "local", false, "build a private two-host testbed and run both ends (the default as root)")
	fs.BoolVar(&o.sameHost, "same-host", false, "-local, -module mplite: run both ends on one host, sharing its NIC (two endpoints, as two ranks of one node)")
	fs.BoolVar(&o.procs, "procs", false, "-same-host: run the receiver in a process of its own, as the ranks of a node are (default: both ends in this process)")
	fs.UintVar(&o.endpointNum, "endpoint", 0, "two-machine mode: this end's endpoint on an interface that other processes share (as ranks of one node)")
	fs.UintVar(&o.peerEndpoint, "peer-endpoint", 0, "two-machine mode: the other end's endpoint")
	fs.BoolVar(&o.mem, "mem", false, "run both ends in process over memnic (the default without root)")
	fs.StringVar(&o.module, "module", defaultModule, "what to measure: raw|vi|rdma|mplite|tcp")
	fs.StringVar(&o.driver, "driver", "afpacket", "frame driver: afpacket|afxdp (-local and -iface)")
	fs.IntVar(&o.links, "links", 1, "parallel links (NICs) between the two hosts")
	fs.BoolVar(&o.pin, "pin", true, "-local: run each end's thread on its own CPU, as on two hosts")
	fs.BoolVar(&o.bond, "bond", false, "vi: bond the links (package bonding) even when there is only one")
	fs.StringVar(&o.rate, "rate", "", "per-link rate limit, e.g. 1gbit, or one per link: 250mbit,500mbit (builds a switch)")
	fs.IntVar(&o.mtu, "mtu", 0, "link MTU (default 1500)")
	fs.Float64Var(&o.drop, "drop", 0, "random frame loss probability on every link (builds a switch)")
	fs.Float64Var(&o.corrupt, "corrupt", 0, "-mem only: probability that a frame gets one byte flipped")
	fs.IntVar(&o.lower, "l", 1, "lower bound of the message size in bytes")
	fs.IntVar(&o.upper, "u", defaultUpper, "upper bound of the message size in bytes")
	fs.IntVar(&o.pert, "p", netpipe.DefaultPerturbation, "perturbation in bytes (0 for none)")
	fs.BoolVar(&o.stream, "s", false, "stream in one direction instead of ping-pong")
	fs.BoolVar(&o.bidir, "B", false, "send in both directions at once")
	fs.BoolVar(&o.integrity, "I", false, "integrity: check every byte of every message; fail on any mismatch")
	fs.StringVar(&o.out, "o", "np.out", "np.out file (bytes, Mbps, seconds); empty for none")
	fs.StringVar(&o.plot, "plot", "", "also draw the run to FILE.svg or FILE.png")
	fs.BoolVar(&o.json, "json", false, "print a JSON summary as the last line of stdout")
	fs.StringVar(&o.iface, "iface", "", "two-machine mode: run one end on these interfaces (IF[,IF...])")
	fs.BoolVar(&o.receiver, "r", false, "two-machine mode: be the receiver")
	fs.StringVar(&o.peer, "peer", "", "two-machine mode: the receiver's MAC per interface (MAC[,MAC...]), on the transmitter")
	fs.StringVar(&o.host, "host", "", "two-machine tcp: the receiver's address (transmitter) or the address to listen on (receiver)")
	fs.IntVar(&o.port, "port", 5002, "tcp: the port the receiver listens on")
	fs.IntVar(&o.repeats, "n", 0, "constant repeat count instead of NetPIPE's calibration")
	fs.IntVar(&o.trials, "trials", 0, fmt.Sprintf("trials per point (default %d, %d with -full, 1 with -I)", quickTrials, netpipe.Trials))
	fs.DurationVar(&o.runtime, "runtime", quickRunTime, fmt.Sprintf("target duration of one trial (%v with -full)", netpipe.RunTime))
	fs.BoolVar(&o.full, "full", false, fmt.Sprintf("NetPIPE 3's full method: %d trials of %v per point (minutes; the default, %d of %v, takes about one)",
		netpipe.Trials, netpipe.RunTime, quickTrials, quickRunTime))
	fs.IntVar(&o.retries, "retries", netpipe.DefaultRetries, "raw: re-run a point up to this many times after lost frames (0: fail at the first loss)")
	fs.StringVar(&o.tcp, "tcp", "", "np.out of a TCP run (NPtcp's, or netpipe -module tcp -o FILE) for the summary to compare with")
	fs.BoolVar(&o.sweep, "sweep", false, "remove the namespaces (and their links) that Ethervia testbeds of dead processes left behind, then exit (root)")
	fs.DurationVar(&o.spin, "spin", 50*time.Microsecond, "raw: how long to poll before blocking on the driver (negative: never spin)")
	fs.IntVar(&o.window, "window", 0, "raw: frames in flight before the receiver returns credit (default: about 1 MiB per link)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Second, "fail when a message makes no progress for this long")
	fs.UintVar(&o.job, "job", 0, "job key in every frame (default: random)")
	fs.BoolVar(&o.auth, "auth", true, "authenticate every frame under a job secret, as jobs do (the raw module never does)")
	fs.StringVar(&o.secretHex, "secret", "", "the job secret (64 hex digits; default: MPLITE_SECRET, else one drawn for the run; two-machine mode needs one)")
	fs.UintVar(&o.ethertype, "ethertype", nic.DefaultEtherType, "EtherType of every frame")
	fs.Uint64Var(&o.seed, "seed", 1, "-mem only: seed of memnic's faults")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the run (both ends with -local and -mem) to FILE")
	fs.StringVar(&o.progress, "progress", "auto", "progress bar on stderr: auto (only on a terminal)|on|off")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (subcommands: plot)", fs.Arg(0))
	}
	o.set = make(map[string]bool)
	fs.Visit(func(f *flag.Flag) {
		o.set[f.Name] = true
		if childFlags[f.Name] {
			o.childArgs = append(o.childArgs, "-"+f.Name+"="+f.Value.String())
		}
	})
	if o.full && !o.set["runtime"] {
		o.runtime = netpipe.RunTime
	}
	if o.trials == 0 && !o.integrity {
		o.trials = quickTrials
		if o.full {
			o.trials = netpipe.Trials
		}
	}
	return o, nil
}

// validate checks the flags against each other and picks the testbed.
func (o *options) validate() error {
	if _, err := o.modules.Lookup(o.module); err != nil {
		return err
	}
	if o.lower < 1 {
		return fmt.Errorf("-l %d: need a starting value >= 1", o.lower)
	}
	if o.lower > o.upper {
		return fmt.Errorf("-l %d must not exceed -u %d", o.lower, o.upper)
	}
	if o.pert < 0 || o.pert > 1024 {
		return fmt.Errorf("-p %d: want 0 to 1024", o.pert)
	}
	if o.stream && o.bidir {
		return errors.New("-s and -B exclude each other")
	}
	if o.links < 1 || o.links > 8 {
		return fmt.Errorf("-links %d: want 1 to 8", o.links)
	}
	if o.bond && o.module != "vi" {
		return fmt.Errorf("-bond applies to the vi module, not %s (mplite bonds by itself over several links)", o.module)
	}
	if math.IsNaN(o.drop) || o.drop < 0 || o.drop >= 1 {
		return fmt.Errorf("-drop %v: want a probability in [0, 1)", o.drop)
	}
	if math.IsNaN(o.corrupt) || o.corrupt < 0 || o.corrupt > 1 {
		return fmt.Errorf("-corrupt %v: want a probability in [0, 1]", o.corrupt)
	}
	if o.mtu != 0 && (o.mtu < 68 || o.mtu > 65535) {
		return fmt.Errorf("-mtu %d: want 68 to 65535", o.mtu)
	}
	if o.ethertype < 0x0600 || o.ethertype > 0xffff {
		return fmt.Errorf("-ethertype %#x: not an EtherType", o.ethertype)
	}
	if o.retries < 0 {
		return fmt.Errorf("-retries %d: want 0 or more", o.retries)
	}
	if o.job > math.MaxUint32 {
		return fmt.Errorf("-job %d: want a 32-bit key", o.job)
	}
	switch o.driver {
	case "afpacket", "afxdp":
	default:
		return fmt.Errorf("-driver %q: want afpacket or afxdp", o.driver)
	}
	switch o.progress {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("-progress %q: want auto, on or off", o.progress)
	}
	if o.rate != "" {
		rates, err := testbed.ParseRates(o.rate)
		if err == nil {
			// The testbed's own rule: one rate, or one per link.
			err = (&testbed.Config{Rails: o.links}).SetRates(rates)
		}
		if err != nil {
			return fmt.Errorf("-rate %q: %w", o.rate, err)
		}
		o.rates = rates
	}
	modes := 0
	for _, m := range []bool{o.local, o.mem, o.iface != ""} {
		if m {
			modes++
		}
	}
	if modes > 1 {
		return errors.New("-local, -mem and -iface exclude each other")
	}
	if o.iface != "" {
		o.twoMachine = true
		o.ifaces = strings.Split(o.iface, ",")
		if o.set["links"] && o.links != len(o.ifaces) {
			return fmt.Errorf("-links %d but -iface names %d interfaces", o.links, len(o.ifaces))
		}
		o.links = len(o.ifaces)
		if o.rate != "" || o.drop != 0 || o.corrupt != 0 || o.set["mtu"] {
			return errors.New("-rate, -drop, -corrupt and -mtu shape the testbeds; with -iface set them on the real links")
		}
		if o.endpointNum > 0xfffe || o.peerEndpoint > 0xfffe {
			return errors.New("-endpoint and -peer-endpoint: 0 to 65534")
		}
		if o.peer != "" {
			for _, s := range strings.Split(o.peer, ",") {
				hw, err := net.ParseMAC(s)
				if err != nil || len(hw) != 6 {
					return fmt.Errorf("-peer %q: not a MAC address", s)
				}
				o.peerMACs = append(o.peerMACs, hw)
			}
		}
		mod, _ := o.modules.Lookup(o.module)
		if !o.receiver && mod.Frames() && len(o.peerMACs) != len(o.ifaces) {
			return fmt.Errorf("the transmitter needs -peer with one MAC per interface (%d), or -r to be the receiver", len(o.ifaces))
		}
		if !mod.Frames() && !o.receiver && o.host == "" {
			return errors.New("two-machine tcp: the transmitter needs -host, the receiver's address")
		}
		return nil
	}
	if o.receiver || o.peer != "" || o.set["endpoint"] || o.set["peer-endpoint"] {
		return errors.New("-r, -peer, -endpoint and -peer-endpoint are for two-machine mode (-iface)")
	}
	if o.procs && !o.sameHost {
		return errors.New("-procs is for -same-host")
	}
	if !o.local && !o.mem {
		if o.isRoot {
			o.local = true
		} else {
			o.mem = true
			fmt.Fprintln(o.stderr, "netpipe: not root: running both ends in process over memnic (-mem); -local needs root")
		}
	}
	if o.local && !o.isRoot {
		return errors.New("-local builds network namespaces and needs root; use -mem")
	}
	if o.mem && o.rate != "" {
		return errors.New("-rate needs -local: memnic has no rate limiter")
	}
	if o.sameHost && (!o.local || o.module != "mplite" || o.driver != "afpacket" || o.rate != "" || o.drop != 0) {
		return errors.New("-same-host is for -local -module mplite -driver afpacket without -rate or -drop (both ends share one host's NIC)")
	}
	if !o.mem && o.corrupt != 0 {
		return errors.New("-corrupt works only with -mem (memnic's corruption fault)")
	}
	return nil
}

// childFlags are the flags a -procs receiver gets as they were given: the
// ones that shape how an end waits and checks (the transmitter tells the
// receiver the sizes and repeat counts).
var childFlags = map[string]bool{"spin": true, "timeout": true, "I": true, "ethertype": true, "auth": true}

// summary is the -json line.
type summary struct {
	Module      string  `json:"module"`
	Driver      string  `json:"driver"`
	Links       int     `json:"links"`
	Bonded      bool    `json:"bonded"`
	LatencyUs   float64 `json:"latency_us"`
	PeakMbps    float64 `json:"peak_mbps"`
	PeakBytes   int     `json:"peak_bytes"`
	Testbed     string  `json:"testbed"`
	Mode        string  `json:"mode"`
	MTU         int     `json:"mtu"`
	Rate        string  `json:"rate,omitempty"`
	Drop        float64 `json:"drop,omitempty"`
	Integrity   bool    `json:"integrity"`
	Start       int     `json:"start"`
	End         int     `json:"end"`
	Pert        int     `json:"perturbation"`
	Points      int     `json:"points"`
	LatencySize int     `json:"latency_bytes"`
	Out         string  `json:"np_out,omitempty"`
	Plot        string  `json:"plot,omitempty"`
	Seconds     float64 `json:"elapsed_s"`
	Reruns      int     `json:"reruns"`
}

func (o *options) modeName() string {
	switch {
	case o.stream:
		return "stream"
	case o.bidir:
		return "bidirectional"
	}
	return "ping-pong"
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	o.stdout, o.stderr = stdout, stderr
	o.isRoot = os.Geteuid() == 0
	if o.sweep {
		return sweep(stdout)
	}
	var tcp []netpipe.Point
	if o.tcp != "" {
		if tcp, err = readNPOut(o.tcp); err != nil {
			return fmt.Errorf("-tcp: %w", err)
		}
	}
	o.modules = modules()
	o.stderrIsTerminal = isTerminal(stderr)
	if err := o.validate(); err != nil {
		return err
	}
	if o.job == 0 && !o.twoMachine {
		o.job = uint(randomJobKey())
	}
	mod, _ := o.modules.Lookup(o.module)
	if err := o.setSecret(mod); err != nil {
		return err
	}

	var env *environment
	switch {
	case o.twoMachine:
		env, err = twoMachineEnv(o, mod)
	case o.mem:
		env, err = memEnv(o, mod)
	default:
		env, err = localEnv(ctx, o, mod)
	}
	if err != nil {
		return err
	}
	defer func() {
		// An interrupted run removes its testbed too; a failure to do so
		// is an error of its own, never silent.
		if cerr := env.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
	}()
	if o.cpuprofile != "" {
		stop, err := startCPUProfile(o.cpuprofile)
		if err != nil {
			return err
		}
		defer stop()
	}

	// np.out is written as points arrive, as NetPIPE does, so a long run
	// that is interrupted keeps what it measured.
	var npout *bufio.Writer
	var npfile *os.File
	tx := env.hasTransmitter()
	if o.out != "" && tx {
		npfile, err = os.Create(o.out)
		if err != nil {
			return fmt.Errorf("np.out: %w", err)
		}
		defer npfile.Close()
		npout = bufio.NewWriter(npfile)
	}
	if authenticates(o, mod) {
		env.describe += ", frames authenticated"
	}
	fmt.Fprintf(stdout, "netpipe: module %s, driver %s, %d link(s), MTU %d, %s, %s\n",
		o.module, env.driver, o.links, env.mtu, o.modeName(), env.describe)
	for _, n := range env.notes {
		fmt.Fprintf(stderr, "netpipe: %s\n", n)
	}
	if o.out != "" && tx {
		fmt.Fprintf(stdout, "Sending output to %s\n", o.out)
	}

	total := len(netpipe.Schedule(o.lower, o.upper, o.pert))
	if tx {
		fmt.Fprintf(stderr, "netpipe: up to %d points, %d to %d bytes, %s\n", total, o.lower, o.upper, o.method())
	}
	bar := newProgress(stderr, o.progress == "on" || o.progress == "auto" && o.stderrIsTerminal, o.lower, o.upper, total)
	var lineBuf []byte
	retries := -1 // Config.Retries: none
	if o.retries > 0 {
		retries = o.retries
	}
	reruns := 0
	cfg := netpipe.Config{
		Start: o.lower, End: o.upper, Pert: o.pert,
		Stream: o.stream, Bidir: o.bidir, Integrity: o.integrity,
		Trials: o.trials, RunTime: o.runtime, Repeats: o.repeats, Retries: retries,
		OnRetry: func(n, bytes int, err error) {
			reruns++
			bar.clear()
			what := fmt.Sprintf("point %d (%d bytes)", n, bytes)
			if n < 0 {
				what = "the latency estimate"
			}
			fmt.Fprintf(stderr, "netpipe: %s lost frames; re-running it: %v\n", what, err)
		},
		BeforePoint: func(n, bytes, repeats int) { bar.update(n, bytes, repeats) },
		AfterPoint: func(p netpipe.Point) {
			bar.clear()
			lineBuf = netpipe.AppendStderrLine(lineBuf[:0], p)
			lineBuf = append(lineBuf, '\n')
			stderr.Write(lineBuf)
			if npout != nil {
				lineBuf = netpipe.AppendNPOut(lineBuf[:0], p)
				npout.Write(lineBuf)
				npout.Flush()
			}
		},
	}
	if tx {
		fmt.Fprintln(stderr, "Now starting the main loop")
	}
	began := time.Now()
	pts, runErr := env.run(ctx, mod, cfg)
	bar.clear()
	if npout != nil {
		if err := npout.Flush(); err != nil && runErr == nil {
			runErr = fmt.Errorf("np.out: %w", err)
		}
		if err := npfile.Close(); err != nil && runErr == nil {
			runErr = fmt.Errorf("np.out: %w", err)
		}
	}
	if runErr != nil {
		if cause := context.Cause(ctx); cause != nil {
			return fmt.Errorf("interrupted (%v) after %d points; the testbed is removed: %w", cause, len(pts), runErr)
		}
		return runErr
	}
	if !tx {
		fmt.Fprintln(stdout, "netpipe: receiver done")
		return nil
	}
	if len(pts) == 0 {
		return errors.New("no data points: the first transfer already took longer than NetPIPE's stop time")
	}
	if o.plot != "" {
		name := fmt.Sprintf("%s/%s", o.module, env.driver)
		if err := netpipe.PlotFile(o.plot, []netpipe.Series{{Name: name, Points: pts}}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Plot written to %s\n", o.plot)
	}
	s := summary{
		Module: o.module, Driver: env.driver, Links: o.links, Bonded: env.bonded.Load(),
		Testbed: env.kind, Mode: o.modeName(), MTU: env.mtu, Rate: o.rate, Drop: o.drop,
		Integrity: o.integrity, Start: o.lower, End: o.upper, Pert: o.pert, Points: len(pts),
		Out: o.out, Plot: o.plot, Seconds: time.Since(began).Seconds(), Reruns: reruns,
	}
	// NetPIPE's latency is the time of the smallest message.
	small := pts[0]
	for _, p := range pts {
		if p.Bytes < small.Bytes {
			small = p
		}
		if p.Mbps > s.PeakMbps {
			s.PeakMbps, s.PeakBytes = p.Mbps, p.Bytes
		}
	}
	s.LatencyUs, s.LatencySize = small.Usec(), small.Bytes
	writeSummary(stdout, &s, o, pts, tcp)
	if o.json {
		b, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("json summary: %w", err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return nil
}

// end is one end of a run: where it runs and what its module gets.
type end struct {
	ep netpipe.Endpoint
	// goIn runs fn where the end's sockets must live (a namespace); nil
	// means a plain goroutine.
	goIn func(fn func() error) <-chan error
}

// environment is what a run happens on: one or two ends, and what to tear
// down afterwards.
type environment struct {
	kind     string // "mem", "local" or "two-machine"
	driver   string
	mtu      int
	describe string
	notes    []string
	ends     []end
	closers  []func() error
	// bonded is set when a connection ran over the bonding layer.
	bonded atomic.Bool
}

func (e *environment) hasTransmitter() bool {
	for _, en := range e.ends {
		if en.ep.Role == netpipe.Transmitter {
			return true
		}
	}
	return false
}

// close tears down in reverse order of building.
func (e *environment) close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		if err := e.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	e.closers = nil
	return errors.Join(errs...)
}

// run connects every end and runs NetPIPE's method on each. The first
// failure cancels the others and closes their connections so none hangs.
func (e *environment) run(ctx context.Context, mod netpipe.Module, cfg netpipe.Config) ([]netpipe.Point, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu    sync.Mutex
		conns []netpipe.Conn
		pts   []netpipe.Point
	)
	closeAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}
	// Some modules' calls take no context (mplite's): an interrupt closes
	// the connections, which fails those calls at once.
	defer context.AfterFunc(ctx, closeAll)()
	// Ends in a namespace run on its thread (goIn). Of the others, the
	// transmitter (or a lone end) runs right here: its sockets must be
	// made in the caller's namespace, which a new goroutine's thread need
	// not share. The rest run on goroutines.
	results := make(chan error, len(e.ends))
	var inline func() error
	for _, en := range e.ends {
		fn := func() error {
			conn, err := mod.Connect(ctx, en.ep)
			if err != nil {
				return fmt.Errorf("%s: connect: %w", en.ep.Role, err)
			}
			mu.Lock()
			conns = append(conns, conn)
			if ctx.Err() != nil {
				conn.Close() // closeAll may have run already
			}
			mu.Unlock()
			if b, ok := conn.(interface{ Bonded() bool }); ok && b.Bonded() {
				e.bonded.Store(true)
			}
			p, err := netpipe.Run(ctx, conn, en.ep.Role, cfg)
			if en.ep.Role == netpipe.Transmitter {
				mu.Lock()
				pts = p
				mu.Unlock()
			}
			if err != nil {
				return fmt.Errorf("%s: %w", en.ep.Role, err)
			}
			return nil
		}
		switch {
		case en.goIn != nil:
			c := en.goIn(fn)
			go func() { results <- <-c }()
		case inline == nil && (en.ep.Role == netpipe.Transmitter || len(e.ends) == 1):
			inline = fn
		default:
			go func() { results <- fn() }()
		}
	}
	// The first failure cancels the other end and closes its connection
	// so it cannot hang; later errors are usually its echo.
	collected := make(chan error, len(e.ends))
	go func() {
		failed := false
		for range e.ends {
			err := <-results
			if err != nil && !failed {
				failed = true
				cancel(err)
				closeAll()
			}
			collected <- err
		}
	}()
	if inline != nil {
		results <- inline()
	}
	var first error
	for range e.ends {
		if err := <-collected; err != nil && first == nil {
			first = err
		}
	}
	closeAll()
	mu.Lock()
	defer mu.Unlock()
	return pts, first
}

// startCPUProfile profiles the whole process (with -local and -mem, both
// ends) until the returned function is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
