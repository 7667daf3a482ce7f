package main

import (
	"fmt"
	"unsafe"
)

// layout is the type map of one element of a datatype, flattened: the
// contiguous runs of data in type-map order (adjacent runs merged), with
// the bounds MPI defines. A predefined datatype is one run. Derived
// datatypes are built from these by the MPI_Type_* constructors.
type layout struct {
	runs     []run
	size     int64  // data bytes per element
	lb, ub   int64  // bounds: the extent (ub - lb) is the stride between elements
	tlb, tub int64  // true bounds: the first and past-the-last byte touched
	basic    uint32 // the one predefined type the data is made of, 0 if mixed
	align    int64  // the largest alignment of its basic types (struct padding)

	// spans are the basic types of the packed bytes in order, which
	// external32 converts one by one. nil when every byte is of basic, a
	// plain predefined type (the common case costs nothing), or when
	// there would be more than maxSpans (spansLost).
	spans     []span
	spansLost bool
}

type run struct{ off, n int64 }

// span is n packed bytes of elements of the predefined type basic.
type span struct {
	n     int64
	basic uint32
}

// maxSpans bounds the spans a layout keeps: a larger mixed type still
// communicates, only external32 refuses it.
const maxSpans = 1 << 20

// plainBasic reports whether h is a predefined type that a layout's basic
// alone describes (not MPI_2INT, nor a pair type, nor 0: mixed).
func plainBasic(h uint32) bool { return h&0xff000000 == 0x4c000000 && h != type2Int }

const type2Int = 0x4c000816 // MPI_2INT

func (l *layout) extent() int64 { return l.ub - l.lb }

// contiguous reports whether count elements at an address are the bytes
// from that address on: one run at offset 0 as long as the extent.
func (l *layout) contiguous() bool {
	return len(l.runs) == 1 && l.runs[0].off == 0 && l.runs[0].n == l.extent() && l.lb == 0
}

// basicLayout is the layout of a predefined datatype of size n.
func basicLayout(h uint32, n int64) *layout {
	return &layout{runs: []run{{0, n}}, size: n, ub: n, tub: n, basic: h, align: min(n, 8)}
}

// builder accumulates copies of layouts placed at displacements.
type builder struct {
	l     layout
	first bool
	basic uint32
	mixed bool
	plain uint32 // while l.spans is nil: the plain basic type of all bytes so far
}

func newBuilder() *builder { return &builder{first: true} }

// place appends one copy of old at byte displacement d.
func (b *builder) place(old *layout, d int64) {
	b.addSpans(old)
	for _, r := range old.runs {
		off := d + r.off
		if k := len(b.l.runs); k > 0 && b.l.runs[k-1].off+b.l.runs[k-1].n == off {
			b.l.runs[k-1].n += r.n
		} else {
			b.l.runs = append(b.l.runs, run{off, r.n})
		}
	}
	b.l.size += old.size
	lb, ub, tlb, tub := d+old.lb, d+old.ub, d+old.tlb, d+old.tub
	if b.first {
		b.l.lb, b.l.ub, b.l.tlb, b.l.tub = lb, ub, tlb, tub
		b.first = false
		b.basic = old.basic
	} else {
		b.l.lb, b.l.ub = min(b.l.lb, lb), max(b.l.ub, ub)
		b.l.tlb, b.l.tub = min(b.l.tlb, tlb), max(b.l.tub, tub)
		if old.basic != b.basic {
			b.mixed = true
		}
	}
	if old.basic == 0 {
		b.mixed = true
	}
	b.l.align = max(b.l.align, old.align)
}

// addSpans appends old's spans, before old's bytes are counted in b.
func (b *builder) addSpans(old *layout) {
	if old.size == 0 || b.l.spansLost {
		return
	}
	if b.l.spans == nil && old.spans == nil && plainBasic(old.basic) && (b.l.size == 0 || b.plain == old.basic) {
		b.plain = old.basic // still one plain type: nothing to keep
		return
	}
	own := old.spans
	if own == nil {
		if old.spansLost || !plainBasic(old.basic) {
			b.l.spans, b.l.spansLost = nil, true
			return
		}
		own = []span{{old.size, old.basic}}
	}
	if b.l.spans == nil && b.l.size > 0 {
		b.l.spans = []span{{b.l.size, b.plain}}
	}
	for _, sp := range own {
		if k := len(b.l.spans); k > 0 && b.l.spans[k-1].basic == sp.basic {
			b.l.spans[k-1].n += sp.n
			continue
		}
		if len(b.l.spans) >= maxSpans {
			b.l.spans, b.l.spansLost = nil, true
			return
		}
		b.l.spans = append(b.l.spans, sp)
	}
}

