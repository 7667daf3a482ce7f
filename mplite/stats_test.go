package mplite_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/nic/memnic"
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

// TestStatsTransport: Stats.Transport counts the frames of the rank's
// connections, frames sent again over a lossy switch, and every rail of a
// bonded connection.
func TestStatsTransport(t *testing.T) {
	const size = 1 << 20
	cases := []struct {
		name string
		opts []mplite.Option
		// minSent is the fewest data frames the sender must count.
		minSent uint64
		lossy   bool
	}{
		// The local world's MTU is 9 000: at most 8 918 payload bytes a
		// frame, so 117 frames at least.
		{"clean", nil, size / 8918, false},
		{"lossy", []mplite.Option{mplite.WithLocalFaults(5, memnic.Faults{Loss: 0.02})}, size / 8918, true},
		// Rail 0 alone carries about half: only the sum reaches 117.
		{"bonded", []mplite.Option{mplite.WithLocalRails(2)}, size / 8918, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stats := make([]mplite.Stats, 2)
			noErrors(t, runWorld(t, 2, 60*time.Second, tc.opts, func(c *mplite.Comm) error {
				buf := make([]byte, size)
				var err error
				if c.Rank() == 0 {
					err = c.Send(buf, 1, 1)
				} else {
					_, err = c.Recv(buf, 0, 1)
				}
				if err == nil {
					err = c.Barrier()
				}
				stats[c.Rank()] = c.Stats()
				return err
			}))
			tx, rx := stats[0].Transport, stats[1].Transport
			if tx.FramesSent < tc.minSent || rx.FramesAccepted < tc.minSent {
				t.Errorf("sender counted %d frames sent, receiver %d accepted; want %d or more each", tx.FramesSent, rx.FramesAccepted, tc.minSent)
			}
			if tc.lossy && tx.Retransmits == 0 {
				t.Errorf("2 %% loss: no retransmissions counted (%+v)", tx)
			}
			if !tc.lossy && tx.Timeouts > tx.FramesSent/10 {
				t.Errorf("clean switch: %d timeouts for %d frames", tx.Timeouts, tx.FramesSent)
			}
		})
	}
}
