package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/testbed"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: -local builds network namespaces and needs root; run the tests as root to cover it")
	}
}

// ourNamespaces lists namespaces this process's testbeds named.
func ourNamespaces(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("%snp-%d-", testbed.Prefix(), os.Getpid())
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestLocalRunsEndToEnd(t *testing.T) {
	needRoot(t)
	cases := [][]string{
		{"-module", "raw", "-driver", "afpacket"},
		{"-module", "tcp"},
		{"-module", "raw", "-driver", "afpacket", "-links", "2", "-B"},
		{"-module", "raw", "-driver", "afpacket", "-rate", "1gbit", "-s"},
		// Unlimited streams of small messages: the sender outruns the
		// receiver between points, which once overran its stash.
		{"-module", "raw", "-driver", "afpacket", "-s", "-n", "3000"},
		{"-module", "raw", "-driver", "afxdp", "-s", "-n", "3000"},
		{"-module", "vi", "-driver", "afpacket", "-s", "-n", "3000"},
		{"-module", "raw", "-driver", "afxdp"},
		{"-module", "raw", "-driver", "afpacket", "-I", "-mtu", "9000"},
		// Two ranks of one node sharing its NIC, data checked.
		{"-module", "mplite", "-same-host", "-I"},
		// The same as two processes, bound to CPUs and not.
		{"-module", "mplite", "-same-host", "-procs", "-I"},
		{"-module", "mplite", "-same-host", "-procs", "-pin=false"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c, ""), func(t *testing.T) {
			dir := t.TempDir()
			args := append(quick(dir, "-local", "-u", "20000", "-json"), c...)
			stdout, stderr, err := runCmd(t, args...)
			if left := ourNamespaces(t); len(left) != 0 {
				t.Errorf("namespaces left behind: %v", left)
			}
			if err != nil {
				t.Fatalf("%v: %v\n%s", args, err, stderr)
			}
			checkOutputs(t, stderr, filepath.Join(dir, "np.out"), 1, 20000, 3)
			m := lastJSON(t, stdout)
			if m["testbed"] != "local" || m["peak_mbps"].(float64) <= 0 {
				t.Errorf("summary %v", m)
			}
		})
	}
}

func TestLocalCleansUpAfterFailure(t *testing.T) {
	needRoot(t)
	// The receiver listens on a kernel-chosen port (-port 0) and the
	// transmitter dials port 0, which fails until the handshake times out;
	// the testbed, built by then, must still go away.
	dir := t.TempDir()
	_, _, err := runCmd(t, quick(dir, "-local", "-module", "tcp", "-port", "0", "-timeout", "100ms")...)
	if err == nil {
		t.Fatal("dialing port 0 succeeded")
	}
	if left := ourNamespaces(t); len(left) != 0 {
		t.Errorf("namespaces left behind after %v: %v", err, left)
	}
}

func TestLocalDrop(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	// Kernel TCP retransmits, so it runs through 2% loss; raw does not
	// and must fail loudly rather than report numbers.
	_, stderr, err := runCmd(t, quick(dir, "-local", "-module", "tcp", "-drop", "0.02", "-u", "5000")...)
	if err != nil && strings.Contains(err.Error(), "fault injector, which is not built yet") {
		t.Skip("SKIPPED: -drop needs testbed's fault injector (package bpf's tc program), not built yet: ", err)
	}
	if err != nil {
		t.Fatalf("tcp under 2%% loss: %v\n%s", err, stderr)
	}
	_, _, err = runCmd(t, quick(dir, "-local", "-module", "raw", "-drop", "0.2", "-l", "20000", "-u", "20000", "-timeout", "300ms")...)
	if err == nil || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("raw under 20%% loss: %v, want a lost-frames error", err)
	}
}

