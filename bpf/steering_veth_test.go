package bpf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/nic"
)

func checkXDPAttached(t *testing.T, ns netns.NsHandle, ifindex int, want bool) {
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
	got := l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
	if got != want {
		t.Errorf("link %d: XDP attached = %v, want %v", ifindex, got, want)
	}
}

func attachSteering(t *testing.T, p *vethPair, mode link.XDPAttachFlags) *Steering {
	t.Helper()
	s, err := NewSteering(testFilter, SteeringOptions{Queues: 4})
	if err != nil {
		t.Fatalf("NewSteering: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := inNetns(p.nsB, func() error { return s.Attach(p.ifB, mode) }); err != nil {
		t.Fatalf("Attach: %v", err)
	}
	checkXDPAttached(t, p.nsB, p.ifB, true)
	return s
}

func TestSteeringVeth(t *testing.T) {
	for _, m := range []struct {
		name string
		mode link.XDPAttachFlags
	}{{"auto", 0}, {"generic", link.XDPGenericMode}, {"driver", link.XDPDriverMode}} {
		t.Run(m.name, func(t *testing.T) {
			p := newVethPair(t)
			var pass io.Closer
			if err := inNetns(p.nsA, func() (err error) {
				pass, err = AttachXDPPass(p.ifA)
				return err
			}); err != nil {
				t.Fatalf("AttachXDPPass: %v", err)
			}
			t.Cleanup(func() { pass.Close() })
			checkXDPAttached(t, p.nsA, p.ifA, true)
			s := attachSteering(t, p, m.mode)
			if err := s.Attach(p.ifB, m.mode); err == nil {
				t.Error("second Attach succeeded")
			}

			tx := listen(t, p.nsA, p.ifA, 0, nil)
			rxOurs := listen(t, p.nsB, p.ifB, testEtherType, nil)
			rxOther := listen(t, p.nsB, p.ifB, testEtherType+1, nil)
			const n = 50
			foreign := nic.Filter{EtherType: testEtherType + 1, JobKey: testJobKey}

			// No socket registered: our frames and foreign ones reach the stack.
			for i := range n {
				send(t, tx, p.macB, testFrame(p, testEtherType, testJobKey, 1, i))
				send(t, tx, p.macB, testFrame(p, testEtherType+1, testJobKey, 1, i))
			}
			ro, rf := newReceiver(rxOurs, n), newReceiver(rxOther, n)
			rf.flt = foreign
			ro.readUntil(t, 1, 10*time.Second, func(r *receiver) bool { return r.total >= n })
			rf.readUntil(t, 1, 10*time.Second, func(r *receiver) bool { return r.total >= n })
			if ro.total != n || rf.total != n {
				t.Fatalf("received %d of ours and %d foreign, want %d each", ro.total, rf.total, n)
			}
			c := steeringCounters(t, s)
			if c.Fault.Seen != n || c.Unclaimed != n || c.Redirected != 0 || c.Passed < n {
				t.Errorf("counters %+v, want Seen=Unclaimed=%d, Passed>=%d", c, n, n)
			}

			// Drop=1: ours vanish, foreign frames still pass.
			if err := s.SetFault(FaultConfig{Drop: 1}); err != nil {
				t.Fatalf("SetFault: %v", err)
			}
			for i := range n {
				send(t, tx, p.macB, testFrame(p, testEtherType, testJobKey, 2, i))
				send(t, tx, p.macB, testFrame(p, testEtherType+1, testJobKey, 2, i))
			}
			rf = newReceiver(rxOther, n)
			rf.flt = foreign
			rf.readUntil(t, 2, 10*time.Second, func(r *receiver) bool { return r.total >= n })
			ro = newReceiver(rxOurs, n)
			ro.readUntil(t, 2, 10*time.Second, func(*receiver) bool { return true })
			if ro.total != 0 || rf.total != n {
				t.Errorf("Drop=1: received %d of ours and %d foreign, want 0 and %d", ro.total, rf.total, n)
			}
			c2 := steeringCounters(t, s)
			if c2.Fault.Dropped != n || c2.Fault.Seen != 2*n {
				t.Errorf("Drop=1: counters %+v, want Dropped=%d", c2, n)
			}

			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			checkXDPAttached(t, p.nsB, p.ifB, false)
			if err := pass.Close(); err != nil {
				t.Fatalf("XDP pass Close: %v", err)
			}
			if err := pass.Close(); err != nil {
				t.Fatalf("XDP pass second Close: %v", err)
			}
			checkXDPAttached(t, p.nsA, p.ifA, false)
		})
	}
}

// testXSK is a minimal copy-mode AF_XDP receive socket.
type testXSK struct {
	fd         int
	umem, fill []byte
	rx         []byte
	off        unix.XDPMmapOffsets
}

const (
	xskFrames    = 64
	xskFrameSize = 2048
)

func sockopt(fd, name int, p unsafe.Pointer, size uintptr) error {
	_, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(name), uintptr(p), size, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func newTestXSK(ifindex, queue int) (_ *testXSK, err error) {
	x := &testXSK{fd: -1}
	defer func() {
		if err != nil {
			x.Close()
		}
	}()
	if x.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if x.umem, err = unix.Mmap(-1, 0, xskFrames*xskFrameSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		return nil, fmt.Errorf("mmap umem: %w", err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&x.umem[0]))), Len: uint64(len(x.umem)), Size: xskFrameSize}
	if err := sockopt(x.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return nil, fmt.Errorf("umem reg: %w", err)
	}
	size := uint32(xskFrames)
	for _, opt := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING} {
		if err := sockopt(x.fd, opt, unsafe.Pointer(&size), 4); err != nil {
			return nil, fmt.Errorf("ring size %d: %w", opt, err)
		}
	}
	ol := uint32(unsafe.Sizeof(x.off))
	if _, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(x.fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&x.off)), uintptr(unsafe.Pointer(&ol)), 0); errno != 0 {
		return nil, fmt.Errorf("mmap offsets: %w", errno)
	}
	if x.fill, err = unix.Mmap(x.fd, unix.XDP_UMEM_PGOFF_FILL_RING, int(x.off.Fr.Desc)+xskFrames*8,
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return nil, fmt.Errorf("mmap fill ring: %w", err)
	}
	if x.rx, err = unix.Mmap(x.fd, unix.XDP_PGOFF_RX_RING, int(x.off.Rx.Desc)+xskFrames*int(unsafe.Sizeof(unix.XDPDesc{})),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return nil, fmt.Errorf("mmap rx ring: %w", err)
	}
	// Give the kernel every frame.
	for i := range xskFrames {
		binary.NativeEndian.PutUint64(x.fill[int(x.off.Fr.Desc)+8*i:], uint64(i*xskFrameSize))
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&x.fill[x.off.Fr.Producer])), xskFrames)
	sa := &unix.SockaddrXDP{Flags: unix.XDP_COPY, Ifindex: uint32(ifindex), QueueID: uint32(queue)}
	if err := unix.Bind(x.fd, sa); err != nil {
		return nil, fmt.Errorf("bind: %w", err)
	}
	return x, nil
}

