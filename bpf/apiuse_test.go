package bpf

import (
	"testing"

	"github.com/cilium/ebpf/link"
)

func TestDirectionString(t *testing.T) {
	for d, want := range map[Direction]string{Ingress: "ingress", Egress: "egress", 5: "Direction(5)"} {
		if got := d.String(); got != want {
			t.Errorf("Direction(%d).String = %q, want %q", int(d), got, want)
		}
	}
}

// TestSteeringQueues checks that Queues is the configured XSKMAP size
// (DefaultQueues for zero) and the bound Register enforces.
func TestSteeringQueues(t *testing.T) {
	s := newTestSteering(t)
	if s.Queues() != 4 {
		t.Fatalf("Queues = %d, want 4", s.Queues())
	}
	if err := s.Register(s.Queues(), 0); err == nil {
		t.Fatal("Register of queue Queues() succeeded")
	}
	d, err := NewSteering(testFilter, SteeringOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Queues() != DefaultQueues {
		t.Fatalf("Queues with zero option = %d, want %d", d.Queues(), DefaultQueues)
	}
}

// TestSteeringDetach checks that Detach removes the program from the
// interface, is a no-op when repeated, and leaves the Steering attachable.
func TestSteeringDetach(t *testing.T) {
	p := newVethPair(t)
	s := attachSteering(t, p, link.XDPGenericMode)
	if err := s.Detach(); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	checkXDPAttached(t, p.nsB, p.ifB, false)
	if err := s.Detach(); err != nil {
		t.Fatalf("second Detach: %v", err)
	}
	if err := inNetns(p.nsB, func() error { return s.Attach(p.ifB, link.XDPGenericMode) }); err != nil {
		t.Fatalf("Attach after Detach: %v", err)
	}
	checkXDPAttached(t, p.nsB, p.ifB, true)
	if err := s.Detach(); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	checkXDPAttached(t, p.nsB, p.ifB, false)
}
