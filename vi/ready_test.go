package vi

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
)

// countingDevice counts Recv calls: each is a pass over the device.
type countingDevice struct {
	nic.Device
	recvs atomic.Int64
}

func (d *countingDevice) Recv(bufs [][]byte, lens []int) (int, error) {
	d.recvs.Add(1)
	return d.Device.Recv(bufs, lens)
}

// TestReady: CQ.Ready, VI.RecvReady and VI.SendReady hand out what has
// completed, in order, and never make a pass over the device themselves,
// where Done does.
func TestReady(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<16)
	var dev *countingDevice
	b := newHostWrapped(t, sw, 1500, memnic.Faults{}, Options{}, 1<<16, func(port *memnic.Port) nic.Device {
		dev = &countingDevice{Device: port}
		return dev
	})
	cq, va, vb := cqPair(t, a, b)

	// Nothing completed: nothing ready, and no pass over the device.
	for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
		cq.Done() // a poller: the background goroutine leaves the device alone
	}
	before := dev.recvs.Load()
	const tries = 2000
	for range tries {
		if c, ok := cq.Ready(); ok {
			t.Fatalf("Ready returned %+v with nothing completed", c)
		}
		if d, ok := vb.RecvReady(); ok {
			t.Fatalf("RecvReady returned %v with nothing posted", d)
		}
		if d, ok := vb.SendReady(); ok {
			t.Fatalf("SendReady returned %v with nothing posted", d)
		}
	}
	// The background goroutine may run a timer pass meanwhile; Done
	// would have made 3*tries of them.
	if n := dev.recvs.Load() - before; n > tries/10 {
		t.Fatalf("%d Ready calls made %d passes over the device", 3*tries, n)
	}

	// Two receives and a send complete; Ready hands them out in order.
	rds := make([]*descriptors.Descriptor, 2)
	for i := range rds {
		rds[i] = &descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 16)}}
		if err := vb.PostRecv(rds[i]); err != nil {
			t.Fatal(err)
		}
		sd := &descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 1)}}
		sd.Segments[0].Buf[0] = byte('x' + i)
		if err := va.PostSend(sd); err != nil {
			t.Fatal(err)
		}
	}
	if err := va.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 16)}}); err != nil {
		t.Fatal(err)
	}
	sd := &descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 1)}}
	if err := vb.PostSend(sd); err != nil {
		t.Fatal(err)
	}
	var got []Completion
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < 3 && time.Now().Before(deadline) {
		if c, ok := cq.Done(); ok {
			got = append(got, c)
			for {
				c, ok := cq.Ready()
				if !ok {
					break
				}
				got = append(got, c)
			}
		}
	}
	if len(got) != 3 {
		t.Fatalf("%d completions, want 3", len(got))
	}
	for i := range rds {
		d, ok := vb.RecvReady()
		if !ok || d != rds[i] || d.Segments[0].Buf[0] != byte('x'+i) {
			t.Fatalf("RecvReady %d: %v %v, want receive %d with %q", i, d, ok, i, rune('x'+i))
		}
	}
	if d, ok := vb.SendReady(); !ok || d != sd || d.Status.Failed() {
		t.Fatalf("SendReady: %v %v, want the completed send", d, ok)
	}
	if _, ok := vb.RecvReady(); ok {
		t.Fatal("RecvReady returned a third receive")
	}
}

// TestPollReportsFrames: Provider.Poll reports 0 over an idle device and
// the frames it took in once a message comes (a bond keeps polling a rail
// that delivers frames, bonding's railHot).
func TestPollReportsFrames(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<16)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<16)
	cq, va, vb := cqPair(t, a, b)
	for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
		b.p.Poll() // a poller: the background goroutine leaves the device alone
	}
	busy := 0
	for range 1000 {
		if b.p.Poll() != 0 {
			busy++
		}
	}
	if busy > 2 {
		t.Fatalf("%d of 1000 polls of an idle device reported frames", busy)
	}
	if err := vb.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 16)}}); err != nil {
		t.Fatal(err)
	}
	if err := va.PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 1)}}); err != nil {
		t.Fatal(err)
	}
	frames := 0
	for deadline := time.Now().Add(5 * time.Second); frames == 0 && time.Now().Before(deadline); {
		frames = b.p.Poll()
	}
	if frames == 0 {
		t.Fatal("no poll reported the message's frame")
	}
	if c, ok := cq.Ready(); !ok || c.VI != vb || !c.Recv {
		t.Fatalf("after the poll that took the frame in: %+v %v, want vb's receive", c, ok)
	}
}

// cqPair connects a reliable-delivery VI of a to one of b whose queues
// complete on a CQ of b's.
func cqPair(t *testing.T, a, b *host) (*CQ, *VI, *VI) {
	t.Helper()
	cq, err := b.p.NewCQ(2048)
	if err != nil {
		t.Fatal(err)
	}
	va := a.newVI(t, Attributes{Reliability: ReliableDelivery})
	vb := b.newVI(t, Attributes{Reliability: ReliableDelivery, SendCQ: cq, RecvCQ: cq})
	connectCS(t, a, b, va, vb, 9)
	return cq, va, vb
}
