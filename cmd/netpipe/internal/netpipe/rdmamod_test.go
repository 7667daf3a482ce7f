package netpipe

import (
	"context"
	"testing"

	"github.com/ethervia/ethervia/nic/memnic"
)

func TestRDMAPingPongAndHotPath(t *testing.T) {
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{Faults: memnic.Faults{Loss: 0.01, Reorder: 0.01}})
	tc, rc := connectPair(t, RDMAModule{}, tx, rx)
	// Sizes around frame boundaries, a zero-length message, and sizes the
	// same buffer is granted again for.
	sizes := []int{0, 1, 1500, 1 << 20, 1<<20 + 1, 3 << 20, 17, 17, 0, 5}
	pingPongSizes(t, tc, rc, sizes)
	// Every message went by RDMA write: each end refused nothing, and
	// completed one receive per grant and one per write notification.
	for _, c := range []Conn{tc, rc} {
		c := c.(*rdmaConn)
		if s := c.p.Stats(); s.RDMARefused() != 0 {
			t.Errorf("refused RDMA accesses: %+v", s.Memory)
		}
		if n := c.v.Stats().MessagesReceived; n != uint64(2*len(sizes)) {
			t.Errorf("%d receives completed, want %d (a grant and a write per message)", n, 2*len(sizes))
		}
		if c.in.base == nil {
			t.Error("no receive buffer was ever registered for remote write")
		}
	}
	tx, rx, _ = memPair(t, 1, memnic.PortConfig{})
	tc, rc = connectPair(t, RDMAModule{}, tx, rx)
	if a := allocsPerRoundTrip(t, tc, rc, 5000, 1000); a != 0 {
		t.Errorf("rdma: %v allocations per round trip", a)
	}
}

func TestRDMAExchange(t *testing.T) {
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{})
	tc, rc := connectPair(t, RDMAModule{}, tx, rx)
	ctx := context.Background()
	for k, n := range []int{0, 1, 9000, 1 << 20} {
		ta, tb := make([]byte, n), make([]byte, n)
		ra, rb := make([]byte, n), make([]byte, n)
		fillMsg(ta, 2*k)
		fillMsg(ra, 2*k+1)
		errc := make(chan error, 1)
		go func() { errc <- rc.Exchange(ctx, ra, rb) }()
		if err := tc.Exchange(ctx, ta, tb); err != nil {
			t.Fatalf("%d bytes: transmitter: %v", n, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("%d bytes: receiver: %v", n, err)
		}
		if string(tb) != string(ra) || string(rb) != string(ta) {
			t.Fatalf("%d bytes: exchanged messages differ", n)
		}
	}
}

func TestRDMARefusesSeveralLinks(t *testing.T) {
	tx, _, _ := memPair(t, 2, memnic.PortConfig{})
	if _, err := (RDMAModule{}).Connect(context.Background(), tx); err == nil {
		t.Error("rdma on two links accepted")
	}
}
