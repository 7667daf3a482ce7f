package memnic

import (
	"bytes"
	"testing"

	"github.com/ethervia/ethervia/nic"
)

// TestSwitchPort checks that Switch.Port returns the ports in the order
// NewPort made them, and nil outside that range.
func TestSwitchPort(t *testing.T) {
	sw := NewSwitch(1)
	if sw.Port(0) != nil {
		t.Fatal("Port(0) of an empty switch is not nil")
	}
	var ports []*Port
	for range 3 {
		p, err := sw.NewPort(PortConfig{Config: nic.Config{JobKey: testJob}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		ports = append(ports, p)
	}
	for i, p := range ports {
		if got := sw.Port(i); got != p {
			t.Fatalf("Port(%d) is not the port NewPort made %d-th", i, i)
		}
		if !bytes.Equal(sw.Port(i).HardwareAddr(), p.HardwareAddr()) {
			t.Fatalf("Port(%d) has another MAC", i)
		}
	}
	if sw.Port(-1) != nil || sw.Port(3) != nil {
		t.Fatal("Port outside [0, 3) is not nil")
	}
}

// TestPromiscuous checks PortConfig.Promiscuous: a promiscuous port also
// receives unicast frames between two other ports; a normal one does not.
func TestPromiscuous(t *testing.T) {
	sw := NewSwitch(2)
	mk := func(promisc bool) *Port {
		p, err := sw.NewPort(PortConfig{Config: nic.Config{JobKey: testJob}, Promiscuous: promisc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	a, b, spy, other := mk(false), mk(false), mk(true), mk(false)
	f := frame(b, a, 7, 200)
	if n, err := a.Send([][]byte{f}); n != 1 || err != nil {
		t.Fatalf("send: %d, %v", n, err)
	}
	if got := drain(t, b); len(got) != 1 || !bytes.Equal(got[0], f) {
		t.Fatalf("addressee got %d frames", len(got))
	}
	if got := drain(t, spy); len(got) != 1 || !bytes.Equal(got[0], f) {
		t.Fatalf("promiscuous port got %d frames, want the one frame", len(got))
	}
	if got := drain(t, other); len(got) != 0 {
		t.Fatalf("normal port got %d frames addressed elsewhere", len(got))
	}
	// The promiscuous port's own frames still reach only their addressee
	// once: not a second time through promiscuity.
	g := frame(spy, a, 8, 100)
	if n, err := a.Send([][]byte{g}); n != 1 || err != nil {
		t.Fatalf("send: %d, %v", n, err)
	}
	if got := drain(t, spy); len(got) != 1 || !bytes.Equal(got[0], g) {
		t.Fatalf("promiscuous addressee got %d frames, want 1", len(got))
	}
}
