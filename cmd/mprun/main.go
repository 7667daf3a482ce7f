// Command mprun launches a local Ethervia cluster: it builds an N-host
// testbed of network namespaces (K rails, one bridge per rail), runs a
// program once per host with the bootstrap environment set, prefixes every
// output line with the rank, and removes everything it built.
//
//	mprun -np N [-nics K] [-rate RATE] [-host-rate H=RATE] [-mtu M] [-drop P] [-driver D] [-bind auto|none] [-timeout T] [-discover] -- PROG ARGS...
//	mprun -sweep
//
// Each rank gets MPLITE_RANK, MPLITE_SIZE, MPLITE_IFACES (its interface per
// rail, comma separated), MPLITE_JOB (a fresh random job key),
// MPLITE_SECRET (a fresh job secret that authenticates every frame;
// -auth=false gives MPLITE_AUTH=0 instead), MPLITE_DRIVER (-driver auto,
// the default: afxdp with one rank per host, an MTU of at most 3506 and at
// most 8 ranks per CPU, else afpacket)
// and MPLITE_HOSTFILE, every rank's MACs, so that no rank has to discover
// them (-discover leaves it out: the ranks then find each other by raw
// Ethernet broadcast, as they must where no launcher knows the
// addresses); with rate-limited ports (-rate,
// -host-rate), MPLITE_RATE, the slowest port's rate, unless already set;
// with more ranks than CPUs, also
// MPLITE_YIELD=1 unless MPLITE_YIELD is already set, so that polling ranks
// yield to one another (MPLITE_SPIN, the spin time, does not change that),
// and MPLITE_CPUS (the CPU count) for
// the collective selector. MPRUN_START is the time (Unix nanoseconds) mprun
// began starting the ranks, the testbed made, for programs that time
// their own start-up (collbench reports it). Each rank gets GOMAXPROCS, its share of the
// CPUs, unless GOMAXPROCS is set; with no more ranks than CPUs each rank
// is also bound to a CPU of its own (-bind none leaves them unbound), as
// Open MPI binds ranks to cores. Two ranks with no rate limit, faults or
// port events are joined by one veth pair per rail (a cable, as netpipe
// -local uses); otherwise the ranks sit on one bridge per rail.
// mprun exits non-zero if any rank
// fails; once one rank has failed, the others get -grace to finish (so they
// can report the dead peer) before they are killed. SIGINT, SIGTERM and
// SIGHUP kill the ranks and remove the testbed, as a normal exit does, and
// mprun then exits non-zero. -sweep removes what testbeds of processes that
// no longer run (killed with SIGKILL, say) left behind.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ethervia/ethervia/bpf"
	"github.com/ethervia/ethervia/nic/afxdp"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/testbed"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	np, nics, mtu int
	rate, driver  string
	drop          float64
	corrupt, dup  float64
	flap          string // AT+FOR: a switch port goes down at AT for FOR
	flapHost      int
	railDown      string // R@AT: every port of rail R goes down for good at AT
	hostRate      string // H=RATE,...: host H's ports at their own rate
	duplex        bool   // rate limits shape what hosts send too
	timeout       time.Duration
	grace         time.Duration
	discover      bool
	auth          bool // frames carry tags under a secret drawn for the job
	sweep         bool
	bind          string // auto: a CPU per rank when there are enough; none
	prog          []string
	// The mpirun side (remote.go): ranks on the hosts of a hostfile.
	hostfile string
	launcher string
	ppn      int
	env      []string // -genv NAME VALUE and -x NAME[=VALUE], as NAME=VALUE
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("mprun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.np, "np", 2, "number of ranks")
	fs.IntVar(&o.np, "n", 2, "the same as -np")
	fs.StringVar(&o.hostfile, "hostfile", "", "run the ranks on the hosts this file lists (HOST[:SLOTS] or HOST slots=N per line) through -launcher, serving them PMI, instead of on a namespace testbed")
	fs.StringVar(&o.launcher, "launcher", "ssh", "with -hostfile: the command that runs a command on a host, called as LAUNCHER HOST COMMAND (ssh, or a script that acts like it)")
	fs.IntVar(&o.ppn, "ppn", 0, "ranks per host, sharing its NICs (default: a hostfile's slots; one on the testbed)")
	fs.Func("genv", "NAME VALUE (or NAME=VALUE): set NAME in every rank's environment; repeatable", func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("want NAME VALUE or NAME=VALUE, got %q", v)
		}
		o.env = append(o.env, v)
		return nil
	})
	fs.Func("x", "NAME or NAME=VALUE: pass NAME (as mprun sees it, or with VALUE) to every rank, as Open MPI's mpirun -x; repeatable", func(v string) error {
		k, _, ok := strings.Cut(v, "=")
		if k == "" {
			return fmt.Errorf("want NAME or NAME=VALUE, got %q", v)
		}
		if !ok {
			v = k + "=" + os.Getenv(k)
		}
		o.env = append(o.env, v)
		return nil
	})
	fs.IntVar(&o.nics, "nics", 1, "rails (NICs) per host; more than one bonds them")
	fs.IntVar(&o.mtu, "mtu", 1500, "MTU of every link")
	fs.StringVar(&o.rate, "rate", "", "per-port rate limit, tc style (e.g. 1gbit); a comma list gives each NIC its own")
	fs.Float64Var(&o.drop, "drop", 0, "probability that a switch port drops an Ethervia frame")
	fs.Float64Var(&o.corrupt, "corrupt", 0, "probability that a switch port flips a byte of an Ethervia frame")
	fs.Float64Var(&o.dup, "dup", 0, "probability that a switch port sends an Ethervia frame twice")
	fs.StringVar(&o.flap, "flap", "", "AT+FOR: take one host's switch port (rail 0) down AT after the start, for FOR (e.g. 2s+1s)")
	fs.IntVar(&o.flapHost, "flap-host", -1, "the host -flap takes down (default: the last)")
	fs.BoolVar(&o.duplex, "duplex", false, "rate limits (-rate, -host-rate) shape both directions of a port, as a full-duplex link: what a host sends as well as what it receives (default: only towards the host)")
	fs.StringVar(&o.hostRate, "host-rate", "", "H=RATE[,H=RATE...]: the switch ports towards host H (every rail) at RATE instead of -rate's, e.g. 3=25mbit for one slow receiver")
	fs.StringVar(&o.railDown, "rail-down", "", "R@AT or R@BYTES: take every switch port of rail R down for good AT after the start (1@3s), or once the hosts have sent BYTES on it (1@8MiB)")
	fs.StringVar(&o.driver, "driver", "auto", "frame driver: afpacket, afxdp, or auto (afxdp where it can serve and pays: one rank per host, MTU at most 3506, at most 8 ranks per CPU; else afpacket)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "kill the job after this long")
	fs.DurationVar(&o.grace, "grace", 30*time.Second, "after a rank fails, how long the others may run")
	fs.BoolVar(&o.auth, "auth", true, "authenticate every frame with a secret drawn for the job (false: a trusted fabric, MPLITE_AUTH=0)")
	fs.BoolVar(&o.discover, "discover", false, "do not give ranks MPLITE_HOSTFILE (every rank's MACs): they find each other by raw-Ethernet broadcast")
	fs.StringVar(&o.bind, "bind", "auto", "auto: bind each rank to a CPU of its own when there are at least as many CPUs as ranks (as Open MPI binds to cores); none: leave placement to the kernel")
	fs.BoolVar(&o.sweep, "sweep", false, "remove the namespaces (and their links) that Ethervia testbeds of dead processes left behind, then exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mprun -np N [-nics K] [-rate RATE] [-host-rate H=RATE] [-duplex] [-mtu M] [-drop P] [-corrupt P] [-dup P] [-flap AT+FOR] [-rail-down R@AT|R@BYTES] [-driver D] [-bind auto|none] [-discover] [-genv NAME VALUE] [-x NAME] -- PROG ARGS...")
		fmt.Fprintln(stderr, "       mprun -n N -hostfile FILE [-launcher CMD] [-ppn P] [-genv NAME VALUE] [-x NAME] -- PROG ARGS...")
		fmt.Fprintln(stderr, "       mprun -sweep")
		fs.PrintDefaults()
	}
	if err := fs.Parse(joinGenv(args)); err != nil {
		return o, err
	}
	o.prog = fs.Args()
	switch {
	case o.sweep && len(o.prog) > 0:
		return o, errors.New("mprun: -sweep runs no program")
	case o.sweep:
		return o, nil
	case len(o.prog) == 0:
		return o, errors.New("mprun: no program given (mprun -np N -- PROG ARGS...)")
	case o.np < 1 || o.np > testbed.MaxHosts*max(1, o.ppn):
		return o, fmt.Errorf("mprun: -np %d outside [1, %d] (hosts times -ppn)", o.np, testbed.MaxHosts*max(1, o.ppn))
	case o.nics < 1 || o.nics > testbed.MaxRails:
		return o, fmt.Errorf("mprun: -nics %d outside [1, %d]", o.nics, testbed.MaxRails)
	case o.driver != "afpacket" && o.driver != "afxdp" && o.driver != "auto":
		return o, fmt.Errorf("mprun: unknown -driver %q (afpacket, afxdp or auto)", o.driver)
	case o.bind != "auto" && o.bind != "none":
		return o, fmt.Errorf("mprun: -bind %q: want auto or none", o.bind)
	case !(o.drop >= 0 && o.drop <= 1):
		return o, fmt.Errorf("mprun: -drop %v outside [0, 1]", o.drop)
	case !(o.corrupt >= 0 && o.corrupt <= 1):
		return o, fmt.Errorf("mprun: -corrupt %v outside [0, 1]", o.corrupt)
	case !(o.dup >= 0 && o.dup <= 1):
		return o, fmt.Errorf("mprun: -dup %v outside [0, 1]", o.dup)
	}
	if o.ppn < 0 {
		return o, fmt.Errorf("mprun: -ppn %d", o.ppn)
	}
	if o.hostfile != "" {
		return o, o.checkRemote()
	}
	if o.driver == "auto" {
		o.driver = autoDriver(o.np, o.perHost(), o.mtu, runtime.NumCPU())
	}
	if o.ppn > 1 && o.driver == "afxdp" {
		return o, fmt.Errorf("mprun: -ppn %d: ranks that share a host's NICs need -driver afpacket", o.ppn)
	}
	if o.flapHost < 0 {
		o.flapHost = o.hosts() - 1
	}
	if o.flapHost >= o.hosts() {
		return o, fmt.Errorf("mprun: -flap-host %d: only %d hosts", o.flapHost, o.hosts())
	}
	if _, _, err := parseFlap(o.flap); err != nil {
		return o, err
	}
	hr, err := parseHostRates(o.hostRate)
	if err != nil {
		return o, err
	}
	for h := range hr {
		if h >= o.hosts() {
			return o, fmt.Errorf("mprun: -host-rate: host %d, but only %d hosts", h, o.hosts())
		}
	}
	if rd, err := parseRailDown(o.railDown); err != nil {
		return o, err
	} else if rd.rail >= o.nics {
		return o, fmt.Errorf("mprun: -rail-down: rail %d, but -nics %d", rd.rail, o.nics)
	}
	return o, nil
}

