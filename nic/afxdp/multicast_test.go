package afxdp

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
	"github.com/ethervia/ethervia/nic/nictest"
)

// devMcast returns the link-layer multicast addresses of iface as listed in
// the namespace's /proc/net/dev_mcast (hex, no colons).
func devMcast(t *testing.T, h host) []string {
	t.Helper()
	var out []string
	if err := inNS(h.ns, func() error {
		b, err := os.ReadFile("/proc/thread-self/net/dev_mcast")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 5 && f[1] == h.link {
				out = append(out, f[4])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func hexMAC(m [6]byte) string { return fmt.Sprintf("%x", m[:]) }

// TestMulticastJoinLeave shows the interface's multicast list holds the
// group address after a join and not after the leave (veth delivers every
// multicast frame anyway, so the list is what a join changes there), that
// a group frame reaches the socket through the steering program, and that
// Close removes what is still joined.
func TestMulticastJoinLeave(t *testing.T) {
	v, a, b := openPair(t, 0, Config{MaxMulticast: 2})
	g := nic.GroupMAC(testJob, 0x42)
	gm := net.HardwareAddr(g[:])
	has := func() bool {
		for _, s := range devMcast(t, v.b) {
			if s == hexMAC(g) {
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
		t.Fatalf("group address %v missing from dev_mcast after the join: %v", gm, devMcast(t, v.b))
	}
	want := frame(make([]byte, 200), gm, a.HardwareAddr(), nic.DefaultEtherType, testJob, 7)
	nictest.SendAll(t, a, [][]byte{want})
	got := collect(t, b, 1, 200*time.Millisecond)
	if len(got) != 1 || !bytes.Equal(got[0], want) {
		t.Fatalf("group frame: got %d frames, want the one sent", len(got))
	}
	// The limit: a second group fits, a third does not.
	g2, g3 := nic.GroupMAC(testJob, 0x43), nic.GroupMAC(testJob, 0x44)
	if err := b.JoinMulticast(g2[:]); err != nil {
		t.Fatal(err)
	}
	if err := b.JoinMulticast(g3[:]); !errors.Is(err, nic.ErrMulticastLimit) {
		t.Fatalf("third group: %v, want ErrMulticastLimit", err)
	}
	if err := b.LeaveMulticast(gm); err != nil {
		t.Fatal(err)
	}
	if has() {
		t.Fatalf("group address still on the interface after the leave: %v", devMcast(t, v.b))
	}
	// g2 is still joined: Close must take it off the interface.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range devMcast(t, v.b) {
		if s == hexMAC(g2) {
			t.Fatalf("group %v left on the interface after Close", net.HardwareAddr(g2[:]))
		}
	}
}
