package vi

import (
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic/memnic"
)

// TestPollConnect: PollConnect hands out a request that has arrived, to
// its discriminator only and once, and otherwise returns at once without
// allocating.
func TestPollConnect(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	if r, ok := b.p.PollConnect(7); ok || r != nil {
		t.Fatalf("PollConnect with nothing asked: %v %v", r, ok)
	}
	if n := testing.AllocsPerRun(200, func() { b.p.PollConnect(7) }); n != 0 {
		t.Errorf("an empty PollConnect allocates %v times", n)
	}
	va := a.newVI(t, Attributes{Reliability: ReliableDelivery})
	vb := b.newVI(t, Attributes{Reliability: ReliableDelivery})
	errc := make(chan error, 1)
	go func() { errc <- va.ConnectRequest(ctxT(t, 5*time.Second), b.addr(7)) }()
	var req *ConnRequest
	for end := time.Now().Add(5 * time.Second); req == nil; {
		if r, ok := b.p.PollConnect(8); ok {
			t.Fatalf("PollConnect(8) took the request to 7: %v", r)
		}
		req, _ = b.p.PollConnect(7)
		if time.Now().After(end) {
			t.Fatal("the request never showed")
		}
	}
	if r, ok := b.p.PollConnect(7); ok {
		t.Fatalf("the request was handed out twice: %v", r)
	}
	if err := req.Accept(vb); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