// done returns the layout (an empty one has bounds 0).
func (b *builder) done() *layout {
	l := b.l
	if !b.mixed {
		l.basic = b.basic
	}
	if b.first {
		l.basic = 0
	}
	if l.spans == nil && !l.spansLost && l.size > 0 && l.basic != b.plain {
		// One plain type, but basic says otherwise (an empty part made it
		// "mixed"): say which.
		l.spans = []span{{l.size, b.plain}}
	}
	return &l
}

// maxRuns bounds a flattened layout, so that a hostile or mistaken count
// cannot make the library allocate without limit.
const maxRuns = 1 << 24

func checkRuns(n int64) error {
	if n > maxRuns {
		return errorf(errArg, "datatype of %d runs: more than %d", n, maxRuns)
	}
	return nil
}

// runsOf is checkRuns of the product of factors (each at least zero), which
// it computes without overflowing.
func runsOf(factors ...int64) error {
	p := int64(1)
	for _, f := range factors {
		if f == 0 {
			return nil
		}
		if f > maxRuns || p > maxRuns/f {
			return errorf(errArg, "datatype of more than %d runs", maxRuns)
		}
		p *= f
	}
	return nil
}

// hvector places count blocks of blocklen elements of old, stride bytes
// apart (MPI_Type_create_hvector; vector and contiguous are made of it).
func hvector(count, blocklen int64, stride int64, old *layout) (*layout, error) {
	if count < 0 || blocklen < 0 {
		return nil, errorf(errCount, "negative count %d or block length %d", count, blocklen)
	}
	if err := runsOf(count, blocklen, int64(len(old.runs))); err != nil {
		return nil, err
	}
	b := newBuilder()
	for i := int64(0); i < count; i++ {
		for j := int64(0); j < blocklen; j++ {
			b.place(old, i*stride+j*old.extent())
		}
	}
	return b.done(), nil
}

// hindexed places blocks of lens[i] elements of old at byte displacements
// disps[i] (indexed and indexed_block are made of it).
func hindexed(lens []int64, disps []int64, old *layout) (*layout, error) {
	var total int64
	for _, n := range lens {
		if n < 0 {
			return nil, errorf(errCount, "negative block length %d", n)
		}
		if err := runsOf(n, int64(len(old.runs))); err != nil {
			return nil, err
		}
		total += n * int64(len(old.runs))
		if err := checkRuns(total); err != nil {
			return nil, err
		}
	}
	b := newBuilder()
	for i, n := range lens {
		for j := int64(0); j < n; j++ {
			b.place(old, disps[i]+j*old.extent())
		}
	}
	return b.done(), nil
}

// structOf places lens[i] elements of olds[i] at byte displacements
// disps[i], and pads the extent to the largest alignment of the basic
// types, as C lays out a struct (and as MPICH does).
func structOf(lens []int64, disps []int64, olds []*layout) (*layout, error) {
	var total int64
	for i, n := range lens {
		if n < 0 {
			return nil, errorf(errCount, "negative block length %d", n)
		}
		if err := runsOf(n, int64(len(olds[i].runs))); err != nil {
			return nil, err
		}
		total += n * int64(len(olds[i].runs))
		if err := checkRuns(total); err != nil {
			return nil, err
		}
	}
	b := newBuilder()
	for i, n := range lens {
		for j := int64(0); j < n; j++ {
			b.place(olds[i], disps[i]+j*olds[i].extent())
		}
	}
	l := b.done()
	if a := l.align; a > 1 {
		if ext := l.extent(); ext%a != 0 {
			l.ub += a - ext%a
		}
	}
	return l, nil
}

// resized gives old new bounds (MPI_Type_create_resized).
func resized(old *layout, lb, extent int64) *layout {
	l := *old
	l.runs = old.runs
	l.lb, l.ub = lb, lb+extent
	return &l
}

