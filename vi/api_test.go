package vi

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/reliability"
)

func TestAttributes(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 9000, memnic.Faults{}, Options{}, 0)
	at := a.p.Attributes()
	if at.MTU != 9000 || at.MaxTransfer < 1<<20 || at.QueueDepth <= 0 || at.MaxPayload != 9000+14-reliability.ShortHeaderLen ||
		at.Reliability != Unreliable|ReliableDelivery|ReliableReception || !at.RDMARead || !at.RDMAWrite {
		t.Fatalf("attributes %+v", at)
	}
	if _, err := a.p.NewVI(Attributes{PTag: 99}); !errors.Is(err, ErrAttributes) {
		t.Fatalf("VI with an unknown protection tag: %v", err)
	}
	if _, err := a.p.NewVI(Attributes{PTag: a.ptag, Reliability: 3}); !errors.Is(err, ErrAttributes) {
		t.Fatalf("VI with two levels: %v", err)
	}
	v := a.newVI(t, Attributes{Reliability: ReliableReception, EnableRDMAWrite: true})
	if got := v.Attributes(); got.Reliability != ReliableReception || !got.EnableRDMAWrite || got.MaxTransfer != at.MaxTransfer {
		t.Fatalf("VI attributes %+v", got)
	}
	if v.State() != Idle {
		t.Fatalf("new VI is %v", v.State())
	}
	if err := v.PostSend(&descriptors.Descriptor{}); !errors.Is(err, ErrState) {
		t.Fatalf("send on an idle VI: %v", err)
	}
}

func TestDescriptorChecks(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{MaxTransfer: 1 << 16, MaxSegments: 2}, 1<<20)
	v := a.newVI(t, Attributes{Reliability: Unreliable})
	other := a.p.NewPTag()
	foreign := make([]byte, 100)
	fh, err := a.p.RegisterMemory(foreign, other, 0)
	mustf(t, err, "register")
	cases := []struct {
		name string
		d    descriptors.Descriptor
		want error
	}{
		{"unregistered", descriptors.Descriptor{Segments: []descriptors.Segment{{Buf: make([]byte, 10), Handle: a.h}}}, descriptors.ErrProtection},
		{"other ptag", descriptors.Descriptor{Segments: []descriptors.Segment{{Buf: foreign, Handle: fh}}}, descriptors.ErrProtection},
		{"past region", descriptors.Descriptor{Segments: []descriptors.Segment{{Buf: a.arena[len(a.arena)-5 : len(a.arena) : len(a.arena)][:5], Handle: fh}}}, descriptors.ErrProtection},
		{"too many segments", descriptors.Descriptor{Segments: make([]descriptors.Segment, 3)}, descriptors.ErrFormat},
		{"too long", descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 1<<17)}}, descriptors.ErrFormat},
		{"bad op", descriptors.Descriptor{Control: descriptors.Control{Op: 9}}, descriptors.ErrFormat},
	}
	for _, c := range cases {
		if err := v.PostRecv(&c.d); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if c.d.Status&descriptors.StatusDone == 0 || !errors.Is(c.d.Status.Err(), c.want) {
			t.Errorf("%s: status %v", c.name, c.d.Status)
		}
	}
	rd := descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMARead}}
	if err := v.PostRecv(&rd); !errors.Is(err, descriptors.ErrFormat) {
		t.Errorf("RDMA read on a receive queue: %v", err)
	}
}

