package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/mplite/pmi"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/testbed"
)

// switchTestbed builds n hosts on one switched rail, removed at the end.
func switchTestbed(t *testing.T, n int, name string) *testbed.Testbed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb, err := testbed.NewContext(ctx, testbed.Config{Hosts: n, Rails: 1, Topology: testbed.Switch, Name: name})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
	})
	return tb
}

// broadcasts counts the frames of our EtherType sent to the broadcast
// address on rail 0 of a switched testbed: the bridge floods each one to
// its own interface too, where a packet socket sees it.
type broadcasts struct {
	fd   int
	n    atomic.Int64
	stop atomic.Bool
	done chan struct{}
}

func countBroadcasts(t *testing.T, tb *testbed.Testbed) *broadcasts {
	t.Helper()
	b := &broadcasts{fd: -1, done: make(chan struct{})}
	err := func() error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		sw, err := netns.GetFromName(tb.SwitchNamespace(0))
		if err != nil {
			return err
		}
		defer sw.Close()
		if err := netns.Set(sw); err != nil {
			return err
		}
		defer netns.Set(orig)
		br, err := net.InterfaceByName("br0")
		if err != nil {
			return err
		}
		all := int(htons(unix.ETH_P_ALL))
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, all)
		if err != nil {
			return err
		}
		b.fd = fd
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: br.Index})
	}()
	if err != nil {
		if b.fd >= 0 {
			unix.Close(b.fd)
		}
		t.Fatalf("counting broadcasts: %v", err)
	}
	go func() {
		defer close(b.done)
		buf := make([]byte, 2048)
		for !b.stop.Load() {
			n, _, err := unix.Recvfrom(b.fd, buf, 0)
			if err != nil {
				continue // the receive timeout: look at stop again
			}
			if n >= 14 && bytes.Equal(buf[:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) &&
				uint16(buf[12])<<8|uint16(buf[13]) == nic.DefaultEtherType {
				b.n.Add(1)
			}
		}
	}()
	t.Cleanup(func() { b.Stop() })
	return b
}

