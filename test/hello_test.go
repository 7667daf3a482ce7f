package test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestHelloExample runs the README's first program (examples/hello) as the
// README says, under mprun with four ranks: rank 0 prints one greeting from
// each other rank. The ranks get every address from mprun, or with
// -discover find each other by raw-Ethernet broadcast.
func TestHelloExample(t *testing.T) {
	needRoot(t)
	for _, mode := range [][]string{nil, {"-discover"}} {
		args := append(append([]string{"-np", "4"}, mode...), "--", built.path(t, "hello"))
		checkHello(t, 4, args)
	}
}

// TestHelloAtScale: 128 ranks, one per host, each greeting rank 0 on a
// connection made on demand. 127 first contacts with one rank must all
// get through (the provider once held 64 requests and refused the rest).
func TestHelloAtScale(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("128 processes")
	}
	checkHello(t, 128, []string{"-np", "128", "--", built.path(t, "hello")})
}

func checkHello(t *testing.T, n int, args []string) {
	t.Helper()
	out, errOut, err := runEnv(t, 2*time.Minute, nil, built.path(t, "mprun"), args...)
	if err != nil {
		t.Fatalf("mprun %v: %v\n%s%s", args, err, out, errOut)
	}
	for r := 1; r < n; r++ {
		if want := fmt.Sprintf("hello from rank %d of %d", r, n); !strings.Contains(out, want) {
			t.Errorf("mprun %v: no %q in the output:\n%s%s", args, want, out, errOut)
		}
	}
}