// nptcpLatency runs NPtcp for one 1-byte point over loopback and returns
// its time in µs.
func nptcpLatency(t *testing.T, path string) float64 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	dir := t.TempDir()
	rcv := exec.Command(path, "-P", port, "-p", "0", "-u", "1")
	rcv.Dir = dir
	if err := rcv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { rcv.Process.Kill(); rcv.Wait() }()
	var out []byte
	for try := 0; ; try++ {
		tx := exec.Command(path, "-h", "127.0.0.1", "-P", port, "-p", "0", "-u", "1", "-o", filepath.Join(dir, "np.out"))
		tx.Dir = dir
		out, err = tx.CombinedOutput()
		if err == nil || try == 20 {
			break
		}
		time.Sleep(50 * time.Millisecond) // the receiver may not listen yet
	}
	if err != nil {
		t.Fatalf("NPtcp: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^ *0: +1 bytes +\d+ times --> +[\d.]+ Mbps in +([\d.]+) usec`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no 1-byte line in NPtcp's output:\n%s", out)
	}
	us, _ := strconv.ParseFloat(string(m[1]), 64)
	return us
}

func TestTCPLatencyAgainstNPtcp(t *testing.T) {
	path, err := exec.LookPath("NPtcp")
	if err != nil {
		t.Skip("SKIPPED: NPtcp is not installed (Debian package netpipe-tcp; .ci/run installs it)")
	}
	theirs := nptcpLatency(t, path)
	dir := t.TempDir()
	stdout, stderr, err := runCmd(t, "-mem", "-module", "tcp", "-u", "1", "-p", "0", "-o", filepath.Join(dir, "np.out"), "-json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	ours := lastJSON(t, stdout)["latency_us"].(float64)
	ratio := ours / theirs
	t.Logf("1-byte latency over loopback: netpipe tcp %.2f µs, NPtcp %.2f µs, ratio %.2f", ours, theirs, ratio)
	if ours <= 0 || theirs <= 0 {
		t.Fatalf("latencies %v and %v", ours, theirs)
	}
	// The issue asks for this bound in the test itself. It is one-sided and
	// loose (ours measured about 0.1x NPtcp's): it catches a tcp baseline
	// made artificially slow, not noise.
	if ratio > 2 {
		t.Errorf("netpipe's tcp latency %.2f µs is more than twice NPtcp's %.2f µs", ours, theirs)
	}
}

func TestTwoMachineMode(t *testing.T) {
	needRoot(t)
	tb, err := testbed.New(testbed.Config{Hosts: 2, Name: "npt"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	tx, rx := tb.Host(0), tb.Host(1)
	secret := strings.Repeat("5a", auth.SecretLen) // both ends hold the job's secret
	for _, c := range []struct{ rx, tx []string }{
		{[]string{"-module", "raw"}, []string{"-module", "raw", "-peer", rx.MACs[0].String()}},
		{[]string{"-module", "mplite", "-secret", secret}, []string{"-module", "mplite", "-peer", rx.MACs[0].String(), "-secret", secret}},
		{[]string{"-module", "tcp", "-host", rx.IPs[0].String()}, []string{"-module", "tcp", "-host", rx.IPs[0].String()}},
	} {
		t.Run(c.rx[1], func(t *testing.T) {
			dir := t.TempDir()
			var rxOut, txOut, txErr strings.Builder
			rargs := append([]string{"-iface", rx.Ifaces[0], "-r", "-job", "9", "-timeout", "2s"}, c.rx...)
			rdone := rx.Go(func() error { return run(rargs, &rxOut, io.Discard) })
			targs := append(quick(dir, "-iface", tx.Ifaces[0], "-job", "9", "-u", "3000", "-json", "-timeout", "2s"), c.tx...)
			if err := <-tx.Go(func() error { return run(targs, &txOut, &txErr) }); err != nil {
				t.Fatalf("transmitter %v: %v\n%s", targs, err, txErr.String())
			}
			if err := <-rdone; err != nil {
				t.Fatalf("receiver %v: %v", rargs, err)
			}
			if !strings.Contains(rxOut.String(), "receiver done") {
				t.Errorf("receiver said %q", rxOut.String())
			}
			checkOutputs(t, txErr.String(), filepath.Join(dir, "np.out"), 1, 3000, 3)
			if m := lastJSON(t, txOut.String()); m["testbed"] != "two-machine" {
				t.Errorf("summary %v", m)
			}
		})
	}
}