func TestPeerToPeer(t *testing.T) {
	sw := memnic.NewSwitch(1)
	// Some loss so that requests and answers get lost too.
	f := memnic.Faults{Loss: 0.3}
	a := newHost(t, sw, 1500, f, Options{}, 1<<20)
	b := newHost(t, sw, 1500, f, Options{}, 1<<20)
	for round := 0; round < 5; round++ {
		va := a.newVI(t, Attributes{Reliability: ReliableReception})
		vb := b.newVI(t, Attributes{Reliability: ReliableReception})
		var wg sync.WaitGroup
		var errB error
		wg.Add(1)
		go func() {
			defer wg.Done()
			errB = vb.ConnectPeer(ctxT(t, 10*time.Second), a.addr(uint64(round)))
		}()
		if err := va.ConnectPeer(ctxT(t, 10*time.Second), b.addr(uint64(round))); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		mustf(t, errB, "b")
		// Data flows both ways.
		for _, p := range [][2]*VI{{va, vb}, {vb, va}} {
			hs, hr := a, b
			if p[0] == vb {
				hs, hr = b, a
			}
			r := &descriptors.Descriptor{Segments: []descriptors.Segment{hr.buf(t, 10)}}
			mustf(t, p[1].PostRecv(r), "post")
			s := &descriptors.Descriptor{Segments: []descriptors.Segment{hs.buf(t, 10)}}
			copy(s.Segments[0].Buf, "peer2peer!")
			mustf(t, p[0].PostSend(s), "send")
			d, err := p[1].RecvWait(ctxT(t, 10*time.Second))
			mustf(t, err, "recv")
			if string(d.Segments[0].Buf) != "peer2peer!" {
				t.Fatalf("got %q", d.Segments[0].Buf)
			}
		}
		mustf(t, va.Close(), "close")
		mustf(t, vb.Close(), "close")
	}
}

func TestPeerLevelMismatchRejected(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	va := a.newVI(t, Attributes{Reliability: ReliableReception})
	vb := b.newVI(t, Attributes{Reliability: Unreliable})
	// vb waits long enough for va's request even under the race detector;
	// its rejection is the answer va must get.
	errb := make(chan error, 1)
	go func() { errb <- vb.ConnectPeer(ctxT(t, 10*time.Second), a.addr(1)) }()
	err := va.ConnectPeer(ctxT(t, 10*time.Second), b.addr(1))
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("connect with mismatched levels: %v", err)
	}
	// Both ends learn it, whichever heard the other first.
	if err := <-errb; !errors.Is(err, ErrRejected) {
		t.Fatalf("the other end of a mismatched pair: %v", err)
	}
}

func TestRejectAndAttributeMismatch(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	va := a.newVI(t, Attributes{Reliability: ReliableDelivery, EnableRDMARead: true})
	wrong := b.newVI(t, Attributes{Reliability: Unreliable})
	errc := make(chan error, 1)
	go func() { errc <- va.ConnectRequest(ctxT(t, 5*time.Second), b.addr(3)) }()
	req, err := b.p.ConnectWait(ctxT(t, 5*time.Second), 3)
	mustf(t, err, "wait")
	if ra := req.RemoteAttributes(); ra.Reliability != ReliableDelivery || !ra.EnableRDMARead || ra.EnableRDMAWrite {
		t.Fatalf("remote attributes %+v", ra)
	}
	if !bytes.Equal(req.Remote().MAC, a.port.HardwareAddr()) || req.Remote().Discriminator != 3 {
		t.Fatalf("remote %v", req.Remote())
	}
	if err := req.Accept(wrong); !errors.Is(err, ErrAttributes) {
		t.Fatalf("accept with the wrong level: %v", err)
	}
	mustf(t, req.Reject(), "reject")
	if err := <-errc; !errors.Is(err, ErrRejected) {
		t.Fatalf("rejected request: %v", err)
	}
	if va.State() != Idle {
		t.Fatalf("state %v", va.State())
	}
}

func TestDisconnectReconnect(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<20)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<20)
	va := a.newVI(t, Attributes{})
	vb := b.newVI(t, Attributes{})
	for round := 0; round < 3; round++ {
		r := &descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 100)}}
		mustf(t, vb.PostRecv(r), "post")
		connectCS(t, a, b, va, vb, 8)
		mustf(t, va.PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 50)}}), "send")
		d, err := vb.RecvWait(ctxT(t, 5*time.Second))
		mustf(t, err, "recv")
		if d.Status != descriptors.StatusDone || d.Length != 50 {
			t.Fatalf("round %d: %v", round, d.Status)
		}
		// A receive left posted is flushed by the disconnect.
		left := &descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 100)}}
		mustf(t, vb.PostRecv(left), "post")
		mustf(t, va.Disconnect(), "disconnect")
		waitState(t, vb, Error)
		d, err = vb.RecvWait(ctxT(t, 5*time.Second))
		mustf(t, err, "recv")
		if d != left || d.Status&descriptors.StatusFlushed == 0 {
			t.Fatalf("posted receive after the peer disconnected: %v", d.Status)
		}
		mustf(t, vb.Disconnect(), "disconnect")
		if va.State() != Idle || vb.State() != Idle {
			t.Fatalf("states %v %v", va.State(), vb.State())
		}
		if _, ok := va.SendDone(); !ok {
			t.Fatal("the send is not reported done")
		}
	}
}

