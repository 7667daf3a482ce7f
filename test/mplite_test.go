package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// run runs a command with a deadline and returns its combined output.
func run(t *testing.T, limit time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s: %v after %v", name, strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond))
	return out.String(), err
}

// wantOK checks that each of the first ranks ranks of a job of size ranks
// printed one line matching pattern (formatted with the rank and the size).
func wantOK(t *testing.T, out string, ranks, size int, pattern string) {
	t.Helper()
	for r := 0; r < ranks; r++ {
		re := regexp.MustCompile(fmt.Sprintf(pattern, r, size))
		if got := len(re.FindAllString(out, -1)); got != 1 {
			t.Errorf("rank %d: %d lines matching %q, want 1", r, got, re)
		}
	}
}

// TestMPLiteSuiteMprun runs the MPI-semantics suite (order, wildcards,
// truncation, zero-length and self sends, sizes around the eager limit up
// to 64 MiB, 1000 Isends, bidirectional large exchange, unexpected large
// messages, AnySource fairness, Probe) as 4 processes under mprun, on a
// clean switch and on one that drops 5 % of the frames, and bonded over
// two rails (mprun -nics 2).
func TestMPLiteSuiteMprun(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		driver string
		drop   string
		nics   string
	}{
		{"afpacket", "0", "1"},
		{"afpacket", "0.05", "1"},
		{"afxdp", "0.05", "1"},
		{"afpacket", "0.05", "2"},
	} {
		t.Run(tc.driver+"/drop="+tc.drop+"/nics="+tc.nics, func(t *testing.T) {
			out, err := run(t, 4*time.Minute, built.path(t, "mprun"), "-np", "4", "-driver", tc.driver, "-drop", tc.drop,
				"-nics", tc.nics, "-timeout", "3m", "--", built.path(t, "mpitest"))
			if err != nil {
				t.Fatalf("mprun failed: %v\n%s", err, out)
			}
			wantOK(t, out, 4, 4, `\[%d\] mpitest: rank %[1]d of %d: ok`)
			if tc.nics != "1" {
				wantOK(t, out, 4, 4, `\[%d\] mpitest: rank %[1]d of %d: rails `+tc.nics+`, rail failures 0`)
			}
			if tc.drop != "0" {
				dropped, seen, ok := droppedFrames(out)
				if !ok {
					t.Fatalf("no fault report in mprun's output:\n%s", out)
				}
				t.Logf("switch dropped %d of %d frames", dropped, seen)
				if dropped == 0 || float64(dropped) < 0.02*float64(seen) {
					t.Errorf("-drop %s dropped %d of %d frames: the faults did not happen", tc.drop, dropped, seen)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// TestMPLiteEarlyExitMprun: the last of 4 ranks vanishes (exits without
// Finalize); each survivor gets an error naming it within the peer timeout,
// never a hang, and mprun still removes everything it built.
func TestMPLiteEarlyExitMprun(t *testing.T) {
	needRoot(t)
	out, err := run(t, time.Minute, built.path(t, "mprun"), "-np", "4", "-timeout", "45s", "--",
		built.path(t, "mpitest"), "-early-exit", "-peer-timeout", "1s")
	if err != nil {
		t.Fatalf("mprun failed: %v\n%s", err, out)
	}
	if !strings.Contains(out, "[3] mpitest: rank 3 of 4: exiting early") {
		t.Errorf("rank 3 never exited early")
	}
	wantOK(t, out, 3, 4, `\[%d\] mpitest: rank %[1]d of %d: saw rank 3 die after`)
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// TestMPLiteHydra runs the suite under MPICH's Hydra, with the MPMD command
// line a user writes for a testbed: mpiexec -n 1 ip netns exec H0 PROG :
// -n 1 ip netns exec H1 PROG ... Ranks come from PMI_RANK and PMI_SIZE.
func TestMPLiteHydra(t *testing.T) {
	needRoot(t)
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		t.Skipf("SKIPPED: MPICH's Hydra (mpiexec.hydra, Debian package mpich) is not installed: %v", err)
	}
	const n = 4
	tb := switchTestbed(t, n, "hydra")
	job := strconv.FormatUint(uint64(time.Now().UnixNano())&0xffffffff|1, 10)
	args := []string{"-genv", "MPLITE_IFACES", tb.Host(0).Ifaces[0], "-genv", "MPLITE_JOB", job}
	for i := 0; i < n; i++ {
		if i > 0 {
			args = append(args, ":")
		}
		args = append(args, "-n", "1", "ip", "netns", "exec", tb.Host(i).Name, built.path(t, "mpitest"), "-max", "8388608")
	}
	out, err := run(t, 3*time.Minute, hydra, args...)
	if err != nil {
		t.Fatalf("mpiexec failed: %v\n%s", err, out)
	}
	wantOK(t, out, n, n, `mpitest: rank %d of %d: ok`)
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// TestRankKilled: the last of 4 ranks is SIGKILLed mid-exchange. Every other
// rank reports an error naming it within the peer timeout and exits
// non-zero, mprun fails, and no namespace or rank process is left behind.
// With two ranks per host, the killed rank's neighbour hears of it through
// shared memory (its process is gone), and no shared-memory file is left.
func TestRankKilled(t *testing.T) {
	needRoot(t)
	for _, ppn := range []string{"1", "2"} {
		t.Run("ppn="+ppn, func(t *testing.T) { rankKilled(t, ppn) })
	}
}

func rankKilled(t *testing.T, ppn string) {
	before := namespaces(t)
	shmBefore := shmFiles(t)
	mpitest := built.path(t, "mpitest")
	out, err := run(t, time.Minute, built.path(t, "mprun"), "-np", "4", "-ppn", ppn, "-timeout", "45s", "-grace", "20s", "--",
		mpitest, "-sigkill-after", "300ms", "-peer-timeout", "1s")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("mprun: %v, want exit status 1 (ranks failed)", err)
	}
	if !strings.Contains(out, "[3] mpitest: rank 3 of 4: SIGKILL to myself") {
		t.Error("rank 3 never killed itself")
	}
	if !strings.Contains(out, "rank 3: signal: killed") {
		t.Error("mprun did not report rank 3 killed")
	}
	wantOK(t, out, 3, 4, `\[%d\] mpitest: rank %[1]d of %d: rank 3 died after \d+ exchanges`)
	for r := 0; r < 3; r++ {
		if !strings.Contains(out, fmt.Sprintf("rank %d: exit status 1", r)) {
			t.Errorf("mprun did not report rank %d failing", r)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
	if left, err := exec.Command("pgrep", "-f", mpitest).Output(); err == nil {
		t.Errorf("rank processes left behind: %s", left)
	}
	for ns := range namespaces(t) {
		if !before[ns] && strings.Contains(ns, "-mprun-") {
			t.Errorf("namespace %s left behind", ns)
		}
	}
	if left := newNames(shmBefore, shmFiles(t)); len(left) > 0 {
		t.Errorf("shared-memory files left behind: %v", left)
	}
}

// namespaces lists the named network namespaces.
func namespaces(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	m := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			m[f[0]] = true
		}
	}
	return m
}

// TestMPLiteRanksPerHost runs the suite under mprun with 2 and 4 ranks per
// host namespace, sharing its NIC (an endpoint each), on a clean switch
// and with 2 % loss; every collective and algorithm checked with 4 ranks
// per host; and hello with the ranks finding each other by broadcast,
// which must reach a host's other ranks too.
func TestMPLiteRanksPerHost(t *testing.T) {
	needRoot(t)
	mprun, mpitest := built.path(t, "mprun"), built.path(t, "mpitest")
	for _, tc := range []struct{ ppn, drop string }{{"2", "0"}, {"2", "0.02"}, {"4", "0"}, {"4", "0.02"}} {
		t.Run("suite/ppn="+tc.ppn+"/drop="+tc.drop, func(t *testing.T) {
			out, err := run(t, 3*time.Minute, mprun, "-np", "8", "-ppn", tc.ppn, "-drop", tc.drop, "-timeout", "150s", "--",
				mpitest, "-max", "4194304")
			if err != nil {
				t.Fatalf("mprun failed: %v\n%s", err, out)
			}
			wantOK(t, out, 8, 8, `\[%d\] mpitest: rank %[1]d of %d: ok`)
			// Ranks of one host talk through shared memory.
			for r := range 8 {
				if !regexp.MustCompile(fmt.Sprintf(`\[%d\] mpitest: rank %[1]d of 8: [1-9][0-9]* entries through shared memory`, r)).MatchString(out) {
					t.Errorf("rank %d took nothing from shared memory", r)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
	t.Run("collbench/ppn=4", func(t *testing.T) {
		out, err := run(t, 5*time.Minute, mprun, "-np", "8", "-ppn", "4", "-timeout", "270s", "--",
			built.path(t, "collbench"), "-check", "-sizes", "1,1024,65536", "-iters", "2")
		if err != nil || !strings.Contains(out, "every result matches the reference") {
			t.Fatalf("collbench -check: %v\n%s", err, out)
		}
	})
	t.Run("hello/ppn=4/discover", func(t *testing.T) {
		out, err := run(t, time.Minute, mprun, "-np", "8", "-ppn", "4", "-discover", "--", built.path(t, "hello"))
		if err != nil {
			t.Fatalf("mprun failed: %v\n%s", err, out)
		}
		for r := 1; r < 8; r++ {
			if !strings.Contains(out, fmt.Sprintf(`rank 0 got "hello from rank %d of 8"`, r)) {
				t.Errorf("no greeting from rank %d:\n%s", r, out)
			}
		}
	})
}

// shmFiles lists the shared-memory inboxes of mplite ranks in /dev/shm.
func shmFiles(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob("/dev/shm/ethervia-*")
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// newNames returns the names in after that are not in before.
func newNames(before, after []string) []string {
	var out []string
	for _, n := range after {
		if !slices.Contains(before, n) {
			out = append(out, n)
		}
	}
	return out
}
