package afxdp

import (
	"errors"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/nic"
)

// TestMaxMulticast checks that MaxMulticast reports the configured limit
// (zero: the default, negative: none) and that joins stop exactly there.
func TestMaxMulticast(t *testing.T) {
	for _, tc := range []struct{ cfg, want int }{{0, nic.DefaultMaxMulticast}, {3, 3}, {-1, 0}} {
		// A fresh pair each time: the kernel releases a closed socket's
		// queue binding asynchronously.
		d := newVethNet(t, 0).a.open(t, Config{Config: nic.Config{JobKey: testJob}, MaxMulticast: tc.cfg})
		if got := d.MaxMulticast(); got != tc.want {
			t.Fatalf("Config.MaxMulticast %d: MaxMulticast = %d, want %d", tc.cfg, got, tc.want)
		}
		for i := range tc.want {
			g := nic.GroupMAC(testJob, uint32(0x100+i))
			if err := d.JoinMulticast(net.HardwareAddr(g[:])); err != nil {
				t.Fatalf("Config.MaxMulticast %d: join %d: %v", tc.cfg, i, err)
			}
		}
		g := nic.GroupMAC(testJob, 0x1ff)
		if err := d.JoinMulticast(net.HardwareAddr(g[:])); !errors.Is(err, nic.ErrMulticastLimit) {
			t.Fatalf("Config.MaxMulticast %d: join beyond MaxMulticast: %v, want ErrMulticastLimit", tc.cfg, err)
		}
	}
}

// TestFD checks that FD is the device's AF_XDP socket.
func TestFD(t *testing.T) {
	_, a, _ := openPair(t, 0, Config{})
	fd := a.FD()
	if fd < 0 {
		t.Fatalf("FD = %d", fd)
	}
	dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		t.Fatalf("SO_DOMAIN of FD %d: %v", fd, err)
	}
	if dom != unix.AF_XDP {
		t.Fatalf("FD %d is a socket of domain %d, want AF_XDP (%d)", fd, dom, unix.AF_XDP)
	}
}