func TestCompletionQueue(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{QueueDepth: 16}, 1<<20)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{QueueDepth: 16}, 1<<20)
	cq, err := b.p.NewCQ(64)
	mustf(t, err, "cq")
	var vbs [3]*VI
	var vas [3]*VI
	for i := range vbs {
		vbs[i] = b.newVI(t, Attributes{RecvCQ: cq, SendCQ: map[bool]*CQ{true: cq}[i == 0]})
		vas[i] = a.newVI(t, Attributes{})
		connectCS(t, a, b, vas[i], vbs[i], uint64(20+i))
	}
	if _, err := b.p.NewVI(Attributes{PTag: b.ptag, RecvCQ: cq}); !errors.Is(err, ErrCQ) {
		t.Fatalf("a fifth queue on a full CQ: %v", err)
	}
	if err := cq.Close(); !errors.Is(err, ErrCQ) {
		t.Fatalf("closing a CQ in use: %v", err)
	}
	for i, v := range vbs {
		mustf(t, v.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 10)}}), "post")
		_ = i
	}
	order := []int{2, 0, 1}
	for _, i := range order {
		mustf(t, vas[i].PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 1)},
			Control: descriptors.Control{Immediate: true, ImmData: uint32(i)}}), "send")
		c, err := cq.Wait(ctxT(t, 5*time.Second))
		mustf(t, err, "cq wait")
		if c.VI != vbs[i] || !c.Recv {
			t.Fatalf("completion %+v, want VI %d receive", c, vbs[i].ID())
		}
		d, ok := c.VI.RecvDone()
		if !ok || d.ImmData != uint32(i) {
			t.Fatalf("descriptor after the CQ entry: %v %v", ok, d)
		}
	}
	// A send on the VI whose send queue feeds the CQ.
	mustf(t, vas[0].PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 10)}}), "post")
	mustf(t, vbs[0].PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 1)}}), "send")
	c, err := cq.Wait(ctxT(t, 5*time.Second))
	mustf(t, err, "cq wait")
	if c.VI != vbs[0] || c.Recv {
		t.Fatalf("completion %+v, want VI %d send", c, vbs[0].ID())
	}
	if _, ok := cq.Done(); ok {
		t.Fatal("an extra completion")
	}
	for _, v := range vbs {
		mustf(t, v.Close(), "close")
	}
	mustf(t, cq.Close(), "close cq")
}

