package bonding

import (
	"context"
	"errors"
	"testing"

	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/vi"
)

// TestCQDepthAndClose covers CQ.Depth and CQ.Close, which no other package
// calls: Close fails while a VI's queue is attached, succeeds once it is
// detached, and a closed CQ refuses new VIs and ends Wait.
func TestCQDepthAndClose(t *testing.T) {
	a, _ := memPair(t, 2, 1500, memnic.Faults{}, testOptions(), 1<<16)
	cq, err := a.b.NewCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	if cq.Depth() != 64 {
		t.Fatalf("Depth = %d, want 64", cq.Depth())
	}
	v := a.newVI(t, Attributes{RecvCQ: cq, QueueDepth: 8})
	if err := cq.Close(); !errors.Is(err, vi.ErrCQ) {
		t.Fatalf("Close with a queue attached: %v, want ErrCQ", err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cq.Close(); err != nil {
		t.Fatalf("Close after the VI detached: %v", err)
	}
	if _, err := a.b.NewVI(Attributes{PTag: a.ptag, RecvCQ: cq}); !errors.Is(err, vi.ErrCQ) {
		t.Fatalf("NewVI on a closed CQ: %v, want ErrCQ", err)
	}
	if _, err := cq.Wait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait on a closed CQ: %v, want ErrClosed", err)
	}
}

// TestVIBondAndAttributes covers VI.Bond and VI.Attributes.
func TestVIBondAndAttributes(t *testing.T) {
	a, b := memPair(t, 2, 1500, memnic.Faults{}, testOptions(), 1<<16)
	cq, err := a.b.NewCQ(a.b.Options().QueueDepth)
	if err != nil {
		t.Fatal(err)
	}
	v := a.newVI(t, Attributes{EnableRDMAWrite: true, SendCQ: cq})
	if v.Bond() != a.b {
		t.Fatal("Bond does not return the VI's bond")
	}
	w := b.newVI(t, Attributes{QueueDepth: 4})
	if w.Bond() != b.b {
		t.Fatal("Bond does not return the VI's bond")
	}
	at := v.Attributes()
	if at.PTag != a.ptag || !at.EnableRDMAWrite || at.SendCQ != cq || at.RecvCQ != nil || at.QueueDepth != a.b.Options().QueueDepth {
		t.Fatalf("Attributes = %+v, want the defaults filled in", at)
	}
	if at := w.Attributes(); at.QueueDepth != 4 || at.EnableRDMAWrite || at.SendCQ != nil {
		t.Fatalf("Attributes = %+v", at)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Idle: "idle", Connected: "connected", Error: "error", closedVI: "closed", 77: "state(77)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String = %q, want %q", uint8(s), got, want)
		}
	}
}
