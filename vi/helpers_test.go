package vi

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
)

const testJob = 0x5eed

// host is one provider on a memnic port, with a protection tag and a
// registered arena to carve buffers from.
type host struct {
	port  *memnic.Port // nil on a kernel driver
	dev   nic.Device
	p     *Provider
	ptag  PTag
	arena []byte
	h     descriptors.MemHandle
	used  int
	mu    sync.Mutex
}

func newHost(t testing.TB, sw *memnic.Switch, mtu int, f memnic.Faults, o Options, arena int) *host {
	return newHostWrapped(t, sw, mtu, f, o, arena, nil)
}

// newHostWrapped is newHost with the provider on wrap(port) instead of
// the port itself (nil: the port), for tests that watch the device.
func newHostWrapped(t testing.TB, sw *memnic.Switch, mtu int, f memnic.Faults, o Options, arena int, wrap func(*memnic.Port) nic.Device) *host {
	t.Helper()
	port, err := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: testJob}, MTU: mtu, Faults: f})
	if err != nil {
		t.Fatal(err)
	}
	var dev nic.Device = port
	if wrap != nil {
		dev = wrap(port)
	}
	o.JobKey = testJob
	p, err := Open(dev, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		port.Close()
	})
	h := &host{port: port, dev: dev, p: p, ptag: p.NewPTag()}
	if arena > 0 {
		h.arena = make([]byte, arena)
		h.h, err = p.RegisterMemory(h.arena, h.ptag, AccessRDMAWrite|AccessRDMARead)
		if err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// buf carves n bytes from the registered arena.
func (h *host) buf(t testing.TB, n int) descriptors.Segment {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.used+n > len(h.arena) {
		t.Fatalf("arena of %d bytes exhausted", len(h.arena))
	}
	b := h.arena[h.used : h.used+n : h.used+n]
	h.used += n
	return descriptors.Segment{Buf: b, Handle: h.h}
}

func (h *host) addr(d uint64) Address { return Address{MAC: h.dev.HardwareAddr(), Discriminator: d} }

func (h *host) newVI(t testing.TB, a Attributes) *VI {
	t.Helper()
	if a.PTag == 0 {
		a.PTag = h.ptag
	}
	v, err := h.p.NewVI(a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// connectCS connects client (on a) to a new VI on b by client/server
// connection, and returns b's VI.
func connectCS(t testing.TB, a, b *host, client *VI, server *VI, disc uint64) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		req, err := b.p.ConnectWait(ctxT(t, 5*time.Second), disc)
		if err != nil {
			errc <- err
			return
		}
		errc <- req.Accept(server)
	}()
	if err := client.ConnectRequest(ctxT(t, 5*time.Second), b.addr(disc)); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func pattern(seed uint64, b []byte) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

func mustf(t testing.TB, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

// recvCQPair connects a reliable-delivery VI on a new host a to one on a
// new host b whose receives complete on cqB, over one memnic switch.
func recvCQPair(t testing.TB, disc uint64) (a, b *host, va, vb *VI, cqB *CQ) {
	t.Helper()
	sw := memnic.NewSwitch(1)
	a = newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<16)
	b = newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<16)
	cqB, err := b.p.NewCQ(2048)
	if err != nil {
		t.Fatal(err)
	}
	va = a.newVI(t, Attributes{Reliability: ReliableDelivery})
	vb = b.newVI(t, Attributes{Reliability: ReliableDelivery, RecvCQ: cqB})
	connectCS(t, a, b, va, vb, disc)
	return a, b, va, vb, cqB
}
