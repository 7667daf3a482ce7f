package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ethervia/ethervia/internal/nstest"
	"github.com/ethervia/ethervia/testbed"
)

func TestHelpExitsZero(t *testing.T) {
	_, errOut, code := mprun(t, "-h")
	if code != 0 {
		t.Fatalf("-h: exit %d, want 0", code)
	}
	if !strings.Contains(errOut, "usage: mprun") || !strings.Contains(errOut, "-sweep") {
		t.Fatalf("-h printed %q, want the usage with -sweep", errOut)
	}
}

func TestSweepTakesNoProgram(t *testing.T) {
	if _, errOut, code := mprun(t, "-sweep", "--", "true"); code != 2 || strings.Count(errOut, "mprun:") != 1 {
		t.Fatalf("-sweep with a program: exit %d, %q", code, errOut)
	}
	needRoot(t)
	out, errOut, code := mprun(t, "-sweep")
	// Leftovers that another process's mounts pin may resist (exit 1);
	// either way mprun says what it removed.
	if code == 2 || !strings.HasPrefix(out, "mprun: -sweep: ") {
		t.Fatalf("-sweep: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestSIGTERMRemovesTestbed(t *testing.T) {
	needRoot(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("SKIPPED: no go command to build mprun: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "mprun")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-np", "2", "--", "/bin/sh", "-c", `echo ready $$; exec sleep 600`)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("%smprun-%d-", testbed.Prefix(), cmd.Process.Pid)
	waited := false
	t.Cleanup(func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		nstest.Remove(tag)
	})
	// Both ranks run (and say their pids) before the signal.
	var ranks []int
	sc := bufio.NewScanner(stdout)
	for len(ranks) < 2 && sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "ready "); ok {
			pid, err := strconv.Atoi(rest)
			if err != nil {
				t.Fatalf("rank line %q", sc.Text())
			}
			ranks = append(ranks, pid)
		}
	}
	if len(ranks) < 2 {
		t.Fatalf("ranks never started (%v)", sc.Err())
	}
	if len(nstest.Leftovers(t, tag)) == 0 {
		t.Fatalf("no namespaces named %s* while the ranks run", tag)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
	}
	err = cmd.Wait()
	waited = true
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Errorf("after SIGTERM: %v, want a non-zero exit", err)
	}
	if left := nstest.Leftovers(t, tag); len(left) != 0 {
		t.Errorf("left behind after SIGTERM:\n%s", strings.Join(left, "\n"))
	}
	for _, pid := range ranks {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), "sleep") {
				t.Errorf("rank pid %d (%q) still runs", pid, b)
			}
		}
	}
}
