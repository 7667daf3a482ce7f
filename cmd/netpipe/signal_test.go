package main

import (
	"bufio"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ethervia/ethervia/internal/nstest"
	"github.com/ethervia/ethervia/testbed"
)

// buildSelf builds this command into a temporary directory, for tests that
// must signal a real process.
func buildSelf(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("SKIPPED: no go command to build netpipe: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "netpipe")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestSignalRemovesTestbed(t *testing.T) {
	needRoot(t)
	bin := buildSelf(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			// The first run's module with NetPIPE's full method: far
			// longer than the test waits, so the signal lands in the
			// middle of the run. mplite's calls take no context.
			cmd := exec.Command(bin, "-local", "-o", "", "-progress", "off", "-full")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			tag := fmt.Sprintf("%snp-%d-", testbed.Prefix(), cmd.Process.Pid)
			waited := false
			t.Cleanup(func() {
				if !waited {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
				nstest.Remove(tag)
			})
			// Wait for the first data point: the testbed is up and the run
			// is in its main loop.
			sc := bufio.NewScanner(stderr)
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if strings.Contains(sc.Text(), " bytes ") {
					break
				}
			}
			if len(nstest.Leftovers(t, tag)) == 0 {
				t.Fatalf("no namespaces named %s* while running; stderr:\n%s", tag, strings.Join(lines, "\n"))
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			err = cmd.Wait()
			waited = true
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("after %v: %v, want exit status 1", sig, err)
			}
			if last := lines[len(lines)-1]; !strings.Contains(last, "interrupted") || strings.Count(last, "netpipe:") != 1 {
				t.Errorf("last line %q: want one netpipe: prefix and \"interrupted\"", last)
			}
			if left := nstest.Leftovers(t, tag); len(left) != 0 {
				t.Errorf("left behind after %v:\n%s", sig, strings.Join(left, "\n"))
			}
		})
	}
}

func TestSweepRemovesKilledRun(t *testing.T) {
	needRoot(t)
	bin := buildSelf(t)
	// SIGKILL leaves no chance to clean up: -sweep must remove the rest.
	cmd := exec.Command(bin, "-local", "-module", "tcp", "-o", "", "-progress", "off", "-full")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("%snp-%d-", testbed.Prefix(), cmd.Process.Pid)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		nstest.Remove(tag)
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), " bytes ") {
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(nstest.Leftovers(t, tag)) == 0 {
		t.Fatalf("SIGKILL left no namespaces named %s* to sweep", tag)
	}
	stdout, _, err := runCmd(t, "-sweep")
	if err != nil && strings.Contains(err.Error(), tag) {
		// Other leftovers may resist (another process's mounts); ours not.
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout, "netpipe: -sweep: removed ") || !strings.Contains(stdout, tag) {
		t.Errorf("-sweep printed %q, want the removal of %s*", stdout, tag)
	}
	if left := nstest.Leftovers(t, tag); len(left) != 0 {
		t.Errorf("left behind after -sweep:\n%s", strings.Join(left, "\n"))
	}
}