func TestRDMAWriteAndRead(t *testing.T) {
	for _, level := range []Level{ReliableDelivery, ReliableReception} {
		t.Run(level.String(), func(t *testing.T) {
			sw := memnic.NewSwitch(1)
			f := memnic.Faults{Loss: 0.05, Reorder: 0.05}
			a := newHost(t, sw, 1500, f, Options{}, 1<<22)
			b := newHost(t, sw, 1500, f, Options{}, 0)
			va := a.newVI(t, Attributes{Reliability: level})
			vb := b.newVI(t, Attributes{Reliability: level, EnableRDMAWrite: true, EnableRDMARead: true})
			connectCS(t, a, b, va, vb, 1)
			// b exports a region.
			region := make([]byte, 1<<20)
			rh, err := b.p.RegisterMemory(region, b.ptag, AccessRDMAWrite|AccessRDMARead)
			mustf(t, err, "register")
			ro, err := b.p.RegisterMemory(make([]byte, 100), b.ptag, AccessRDMARead)
			mustf(t, err, "register")

			src := a.buf(t, 300000)
			pattern(5, src.Buf)
			w := &descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMAWrite},
				Segments: []descriptors.Segment{src}, Address: descriptors.AddressSegment{Handle: rh, Offset: 1000}}
			mustf(t, va.PostSend(w), "write")
			// A write with immediate data consumes a receive at b.
			notify := &descriptors.Descriptor{}
			mustf(t, vb.PostRecv(notify), "post")
			w2 := &descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMAWrite, Immediate: true, ImmData: 77},
				Segments: []descriptors.Segment{{Buf: src.Buf[:10], Handle: src.Handle}}, Address: descriptors.AddressSegment{Handle: rh}}
			mustf(t, va.PostSend(w2), "write imm")
			// A fenced read sees both writes.
			dst := a.buf(t, 300000+1000)
			r := &descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMARead, Fence: true},
				Segments: []descriptors.Segment{{Buf: dst.Buf[:7], Handle: dst.Handle}, {Buf: dst.Buf[7:], Handle: dst.Handle}},
				Address:  descriptors.AddressSegment{Handle: rh}}
			mustf(t, va.PostSend(r), "read")
			for _, want := range []*descriptors.Descriptor{w, w2, r} {
				d, err := va.SendWait(ctxT(t, 10*time.Second))
				mustf(t, err, "send wait")
				if d != want || d.Status != descriptors.StatusDone {
					t.Fatalf("completion %v of the wrong descriptor or failed", d.Status)
				}
			}
			n, err := vb.RecvWait(ctxT(t, 10*time.Second))
			mustf(t, err, "notify")
			if n != notify || n.Status != descriptors.StatusDone|descriptors.StatusImmediate|descriptors.StatusRemoteWrite || n.ImmData != 77 || n.Length != 10 {
				t.Fatalf("notification %v imm %d len %d", n.Status, n.ImmData, n.Length)
			}
			if !bytes.Equal(region[1000:301000], src.Buf) || !bytes.Equal(region[:10], src.Buf[:10]) {
				t.Fatal("RDMA write did not land")
			}
			if !bytes.Equal(dst.Buf, region[:301000]) || r.Length != 301000 {
				t.Fatal("RDMA read returned the wrong bytes")
			}
			// A write to a read-only region is refused before any byte
			// lands, and breaks the connection.
			bad := &descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMAWrite},
				Segments: []descriptors.Segment{{Buf: src.Buf[:50], Handle: src.Handle}}, Address: descriptors.AddressSegment{Handle: ro}}
			mustf(t, va.PostSend(bad), "bad write")
			d, err := va.SendWait(ctxT(t, 10*time.Second))
			mustf(t, err, "send wait")
			if level == ReliableReception && !errors.Is(d.Status.Err(), descriptors.ErrRDMAProtection) {
				t.Fatalf("write to a read-only region: %v", d.Status)
			}
			waitState(t, va, Error)
			waitState(t, vb, Error)
		})
	}
}

func TestRDMADisabledOnVI(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<20)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	va := a.newVI(t, Attributes{Reliability: ReliableReception})
	vb := b.newVI(t, Attributes{Reliability: ReliableReception}) // RDMA not enabled
	connectCS(t, a, b, va, vb, 1)
	region := make([]byte, 100)
	rh, err := b.p.RegisterMemory(region, b.ptag, AccessRDMAWrite|AccessRDMARead)
	mustf(t, err, "register")
	dst := a.buf(t, 10)
	mustf(t, va.PostSend(&descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMARead},
		Segments: []descriptors.Segment{dst}, Address: descriptors.AddressSegment{Handle: rh}}), "read")
	d, err := va.SendWait(ctxT(t, 10*time.Second))
	mustf(t, err, "wait")
	if !errors.Is(d.Status.Err(), descriptors.ErrRDMAProtection) {
		t.Fatalf("read of a VI without RDMA read: %v", d.Status)
	}
}

