package vi

import (
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
)

// TestBlock: a caller blocked in Provider.Block wakes when a frame arrives,
// when Interrupt is called and when the deadline passes, and Block refuses
// at once while another goroutine holds the device.
func TestBlock(t *testing.T) {
	a, b, va, vb, cqB := recvCQPair(t, 7)
	rd := &descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, 64)}}
	if err := vb.PostRecv(rd); err != nil {
		t.Fatal(err)
	}

	// Block is for callers that poll (a bond's waiter): poll as one does
	// for a while first, so that the background goroutine leaves the
	// device to the pollers.
	pollAWhile := func() {
		for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
			if _, ok := cqB.Done(); ok {
				t.Fatal("unexpected completion")
			}
		}
	}

	// A frame ends the block; progress then finds the receive. (A Block
	// that returns before the frame is sent was refused, the background
	// goroutine having taken the device on a loaded machine, or ended by a
	// timer of the provider's: try again.)
	blocked := make(chan bool, 1)
	// startBlock polls a while, then lets a goroutine Block and gives it
	// 20 ms to fall asleep.
	startBlock := func() {
		pollAWhile()
		go func() { blocked <- b.p.Block(time.Now().Add(10 * time.Second)) }()
		time.Sleep(20 * time.Millisecond)
	}
	for attempt := 1; ; attempt++ {
		startBlock()
		select {
		case <-blocked:
			if attempt == 10 {
				t.Fatal("Block never stayed blocked for 20 ms on an idle provider")
			}
			continue
		default:
		}
		break
	}
	sd := &descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 5)}}
	copy(sd.Segments[0].Buf, "hello")
	if err := va.PostSend(sd); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-blocked:
		if !ok {
			t.Fatal("Block refused on an idle provider")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an arriving frame did not end Block")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, ok := cqB.Done(); ok {
			if !c.Recv || c.VI != vb {
				t.Fatalf("completion %+v, want vb's receive", c)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the message that ended Block never completed")
		}
	}
	if d, ok := vb.RecvDone(); !ok || string(d.Segments[0].Buf[:d.Length]) != "hello" {
		t.Fatalf("received %v %v", d, ok)
	}

	// Interrupt ends it. On a loaded machine the goroutine may start so
	// late that the background goroutine, seeing nobody poll, has taken
	// the device: Block is refused then, and the interrupt stays for the
	// next Block. Consume it and try again.
	for attempt := 1; ; attempt++ {
		startBlock()
		b.p.Interrupt()
		var ok bool
		select {
		case ok = <-blocked:
		case <-time.After(5 * time.Second):
			t.Fatal("Interrupt did not end Block")
		}
		if ok {
			break
		}
		if attempt == 10 {
			t.Fatal("Block refused 10 times on an idle provider")
		}
		for end := time.Now().Add(5 * time.Second); !b.p.Block(time.Now().Add(time.Millisecond)); {
			if time.Now().After(end) {
				t.Fatal("Block refused for 5 s on an idle provider")
			}
		}
	}

	// The deadline ends it.
	for attempt := 1; ; attempt++ {
		pollAWhile()
		start := time.Now()
		if b.p.Block(start.Add(30 * time.Millisecond)) {
			if el := time.Since(start); el < 25*time.Millisecond {
				t.Fatalf("Block returned after %v, before its 30 ms deadline", el)
			}
			break
		}
		if attempt == 10 {
			t.Fatal("Block refused 10 times on an idle provider")
		}
	}

	// Someone else holds the device: refused at once.
	b.p.pollMu.Lock()
	start := time.Now()
	ok := b.p.Block(start.Add(time.Second))
	b.p.pollMu.Unlock()
	if ok || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("Block with the device held returned %v after %v, want false at once", ok, time.Since(start))
	}
}
