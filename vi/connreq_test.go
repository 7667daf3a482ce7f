package vi

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic/memnic"
)

// A client repeats its request while the server holds it unanswered. The
// repeats must not come out of ConnectWait as new requests (a server that
// has already connected to that client would reject the copy, and the
// client, if it missed the Accept, would take the Reject as the answer);
// and a Reject reaches the client.
func TestRepeatedRequestNotRequeued(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{ConnectRetry: 2 * time.Millisecond}, 0)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	client := a.newVI(t, Attributes{Reliability: ReliableDelivery})
	done := make(chan error, 1)
	go func() {
		done <- client.ConnectRequest(ctxT(t, 10*time.Second), Address{MAC: b.p.Attributes().HardwareAddr, Discriminator: 9})
	}()
	req, err := b.p.ConnectWait(ctxT(t, 5*time.Second), 9)
	if err != nil {
		t.Fatal(err)
	}
	// Let the client repeat its request many times.
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if dup, err := b.p.ConnectWait(ctx, 9); err == nil {
		t.Fatalf("a repeat of the held request came out as a new one (%v)", dup.Remote())
	}
	if s := b.p.Stats(); s.RepeatedRequests == 0 {
		t.Errorf("no repeated requests counted: %+v", s)
	}
	if err := req.Reject(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrRejected) {
		t.Fatalf("client: %v, want ErrRejected", err)
	}
}
