package afxdp

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// These tests need no root: the "kernel" side of a ring is a second ring
// value over the same memory, used in the opposite role.

// fakeRing returns memory laid out like a kernel ring mapping, with the
// free-running indices starting at start.
func fakeRing[T desc](t testing.TB, size, start uint32) (mem []byte, off unix.XDPRingOffset) {
	t.Helper()
	var zero T
	off = unix.XDPRingOffset{Producer: 0, Consumer: 64, Flags: 128, Desc: 192}
	mem = make([]byte, 192+uintptr(size)*unsafe.Sizeof(zero))
	*(*uint32)(unsafe.Pointer(&mem[off.Producer])) = start
	*(*uint32)(unsafe.Pointer(&mem[off.Consumer])) = start
	return mem, off
}

func pair[T desc](t testing.TB, size, start uint32) (prod, cons ring[T]) {
	t.Helper()
	mem, off := fakeRing[T](t, size, start)
	var err error
	if prod, err = newRing[T](mem, off, size); err != nil {
		t.Fatal(err)
	}
	if cons, err = newRing[T](mem, off, size); err != nil {
		t.Fatal(err)
	}
	return prod, cons
}

func TestRingReserveSubmitPeekRelease(t *testing.T) {
	p, c := pair[uint64](t, 8, 0)
	idx, k := p.reserve(5)
	if k != 5 {
		t.Fatalf("reserve 5 on an empty ring of 8 gave %d", k)
	}
	for i := uint32(0); i < k; i++ {
		*p.at(idx + i) = uint64(100 + i)
	}
	if _, n := c.peek(8); n != 0 {
		t.Fatalf("consumer saw %d entries before submit", n)
	}
	p.submit(k)
	cidx, n := c.peek(8)
	if n != 5 {
		t.Fatalf("consumer saw %d entries, want 5", n)
	}
	for i := uint32(0); i < n; i++ {
		if got := *c.at(cidx + i); got != uint64(100+i) {
			t.Fatalf("entry %d = %d", i, got)
		}
	}
	if _, k := p.reserve(8); k != 3 {
		t.Fatalf("producer found %d free slots before release, want 3", k)
	}
	c.release(3)
	if _, k := p.reserve(8); k != 6 {
		t.Fatalf("producer found %d free slots after releasing 3, want 6", k)
	}
	if got := p.pending(); got != 2 {
		t.Fatalf("pending = %d, want 2", got)
	}
}

// TestRingWrapModel drives a ring through many random operations, with the
// free-running indices starting just below 2^32 so they wrap, and checks it
// against a plain FIFO.
func TestRingWrapModel(t *testing.T) {
	for _, start := range []uint32{0, 1<<32 - 37} {
		p, c := pair[unix.XDPDesc](t, 16, start)
		rng := rand.New(rand.NewPCG(1, uint64(start)))
		var fifo []uint64
		next := uint64(0)
		for step := 0; step < 20000; step++ {
			n := uint32(rng.IntN(20))
			if rng.IntN(2) == 0 {
				idx, k := p.reserve(n)
				if want := min(n, 16-uint32(len(fifo))); k != want {
					t.Fatalf("step %d: reserve(%d) = %d, want %d", step, n, k, want)
				}
				for i := uint32(0); i < k; i++ {
					*p.at(idx + i) = unix.XDPDesc{Addr: next, Len: uint32(next)}
					fifo = append(fifo, next)
					next++
				}
				p.submit(k)
			} else {
				idx, k := c.peek(n)
				if want := min(n, uint32(len(fifo))); k != want {
					t.Fatalf("step %d: peek(%d) = %d, want %d", step, n, k, want)
				}
				for i := uint32(0); i < k; i++ {
					if d := *c.at(idx + i); d.Addr != fifo[i] || d.Len != uint32(fifo[i]) {
						t.Fatalf("step %d: got %d, want %d", step, d.Addr, fifo[i])
					}
				}
				fifo = fifo[k:]
				c.release(k)
			}
			if p.pending() != uint32(len(fifo)) {
				t.Fatalf("step %d: pending %d, fifo %d", step, p.pending(), len(fifo))
			}
		}
		if next < 1000 {
			t.Fatalf("only %d entries went through", next)
		}
	}
}