// Stop ends the count and returns it.
func (b *broadcasts) Stop() int64 {
	if !b.stop.Swap(true) {
		<-b.done
		unix.Close(b.fd)
	}
	return b.n.Load()
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// sshLike writes a launcher script that acts like ssh for the testbed's
// hosts: "[-x] HOST COMMAND..." runs COMMAND through a shell in the
// namespace of the host whose address is HOST, as ssh runs it on that host.
func sshLike(t *testing.T, tb *testbed.Testbed) string {
	t.Helper()
	var cases strings.Builder
	for _, h := range tb.Hosts() {
		fmt.Fprintf(&cases, "%s) ns=%s;;\n", h.IPs[0], h.Name)
	}
	script := fmt.Sprintf(`#!/bin/sh
# ssh for a namespace testbed: [-x] HOST COMMAND...
[ "$1" = "-x" ] && shift
host=$1; shift
case $host in
%s*) echo "nsssh: unknown host $host" >&2; exit 255;;
esac
exec ip netns exec "$ns" sh -c "$*"
`, cases.String())
	path := filepath.Join(t.TempDir(), "nsssh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// hostList is the testbed's addresses on rail 0, comma-separated.
func hostList(tb *testbed.Testbed) string {
	var ips []string
	for _, h := range tb.Hosts() {
		ips = append(ips, h.IPs[0].String())
	}
	return strings.Join(ips, ",")
}

// TestHydraPMI launches the suite with MPICH's mpiexec across the testbed's
// hosts, as on a cluster: mpiexec runs on the first host and starts its
// proxies on every host through an ssh-like launcher. Nothing is set but
// what Hydra sets: the ranks find their rank, job key, interface and peers'
// addresses through PMI (PMI-1, then PMI-2), and no broadcast reaches the
// wire. The control run, without a launcher, shows the counter sees the
// discovery's broadcasts.
func TestHydraPMI(t *testing.T) {
	needRoot(t)
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		t.Skipf("SKIPPED: MPICH's Hydra (mpiexec.hydra, Debian package mpich) is not installed: %v", err)
	}
	const n = 3
	tb := switchTestbed(t, n, "pmih")
	ssh := sshLike(t, tb)
	mpitest := built.path(t, "mpitest")
	t.Run("control: discovery broadcasts", func(t *testing.T) {
		bc := countBroadcasts(t, tb)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		outs := make([][]byte, n)
		errs := make([]error, n)
		secret, err := auth.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", tb.Host(i).Name, mpitest, "-max", "65536")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "MPLITE_RANK=" + strconv.Itoa(i), "MPLITE_SIZE=" + strconv.Itoa(n),
				"MPLITE_IFACES=" + tb.Host(i).Ifaces[0], "MPLITE_JOB=991", "MPLITE_SECRET=" + secret.Hex()}
			wg.Add(1)
			go func() { defer wg.Done(); outs[i], errs[i] = cmd.CombinedOutput() }()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("%v\n%s", err, bytes.Join(outs, nil))
		}
		if got := bc.Stop(); got == 0 {
			t.Fatal("the discovery ran and the counter saw no broadcast")
		} else {
			t.Logf("discovery: %d broadcasts", got)
		}
	})
	// Two ranks on each host: Hydra's local rank ids make them endpoints
	// of the host's NIC.
	t.Run("PMI-1/2-per-host", func(t *testing.T) {
		bc := countBroadcasts(t, tb)
		var hosts []string
		for _, h := range tb.Hosts() {
			hosts = append(hosts, h.IPs[0].String()+":2")
		}
		out, err := run(t, 2*time.Minute, "ip", "netns", "exec", tb.Host(0).Name, hydra, "-launcher", "ssh", "-launcher-exec", ssh,
			"-hosts", strings.Join(hosts, ","), "-n", strconv.Itoa(2*n), mpitest, "-max", "1048576")
		if err != nil {
			t.Fatalf("mpiexec failed: %v\n%s", err, out)
		}
		wantOK(t, out, 2*n, 2*n, `mpitest: rank %d of %d: ok`)
		// Ranks that share a NIC take AF_PACKET by default.
		wantOK(t, out, 2*n, 2*n, `mpitest: rank %d of %d: driver afpacket`)
		if got := bc.Stop(); got != 0 {
			t.Errorf("%d broadcasts on the wire, want none", got)
		}
	})
	for _, version := range []string{"1", "2"} {
		t.Run("PMI-"+version, func(t *testing.T) {
			bc := countBroadcasts(t, tb)
			args := []string{"netns", "exec", tb.Host(0).Name, hydra, "-launcher", "ssh", "-launcher-exec", ssh,
				"-hosts", hostList(tb), "-n", strconv.Itoa(n)}
			if version == "2" {
				args = append(args[:len(args)-2], "-genv", "MPLITE_PMI", "2", "-n", strconv.Itoa(n))
			}
			out, err := run(t, 2*time.Minute, "ip", append(args, mpitest, "-max", "1048576")...)
			if err != nil {
				t.Fatalf("mpiexec failed: %v\n%s", err, out)
			}
			wantOK(t, out, n, n, `mpitest: rank %d of %d: ok`)
			// Alone on its host (Hydra's local size is 1), on a veth of
			// one receive queue, a rank takes AF_XDP by default.
			wantOK(t, out, n, n, `mpitest: rank %d of %d: driver afxdp`)
			if got := bc.Stop(); got != 0 {
				t.Errorf("%d broadcasts on the wire, want none (addresses come from the KVS)", got)
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// launched is a rank started by a test's own PMI server.
type launched struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done <-chan error // the PMI session's end
}

// launchPMI starts n ranks of argv, rank i in host i's namespace, the way
// Slurm's stepd does: a socket pair per rank, PMI_FD=3 and the variables
// of env (with %d replaced by the rank). wrap goes between "ip netns exec
// NS" and argv.
func launchPMI(t *testing.T, ctx context.Context, tb *testbed.Testbed, s *pmi.Server, n int, env, wrap, argv []string) []*launched {
	t.Helper()
	ranks := make([]*launched, n)
	for i := range n {
		child, done, err := s.Pair(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		args := append(append([]string{"netns", "exec", tb.Host(i).Name}, wrap...), argv...)
		cmd := exec.CommandContext(ctx, "ip", args...)
		cmd.ExtraFiles = []*os.File{child}
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PMI_FD=3"}
		for _, e := range env {
			cmd.Env = append(cmd.Env, strings.ReplaceAll(e, "%d", strconv.Itoa(i)))
		}
		cmd.WaitDelay = 5 * time.Second
		r := &launched{cmd: cmd, done: done}
		cmd.Stdout, cmd.Stderr = &r.out, &r.out
		err = cmd.Start()
		child.Close()
		if err != nil {
			t.Fatal(err)
		}
		ranks[i] = r
	}
	return ranks
}

// TestSlurmLikePMI2 is srun --mpi=pmi2 without Slurm: the test serves
// PMI-2 itself (package pmi's server, the protocol in full) and sets what
// Slurm's stepd sets, PMI_FD, PMI_JOBID, PMI_RANK, PMI_SIZE and the SLURM_*
// variables, nothing else. The ranks pick PMI-2 because PMI_JOBID is set,
// publish their MACs in the KVS and pass the suite, with no broadcast on
// the wire.
func TestSlurmLikePMI2(t *testing.T) {
	needRoot(t)
	const n = 3
	tb := switchTestbed(t, n, "pmis")
	bc := countBroadcasts(t, tb)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pmi.NewServer(pmi.ServerConfig{Size: n, JobID: "4242.0"})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PMI_JOBID=4242.0", "PMI_RANK=%d", "PMI_SIZE=" + strconv.Itoa(n), "SLURM_JOB_ID=4242", "SLURM_STEP_ID=0",
		"SLURM_PROCID=%d", "SLURM_NTASKS=" + strconv.Itoa(n)}
	ranks := launchPMI(t, ctx, tb, s, n, env, nil, []string{built.path(t, "mpitest"), "-max", "1048576"})
	var out strings.Builder
	for i, r := range ranks {
		if err := r.cmd.Wait(); err != nil {
			t.Errorf("rank %d: %v", i, err)
		}
		if err := <-r.done; err != nil {
			t.Errorf("rank %d's PMI session: %v", i, err)
		}
		out.Write(r.out.Bytes())
	}
	wantOK(t, out.String(), n, n, `mpitest: rank %d of %d: ok`)
	if st := s.Stats(); st.Puts != n+1 || st.Finalized != n || st.Fences < n {
		t.Errorf("server saw %+v: want %d puts (one address each, and rank 0's job secret), %d finalizes", st, n+1, n)
	}
	wantOK(t, out.String(), n, n, `mpitest: rank %d of %d: authenticated`)
	if got := bc.Stop(); got != 0 {
		t.Errorf("%d broadcasts on the wire, want none", got)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out.String())
	}
}

// TestRankWithCapabilities runs ranks as an unprivileged user (nobody)
// holding only CAP_NET_RAW, which is what docs/cluster.md says the
// AF_PACKET driver needs; a rank without it fails with an error naming
// the capability.
func TestRankWithCapabilities(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skipf("SKIPPED: setpriv (util-linux) is not installed: %v", err)
	}
	mpitest := built.path(t, "mpitest")
	// The built programs live in a private temporary directory; nobody
	// must be able to run them.
	if err := os.Chmod(filepath.Dir(mpitest), 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 2
	tb := switchTestbed(t, n, "caps")
	nobody := []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}
	env := []string{"PMI_RANK=%d", "PMI_SIZE=" + strconv.Itoa(n)}
	t.Run("CAP_NET_RAW", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, _ := pmi.NewServer(pmi.ServerConfig{Size: n, JobID: "caps-1"})
		wrap := append(nobody, "--inh-caps=+net_raw", "--ambient-caps=+net_raw")
		ranks := launchPMI(t, ctx, tb, s, n, env, wrap, []string{mpitest, "-max", "1048576"})
		var out strings.Builder
		for i, r := range ranks {
			if err := r.cmd.Wait(); err != nil {
				t.Errorf("rank %d: %v", i, err)
			}
			out.Write(r.out.Bytes())
		}
		wantOK(t, out.String(), n, n, `mpitest: rank %d of %d: ok`)
		// AF_XDP needs CAP_BPF and CAP_NET_ADMIN besides: the default
		// driver falls back to AF_PACKET.
		wantOK(t, out.String(), n, n, `mpitest: rank %d of %d: driver afpacket`)
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	})
	t.Run("no capabilities", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, _ := pmi.NewServer(pmi.ServerConfig{Size: n, JobID: "caps-2"})
		wrap := append(nobody, "--inh-caps=-all")
		ranks := launchPMI(t, ctx, tb, s, n, env, wrap, []string{mpitest, "-max", "1024"})
		for i, r := range ranks {
			err := r.cmd.Wait()
			if err == nil {
				t.Errorf("rank %d ran without CAP_NET_RAW", i)
			}
			if !strings.Contains(r.out.String(), "CAP_NET_RAW") {
				t.Errorf("rank %d's error does not name CAP_NET_RAW:\n%s", i, r.out.String())
			}
		}
	})
}

