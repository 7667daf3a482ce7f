package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdlayher/packet"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/nic"
)

// linkSeq makes link names unique within this test process (with the pid,
// across processes).
var linkSeq atomic.Int64

// vethPair is a veth pair with end a in namespace nsA and end b in nsB, both
// fresh unnamed namespaces (freed by the kernel when the test lets go, even
// if the process is killed).
type vethPair struct {
	nsA, nsB     netns.NsHandle
	ifA, ifB     int
	macA, macB   net.HardwareAddr
	nameA, nameB string
}

// newVethPair builds the pair and registers its removal with t.Cleanup.
func newVethPair(t *testing.T) *vethPair {
	t.Helper()
	needRoot(t)
	n := linkSeq.Add(1)
	p := &vethPair{
		nameA: fmt.Sprintf("evb%da%d", os.Getpid(), n),
		nameB: fmt.Sprintf("evb%db%d", os.Getpid(), n),
	}
	if len(p.nameA) > 15 {
		t.Fatalf("link name %q too long", p.nameA)
	}
	var err error
	if p.nsA, err = newNetns(); err != nil {
		t.Fatalf("new netns: %v", err)
	}
	t.Cleanup(func() { p.nsA.Close() })
	if p.nsB, err = newNetns(); err != nil {
		t.Fatalf("new netns: %v", err)
	}
	t.Cleanup(func() { p.nsB.Close() })

	hA, err := netlink.NewHandleAt(p.nsA)
	if err != nil {
		t.Fatalf("netlink handle: %v", err)
	}
	defer hA.Close()
	hB, err := netlink.NewHandleAt(p.nsB)
	if err != nil {
		t.Fatalf("netlink handle: %v", err)
	}
	defer hB.Close()

	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: p.nameA, MTU: 1500},
		PeerName:      p.nameB,
		PeerNamespace: netlink.NsFd(p.nsB),
	}
	if err := hA.LinkAdd(veth); err != nil {
		t.Fatalf("add veth %s/%s: %v", p.nameA, p.nameB, err)
	}
	t.Cleanup(func() {
		// Deleting one end removes both; the namespaces go with their
		// handles anyway, this just does it now.
		h, err := netlink.NewHandleAt(p.nsA)
		if err != nil {
			return
		}
		defer h.Close()
		if l, err := h.LinkByName(p.nameA); err == nil {
			h.LinkDel(l)
		}
	})
	for _, x := range []struct {
		h    *netlink.Handle
		name string
		idx  *int
		mac  *net.HardwareAddr
	}{{hA, p.nameA, &p.ifA, &p.macA}, {hB, p.nameB, &p.ifB, &p.macB}} {
		l, err := x.h.LinkByName(x.name)
		if err != nil {
			t.Fatalf("link %s: %v", x.name, err)
		}
		if err := x.h.LinkSetUp(l); err != nil {
			t.Fatalf("link %s up: %v", x.name, err)
		}
		*x.idx, *x.mac = l.Attrs().Index, l.Attrs().HardwareAddr
	}
	// A veth carries frames only once both ends are operationally up,
	// which the kernel reports a little after LinkSetUp; frames sent
	// before are dropped.
	deadline := time.Now().Add(5 * time.Second)
	for _, x := range []struct {
		h    *netlink.Handle
		name string
	}{{hA, p.nameA}, {hB, p.nameB}} {
		for {
			l, err := x.h.LinkByName(x.name)
			if err == nil && l.Attrs().OperState == netlink.OperUp {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("link %s not operationally up after 5s (%v)", x.name, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return p
}

// newNetns creates an unnamed network namespace and returns a handle to it,
// leaving the calling thread where it was.
func newNetns() (netns.NsHandle, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return 0, err
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		runtime.UnlockOSThread()
		return 0, err
	}
	if err := netns.Set(orig); err != nil {
		// The thread is stuck in the new namespace: keep it locked so
		// that it dies with this goroutine instead of being reused.
		ns.Close()
		return 0, fmt.Errorf("back to original netns: %w", err)
	}
	runtime.UnlockOSThread()
	return ns, nil
}

// inNetns runs fn on a thread in ns. The thread is never unlocked, so it is
// discarded when fn returns rather than reused in the wrong namespace.
func inNetns(ns netns.NsHandle, fn func() error) error {
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

// listen opens an AF_PACKET socket on ifindex in ns. Sockets stay in the
// namespace they were made in, whichever thread uses them later.
func listen(t *testing.T, ns netns.NsHandle, ifindex, proto int, cfg *packet.Config) *packet.Conn {
	t.Helper()
	var c *packet.Conn
	err := inNetns(ns, func() error {
		ifi, err := net.InterfaceByIndex(ifindex)
		if err != nil {
			return err
		}
		c, err = packet.Listen(ifi, packet.Raw, proto, cfg)
		if err != nil {
			return err
		}
		// Room for every test frame, so the socket never drops.
		rc, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
		}); err != nil {
			return err
		}
		return serr
	})
	if err != nil {
		t.Fatalf("packet socket on %d: %v", ifindex, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testFrame is an Ethervia frame from a to b carrying a phase and a sequence
// number after the prefix.
func testFrame(p *vethPair, et uint16, key uint32, phase byte, seq int) []byte {
	b := make([]byte, 64)
	pre := nic.Prefix{EtherType: et, Version: nic.Version, JobKey: key}
	pre.Dst, _ = nic.MAC(p.macB)
	pre.Src, _ = nic.MAC(p.macA)
	nic.PutPrefix(b, &pre)
	b[nic.PrefixLen] = phase
	binary.BigEndian.PutUint32(b[nic.PrefixLen+1:], uint32(seq))
	return b
}

// receiver counts frames of one phase by sequence number.
type receiver struct {
	c      *packet.Conn
	flt    nic.Filter
	counts []int
	total  int
	other  int // frames that are not ours or of another phase
	buf    []byte
}

func newReceiver(c *packet.Conn, n int) *receiver {
	return &receiver{c: c, flt: testFilter, counts: make([]int, n), buf: make([]byte, 2048)}
}

// readUntil reads frames of phase until done() reports true after a quiet
// read, or until limit passes (then it fails the test).
func (r *receiver) readUntil(t *testing.T, phase byte, limit time.Duration, done func(r *receiver) bool) {
	t.Helper()
	end := time.Now().Add(limit)
	for {
		if err := r.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
			t.Fatalf("set deadline: %v", err)
		}
		n, _, err := r.c.ReadFrom(r.buf)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("read: %v", err)
			}
			if done(r) {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("gave up after %v: received %d frames of phase %d", limit, r.total, phase)
			}
			continue
		}
		f := r.buf[:n]
		if r.flt.Check(f) != nil || n < nic.PrefixLen+5 || f[nic.PrefixLen] != phase {
			r.other++
			continue
		}
		seq := int(binary.BigEndian.Uint32(f[nic.PrefixLen+1:]))
		if seq >= len(r.counts) {
			r.other++
			continue
		}
		r.counts[seq]++
		r.total++
	}
}

// send sends b and reports whether the kernel refused it with ENOBUFS: a
// frame dropped by a tc egress program (TC_ACT_SHOT becomes NET_XMIT_DROP)
// fails the sender's sendto that way.
func send(t *testing.T, c *packet.Conn, to net.HardwareAddr, b []byte) (dropped bool) {
	t.Helper()
	_, err := c.WriteTo(b, &packet.Addr{HardwareAddr: to})
	if errors.Is(err, unix.ENOBUFS) {
		return true
	}
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return false
}

func TestTCFaultVeth(t *testing.T) {
	for _, c := range []struct {
		name    string
		dir     Direction
		clsact  bool
		onPeerB bool // attach on the receiving end (ingress) instead of the sender
	}{
		{"tcx egress", Egress, false, false},
		{"tcx ingress", Ingress, false, true},
		{"clsact egress", Egress, true, false},
		{"clsact ingress", Ingress, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newVethPair(t)
			ns, ifindex := p.nsA, p.ifA
			if c.onPeerB {
				ns, ifindex = p.nsB, p.ifB
			}
			var tf *TCFault
			if err := inNetns(ns, func() (err error) {
				tf, err = attachTCFault(ifindex, c.dir, testEtherType, c.clsact)
				return err
			}); err != nil {
				t.Fatalf("attach: %v", err)
			}
			t.Cleanup(func() { tf.Close() })
			if attachedTCX := tf.lnk != nil; attachedTCX == c.clsact || (tf.filter != nil) != c.clsact {
				t.Fatalf("attached through TCX=%v clsact=%v, want clsact=%v", tf.lnk != nil, tf.filter != nil, c.clsact)
			}
			testTCFaultTraffic(t, p, tf)
			if err := tf.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if c.clsact {
				checkNoBPFFilter(t, ns, ifindex, c.dir)
			}
		})
	}
}

