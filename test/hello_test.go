package test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestHelloExample runs the README's first program (examples/hello) as the
// README says, under mprun with four ranks: rank 0 prints one greeting from
// each other rank.
func TestHelloExample(t *testing.T) {
	needRoot(t)
	out, errOut, err := runEnv(t, 2*time.Minute, nil, built.path(t, "mprun"), "-np", "4", "--", built.path(t, "hello"))
	if err != nil {
		t.Fatalf("mprun: %v\n%s%s", err, out, errOut)
	}
	for r := 1; r < 4; r++ {
		if want := fmt.Sprintf("hello from rank %d of 4", r); !strings.Contains(out, want) {
			t.Errorf("no %q in the output:\n%s%s", want, out, errOut)
		}
	}
}