// parseHostRates parses -host-rate's H=RATE list into bit/s by host.
func parseHostRates(s string) (map[int]uint64, error) {
	out := map[int]uint64{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		h, r, ok := strings.Cut(part, "=")
		host, err := strconv.Atoi(h)
		if !ok || err != nil || host < 0 {
			return nil, fmt.Errorf("mprun: -host-rate %q: want HOST=RATE[,HOST=RATE...], e.g. 3=25mbit", s)
		}
		bps, err := testbed.ParseRate(r)
		if err != nil || bps == 0 {
			return nil, fmt.Errorf("mprun: -host-rate %q: host %d: %v", s, host, err)
		}
		out[host] = bps
	}
	return out, nil
}

// slowestRate is the lowest rate limit of the job's switch ports in bit/s
// (0: no port is limited), which the ranks get as MPLITE_RATE.
func slowestRate(tb *testbed.Testbed, np, nics int) (uint64, error) {
	var slow uint64
	for h := range np {
		for r := range nics {
			bps, err := tb.Rate(h, r)
			if err != nil {
				return 0, fmt.Errorf("mprun: rate of host %d rail %d: %w", h, r, err)
			}
			if bps > 0 && (slow == 0 || bps < slow) {
				slow = bps
			}
		}
	}
	return slow, nil
}

