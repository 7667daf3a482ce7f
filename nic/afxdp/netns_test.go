package afxdp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/ethervia/ethervia/testbed"
)

// This file is a small namespace helper for this package's tests: two
// network namespaces joined by one veth pair.

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: AF_XDP tests need root (network namespaces, XDP programs, AF_XDP sockets); run as root, as CI does")
	}
}

// host is one end of a vethNet.
type host struct {
	ns   netns.NsHandle
	name string // namespace name
	link string // veth name inside the namespace
	ip   net.IP
}

// vethNet is two namespaces joined by a veth pair.
type vethNet struct {
	a, b host
}

// inNS runs fn on an OS thread switched into ns. The thread is locked and
// never unlocked, so the runtime discards it afterwards instead of reusing a
// thread left in a foreign namespace.
func inNS(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// newVethNet builds the two namespaces and the veth pair with the given MTU
// (0 keeps the default), both links up and addressed from 198.18.0.0/15.
// The veths have the kernel's default single active queue.
// Names hold the pid and the first free counter value, so parallel test
// binaries do not collide; t.Cleanup removes everything, also on failure.
func newVethNet(t testing.TB, mtu int) *vethNet {
	t.Helper()
	return newVethNetQ(t, mtu, 0)
}

// newVethNetQ is newVethNet with queues active rx and tx queues per veth
// (0: the kernel's default).
func newVethNetQ(t testing.TB, mtu, queues int) *vethNet {
	t.Helper()
	needRoot(t)
	pid := os.Getpid()
	v := &vethNet{}
	errc := make(chan error, 1)
	var n int
	go func() {
		// NewNamed unshares the calling thread; keep it locked so it dies
		// with this goroutine.
		runtime.LockOSThread()
		for n = 0; n < 1000; n++ {
			na := fmt.Sprintf("%sxdp-%d-%d-a", testbed.Prefix(), pid, n)
			ns, err := netns.NewNamed(na)
			if errors.Is(err, os.ErrExist) {
				continue
			}
			if err != nil {
				errc <- fmt.Errorf("netns %s: %w", na, err)
				return
			}
			v.a = host{ns: ns, name: na}
			nb := fmt.Sprintf("%sxdp-%d-%d-b", testbed.Prefix(), pid, n)
			ns, err = netns.NewNamed(nb)
			if err != nil {
				errc <- fmt.Errorf("netns %s: %w", nb, err)
				return
			}
			v.b = host{ns: ns, name: nb}
			errc <- nil
			return
		}
		errc <- errors.New("no free namespace name")
	}()
	err := <-errc
	t.Cleanup(func() {
		for _, h := range []host{v.a, v.b} {
			if h.name == "" {
				continue
			}
			if err := netns.DeleteNamed(h.name); err != nil {
				t.Errorf("delete netns %s: %v", h.name, err)
			}
			h.ns.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	v.a.link = fmt.Sprintf("xa%dn%d", pid, n)
	v.b.link = fmt.Sprintf("xb%dn%d", pid, n)
	v.a.ip = net.IPv4(198, 18, byte(n), 1)
	v.b.ip = net.IPv4(198, 18, byte(n), 2)

	ha, err := netlink.NewHandleAt(v.a.ns)
	if err != nil {
		t.Fatalf("netlink handle: %v", err)
	}
	t.Cleanup(ha.Close)
	hb, err := netlink.NewHandleAt(v.b.ns)
	if err != nil {
		t.Fatalf("netlink handle: %v", err)
	}
	t.Cleanup(hb.Close)
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: v.a.link, MTU: mtu, NumTxQueues: queues, NumRxQueues: queues},
		PeerName:      v.b.link,
		PeerNamespace: netlink.NsFd(int(v.b.ns)),
	}
	if err := ha.LinkAdd(veth); err != nil {
		t.Fatalf("veth %s-%s: %v", v.a.link, v.b.link, err)
	}
	t.Cleanup(func() {
		// Deleting one end removes both; the namespaces would do it too,
		// but only asynchronously.
		if l, err := ha.LinkByName(v.a.link); err == nil {
			if err := ha.LinkDel(l); err != nil {
				t.Errorf("delete veth %s: %v", v.a.link, err)
			}
		}
	})
	for _, e := range []struct {
		h *netlink.Handle
		x host
	}{{ha, v.a}, {hb, v.b}} {
		l, err := e.h.LinkByName(e.x.link)
		if err != nil {
			t.Fatalf("link %s: %v", e.x.link, err)
		}
		if mtu > 0 {
			if err := e.h.LinkSetMTU(l, mtu); err != nil {
				t.Fatalf("mtu %d on %s: %v", mtu, e.x.link, err)
			}
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: e.x.ip, Mask: net.CIDRMask(24, 32)}}
		if err := e.h.AddrAdd(l, addr); err != nil {
			t.Fatalf("address on %s: %v", e.x.link, err)
		}
		if err := e.h.LinkSetUp(l); err != nil {
			t.Fatalf("up %s: %v", e.x.link, err)
		}
	}
	return v
}

// open opens a Device on h's veth end inside h's namespace and closes it in
// t.Cleanup.
func (h host) open(t testing.TB, cfg Config) *Device {
	t.Helper()
	d, err := h.tryOpen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return d
}

func (h host) tryOpen(cfg Config) (*Device, error) {
	cfg.Iface = h.link
	var d *Device
	err := inNS(h.ns, func() error {
		var err error
		d, err = Open(cfg)
		return err
	})
	return d, err
}
