package auth_test

import (
	"testing"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/nic/nictest"
)

const jobKey = 0xabc

// newKey derives a key from a fresh secret.
func newKey(t testing.TB) *auth.Key {
	t.Helper()
	s, err := auth.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	k, err := auth.NewKey(s, jobKey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// bed is a memnic switch with two authenticated ports (A, B) and, if
// asked for, a raw promiscuous port for the attacker, which sees every
// frame and can send any.
type bed struct {
	nictest.Pair
	rawA, rawB *memnic.Port // the ports under A and B
	rogue      *memnic.Port
}

func newBed(t testing.TB, key *auth.Key, withRogue bool) *bed {
	t.Helper()
	sw := memnic.NewSwitch(1)
	cfg := memnic.PortConfig{Config: nic.Config{JobKey: jobKey}}
	var b bed
	var err error
	if b.rawA, err = sw.NewPort(cfg); err != nil {
		t.Fatal(err)
	}
	if b.rawB, err = sw.NewPort(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.rawA.Close(); b.rawB.Close() })
	if withRogue {
		rc := cfg
		rc.Promiscuous = true
		if b.rogue, err = sw.NewPort(rc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.rogue.Close() })
	}
	if b.A, err = auth.Wrap(b.rawA, key, auth.Config{}); err != nil {
		t.Fatal(err)
	}
	if b.B, err = auth.Wrap(b.rawB, key, auth.Config{}); err != nil {
		t.Fatal(err)
	}
	b.EtherType, b.JobKey = nic.DefaultEtherType, jobKey
	return &b
}

// send sends frames from d, failing t on an error.
func send(t testing.TB, d nic.Device, frames ...[]byte) {
	t.Helper()
	nictest.SendAll(t, d, frames)
}