func TestRingNeedWakeup(t *testing.T) {
	p, _ := pair[uint64](t, 4, 0)
	if p.needWakeup() {
		t.Fatal("need-wakeup set on a fresh ring")
	}
	p.flags.Store(unix.XDP_RING_NEED_WAKEUP)
	if !p.needWakeup() {
		t.Fatal("need-wakeup flag not seen")
	}
}

func TestNewRingChecks(t *testing.T) {
	mem, off := fakeRing[uint64](t, 8, 0)
	if _, err := newRing[uint64](mem, off, 6); err == nil {
		t.Error("ring size 6 accepted")
	}
	if _, err := newRing[uint64](mem, off, 16); err == nil {
		t.Error("descriptors past the mapping accepted")
	}
	bad := off
	bad.Flags = uint64(len(mem))
	if _, err := newRing[uint64](mem, bad, 8); err == nil {
		t.Error("flags past the mapping accepted")
	}
	bad = off
	bad.Consumer = 2
	if _, err := newRing[uint64](mem, bad, 8); err == nil {
		t.Error("misaligned consumer index accepted")
	}
	if _, err := newRing[uint64](mem, off, 8); err != nil {
		t.Errorf("good ring refused: %v", err)
	}
}

func TestFreeList(t *testing.T) {
	f := newFreeList(3)
	for _, a := range []uint64{10, 20, 30} {
		if !f.push(a) {
			t.Fatalf("push %d refused", a)
		}
	}
	if f.push(40) {
		t.Fatal("push beyond capacity accepted")
	}
	for _, want := range []uint64{30, 20, 10} {
		if a, ok := f.pop(); !ok || a != want {
			t.Fatalf("pop = %d, %v; want %d", a, ok, want)
		}
	}
	if _, ok := f.pop(); ok {
		t.Fatal("pop from an empty list succeeded")
	}
	if f.len() != 0 {
		t.Fatalf("len %d", f.len())
	}
}

func TestUmemFrame(t *testing.T) {
	l := umemLayout{chunk: 2048, count: 4}
	for _, c := range []struct {
		d    unix.XDPDesc
		ok   bool
		base uint64
	}{
		{unix.XDPDesc{Addr: 256, Len: 60}, true, 0},
		{unix.XDPDesc{Addr: 2048 + 256, Len: 1792}, true, 2048},
		{unix.XDPDesc{Addr: 2048 + 256, Len: 1793}, false, 2048}, // crosses into the next chunk
		{unix.XDPDesc{Addr: 3*2048 + 256, Len: 1792}, true, 3 * 2048},
		{unix.XDPDesc{Addr: 4 * 2048, Len: 1}, false, 4 * 2048}, // past the UMEM
		{unix.XDPDesc{Addr: 100, Len: 0}, false, 0},
		{unix.XDPDesc{Addr: 1<<64 - 1, Len: 1<<32 - 1}, false, 1<<64 - 2048},
	} {
		off, n, ok := l.frame(c.d)
		if ok != c.ok {
			t.Errorf("%+v: ok = %v", c.d, ok)
		}
		if ok && (off != c.d.Addr || n != uint64(c.d.Len)) {
			t.Errorf("%+v: frame at %d+%d", c.d, off, n)
		}
		if b := l.base(c.d.Addr); b != c.base {
			t.Errorf("%+v: base %d, want %d", c.d, b, c.base)
		}
	}
	if got := (umemLayout{chunk: 4096}).maxRxFrame(); got != 4096-256 {
		t.Errorf("maxRxFrame = %d", got)
	}
}
