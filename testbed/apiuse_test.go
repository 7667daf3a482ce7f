package testbed

import (
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// TestHostNetNS checks that NetNS returns a handle to the namespace Do runs
// in, one per host, through which netlink sees the host's rail interface.
func TestHostNetNS(t *testing.T) {
	needRoot(t)
	tb := build(t, Config{Hosts: 2, Topology: Pair})
	var handles []netns.NsHandle
	for _, h := range tb.Hosts() {
		ns, err := h.NetNS()
		if err != nil {
			t.Fatalf("NetNS: %v", err)
		}
		t.Cleanup(func() { ns.Close() })
		handles = append(handles, ns)
		if err := h.Do(func() error {
			cur, err := netns.Get()
			if err != nil {
				return err
			}
			defer cur.Close()
			if !cur.Equal(ns) {
				t.Errorf("host %s: NetNS is not the namespace Do runs in", h.Name)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		nh, err := netlink.NewHandleAt(ns)
		if err != nil {
			t.Fatal(err)
		}
		l, err := nh.LinkByName(h.Ifaces[0])
		nh.Close()
		if err != nil {
			t.Fatalf("host %s: link %s not in its NetNS: %v", h.Name, h.Ifaces[0], err)
		}
		if l.Attrs().Name != h.Ifaces[0] {
			t.Fatalf("link %q, want %q", l.Attrs().Name, h.Ifaces[0])
		}
	}
	if handles[0].Equal(handles[1]) {
		t.Fatal("two hosts' NetNS handles name the same namespace")
	}
	root, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if root.Equal(handles[0]) {
		t.Fatal("NetNS is the test's own namespace")
	}
}