func TestCreditsHoldSends(t *testing.T) {
	// With one receive posted, the second send waits for credit instead of
	// being dropped, and goes as soon as another receive is posted.
	for _, level := range allLevels {
		t.Run(level.String(), func(t *testing.T) {
			sw := memnic.NewSwitch(1)
			a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<20)
			b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<20)
			va := a.newVI(t, Attributes{Reliability: level})
			vb := b.newVI(t, Attributes{Reliability: level})
			mustf(t, vb.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 10)}}), "post")
			connectCS(t, a, b, va, vb, 1)
			for i := 0; i < 2; i++ {
				mustf(t, va.PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 10)},
					Control: descriptors.Control{Immediate: true, ImmData: uint32(i)}}), "send")
			}
			d, err := vb.RecvWait(ctxT(t, 5*time.Second))
			mustf(t, err, "recv")
			if d.ImmData != 0 {
				t.Fatalf("first message %d", d.ImmData)
			}
			time.Sleep(30 * time.Millisecond)
			if _, ok := vb.RecvDone(); ok {
				t.Fatal("a message arrived with no receive posted")
			}
			if level == Unreliable || level == ReliableDelivery {
				if _, ok := va.SendDone(); !ok {
					t.Fatal("the first send did not complete")
				}
				if _, ok := va.SendDone(); ok {
					t.Fatal("the second send completed without credit")
				}
			}
			mustf(t, vb.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 10)}}), "post")
			d, err = vb.RecvWait(ctxT(t, 5*time.Second))
			mustf(t, err, "recv")
			if d.ImmData != 1 || d.Status.Failed() {
				t.Fatalf("second message %d %v", d.ImmData, d.Status)
			}
		})
	}
}

func TestConnectWaitDiscriminators(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	const n = 4
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		vb := b.newVI(t, Attributes{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := b.p.ConnectWait(ctxT(t, 5*time.Second), uint64(i))
			if err != nil {
				t.Error(err)
				return
			}
			if req.Remote().Discriminator != uint64(i) {
				t.Errorf("waiter %d got request %d", i, req.Remote().Discriminator)
			}
			if err := req.Accept(vb); err != nil {
				t.Error(err)
			}
		}()
	}
	for i := n - 1; i >= 0; i-- {
		va := a.newVI(t, Attributes{})
		if err := va.ConnectRequest(ctxT(t, 5*time.Second), b.addr(uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

func TestWaitContextCancelled(t *testing.T) {
	l := newLink(t, ReliableDelivery, memnic.Faults{}, Options{})
	l.recvs(t, 1, 10)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, err := l.vb.RecvWait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait after cancel: %v", err)
	}
}

func TestUnreliableRDMAWrite(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<20)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	va := a.newVI(t, Attributes{Reliability: Unreliable})
	vb := b.newVI(t, Attributes{Reliability: Unreliable, EnableRDMAWrite: true})
	mustf(t, vb.PostRecv(&descriptors.Descriptor{}), "post")
	connectCS(t, a, b, va, vb, 1)
	region := make([]byte, 10000)
	rh, err := b.p.RegisterMemory(region, b.ptag, AccessRDMAWrite)
	mustf(t, err, "register")
	src := a.buf(t, 5000)
	pattern(9, src.Buf)
	mustf(t, va.PostSend(&descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMAWrite, Immediate: true, ImmData: 5},
		Segments: []descriptors.Segment{src}, Address: descriptors.AddressSegment{Handle: rh, Offset: 100}}), "write")
	d, err := vb.RecvWait(ctxT(t, 5*time.Second))
	mustf(t, err, "recv")
	if d.Status != descriptors.StatusDone|descriptors.StatusImmediate|descriptors.StatusRemoteWrite || d.ImmData != 5 || d.Length != 5000 {
		t.Fatalf("notification %v imm %d len %d", d.Status, d.ImmData, d.Length)
	}
	if !bytes.Equal(region[100:5100], src.Buf) {
		t.Fatal("the write did not land")
	}
	// RDMA read needs a reliable VI.
	err = va.PostSend(&descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMARead},
		Segments: []descriptors.Segment{src}, Address: descriptors.AddressSegment{Handle: rh}})
	if !errors.Is(err, descriptors.ErrFormat) {
		t.Fatalf("RDMA read on an unreliable VI: %v", err)
	}
}