// TestMprunHostfile runs mprun as on a cluster's first node: -hostfile
// lists the testbed's hosts by address, and an ssh-like launcher starts a
// rank on each. mprun serves PMI over TCP; the ranks get only PMI_PORT and
// PMI_ID, pass the suite, and put no broadcast on the wire. A failing
// rank fails the job; its exit code also shows -genv and -x reaching the
// remote ranks.
func TestMprunHostfile(t *testing.T) {
	needRoot(t)
	const n = 3
	tb := switchTestbed(t, n, "mphf")
	bc := countBroadcasts(t, tb)
	hostfile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostfile, []byte(strings.ReplaceAll(hostList(tb), ",", "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, 2*time.Minute, "ip", "netns", "exec", tb.Host(0).Name, built.path(t, "mprun"), "-n", strconv.Itoa(n),
		"-hostfile", hostfile, "-launcher", sshLike(t, tb), "--",
		built.path(t, "mpitest"), "-max", "1048576")
	if err != nil {
		t.Fatalf("mprun failed: %v\n%s", err, out)
	}
	wantOK(t, out, n, n, `\[%d\] mpitest: rank %[1]d of %d: ok`)
	if got := bc.Stop(); got != 0 {
		t.Errorf("%d broadcasts on the wire, want none", got)
	}
	// -ppn 2: four ranks on two hosts, two sharing each host's NIC.
	out, err = run(t, 2*time.Minute, "ip", "netns", "exec", tb.Host(0).Name, built.path(t, "mprun"), "-n", "4", "-ppn", "2",
		"-hostfile", hostfile, "-launcher", sshLike(t, tb), "--", built.path(t, "mpitest"), "-max", "1048576")
	if err != nil {
		t.Fatalf("mprun -ppn 2 failed: %v\n%s", err, out)
	}
	wantOK(t, out, 4, 4, `\[%d\] mpitest: rank %[1]d of %d: ok`)
	// Ranks that never speak PMI are ranks too.
	if out, err := run(t, time.Minute, "ip", "netns", "exec", tb.Host(0).Name, built.path(t, "mprun"), "-n", "2",
		"-hostfile", hostfile, "-launcher", sshLike(t, tb), "--", "/bin/sh", "-c", "echo at $PMI_ID"); err != nil ||
		!strings.Contains(out, "[1] at 1") {
		t.Errorf("a job of shells: %v\n%s", err, out)
	}
	// A rank that fails its program fails the job, named by mprun.
	t.Setenv("MPRUN_XADD", "2")
	out, err = run(t, time.Minute, "ip", "netns", "exec", tb.Host(0).Name, built.path(t, "mprun"), "-n", "2",
		"-hostfile", hostfile, "-launcher", sshLike(t, tb), "-grace", "2s", "-genv", "MPRUN_BASE", "1", "-x", "MPRUN_XADD", "--",
		"/bin/sh", "-c", `[ "$PMI_ID" = 1 ] && exit $((MPRUN_BASE + MPRUN_XADD)); sleep 1`)
	if err == nil || !strings.Contains(out, "rank 1: exit status 3") {
		t.Errorf("a failing rank: err %v\n%s", err, out)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
