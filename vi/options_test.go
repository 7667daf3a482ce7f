package vi

import (
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic/memnic"
)

// TestAckReqDelayDefaults: zero takes DefaultAckReqDelay, negative means at
// once and stays negative, so that filled-in options keep their meaning
// (bonding.Options embeds these and fills them in the same way).
func TestAckReqDelayDefaults(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{0, DefaultAckReqDelay},
		{-1, -1},
		{5 * time.Microsecond, 5 * time.Microsecond},
	} {
		o, err := Options{AckReqDelay: c.in}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if o.AckReqDelay != c.want {
			t.Errorf("AckReqDelay %v: filled in as %v, want %v", c.in, o.AckReqDelay, c.want)
		}
		again, _ := o.withDefaults()
		if again.AckReqDelay != o.AckReqDelay {
			t.Errorf("AckReqDelay %v: %v, then %v filled in again", c.in, o.AckReqDelay, again.AckReqDelay)
		}
	}
}

// TestVITimingOverridesProvider: a VI's own acknowledgement and
// retransmission timing replaces the provider's for its connection only;
// a neighbour on the same provider keeps the provider's.
func TestVITimingOverridesProvider(t *testing.T) {
	sw := memnic.NewSwitch(1)
	o := Options{AckDelay: 300 * time.Microsecond, AckReqDelay: 40 * time.Microsecond, RTOMin: 2 * time.Millisecond}
	a := newHost(t, sw, 1500, memnic.Faults{}, o, 0)
	b := newHost(t, sw, 1500, memnic.Faults{}, o, 0)
	own := Attributes{Reliability: ReliableReception, AckDelay: time.Millisecond, AckReqDelay: -1, RTOMin: 3 * time.Millisecond}
	plain := Attributes{Reliability: ReliableReception}
	for i, attrs := range []Attributes{own, plain} {
		va, vb := a.newVI(t, attrs), b.newVI(t, plain)
		errb := make(chan error, 1)
		go func() { errb <- vb.ConnectPeer(ctxT(t, 10*time.Second), a.addr(uint64(i))) }()
		mustf(t, va.ConnectPeer(ctxT(t, 10*time.Second), b.addr(uint64(i))), "connect")
		mustf(t, <-errb, "peer connect")
		a.p.mu.Lock()
		got := va.conn.Config()
		a.p.mu.Unlock()
		want := o
		if i == 0 {
			want = Options{AckDelay: own.AckDelay, AckReqDelay: own.AckReqDelay, RTOMin: own.RTOMin}
		}
		if got.AckDelay != want.AckDelay || got.AckReqDelay != want.AckReqDelay || got.RTOMin != want.RTOMin {
			t.Errorf("VI %d: connection timing ack %v, ack request %v, rto floor %v; want %v, %v, %v",
				i, got.AckDelay, got.AckReqDelay, got.RTOMin, want.AckDelay, want.AckReqDelay, want.RTOMin)
		}
	}
}