// parseFlap parses -flap's AT+FOR ("" is no flap: FOR 0).
func parseFlap(s string) (at, dur time.Duration, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, f, ok := strings.Cut(s, "+")
	if ok {
		at, err = time.ParseDuration(a)
	}
	if ok && err == nil {
		dur, err = time.ParseDuration(f)
	}
	if !ok || err != nil || at < 0 || dur <= 0 {
		return 0, 0, fmt.Errorf("mprun: -flap %q: want AT+FOR, e.g. 2s+1s", s)
	}
	return at, dur, nil
}

// railDown is a parsed -rail-down: rail R goes down at a time after the
// start, or once its switch ports have carried a number of bytes from the
// hosts (which waits for the job's own traffic, however slow its start).
type railDown struct {
	rail  int // -1: none
	at    time.Duration
	bytes uint64 // > 0: cut after this much traffic instead of at
}

// byteUnits are the suffixes -rail-down takes for a byte count.
var byteUnits = []struct {
	suffix string
	mult   uint64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"B", 1}}

// parseByteCount parses "8MiB", "500kB", "4096B".
func parseByteCount(s string) (uint64, bool) {
	for _, u := range byteUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseUint(num, 10, 64)
			if err != nil || n == 0 || n > (1<<62)/u.mult {
				return 0, false
			}
			return n * u.mult, true
		}
	}
	return 0, false
}

