package vi

import (
	"bytes"
	"testing"

	"github.com/ethervia/ethervia/nic/memnic"
)

// TestUnusedAccessors covers small exported accessors that no other package
// calls: VI.Provider, VI.Remote, CQ.Depth, DatagramPort.Kind and the String
// methods of Address and State.
func TestUnusedAccessors(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a, b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0), newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	va := a.newVI(t, Attributes{})
	vb := b.newVI(t, Attributes{})
	if va.Provider() != a.p || vb.Provider() != b.p {
		t.Fatal("VI.Provider does not return the provider the VI was made on")
	}
	if r := va.Remote(); r.MAC != nil || r.Discriminator != 0 {
		t.Fatalf("Remote of a never-connected VI is %v", r)
	}
	connectCS(t, a, b, va, vb, 42)
	if r := va.Remote(); !bytes.Equal(r.MAC, b.dev.HardwareAddr()) || r.Discriminator != 42 {
		t.Fatalf("client's Remote is %v, want %v", r, b.addr(42))
	}
	if r := vb.Remote(); !bytes.Equal(r.MAC, a.dev.HardwareAddr()) {
		t.Fatalf("server's Remote is %v, want MAC %v", r, a.dev.HardwareAddr())
	}

	cq, err := a.p.NewCQ(37)
	if err != nil {
		t.Fatal(err)
	}
	if cq.Depth() != 37 {
		t.Fatalf("CQ.Depth is %d, want 37", cq.Depth())
	}

	d, err := a.p.OpenDatagram(MinDatagramKind+3, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Kind() != MinDatagramKind+3 {
		t.Fatalf("DatagramPort.Kind is %d, want %d", d.Kind(), MinDatagramKind+3)
	}
}

func TestAddressAndStateString(t *testing.T) {
	ad := Address{MAC: []byte{0x02, 0, 0, 0, 0, 0x0a}, Discriminator: 7}
	if got := ad.String(); got != "02:00:00:00:00:0a/7" {
		t.Fatalf("Address.String = %q", got)
	}
	for s, want := range map[State]string{Idle: "idle", Pending: "pending", Connected: "connected", Error: "error", closedVI: "closed", 200: "state(200)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String = %q, want %q", uint8(s), got, want)
		}
	}
}
