package mplite_test

import (
	"errors"
	"testing"

	"github.com/ethervia/ethervia/mplite"
)

// TestStatsEager: one short message counts as one eager send on its
// sender and one eager receive on its receiver.
func TestStatsEager(t *testing.T) {
	comms, err := mplite.NewLocalWorld(2)
	if err != nil {
		t.Fatal(err)
	}
	a, b := comms[0], comms[1]
	defer mplite.Abandon(a)
	defer mplite.Abandon(b)
	sent, recvd := a.Stats().EagerSent, b.Stats().EagerReceived
	done := make(chan error, 1)
	go func() {
		_, err := b.Recv(make([]byte, 8), 0, 3)
		done <- err
	}()
	if err := a.Send([]byte("hi"), 1, 3); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := a.Stats().EagerSent - sent; d != 1 {
		t.Errorf("EagerSent grew by %d, want 1", d)
	}
	if d := b.Stats().EagerReceived - recvd; d != 1 {
		t.Errorf("EagerReceived grew by %d, want 1", d)
	}
}

// TestPeerErrorUnwrap: a PeerError is ErrPeerDead and unwraps to its
// cause.
func TestPeerErrorUnwrap(t *testing.T) {
	cause := errors.New("keepalive timeout")
	var err error = &mplite.PeerError{Rank: 3, Err: cause}
	if errors.Unwrap(err) != cause || !errors.Is(err, cause) || !errors.Is(err, mplite.ErrPeerDead) {
		t.Errorf("%v: unwraps to %v", err, errors.Unwrap(err))
	}
}