// received returns the frames the kernel has put on the rx ring.
func (x *testXSK) received() [][]byte {
	prod := atomic.LoadUint32((*uint32)(unsafe.Pointer(&x.rx[x.off.Rx.Producer])))
	var out [][]byte
	for i := range prod {
		d := (*unix.XDPDesc)(unsafe.Pointer(&x.rx[int(x.off.Rx.Desc)+int(i%xskFrames)*int(unsafe.Sizeof(unix.XDPDesc{}))]))
		out = append(out, x.umem[d.Addr:d.Addr+uint64(d.Len)])
	}
	return out
}

func (x *testXSK) Close() error {
	for _, m := range [][]byte{x.rx, x.fill, x.umem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	if x.fd >= 0 {
		unix.Close(x.fd)
	}
	return nil
}

func TestSteeringAFXDP(t *testing.T) {
	p := newVethPair(t)
	s := attachSteering(t, p, 0)
	var x *testXSK
	if err := inNetns(p.nsB, func() (err error) {
		x, err = newTestXSK(p.ifB, 0)
		return err
	}); err != nil {
		t.Fatalf("AF_XDP socket: %v", err)
	}
	// Unregister before the socket goes: cleanups run last-in first-out.
	t.Cleanup(func() { x.Close() })
	if err := s.Register(0, x.fd); err != nil {
		t.Fatalf("Register: %v", err)
	}
	t.Cleanup(func() { s.Unregister(0) })

	tx := listen(t, p.nsA, p.ifA, 0, nil)
	rxOther := listen(t, p.nsB, p.ifB, testEtherType+1, nil)
	const n = 32
	var sent [][]byte
	for i := range n {
		f := testFrame(p, testEtherType, testJobKey, 1, i)
		sent = append(sent, f)
		send(t, tx, p.macB, f)
		send(t, tx, p.macB, testFrame(p, testEtherType+1, testJobKey, 1, i))
	}
	// Foreign frames were sent after ours on the same queue; once they are
	// all in, ours have been through XDP too.
	rf := newReceiver(rxOther, n)
	rf.flt = nic.Filter{EtherType: testEtherType + 1, JobKey: testJobKey}
	rf.readUntil(t, 1, 10*time.Second, func(r *receiver) bool { return r.total >= n })
	deadline := time.Now().Add(10 * time.Second)
	var got [][]byte
	for {
		if got = x.received(); len(got) >= n || time.Now().After(deadline) {
			break
		}
		unix.Poll([]unix.PollFd{{Fd: int32(x.fd), Events: unix.POLLIN}}, 100)
	}
	if len(got) != n {
		t.Fatalf("AF_XDP socket got %d frames, want %d", len(got), n)
	}
	for i, f := range got {
		if !bytes.Equal(f, sent[i]) {
			t.Fatalf("frame %d on the AF_XDP ring differs from the one sent:\n% x\n% x", i, f, sent[i])
		}
	}
	c := steeringCounters(t, s)
	if c.Redirected != n || c.Unclaimed != 0 || c.Fault.Seen != n || c.Passed < n {
		t.Errorf("counters %+v, want Redirected=Seen=%d, Passed>=%d", c, n, n)
	}

	// Unregistered: our frames go to the kernel stack again.
	if err := s.Unregister(0); err != nil {
		t.Fatalf("Unregister: %v", err)
	}
	rxOurs := listen(t, p.nsB, p.ifB, testEtherType, nil)
	for i := range 5 {
		send(t, tx, p.macB, testFrame(p, testEtherType, testJobKey, 2, i))
	}
	ro := newReceiver(rxOurs, 5)
	ro.readUntil(t, 2, 10*time.Second, func(r *receiver) bool { return r.total >= 5 })
	if c := steeringCounters(t, s); c.Unclaimed != 5 || c.Redirected != n {
		t.Errorf("after Unregister: counters %+v, want Unclaimed=5 Redirected=%d", c, n)
	}
	if len(x.received()) != n {
		t.Errorf("AF_XDP socket got frames after Unregister")
	}
}