// subarray is the layout of a subarray of an n-dimensional array of old
// (MPI_Type_create_subarray), in C (row-major) or Fortran order.
func subarray(sizes, subsizes, starts []int64, fortran bool, old *layout) (*layout, error) {
	n := len(sizes)
	if n == 0 || len(subsizes) != n || len(starts) != n {
		return nil, errorf(errArg, "subarray of %d dimensions", n)
	}
	for i := range sizes {
		if sizes[i] <= 0 || subsizes[i] <= 0 || starts[i] < 0 || starts[i] > sizes[i]-subsizes[i] {
			return nil, errorf(errArg, "dimension %d: size %d, subsize %d, start %d", i, sizes[i], subsizes[i], starts[i])
		}
	}
	if err := runsOf(append([]int64{int64(len(old.runs))}, subsizes...)...); err != nil {
		return nil, err
	}
	idx := make([][]int64, n)
	for i := range sizes {
		for j := starts[i]; j < starts[i]+subsizes[i]; j++ {
			idx[i] = append(idx[i], j)
		}
	}
	return grid(sizes, idx, fortran, old)
}

// grid is the layout of the elements of an n-dimensional array of old
// whose index along dimension i is one of idx[i] (each increasing), in
// array order, C (row-major) or Fortran; its bounds are the whole array's
// (subarrays and distributed arrays).
func grid(sizes []int64, idx [][]int64, fortran bool, old *layout) (*layout, error) {
	n := len(sizes)
	dims := make([]int, n) // fastest-varying last
	for i := range dims {
		dims[i] = i
		if fortran {
			dims[i] = n - 1 - i
		}
	}
	factors := []int64{int64(len(old.runs))}
	for i := range idx {
		factors = append(factors, int64(len(idx[i])))
	}
	if err := runsOf(factors...); err != nil {
		return nil, err
	}
	// The array's extent too must be representable.
	whole := int64(1)
	for _, n := range sizes {
		if n > (1<<62)/whole/max(old.extent(), 1) {
			return nil, errorf(errArg, "an array of more than 2^62 bytes")
		}
		whole *= n
	}
	// stride in elements of each dimension
	stride := make([]int64, n)
	s := int64(1)
	for k := n - 1; k >= 0; k-- {
		stride[dims[k]] = s
		s *= sizes[dims[k]]
	}
	b := newBuilder()
	at := make([]int, n) // position in each idx list
	for i := range idx {
		if len(idx[i]) == 0 {
			at = nil // no element at all
		}
	}
	for at != nil {
		var e int64
		for i := range at {
			e += idx[i][at[i]] * stride[i]
		}
		b.place(old, e*old.extent())
		k := n - 1
		for ; k >= 0; k-- {
			d := dims[k]
			at[d]++
			if at[d] < len(idx[d]) {
				break
			}
			at[d] = 0
		}
		if k < 0 {
			break
		}
	}
	l := b.done()
	l.lb, l.ub = 0, s*old.extent() // the whole array
	return l, nil
}

// pack copies count elements laid out by l at src (C memory) into dst,
// which holds count*l.size bytes, and returns the bytes copied.
func (l *layout) pack(dst []byte, src unsafe.Pointer, count int) int {
	k := 0
	for e := 0; e < count; e++ {
		base := int64(e) * l.extent()
		for _, r := range l.runs {
			k += copy(dst[k:], unsafe.Slice((*byte)(unsafe.Add(src, base+r.off)), r.n))
		}
	}
	return k
}

// unpack copies the packed src into count elements laid out by l at dst,
// stopping when src runs out (a short message), and returns the bytes
// copied.
func (l *layout) unpack(dst unsafe.Pointer, src []byte, count int) int {
	k := 0
	for e := 0; e < count && k < len(src); e++ {
		base := int64(e) * l.extent()
		for _, r := range l.runs {
			if k >= len(src) {
				break
			}
			k += copy(unsafe.Slice((*byte)(unsafe.Add(dst, base+r.off)), r.n), src[k:])
		}
	}
	return k
}

func (l *layout) String() string {
	return fmt.Sprintf("layout{size %d, lb %d, ub %d, true %d..%d, %d runs}", l.size, l.lb, l.ub, l.tlb, l.tub, len(l.runs))
}
