package vi

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/internal/ctxdl"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
)

// countingDev counts the device waits of each kind; WaitThread is Wait.
type countingDev struct {
	*memnic.Port
	waits, threadWaits atomic.Int64
}

func (d *countingDev) Wait(deadline time.Time) error {
	d.waits.Add(1)
	return d.Port.Wait(deadline)
}

func (d *countingDev) WaitThread(deadline time.Time) error {
	d.threadWaits.Add(1)
	return d.Port.Wait(deadline)
}

var _ nic.ThreadWaiter = (*countingDev)(nil)

// sendOne posts one small send from va and returns its descriptor.
func sendOne(t *testing.T, a *host, va *VI) *descriptors.Descriptor {
	t.Helper()
	d := &descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 64)}}
	mustf(t, va.PostSend(d), "post send")
	return d
}

// countingPair connects a VI on a plain host to one on a host whose device
// counts its waits (provider options o), with recvs receives posted on the
// latter, whose completions go to cq.
func countingPair(t *testing.T, o Options, recvs int) (a *host, va *VI, dev *countingDev, cq *CQ) {
	t.Helper()
	sw := memnic.NewSwitch(1)
	a = newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<16)
	b := newHostWrapped(t, sw, 1500, memnic.Faults{}, o, 1<<16, func(p *memnic.Port) nic.Device {
		dev = &countingDev{Port: p}
		return dev
	})
	cq, err := b.p.NewCQ(2048)
	if err != nil {
		t.Fatal(err)
	}
	va = a.newVI(t, Attributes{Reliability: ReliableDelivery})
	vb := b.newVI(t, Attributes{Reliability: ReliableDelivery, RecvCQ: cq})
	for range recvs {
		mustf(t, vb.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 64)}}), "post recv")
	}
	connectCS(t, a, b, va, vb, 3)
	return a, va, dev, cq
}

// TestHoldThreadWait: a CQ wait under a context marked by SetHoldThread
// sleeps in the device's WaitThread; an unmarked one in Wait.
func TestHoldThreadWait(t *testing.T) {
	a, va, dev, cq := countingPair(t, Options{SpinTime: -1}, 2)
	for _, hold := range []bool{true, false} {
		w0, t0 := dev.waits.Load(), dev.threadWaits.Load()
		var ctx ctxdl.Context
		ctx.Reset(time.Now().Add(5 * time.Second))
		ctx.SetHoldThread(hold)
		go func() {
			time.Sleep(20 * time.Millisecond) // let the wait block first
			sendOne(t, a, va)
		}()
		if _, err := cq.Wait(&ctx); err != nil {
			t.Fatal(err)
		}
		waits, threadWaits := dev.waits.Load()-w0, dev.threadWaits.Load()-t0
		if hold && threadWaits == 0 || !hold && threadWaits != 0 {
			t.Errorf("hold %v: %d WaitThread and %d Wait calls", hold, threadWaits, waits)
		}
	}
}

// TestBackgroundNaps: with BackgroundNaps the background goroutine never
// sleeps in the device, and still takes in what arrives for a provider
// nobody polls, within about PollGrace.
func TestBackgroundNaps(t *testing.T) {
	a, va, dev, cq := countingPair(t, Options{BackgroundNaps: true, PollGrace: 5 * time.Millisecond}, 1)
	w0 := dev.waits.Load()
	sendOne(t, a, va)
	// Nobody on b polls: only its background goroutine can take the frame.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := cq.Ready(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the receive never completed without a poller")
		}
		time.Sleep(time.Millisecond)
	}
	if n := dev.waits.Load() - w0; n != 0 {
		t.Errorf("the background goroutine slept in the device %d times", n)
	}
}

// TestDrainEmptiesDevice: a napping background goroutine's pass takes every
// frame waiting, not the four batches of one progress pass (which left a
// 128-rank Alltoall's frames in the socket buffers until peers timed out).
func TestDrainEmptiesDevice(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<18)
	port, err := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: testJob, BatchSize: 4}, MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	// The background goroutine naps for an hour: only this test drains.
	o := Options{BackgroundNaps: true, PollGrace: time.Hour, SpinTime: -1}
	o.JobKey = testJob
	p, err := Open(port, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); port.Close() })
	b := &host{port: port, dev: port, p: p, ptag: p.NewPTag(), arena: make([]byte, 1<<18)}
	if b.h, err = p.RegisterMemory(b.arena, b.ptag, AccessRDMAWrite|AccessRDMARead); err != nil {
		t.Fatal(err)
	}
	va := a.newVI(t, Attributes{Reliability: ReliableDelivery})
	vb := b.newVI(t, Attributes{Reliability: ReliableDelivery})
	mustf(t, vb.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 100000)}}), "post recv")
	connectCS(t, a, b, va, vb, 5)
	d := &descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 100000)}}
	mustf(t, va.PostSend(d), "post send")
	// 71 frames, many more than one pass's 4 batches of 4, reach the port
	// (memnic queues them as they are sent; nobody reads them).
	time.Sleep(50 * time.Millisecond)
	p.mu.Lock()
	before := p.received.Load()
	p.drainLocked()
	taken := p.received.Load() - before
	p.mu.Unlock()
	if taken < 60 {
		t.Fatalf("one drain took %d frames of the 71 waiting", taken)
	}
}
