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
	"testing"
)

// bins holds the programs built once for every test in the package.
type bins struct{ dir string }

func (b bins) path(name string) string { return filepath.Join(b.dir, name) }

var built bins // set once by TestMain, read-only afterwards

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
	code := func() int {
		defer os.RemoveAll(dir)
		for name, pkg := range map[string]string{
			"mprun":   "github.com/ethervia/ethervia/cmd/mprun",
			"netpipe": "github.com/ethervia/ethervia/cmd/netpipe",
			"mpitest": "github.com/ethervia/ethervia/mplite/internal/mpitest/cmd/mpitest",
		} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "test: building %s: %v\n%s", name, err, out)
				return 1
			}
		}
		built = bins{dir}
		return m.Run()
	}()
	os.Exit(code)
}

// needRoot skips t, loudly, when the tests cannot build namespaces.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root to build network namespaces and run ranks in them")
	}
}
