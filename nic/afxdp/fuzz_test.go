package afxdp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzRxDesc feeds arbitrary rx descriptors (what the kernel writes into the
// rx ring) to the check that guards every UMEM access in Recv: an accepted
// descriptor must name a non-empty frame inside one chunk of the UMEM.
func FuzzRxDesc(f *testing.F) {
	f.Add(uint64(256), uint32(60), uint32(0), false)
	f.Add(uint64(2048+256), uint32(1792), uint32(0), false)
	f.Add(uint64(4096*3+256), uint32(3840), uint32(1), true)
	f.Add(uint64(1<<64-1), uint32(1<<32-1), uint32(0), true)
	f.Fuzz(func(t *testing.T, addr uint64, n, opts uint32, big bool) {
		l := umemLayout{chunk: 2048, count: 8}
		if big {
			l.chunk = 4096
		}
		umem := make([]byte, l.size())
		off, size, ok := l.frame(unix.XDPDesc{Addr: addr, Len: n, Options: opts})
		base := l.base(addr)
		if base%l.chunk != 0 || base > addr {
			t.Fatalf("base %#x of %#x", base, addr)
		}
		if !ok {
			return
		}
		if size == 0 || off+size > l.size() || off < base || off+size > base+l.chunk {
			t.Fatalf("accepted %#x+%d outside its chunk or the UMEM", off, size)
		}
		_ = umem[off : off+size]
	})
}

// FuzzRing runs an arbitrary sequence of producer and consumer operations on
// a ring and compares it with a FIFO. Each input byte is one operation: the
// top bit picks the side, the rest the count.
func FuzzRing(f *testing.F) {
	f.Add([]byte{0x05, 0x83, 0x10, 0xff, 0x08})
	f.Add([]byte{0x7f, 0x7f, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const size = 8
		p, c := pair[uint64](t, size, 1<<32-3)
		var fifo []uint64
		next := uint64(1)
		for _, op := range ops {
			n := uint32(op & 0x7f % 12)
			if op&0x80 == 0 {
				idx, k := p.reserve(n)
				if k != min(n, size-uint32(len(fifo))) {
					t.Fatalf("reserve(%d) = %d with %d queued", n, k, len(fifo))
				}
				for i := uint32(0); i < k; i++ {
					*p.at(idx + i) = next
					fifo = append(fifo, next)
					next++
				}
				p.submit(k)
				continue
			}
			idx, k := c.peek(n)
			if k != min(n, uint32(len(fifo))) {
				t.Fatalf("peek(%d) = %d with %d queued", n, k, len(fifo))
			}
			for i := uint32(0); i < k; i++ {
				if got := *c.at(idx + i); got != fifo[i] {
					t.Fatalf("got %d, want %d", got, fifo[i])
				}
			}
			fifo = fifo[k:]
			c.release(k)
		}
	})
}
