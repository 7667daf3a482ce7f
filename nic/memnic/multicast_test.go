package memnic

import (
	"bytes"
	"errors"
	"net"
	"testing"

	"github.com/ethervia/ethervia/nic"
)

// groupFrame is a frame from src to the group address g.
func groupFrame(g [6]byte, src *Port, seq uint32) []byte {
	f := frame(src, src, seq, 100)
	copy(f[0:6], g[:])
	return f
}

func TestMulticastFilter(t *testing.T) {
	sw := NewSwitch(1)
	cfg := PortConfig{Config: nic.Config{JobKey: testJob}}
	var ports [3]*Port
	for i := range ports {
		p, err := sw.NewPort(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
		t.Cleanup(func() { p.Close() })
	}
	a, b, c := ports[0], ports[1], ports[2]
	g := nic.GroupMAC(testJob, 7)
	gm := net.HardwareAddr(g[:])

	// Nobody joined: the group frame reaches nobody, broadcast everybody.
	bc := frame(a, a, 1, 80)
	copy(bc[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	if _, err := a.Send([][]byte{groupFrame(g, a, 1), bc}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Port{b, c} {
		got := drain(t, p)
		if len(got) != 1 || !bytes.Equal(got[0], bc) {
			t.Fatalf("port %d before join: got %d frames, want only the broadcast", p.Index(), len(got))
		}
	}

	// b joins (twice): only b gets the group frame.
	for range 2 {
		if err := b.JoinMulticast(gm); err != nil {
			t.Fatal(err)
		}
	}
	want := groupFrame(g, a, 2)
	if _, err := a.Send([][]byte{want}); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, b); len(got) != 1 || !bytes.Equal(got[0], want) {
		t.Fatalf("joined port got %d frames, want the group frame", len(got))
	}
	if got := drain(t, c); len(got) != 0 {
		t.Fatalf("port that did not join got %d frames", len(got))
	}
	if m := b.Multicast(); len(m) != 1 || !bytes.Equal(m[0], gm) {
		t.Fatalf("b's groups = %v, want [%v]", m, gm)
	}

	// One leave keeps the second join; the last one drops the group.
	if err := b.LeaveMulticast(gm); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send([][]byte{groupFrame(g, a, 3)}); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, b); len(got) != 1 {
		t.Fatalf("after one of two leaves: got %d frames, want 1", len(got))
	}
	if err := b.LeaveMulticast(gm); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send([][]byte{groupFrame(g, a, 4)}); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, b); len(got) != 0 {
		t.Fatalf("after leaving: got %d frames, want 0", len(got))
	}
	if err := b.LeaveMulticast(gm); !errors.Is(err, nic.ErrNotJoined) {
		t.Fatalf("leave of a group not joined: %v, want ErrNotJoined", err)
	}
	if err := b.JoinMulticast(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); !errors.Is(err, nic.ErrNotMulticast) {
		t.Fatalf("join of broadcast: %v, want ErrNotMulticast", err)
	}
	if err := b.JoinMulticast(b.HardwareAddr()); !errors.Is(err, nic.ErrNotMulticast) {
		t.Fatalf("join of a unicast address: %v, want ErrNotMulticast", err)
	}
}

func TestMulticastLimit(t *testing.T) {
	sw := NewSwitch(1)
	p, err := sw.NewPort(PortConfig{Config: nic.Config{JobKey: testJob}, MaxMulticast: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.MaxMulticast() != 2 {
		t.Fatalf("MaxMulticast = %d, want 2", p.MaxMulticast())
	}
	mac := func(i uint32) net.HardwareAddr { g := nic.GroupMAC(testJob, i); return g[:] }
	for i := range uint32(2) {
		if err := p.JoinMulticast(mac(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.JoinMulticast(mac(0)); err != nil { // a repeat is not a new group
		t.Fatal(err)
	}
	err = p.JoinMulticast(mac(2))
	if !errors.Is(err, nic.ErrMulticastLimit) {
		t.Fatalf("third group: %v, want ErrMulticastLimit", err)
	}
	t.Logf("limit error: %v", err)
	if err := p.LeaveMulticast(mac(1)); err != nil {
		t.Fatal(err)
	}
	if err := p.JoinMulticast(mac(2)); err != nil {
		t.Fatalf("join after a leave freed a slot: %v", err)
	}

	// Defaults and "none".
	q, _ := sw.NewPort(PortConfig{Config: nic.Config{JobKey: testJob}})
	r, _ := sw.NewPort(PortConfig{Config: nic.Config{JobKey: testJob}, MaxMulticast: -1})
	defer q.Close()
	defer r.Close()
	if q.MaxMulticast() != nic.DefaultMaxMulticast || r.MaxMulticast() != 0 {
		t.Fatalf("limits %d, %d, want %d, 0", q.MaxMulticast(), r.MaxMulticast(), nic.DefaultMaxMulticast)
	}
	if err := r.JoinMulticast(mac(0)); !errors.Is(err, nic.ErrMulticastLimit) {
		t.Fatalf("join with no groups allowed: %v", err)
	}
	q.SetMaxMulticast(-1)
	if err := q.JoinMulticast(mac(0)); !errors.Is(err, nic.ErrMulticastLimit) {
		t.Fatalf("join after SetMaxMulticast(-1): %v", err)
	}
}

func TestGroupMAC(t *testing.T) {
	g := nic.GroupMAC(0x12345678, 0xabcdef01)
	want := [6]byte{0x03, 0x12 ^ 0x56, 0x34 ^ 0x78, 0xcd, 0xef, 0x01}
	if g != want {
		t.Fatalf("GroupMAC = % x, want % x", g, want)
	}
	if !nic.IsMulticast(g[:]) {
		t.Fatal("group MAC is not multicast")
	}
}
