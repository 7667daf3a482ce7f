// Package test holds Ethervia's end-to-end tests: real network namespaces,
// veth pairs and bridges built by package testbed, and real processes
// (mprun, mpiexec, netpipe, the mpitest rank program). They need root; as
// any other user they skip, and say so.
package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
)

// bins builds the programs the tests run, each once, on first use.
type bins struct {
	dir  string
	mu   sync.Mutex
	errs map[string]error // built (nil) or failed
}

var pkgs = map[string]string{
	"mprun":     "github.com/ethervia/ethervia/cmd/mprun",
	"netpipe":   "github.com/ethervia/ethervia/cmd/netpipe",
	"mpitest":   "github.com/ethervia/ethervia/mplite/internal/mpitest/cmd/mpitest",
	"collbench": "github.com/ethervia/ethervia/cmd/collbench",
	"hello":     "github.com/ethervia/ethervia/examples/hello",
}

// path returns the built program, building it first if needed.
func (b *bins) path(t *testing.T, name string) string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := filepath.Join(b.dir, name)
	err, done := b.errs[name]
	if !done {
		if cmdOut, berr := exec.Command("go", "build", "-o", out, pkgs[name]).CombinedOutput(); berr != nil {
			err = fmt.Errorf("building %s: %v\n%s", name, berr, cmdOut)
		}
		b.errs[name] = err
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var built *bins // set by TestMain before any test runs

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "test: NOT ROOT: every end-to-end test (namespaces, veth, bridges, real processes) is SKIPPED; run as root to run them")
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "ethervia-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built = &bins{dir: dir, errs: make(map[string]error)}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needRoot skips t, loudly, when the tests cannot build namespaces.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root to build network namespaces and run ranks in them")
	}
}

// faultReport is mprun's closing line on what the switch did to frames.
var faultReport = regexp.MustCompile(`the switch dropped (\d+), corrupted (\d+) and duplicated (\d+) of (\d+) Ethervia frames`)

// droppedFrames reads mprun's fault report from out: frames dropped and
// frames seen; ok is false when there is no report.
func droppedFrames(out string) (dropped, frames int, ok bool) {
	m := faultReport.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, false
	}
	dropped, _ = strconv.Atoi(m[1])
	frames, _ = strconv.Atoi(m[4])
	return dropped, frames, true
}
