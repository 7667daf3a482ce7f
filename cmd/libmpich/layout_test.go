package main

import (
	"testing"
	"unsafe"
)

func TestLayoutVectorAndSubarray(t *testing.T) {
	d := basicLayout(0x4c00080b, 8) // MPI_DOUBLE
	col, err := hvector(4, 1, 4*8, d)
	if err != nil {
		t.Fatal(err)
	}
	if col.size != 32 || col.lb != 0 || col.extent() != 3*32+8 || len(col.runs) != 4 || col.contiguous() || col.basic != 0x4c00080b {
		t.Fatalf("column of a 4x4 grid: %v", col)
	}
	row, _ := hvector(1, 4, 0, d)
	if !row.contiguous() || len(row.runs) != 1 {
		t.Fatalf("a row is contiguous: %v", row)
	}
	i := basicLayout(0x4c000405, 4) // MPI_INT
	sub, err := subarray([]int64{4, 6}, []int64{2, 3}, []int64{1, 2}, false, i)
	if err != nil {
		t.Fatal(err)
	}
	if sub.size != 24 || sub.extent() != 96 || len(sub.runs) != 2 || sub.runs[0] != (run{(6 + 2) * 4, 12}) || sub.runs[1] != (run{(12 + 2) * 4, 12}) {
		t.Fatalf("C-order subarray: %v %v", sub, sub.runs)
	}
	fsub, _ := subarray([]int64{4, 6}, []int64{2, 3}, []int64{1, 2}, true, i)
	if fsub.size != 24 || fsub.runs[0].off != (2*4+1)*4 || fsub.runs[0].n != 8 {
		t.Fatalf("Fortran-order subarray: %v %v", fsub, fsub.runs)
	}
	if _, err := subarray([]int64{4}, []int64{3}, []int64{2}, false, i); err == nil {
		t.Fatal("a subarray past its array was accepted")
	}
	if _, err := hvector(1<<20, 1<<10, 8, d); err == nil {
		t.Fatal("a layout of 2^30 runs was accepted")
	}
}

func TestLayoutStructPadsAndPackRoundTrips(t *testing.T) {
	d, i, c := basicLayout(0x4c00080b, 8), basicLayout(0x4c000405, 4), basicLayout(0x4c000101, 1)
	s, err := structOf([]int64{3, 1, 1}, []int64{0, 24, 28}, []*layout{d, i, c})
	if err != nil {
		t.Fatal(err)
	}
	if s.size != 29 || s.extent() != 32 || s.basic != 0 || len(s.runs) != 1 {
		t.Fatalf("struct {double[3]; int; char}: %v", s)
	}
	col, _ := hvector(3, 2, 40, i) // two ints every 40 bytes
	src := make([]byte, 2*col.extent()+8)
	for k := range src {
		src[k] = byte(k)
	}
	packed := make([]byte, 2*col.size)
	if n := col.pack(packed, unsafe.Pointer(&src[0]), 2); n != len(packed) {
		t.Fatalf("packed %d of %d bytes", n, len(packed))
	}
	if packed[0] != 0 || packed[8] != 40 || packed[24] != byte(col.extent()) {
		t.Fatalf("packed bytes %v", packed[:32])
	}
	dst := make([]byte, len(src))
	if n := col.unpack(unsafe.Pointer(&dst[0]), packed[:20], 2); n != 20 {
		t.Fatalf("unpacked %d of 20 bytes (a short message)", n)
	}
	for _, k := range []int{0, 7, 40, 47, 80, 83} {
		if dst[k] != src[k] {
			t.Fatalf("byte %d: %d, want %d", k, dst[k], src[k])
		}
	}
	if dst[84] != 0 || dst[8] != 0 {
		t.Fatal("unpack wrote past the message or into a gap")
	}
}

// FuzzLayout builds layouts from a program's arguments (any counts,
// strides and bounds) and checks that the constructors refuse or build
// without panicking, that a layout's size is its runs' and its true
// bounds hold them, and that pack then unpack restores every byte a
// layout covers and touches no other.
func FuzzLayout(f *testing.F) {
	f.Add(int64(3), int64(2), int64(40), int64(4), int64(6), int64(2), int64(3), int64(1), int64(2), false, int64(0), int64(0))
	f.Add(int64(1), int64(1), int64(-16), int64(2), int64(2), int64(1), int64(1), int64(0), int64(0), true, int64(-8), int64(32))
	f.Add(int64(0), int64(5), int64(0), int64(1), int64(1), int64(1), int64(1), int64(0), int64(0), false, int64(4), int64(4))
	f.Fuzz(func(t *testing.T, count, blocklen, stride, s0, s1, sub0, sub1, st0, st1 int64, fortran bool, lb, extent int64) {
		d := basicLayout(0x4c00080b, 8)
		var ls []*layout
		if count < 64 && blocklen < 64 && count > -2 && blocklen > -2 {
			if l, err := hvector(count, blocklen, stride, d); err == nil {
				ls = append(ls, l)
			}
		}
		if l, err := subarray([]int64{s0, s1}, []int64{sub0, sub1}, []int64{st0, st1}, fortran, d); err == nil && l.size <= 1<<16 {
			ls = append(ls, l)
		}
		if len(ls) > 0 && extent > -1<<20 && extent < 1<<20 && lb > -1<<20 && lb < 1<<20 {
			ls = append(ls, resized(ls[0], lb, extent))
		}
		for _, l := range ls {
			var sum int64
			for _, r := range l.runs {
				sum += r.n
				if r.off < l.tlb || r.off+r.n > l.tub {
					t.Fatalf("run %v outside the true bounds %v", r, l)
				}
			}
			if sum != l.size {
				t.Fatalf("runs hold %d bytes, size %d", sum, l.size)
			}
			if l.tub-l.tlb > 1<<20 || l.extent() < 0 || l.extent() > 1<<20 || l.tlb < -1<<20 || l.tlb > 1<<20 {
				continue
			}
			// base, the address of element 0, must lie inside the buffer:
			// a Go pointer outside its object is invalid.
			const elems = 2
			b0 := 8 + max(0, -l.tlb)
			span := b0 + max(l.tub, 0) + (elems-1)*l.extent() + 8
			mem := make([]byte, span)
			for i := range mem {
				mem[i] = byte(i)
			}
			packed := make([]byte, elems*l.size)
			if n := l.pack(packed, unsafe.Pointer(&mem[b0]), elems); n != len(packed) {
				t.Fatalf("packed %d of %d", n, len(packed))
			}
			back := make([]byte, span)
			l.unpack(unsafe.Pointer(&back[b0]), packed, elems)
			covered := make([]bool, span)
			for e := int64(0); e < elems; e++ {
				for _, r := range l.runs {
					for k := int64(0); k < r.n; k++ {
						covered[b0+e*l.extent()+r.off+k] = true
					}
				}
			}
			for i := range back {
				if covered[i] && back[i] != mem[i] || !covered[i] && back[i] != 0 {
					t.Fatalf("byte %d: %d after the round trip (covered %v, was %d)", i, back[i], covered[i], mem[i])
				}
			}
		}
	})
}