// parseRailDown parses -rail-down's R@AT or R@BYTES ("" is none: rail -1).
func parseRailDown(s string) (railDown, error) {
	rd := railDown{rail: -1}
	if s == "" {
		return rd, nil
	}
	bad := fmt.Errorf("mprun: -rail-down %q: want RAIL@AT or RAIL@BYTES, e.g. 1@3s or 1@8MiB", s)
	r, a, ok := strings.Cut(s, "@")
	if !ok {
		return rd, bad
	}
	rail, err := strconv.Atoi(r)
	if err != nil || rail < 0 {
		return rd, bad
	}
	if n, ok := parseByteCount(a); ok {
		return railDown{rail: rail, bytes: n}, nil
	}
	at, err := time.ParseDuration(a)
	if err != nil || at < 0 {
		return rd, bad
	}
	return railDown{rail: rail, at: at}, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0 // -h asked for the usage, which is printed
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "mprun: needs root to build network namespaces")
		return 2
	}
	if o.sweep {
		if err := sweep(stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	if o.hostfile != "" {
		if err := remoteJob(ctx, o, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	prog, err := exec.LookPath(o.prog[0])
	if err != nil {
		fmt.Fprintf(stderr, "mprun: %v\n", err)
		return 2
	}
	if _, err := testbed.Sweep(); err != nil {
		fmt.Fprintf(stderr, "mprun: sweeping leftovers: %v\n", err)
	}
	if err := job(ctx, o, prog, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// job builds the testbed, runs the ranks and always tears the testbed down.
func job(ctx context.Context, o options, prog string, stdout, stderr io.Writer) (err error) {
	cfg := testbed.Config{Hosts: o.hosts(), Rails: o.nics, Topology: testbed.Switch, MTU: o.mtu, Name: "mprun", Duplex: o.duplex}
	if o.hosts() == 1 {
		// A single rank still gets a NIC: a switch of one port is fine,
		// but testbed wants two hosts, so build two and use one.
		cfg.Hosts = 2
	}
	if o.hosts() == 2 && o.cable() {
		// Two hosts need no switch: one cable per rail, the link netpipe
		// -local measures, so the two compare on the same kind of link.
		cfg.Topology = testbed.Pair
	}
	if o.rate != "" {
		rates, err := testbed.ParseRates(o.rate)
		if err == nil {
			err = cfg.SetRates(rates)
		}
		if err != nil {
			return fmt.Errorf("mprun: -rate: %w", err)
		}
	}
	bctx, cancel := context.WithTimeout(ctx, time.Minute)
	tb, err := testbed.NewContext(bctx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("mprun: %w", err) // testbed's errors say "testbed:"
	}
	defer func() {
		if cerr := tb.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("mprun: cleanup: %w", cerr))
		}
	}()
	hostRates, _ := parseHostRates(o.hostRate) // checked in parse
	for h, bps := range hostRates {
		for r := 0; r < o.nics; r++ {
			if err := tb.SetRate(h, r, bps); err != nil {
				return fmt.Errorf("mprun: -host-rate: %w", err)
			}
		}
	}
	faults := bpf.FaultConfig{Drop: o.drop, Corrupt: o.corrupt, Duplicate: o.dup}
	if o.faulty() {
		for h := 0; h < o.hosts(); h++ {
			for r := 0; r < o.nics; r++ {
				if err := tb.SetFault(h, r, faults); err != nil {
					return fmt.Errorf("mprun: faults: %w", err)
				}
			}
		}
	}
	env, cleanupEnv, err := jobEnv(tb, o)
	if err != nil {
		return err
	}
	defer cleanupEnv()

	stopEvents := portEvents(tb, o, stderr)
	defer stopEvents()
	cpus, err := rankCPUs(o)
	if err != nil {
		return err
	}
	start := "MPRUN_START=" + strconv.FormatInt(time.Now().UnixNano(), 10)
	failed := supervise(ctx, o, func(r int) (*exec.Cmd, func(*exec.Cmd) error) {
		cmd := exec.Command(prog, o.prog[1:]...)
		cmd.Env = append(append(append(os.Environ(), env(r)...), start), o.env...)
		h := tb.Host(r / o.perHost())
		if cpus == nil {
			return cmd, h.Start
		}
		return cmd, func(cmd *exec.Cmd) error { return h.StartOnCPU(cmd, cpus[r]) }
	}, stdout, stderr)
	if o.faulty() {
		reportFaults(tb, o, stderr)
	}
	if len(failed) > 0 {
		return fmt.Errorf("mprun: %d rank(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}

// supervise starts every rank (mk makes rank r's command and the function
// that starts it), prefixes their output, and waits for them: once one rank
// has failed the others get -grace, and at -timeout or a signal all are
// killed. It returns what failed.
func supervise(ctx context.Context, o options, mk func(r int) (*exec.Cmd, func(*exec.Cmd) error), stdout, stderr io.Writer) (failed []string) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	out := &prefixer{}
	cmds := make([]*exec.Cmd, o.np)
	outputs := make([]*sync.WaitGroup, o.np)
	for r := 0; r < o.np; r++ {
		cmd, start := mk(r)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		so, _ := cmd.StdoutPipe()
		se, _ := cmd.StderrPipe()
		if err := start(cmd); err != nil {
			killAll(cmds)
			for _, c := range cmds {
				if c != nil {
					c.Wait()
				}
			}
			return []string{fmt.Sprintf("rank %d: start: %v", r, err)}
		}
		cmds[r] = cmd
		wg := &sync.WaitGroup{}
		wg.Add(2)
		go out.copy(wg, stdout, so, r)
		go out.copy(wg, stderr, se, r)
		outputs[r] = wg
	}

	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, o.np)
	for r, cmd := range cmds {
		go func() {
			// Read all output first: Wait closes the pipes.
			outputs[r].Wait()
			exits <- exit{r, cmd.Wait()}
		}()
	}
	var graceC <-chan time.Time
	for left := o.np; left > 0; {
		select {
		case e := <-exits:
			left--
			if e.err != nil {
				failed = append(failed, fmt.Sprintf("rank %d: %v", e.rank, e.err))
				if graceC == nil && left > 0 {
					graceC = time.After(o.grace)
				}
			}
		case <-graceC:
			fmt.Fprintf(stderr, "mprun: a rank failed; killing the %d still running after %v\n", left, o.grace)
			killAll(cmds)
			graceC = nil
		case <-ctx.Done():
			cause := context.Cause(ctx)
			fmt.Fprintf(stderr, "mprun: %v; killing every rank\n", cause)
			killAll(cmds)
			ctx = context.Background()
			failed = append(failed, "job: "+cause.Error())
		}
	}
	return failed
}

// joinGenv turns Hydra's two-word "-genv NAME VALUE" into one flag value,
// "-genv=NAME=VALUE", which the flag package can take; it stops at "--".
func joinGenv(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "-genv" || a == "--genv") && i+2 < len(args) && !strings.Contains(args[i+1], "=") {
			out = append(out, "-genv="+args[i+1]+"="+args[i+2])
			i += 2
			continue
		}
		out = append(out, a)
	}
	return out
}

// sweep removes the namespaces that testbeds of dead processes left (-sweep)
// and says which went.
func sweep(stdout io.Writer) error {
	gone, err := testbed.Sweep()
	testbed.ReportSweep(stdout, "mprun", gone)
	if err != nil {
		return fmt.Errorf("mprun: %w", err) // "sweep: testbed: ..."
	}
	return nil
}

// reportFaults prints what the switch's fault injectors did, so a lossy run
// shows that frames really were lost.
func reportFaults(tb *testbed.Testbed, o options, stderr io.Writer) {
	var sum bpf.FaultCounters
	for h := 0; h < o.hosts(); h++ {
		for r := 0; r < o.nics; r++ {
			c, err := tb.FaultCounters(h, r)
			if err != nil {
				fmt.Fprintf(stderr, "mprun: fault counters of host %d rail %d: %v\n", h, r, err)
				continue
			}
			sum.Seen += c.Seen
			sum.Dropped += c.Dropped
			sum.Corrupted += c.Corrupted
			sum.Duplicated += c.Duplicated
		}
	}
	fmt.Fprintf(stderr, "mprun: faults: the switch dropped %d, corrupted %d and duplicated %d of %d Ethervia frames\n",
		sum.Dropped, sum.Corrupted, sum.Duplicated, sum.Seen)
}

// perHost is the ranks per testbed host (-ppn, at least 1).
func (o options) perHost() int { return max(1, o.ppn) }

// hosts is the number of testbed hosts: -np ranks, -ppn to a host.
func (o options) hosts() int { return (o.np + o.perHost() - 1) / o.perHost() }

// autoDriver is -driver auto on the testbed: AF_XDP, which copies a frame
// once where AF_PACKET's receive ring copies it twice, wherever it can
// serve: one endpoint per NIC and frames that fit a page.
func autoDriver(np, perHost, mtu, cpus int) string {
	if perHost > 1 || mtu > afxdp.VethMaxMTU || np > xdpRanksPerCPU*max(1, cpus) {
		return "afpacket"
	}
	return "afxdp"
}

// xdpRanksPerCPU is the most ranks per CPU -driver auto gives AF_XDP. Each
// AF_XDP rank pins a 16 MiB UMEM and attaches a program to its interface;
// 128 ranks on 2 CPUs took 4.1-5.0 s from launch to the end of a hello
// world on AF_XDP and 2.7-3.3 on AF_PACKET (one sitting), and when ranks
// take turns on a CPU, polling memory instead of making a system call
// saves nothing: an 8-byte Allreduce of 64 such ranks took 12.0-12.5 ms
// on AF_XDP and 11.6-13.3 on AF_PACKET. At 8 ranks per CPU AF_XDP still
// pays: 16 ranks on 2 CPUs at 100 Mbit/s ran a multicast Bcast 1.7x (64
// KiB) and about 2x (1 MiB) faster on it, the other collectives at 1 byte
// and 64 KiB within 6 % either way, for 0.12 s more start-up (hello 0.58
// against 0.46 s).
const xdpRanksPerCPU = 8

func (o options) faulty() bool { return o.drop > 0 || o.corrupt > 0 || o.dup > 0 }

// cable reports whether two ranks may be joined by a plain veth pair: rate
// limits, faults and port events sit on switch ports, as in netpipe (a tbf
// on a host's own veth would not limit our senders, which bypass the
// qdisc).
func (o options) cable() bool {
	return o.rate == "" && o.hostRate == "" && !o.faulty() && o.flap == "" && o.railDown == ""
}

// portEvents schedules -flap and -rail-down; the returned function cancels
// what has not happened yet.
func portEvents(tb *testbed.Testbed, o options, stderr io.Writer) func() {
	var stops []func()
	after := func(d time.Duration, f func()) func() {
		t := time.AfterFunc(d, f)
		return func() { t.Stop() }
	}
	set := func(what string, host, rail int, up bool) {
		if err := tb.SetPortUp(host, rail, up); err != nil {
			fmt.Fprintf(stderr, "mprun: %s: host %d rail %d: %v\n", what, host, rail, err)
			return
		}
		state := "down"
		if up {
			state = "up"
		}
		fmt.Fprintf(stderr, "mprun: %s: switch port of host %d rail %d %s\n", what, host, rail, state)
	}
	if at, dur, _ := parseFlap(o.flap); dur > 0 {
		stops = append(stops,
			after(at, func() { set("-flap", o.flapHost, 0, false) }),
			after(at+dur, func() { set("-flap", o.flapHost, 0, true) }))
	}
	rd, _ := parseRailDown(o.railDown)
	cut := func() {
		for h := 0; h < o.hosts(); h++ {
			set("-rail-down", h, rd.rail, false)
		}
	}
	switch {
	case rd.rail >= 0 && rd.bytes > 0:
		stops = append(stops, watchRailBytes(tb, o.hosts(), rd, cut, stderr))
	case rd.rail >= 0:
		stops = append(stops, after(rd.at, cut))
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// railPoll is how often a byte-triggered -rail-down reads the port counters:
// at 1 Gbit/s a rail carries 1.25 MB in 10 ms, well inside any message the
// cut is meant to hit.
const railPoll = 10 * time.Millisecond

// watchRailBytes calls cut once the switch ports of rd.rail have received
// rd.bytes from the np hosts together. The returned function ends the watch.
func watchRailBytes(tb *testbed.Testbed, np int, rd railDown, cut func(), stderr io.Writer) (stop func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(railPoll)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			var sum uint64
			for h := 0; h < np; h++ {
				n, err := tb.PortBytes(h, rd.rail)
				if err != nil {
					fmt.Fprintf(stderr, "mprun: -rail-down: %v\n", err)
					return
				}
				sum += n
			}
			if sum >= rd.bytes {
				fmt.Fprintf(stderr, "mprun: -rail-down: rail %d has carried %d bytes\n", rd.rail, sum)
				cut()
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// jobEnv returns each rank's bootstrap environment.
func jobEnv(tb *testbed.Testbed, o options) (func(rank int) []string, func(), error) {
	var key [4]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, nil, fmt.Errorf("mprun: job key: %w", err)
	}
	job := binary.BigEndian.Uint32(key[:])
	// The job's secret reaches the ranks through their environment only.
	secret, err := auth.NewSecret()
	if err != nil {
		return nil, nil, err
	}
	slow, err := slowestRate(tb, o.hosts(), o.nics)
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() {}
	hostfile := ""
	if !o.discover {
		// The launcher knows every address: handing them out spares
		// the job a broadcast discovery whose frames grow with the
		// square of its ranks (128 ranks on this 2-CPU machine spent
		// seconds of CPU in it).
		dir, err := os.MkdirTemp("", "mprun")
		if err != nil {
			return nil, nil, fmt.Errorf("mprun: hostfile: %w", err)
		}
		cleanup = func() { os.RemoveAll(dir) }
		var b strings.Builder
		for r := 0; r < o.np; r++ {
			macs := make([]string, o.nics)
			for k := range macs {
				macs[k] = tb.Host(r / o.perHost()).MACs[k].String()
			}
			fmt.Fprintf(&b, "%d %s %d\n", r, strings.Join(macs, ","), r%o.perHost())
		}
		hostfile = filepath.Join(dir, "hostfile")
		if err := os.WriteFile(hostfile, []byte(b.String()), 0o644); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("mprun: hostfile: %w", err)
		}
	}
	return func(rank int) []string {
		h := tb.Host(rank / o.perHost())
		env := []string{
			"MPLITE_RANK=" + strconv.Itoa(rank),
			"MPLITE_SIZE=" + strconv.Itoa(o.np),
			"MPLITE_IFACES=" + strings.Join(h.Ifaces[:o.nics], ","),
			// The rank's endpoint on its host's NICs, and how many ranks
			// share them.
			"MPLITE_ENDPOINT=" + strconv.Itoa(rank%o.perHost()),
			"MPLITE_LOCAL_SIZE=" + strconv.Itoa(min(o.perHost(), o.np-rank/o.perHost()*o.perHost())),
			"MPLITE_JOB=" + strconv.FormatUint(uint64(job), 10),
			"MPLITE_DRIVER=" + o.driver,
		}
		if hostfile != "" {
			env = append(env, "MPLITE_HOSTFILE="+hostfile)
		}
		if o.auth {
			env = append(env, "MPLITE_SECRET="+secret.Hex())
		} else {
			env = append(env, "MPLITE_AUTH=0")
		}
		if slow > 0 && os.Getenv("MPLITE_RATE") == "" {
			// The cost model and the windows need the line rate, and
			// every rank must see the same: the slowest port's.
			env = append(env, "MPLITE_RATE="+testbed.FormatRate(slow))
		}
		env = append(env, oversubscribed(o.np, runtime.NumCPU(), os.Getenv)...)
		env = append(env, goProcs(o.np, runtime.NumCPU(), os.Getenv)...)
		return env
	}, cleanup, nil
}

// oversubscribed returns, when more ranks than CPUs share this machine,
// MPLITE_YIELD=1 unless the user chose whether ranks yield (a rank that
// spins there takes the CPU from the rank it waits for; Open MPI yields
// too; a spin time in MPLITE_SPIN is how long to poll, not whether to
// yield meanwhile), and MPLITE_CPUS (the collective selector then counts the whole
// job's work against the CPUs) unless the user set it.
func oversubscribed(np, cpus int, getenv func(string) string) []string {
	if np <= cpus {
		return nil
	}
	var env []string
	if getenv("MPLITE_YIELD") == "" {
		env = append(env, "MPLITE_YIELD=1")
	}
	if getenv("MPLITE_CPUS") == "" {
		env = append(env, "MPLITE_CPUS="+strconv.Itoa(cpus))
	}
	return env
}

// goProcs returns GOMAXPROCS for a rank, its share of the CPUs (at least
// one), unless the user set GOMAXPROCS. A rank's Go runtime (a Go program's,
// or libmpich.so.12's under a C program) otherwise keeps a P per CPU, and
// with every CPU taken by a polling rank each goroutine wake-up starts a
// thread on an idle P that preempts another rank's poller: two ranks on
// two CPUs then paid one such switch per message, and 1-byte NPmpich2
// latency was 9-15 us instead of 3.
func goProcs(np, cpus int, getenv func(string) string) []string {
	if getenv("GOMAXPROCS") != "" {
		return nil
	}
	return []string{"GOMAXPROCS=" + strconv.Itoa(max(1, cpus/max(1, np)))}
}

func killAll(cmds []*exec.Cmd) {
	for _, c := range cmds {
		if c != nil && c.Process != nil {
			// The rank leads its own process group: take its children too.
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
	}
}

// prefixer writes whole lines, each prefixed with its rank, so that ranks'
// output never interleaves inside a line.
type prefixer struct{ mu sync.Mutex }

func (p *prefixer) copy(wg *sync.WaitGroup, w io.Writer, r io.Reader, rank int) {
	defer wg.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		p.mu.Lock()
		fmt.Fprintf(w, "[%d] %s\n", rank, sc.Bytes())
		p.mu.Unlock()
	}
	// Drain anything past an over-long line so the rank never blocks.
	_, _ = io.Copy(io.Discard, r)
}