func testTCFaultTraffic(t *testing.T, p *vethPair, tf *TCFault) {
	filter, err := SocketFilter(testFilter)
	if err != nil {
		t.Fatal(err)
	}
	tx := listen(t, p.nsA, p.ifA, 0, nil)
	rx := listen(t, p.nsB, p.ifB, nic.DefaultEtherType, &packet.Config{Filter: filter})
	counters := func() FaultCounters {
		c, err := tf.Counters()
		if err != nil {
			t.Fatalf("Counters: %v", err)
		}
		return c
	}

	// Phase 1, no faults: the socket filter lets only our job key in.
	const n1 = 100
	r := newReceiver(rx, n1)
	for i := range n1 {
		send(t, tx, p.macB, testFrame(p, testEtherType, testJobKey^0xff, 1, i))
		send(t, tx, p.macB, testFrame(p, testEtherType, testJobKey, 1, i))
	}
	r.readUntil(t, 1, 10*time.Second, func(r *receiver) bool { return r.total >= n1 })
	if r.total != n1 || r.other != 0 {
		t.Fatalf("no faults: received %d of ours and %d others, want %d and 0", r.total, r.other, n1)
	}
	base := counters()
	if base.Seen != 2*n1 || base.Dropped != 0 || base.Duplicated != 0 {
		t.Fatalf("no faults: counters %+v, want Seen=%d only", base, 2*n1)
	}

	// Phase 2, Drop=0.5, with frames of another EtherType mixed in that
	// must be neither faulted nor counted.
	if err := tf.Set(FaultConfig{Drop: 0.5}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	const n2 = 4000
	other := listen(t, p.nsB, p.ifB, testEtherType+1, nil)
	r = newReceiver(rx, n2)
	enobufs := 0
	for i := range n2 {
		if send(t, tx, p.macB, testFrame(p, testEtherType, testJobKey, 2, i)) {
			enobufs++
		}
		if i%40 == 0 {
			send(t, tx, p.macB, testFrame(p, testEtherType+1, testJobKey, 2, i))
		}
	}
	r.readUntil(t, 2, 10*time.Second, func(r *receiver) bool {
		c := counters()
		return c.Seen-base.Seen == n2 && uint64(r.total) == c.Seen-base.Seen-(c.Dropped-base.Dropped)
	})
	c := counters()
	frac := float64(r.total) / n2
	t.Logf("Drop=0.5: %d of %d frames arrived (%.3f); counters %+v", r.total, n2, frac, c)
	if frac < 0.4 || frac > 0.6 {
		t.Errorf("Drop=0.5: %.3f arrived, want 0.4..0.6", frac)
	}
	if tf.dir == Egress && uint64(enobufs) != c.Dropped-base.Dropped {
		t.Errorf("egress: %d sends failed with ENOBUFS, want one per drop (%d)", enobufs, c.Dropped-base.Dropped)
	}
	if tf.dir == Ingress && enobufs != 0 {
		t.Errorf("ingress: %d sends failed with ENOBUFS, want 0", enobufs)
	}
	if c.Seen-base.Seen != n2 {
		t.Errorf("Seen grew by %d, want %d (other EtherTypes must not count)", c.Seen-base.Seen, n2)
	}
	for seq, k := range r.counts {
		if k > 1 {
			t.Fatalf("Drop=0.5: frame %d arrived %d times", seq, k)
		}
	}
	othersGot := 0
	for {
		other.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, _, err := other.ReadFrom(make([]byte, 2048)); err != nil {
			break
		}
		othersGot++
	}
	if othersGot != n2/40 {
		t.Errorf("other EtherType: %d of %d arrived, want all", othersGot, n2/40)
	}

	// Phase 3, Duplicate=1: every frame exactly twice.
	if err := tf.Set(FaultConfig{Duplicate: 1}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	base = counters()
	const n3 = 1000
	r = newReceiver(rx, n3)
	for i := range n3 {
		send(t, tx, p.macB, testFrame(p, testEtherType, testJobKey, 3, i))
	}
	r.readUntil(t, 3, 10*time.Second, func(r *receiver) bool { return r.total >= 2*n3 })
	c = counters()
	if r.total != 2*n3 {
		t.Errorf("Duplicate=1: %d frames arrived, want %d", r.total, 2*n3)
	}
	for seq, k := range r.counts {
		if k != 2 {
			t.Fatalf("Duplicate=1: frame %d arrived %d times, want 2", seq, k)
		}
	}
	if c.Seen-base.Seen != n3 || c.Duplicated-base.Duplicated != n3 || c.Dropped != base.Dropped {
		t.Errorf("Duplicate=1: counters %+v (before %+v), want Seen and Duplicated +%d", c, base, n3)
	}
}

// checkNoBPFFilter fails if a bpf filter is left on the clsact hook.
func checkNoBPFFilter(t *testing.T, ns netns.NsHandle, ifindex int, dir Direction) {
	t.Helper()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByIndex(ifindex)
	if err != nil {
		t.Fatal(err)
	}
	parent := uint32(netlink.HANDLE_MIN_EGRESS)
	if dir == Ingress {
		parent = netlink.HANDLE_MIN_INGRESS
	}
	fs, err := h.FilterList(l, parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 0 {
		t.Errorf("after Close, %d filters remain on %v: %+v", len(fs), dir, fs[0])
	}
}
