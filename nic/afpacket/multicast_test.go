package afpacket_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/afpacket"
	"github.com/ethervia/ethervia/testbed"
)

// devMcast lists the link-layer multicast addresses of h's rail-0
// interface from its namespace's /proc/net/dev_mcast (hex, no colons).
func devMcast(t *testing.T, h *testbed.Host) []string {
	t.Helper()
	var out []string
	if err := h.Do(func() error {
		b, err := os.ReadFile("/proc/thread-self/net/dev_mcast")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 5 && f[1] == h.Ifaces[0] {
				out = append(out, f[4])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// recvOne waits up to a second for one frame.
func recvOne(t *testing.T, d nic.Device) []byte {
	t.Helper()
	buf := [][]byte{make([]byte, nic.FrameCap(d.MTU()))}
	lens := []int{0}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		n, err := d.Recv(buf, lens)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return buf[0][:lens[0]]
		}
		_ = d.Wait(time.Now().Add(10 * time.Millisecond))
	}
	return nil
}

// TestMulticastJoinLeave shows that the interface's multicast list holds
// the group address after a join and not after the leave (veth delivers
// every multicast frame anyway, so the list is what a join changes there),
// that the socket receives group frames, that the limit holds, and that
// closing the socket drops its memberships.
func TestMulticastJoinLeave(t *testing.T) {
	tb := newTestbedPair(t, "afpmc")
	a := openOn(t, tb.Host(0))
	b := openCfg(t, tb.Host(1), afpacket.Config{Config: nic.Config{JobKey: jobKey}, MaxMulticast: 1})
	g := nic.GroupMAC(jobKey, 0x42)
	gm := net.HardwareAddr(g[:])
	gs := fmt.Sprintf("%x", g[:])
	has := func() bool {
		for _, s := range devMcast(t, tb.Host(1)) {
			if s == gs {
				return true
			}
		}
		return false
	}
	if has() {
		t.Fatal("group address on the interface before the join")
	}
	if err := b.JoinMulticast(gm); err != nil {
		t.Fatal(err)
	}
	if !has() {
		t.Fatalf("group %v missing from dev_mcast after the join: %v", gm, devMcast(t, tb.Host(1)))
	}
	want := make([]byte, 200)
	nic.PutPrefix(want, &nic.Prefix{Dst: g, EtherType: nic.DefaultEtherType, Version: nic.Version, JobKey: jobKey})
	copy(want[6:12], a.HardwareAddr())
	for i := nic.PrefixLen; i < len(want); i++ {
		want[i] = byte(i * 7)
	}
	if _, err := a.Send([][]byte{want}); err != nil {
		t.Fatal(err)
	}
	if got := recvOne(t, b); !bytes.Equal(got, want) {
		t.Fatalf("group frame: got %d bytes, want the %d sent", len(got), len(want))
	}
	g2 := nic.GroupMAC(jobKey, 0x43)
	if err := b.JoinMulticast(g2[:]); !errors.Is(err, nic.ErrMulticastLimit) {
		t.Fatalf("second group with MaxMulticast 1: %v, want ErrMulticastLimit", err)
	}
	if err := b.LeaveMulticast(gm); err != nil {
		t.Fatal(err)
	}
	if has() {
		t.Fatalf("group still on the interface after the leave: %v", devMcast(t, tb.Host(1)))
	}
	if err := b.JoinMulticast(gm); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if has() {
		t.Fatal("group still on the interface after the socket closed")
	}
}
