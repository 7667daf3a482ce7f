package mplite_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ethervia/ethervia/mplite"
)

// TestInitNeedsSecret: a rank started without a launcher's key-value
// store and without MPLITE_SECRET refuses to run open, before it touches
// a device, unless authentication is turned off; a malformed secret or
// switch is refused by name.
func TestInitNeedsSecret(t *testing.T) {
	for _, k := range []string{"PMI_FD", "PMI_PORT", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "MPLITE_HOSTFILE", "MPLITE_AUTH", "MPLITE_SECRET"} {
		t.Setenv(k, "")
	}
	t.Setenv("MPLITE_RANK", "0")
	t.Setenv("MPLITE_SIZE", "2")
	t.Setenv("MPLITE_IFACES", "ethervia-no-such-iface")
	t.Setenv("MPLITE_JOB", "7")
	if _, err := mplite.Init(); !errors.Is(err, mplite.ErrNoSecret) {
		t.Fatalf("Init without a secret: %v, want ErrNoSecret", err)
	}
	// With the secret or with authentication off it goes on, to the
	// interface that does not exist.
	t.Setenv("MPLITE_SECRET", strings.Repeat("ab", 32))
	if _, err := mplite.Init(); err == nil || errors.Is(err, mplite.ErrNoSecret) || !strings.Contains(err.Error(), "ethervia-no-such-iface") {
		t.Fatalf("Init with a secret: %v, want the missing interface", err)
	}
	t.Setenv("MPLITE_SECRET", "")
	if _, err := mplite.Init(mplite.WithAuthentication(false)); err == nil || errors.Is(err, mplite.ErrNoSecret) {
		t.Fatalf("Init with authentication off: %v, want the missing interface", err)
	}
	for _, env := range [][2]string{{"MPLITE_SECRET", "12"}, {"MPLITE_AUTH", "maybe"}} {
		t.Setenv(env[0], env[1])
		if _, err := mplite.Init(); err == nil || !strings.Contains(err.Error(), env[0]) {
			t.Errorf("%s=%s: %v, want an error naming it", env[0], env[1], err)
		}
		t.Setenv(env[0], "")
	}
}
