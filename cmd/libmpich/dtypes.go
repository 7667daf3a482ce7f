package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"unsafe"
)

// Derived datatypes: the table of handles and the MPI_Type_* exports.

// typeFirst is the first derived datatype handle: MPICH's indirect
// datatype handles (0xcc...), apart from the builtin ones (0x4c...) and
// the pair types (0x8c...).
const typeFirst = -0x34000000 // 0xcc000000 as an int32

// typeEntry is a derived datatype.
type typeEntry struct {
	l         *layout
	committed bool
	env       *envelope // the constructor call (MPI_Type_get_contents)
	attrSet   attrSet   // user attributes by keyval
}

func isBuiltin(dt C.MPI_Datatype) bool { return uint32(dt)&0xff000000 == 0x4c000000 }

// pairLayout is the layout of MPICH's pair types (struct {value; int}),
// used with MPI_MINLOC and MPI_MAXLOC.
func pairLayout(h uint32) (*layout, bool) {
	var vsize, vbasic int64
	var basic uint32
	switch h {
	case 0x8c000000: // MPI_FLOAT_INT
		vsize, vbasic, basic = 4, 4, 0x4c00040a
	case 0x8c000001: // MPI_DOUBLE_INT
		vsize, vbasic, basic = 8, 8, 0x4c00080b
	case 0x8c000002: // MPI_LONG_INT
		vsize, vbasic, basic = 8, 8, 0x4c000807
	case 0x8c000003: // MPI_SHORT_INT
		vsize, vbasic, basic = 2, 2, 0x4c000203
	case 0x8c000004: // MPI_LONG_DOUBLE_INT
		vsize, vbasic, basic = 16, 16, 0x4c00100c
	default:
		return nil, false
	}
	_ = vbasic
	v := basicLayout(basic, vsize)
	i := basicLayout(0x4c000405, 4)
	l, _ := structOf([]int64{1, 1}, []int64{0, vsize}, []*layout{v, i})
	l.basic = h // a pair: reductions know it by its own handle
	return l, true
}

// layoutOf returns the layout of any datatype; committed says whether it
// may be used for communication.
func layoutOf(dt C.MPI_Datatype) (l *layout, committed bool, err error) {
	h := uint32(dt)
	if isBuiltin(dt) {
		n, err := typeSize(dt)
		if err != nil {
			return nil, false, err
		}
		if h == type2Int { // a pair of ints
			i := basicLayout(0x4c000405, 4)
			l, _ := hvector(1, 2, 0, i)
			l.basic = h
			l.spans = []span{{8, 0x4c000405}}
			return l, true, nil
		}
		return basicLayout(h, int64(n)), true, nil
	}
	if l, ok := pairLayout(h); ok {
		return l, true, nil
	}
	lib.mu.Lock()
	te := lib.types.at(int32(dt))
	lib.mu.Unlock()
	if te == nil {
		if h == datatypeNull {
			return nil, false, errorf(errType, "MPI_DATATYPE_NULL")
		}
		return nil, false, errorf(errType, "invalid datatype %#x", h)
	}
	return te.l, te.committed, nil
}

// commLayout is layoutOf for communication: the type must be committed.
func commLayout(dt C.MPI_Datatype) (*layout, error) {
	l, committed, err := layoutOf(dt)
	if err == nil && !committed {
		err = errorf(errType, "datatype %#x is not committed", uint32(dt))
	}
	return l, err
}

func newType(l *layout, e *envelope, out *C.MPI_Datatype) error {
	if out == nil {
		return errorf(errArg, "NULL result datatype")
	}
	lib.mu.Lock()
	h := lib.types.add(typeFirst, &typeEntry{l: l, env: e})
	lib.mu.Unlock()
	*out = C.MPI_Datatype(h)
	return nil
}

// construct runs a constructor over old's layout and hands out the new
// type.
func construct(fn string, e *envelope, old C.MPI_Datatype, out *C.MPI_Datatype, make func(o *layout) (*layout, error)) C.int {
	o, _, err := layoutOf(old)
	if err != nil {
		return ret(fn, err)
	}
	l, err := make(o)
	if err != nil {
		return ret(fn, err)
	}
	e.types = []typeRef{refOf(old)}
	return ret(fn, newType(l, e, out))
}

func cInt64s(p *C.int, n int) []int64 {
	out := make([]int64, n)
	for i, v := range cInts(p, n) {
		out[i] = int64(v)
	}
	return out
}

func cAints(p *C.MPI_Aint, n int) []int64 {
	out := make([]int64, n)
	if n > 0 && p != nil {
		for i, v := range unsafe.Slice(p, n) {
			out[i] = int64(v)
		}
	}
	return out
}

func checkArrays(count C.int, ps ...unsafe.Pointer) error {
	if count < 0 {
		return errorf(errCount, "negative count %d", int(count))
	}
	for _, p := range ps {
		if count > 0 && p == nil {
			return errorf(errArg, "NULL array")
		}
	}
	return nil
}

//export PMPI_Type_contiguous
func PMPI_Type_contiguous(count C.int, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_contiguous", &mpirc)
	return construct("MPI_Type_contiguous", &envelope{combiner: combinerContiguous, ints: []int{int(count)}}, old, out, func(o *layout) (*layout, error) {
		return hvector(1, int64(count), 0, o)
	})
}

//export PMPI_Type_vector
func PMPI_Type_vector(count, blocklen, stride C.int, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_vector", &mpirc)
	return construct("MPI_Type_vector", &envelope{combiner: combinerVector, ints: []int{int(count), int(blocklen), int(stride)}}, old, out, func(o *layout) (*layout, error) {
		return hvector(int64(count), int64(blocklen), int64(stride)*o.extent(), o)
	})
}

//export PMPI_Type_create_hvector
func PMPI_Type_create_hvector(count, blocklen C.int, stride C.MPI_Aint, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_hvector", &mpirc)
	return construct("MPI_Type_create_hvector", &envelope{combiner: combinerHvector, ints: []int{int(count), int(blocklen)}, aints: []int64{int64(stride)}}, old, out, func(o *layout) (*layout, error) {
		return hvector(int64(count), int64(blocklen), int64(stride), o)
	})
}

//export PMPI_Type_hvector
func PMPI_Type_hvector(count, blocklen C.int, stride C.MPI_Aint, old C.MPI_Datatype, out *C.MPI_Datatype) C.int {
	return PMPI_Type_create_hvector(count, blocklen, stride, old, out)
}

//export PMPI_Type_indexed
func PMPI_Type_indexed(count C.int, lens, disps *C.int, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_indexed", &mpirc)
	if err := checkArrays(count, unsafe.Pointer(lens), unsafe.Pointer(disps)); err != nil {
		return ret("MPI_Type_indexed", err)
	}
	return construct("MPI_Type_indexed", &envelope{combiner: combinerIndexed,
		ints: append(append([]int{int(count)}, cIntList(lens, int(count))...), cIntList(disps, int(count))...)}, old, out, func(o *layout) (*layout, error) {
		d := cInt64s(disps, int(count))
		for i := range d {
			d[i] *= o.extent()
		}
		return hindexed(cInt64s(lens, int(count)), d, o)
	})
}

//export PMPI_Type_create_hindexed
func PMPI_Type_create_hindexed(count C.int, lens *C.int, disps *C.MPI_Aint, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_hindexed", &mpirc)
	if err := checkArrays(count, unsafe.Pointer(lens), unsafe.Pointer(disps)); err != nil {
		return ret("MPI_Type_create_hindexed", err)
	}
	return construct("MPI_Type_create_hindexed", &envelope{combiner: combinerHindexed,
		ints: append([]int{int(count)}, cIntList(lens, int(count))...), aints: cAints(disps, int(count))}, old, out, func(o *layout) (*layout, error) {
		return hindexed(cInt64s(lens, int(count)), cAints(disps, int(count)), o)
	})
}

//export PMPI_Type_hindexed
func PMPI_Type_hindexed(count C.int, lens *C.int, disps *C.MPI_Aint, old C.MPI_Datatype, out *C.MPI_Datatype) C.int {
	return PMPI_Type_create_hindexed(count, lens, disps, old, out)
}

//export PMPI_Type_create_indexed_block
func PMPI_Type_create_indexed_block(count, blocklen C.int, disps *C.int, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_indexed_block", &mpirc)
	if err := checkArrays(count, unsafe.Pointer(disps)); err != nil {
		return ret("MPI_Type_create_indexed_block", err)
	}
	return construct("MPI_Type_create_indexed_block", &envelope{combiner: combinerIndexedBlock,
		ints: append([]int{int(count), int(blocklen)}, cIntList(disps, int(count))...)}, old, out, func(o *layout) (*layout, error) {
		d := cInt64s(disps, int(count))
		lens := make([]int64, count)
		for i := range d {
			d[i] *= o.extent()
			lens[i] = int64(blocklen)
		}
		return hindexed(lens, d, o)
	})
}

//export PMPI_Type_create_hindexed_block
func PMPI_Type_create_hindexed_block(count, blocklen C.int, disps *C.MPI_Aint, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_hindexed_block", &mpirc)
	if err := checkArrays(count, unsafe.Pointer(disps)); err != nil {
		return ret("MPI_Type_create_hindexed_block", err)
	}
	return construct("MPI_Type_create_hindexed_block", &envelope{combiner: combinerHindexedBlock,
		ints: []int{int(count), int(blocklen)}, aints: cAints(disps, int(count))}, old, out, func(o *layout) (*layout, error) {
		lens := make([]int64, count)
		for i := range lens {
			lens[i] = int64(blocklen)
		}
		return hindexed(lens, cAints(disps, int(count)), o)
	})
}

//export PMPI_Type_create_struct
func PMPI_Type_create_struct(count C.int, lens *C.int, disps *C.MPI_Aint, types *C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_struct", &mpirc)
	if err := checkArrays(count, unsafe.Pointer(lens), unsafe.Pointer(disps), unsafe.Pointer(types)); err != nil {
		return ret("MPI_Type_create_struct", err)
	}
	olds := make([]*layout, count)
	for i, t := range unsafe.Slice(types, int(count)) {
		l, _, err := layoutOf(t)
		if err != nil {
			return ret("MPI_Type_create_struct", err)
		}
		olds[i] = l
	}
	l, err := structOf(cInt64s(lens, int(count)), cAints(disps, int(count)), olds)
	if err != nil {
		return ret("MPI_Type_create_struct", err)
	}
	e := &envelope{combiner: combinerStruct, ints: append([]int{int(count)}, cIntList(lens, int(count))...), aints: cAints(disps, int(count))}
	for _, t := range unsafe.Slice(types, int(count)) {
		e.types = append(e.types, refOf(t))
	}
	return ret("MPI_Type_create_struct", newType(l, e, out))
}

//export PMPI_Type_struct
func PMPI_Type_struct(count C.int, lens *C.int, disps *C.MPI_Aint, types *C.MPI_Datatype, out *C.MPI_Datatype) C.int {
	return PMPI_Type_create_struct(count, lens, disps, types, out)
}

//export PMPI_Type_create_resized
func PMPI_Type_create_resized(old C.MPI_Datatype, lb, extent C.MPI_Aint, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_resized", &mpirc)
	return construct("MPI_Type_create_resized", &envelope{combiner: combinerResized, aints: []int64{int64(lb), int64(extent)}}, old, out, func(o *layout) (*layout, error) {
		return resized(o, int64(lb), int64(extent)), nil
	})
}

//export PMPI_Type_create_subarray
func PMPI_Type_create_subarray(ndims C.int, sizes, subsizes, starts *C.int, order C.int, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_subarray", &mpirc)
	if ndims <= 0 {
		return ret("MPI_Type_create_subarray", errorf(errArg, "%d dimensions", int(ndims)))
	}
	if err := checkArrays(ndims, unsafe.Pointer(sizes), unsafe.Pointer(subsizes), unsafe.Pointer(starts)); err != nil {
		return ret("MPI_Type_create_subarray", err)
	}
	if order != orderC && order != orderFortran {
		return ret("MPI_Type_create_subarray", errorf(errArg, "order %d (MPI_ORDER_C or MPI_ORDER_FORTRAN)", int(order)))
	}
	n := int(ndims)
	return construct("MPI_Type_create_subarray", &envelope{combiner: combinerSubarray,
		ints: append(append(append([]int{n}, cIntList(sizes, n)...), append(cIntList(subsizes, n), cIntList(starts, n)...)...), int(order))}, old, out, func(o *layout) (*layout, error) {
		return subarray(cInt64s(sizes, n), cInt64s(subsizes, n), cInt64s(starts, n), order == orderFortran, o)
	})
}

//export PMPI_Type_dup
func PMPI_Type_dup(old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_dup", &mpirc)
	l, committed, err := layoutOf(old)
	if err != nil {
		return ret("MPI_Type_dup", err)
	}
	from, err := typeAttrs(old)
	if err != nil {
		return ret("MPI_Type_dup", err)
	}
	var dup C.MPI_Datatype
	if err := newType(l, env(combinerDup, old, nil, nil), &dup); err != nil {
		return ret("MPI_Type_dup", err)
	}
	lib.mu.Lock()
	te := lib.types.at(int32(dup))
	te.committed = committed
	lib.mu.Unlock()
	if code := from.copyAttrs(holder{keyType, C.int(dup), &te.attrSet}); code != 0 {
		lib.mu.Lock()
		lib.types.del(int32(dup))
		lib.mu.Unlock()
		return ret("MPI_Type_dup", errorf(code, "an attribute copy callback failed with %d", code))
	}
	*out = dup
	return errSuccess
}

//export PMPI_Type_commit
func PMPI_Type_commit(dt *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_commit", &mpirc)
	if isBuiltin(*dt) {
		return errSuccess
	}
	lib.mu.Lock()
	te := lib.types.at(int32(*dt))
	if te != nil {
		te.committed = true
	}
	lib.mu.Unlock()
	if te == nil {
		if _, ok := pairLayout(uint32(*dt)); ok {
			return errSuccess
		}
		return ret("MPI_Type_commit", errorf(errType, "invalid datatype %#x", uint32(*dt)))
	}
	return errSuccess
}

//export PMPI_Type_free
func PMPI_Type_free(dt *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_free", &mpirc)
	lib.mu.Lock()
	te := lib.types.at(int32(*dt))
	lib.mu.Unlock()
	if te == nil {
		return ret("MPI_Type_free", errorf(errType, "datatype %#x is not a derived datatype", uint32(*dt)))
	}
	// The delete callbacks run first, with the handle still valid.
	if code := (holder{keyType, C.int(*dt), &te.attrSet}).deleteAll(); code != 0 {
		return ret("MPI_Type_free", errorf(code, "an attribute delete callback failed with %d", code))
	}
	lib.mu.Lock()
	ok := lib.types.del(int32(*dt))
	lib.mu.Unlock()
	if !ok {
		return ret("MPI_Type_free", errorf(errType, "datatype %#x is not a derived datatype", uint32(*dt)))
	}
	forgetTypeName(*dt)
	*dt = datatypeNull
	return errSuccess
}

// MPI_Type_match_size answers with the Fortran sized types, as MPICH does.
//
//export PMPI_Type_match_size
func PMPI_Type_match_size(class, size C.int, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_match_size", &mpirc)
	const real, integer, complex = 1, 2, 3 // MPI_TYPECLASS_*
	bySize := map[int]map[C.int]uint32{
		real:    {4: 0x4c000427, 8: 0x4c000829, 16: 0x4c00102b},               // MPI_REAL4, 8, 16
		integer: {1: 0x4c00012d, 2: 0x4c00022f, 4: 0x4c000430, 8: 0x4c000831}, // MPI_INTEGER1, 2, 4, 8
		complex: {8: 0x4c000828, 16: 0x4c00102a, 32: 0x4c00202c},              // MPI_COMPLEX8, 16, 32
	}
	t, ok := bySize[int(class)][size]
	if !ok {
		return ret("MPI_Type_match_size", errorf(errArg, "no datatype of class %d and size %d", int(class), int(size)))
	}
	*out = C.MPI_Datatype(t)
	return errSuccess
}

//export PMPI_Type_get_extent
func PMPI_Type_get_extent(dt C.MPI_Datatype, lb, extent *C.MPI_Aint) (mpirc C.int) {
	defer guard("MPI_Type_get_extent", &mpirc)
	l, _, err := layoutOf(dt)
	if err != nil {
		return ret("MPI_Type_get_extent", err)
	}
	*lb, *extent = C.MPI_Aint(l.lb), C.MPI_Aint(l.extent())
	return errSuccess
}

//export PMPI_Type_get_extent_x
func PMPI_Type_get_extent_x(dt C.MPI_Datatype, lb, extent *C.MPI_Count) (mpirc C.int) {
	defer guard("MPI_Type_get_extent_x", &mpirc)
	var a, b C.MPI_Aint
	if rc := PMPI_Type_get_extent(dt, &a, &b); rc != errSuccess {
		return rc
	}
	*lb, *extent = C.MPI_Count(a), C.MPI_Count(b)
	return errSuccess
}

//export PMPI_Type_get_true_extent
func PMPI_Type_get_true_extent(dt C.MPI_Datatype, lb, extent *C.MPI_Aint) (mpirc C.int) {
	defer guard("MPI_Type_get_true_extent", &mpirc)
	l, _, err := layoutOf(dt)
	if err != nil {
		return ret("MPI_Type_get_true_extent", err)
	}
	*lb, *extent = C.MPI_Aint(l.tlb), C.MPI_Aint(l.tub-l.tlb)
	return errSuccess
}

//export PMPI_Type_get_true_extent_x
func PMPI_Type_get_true_extent_x(dt C.MPI_Datatype, lb, extent *C.MPI_Count) (mpirc C.int) {
	defer guard("MPI_Type_get_true_extent_x", &mpirc)
	var a, b C.MPI_Aint
	if rc := PMPI_Type_get_true_extent(dt, &a, &b); rc != errSuccess {
		return rc
	}
	*lb, *extent = C.MPI_Count(a), C.MPI_Count(b)
	return errSuccess
}

//export PMPI_Type_extent
func PMPI_Type_extent(dt C.MPI_Datatype, extent *C.MPI_Aint) (mpirc C.int) {
	defer guard("MPI_Type_extent", &mpirc)
	var lb C.MPI_Aint
	return PMPI_Type_get_extent(dt, &lb, extent)
}

//export PMPI_Type_size_x
func PMPI_Type_size_x(dt C.MPI_Datatype, size *C.MPI_Count) (mpirc C.int) {
	defer guard("MPI_Type_size_x", &mpirc)
	l, _, err := layoutOf(dt)
	if err != nil {
		return ret("MPI_Type_size_x", err)
	}
	*size = C.MPI_Count(l.size)
	return errSuccess
}

//export PMPI_Get_address
func PMPI_Get_address(p unsafe.Pointer, addr *C.MPI_Aint) (mpirc C.int) {
	defer guard("MPI_Get_address", &mpirc)
	*addr = C.MPI_Aint(uintptr(p))
	return errSuccess
}

//export PMPI_Address
func PMPI_Address(p unsafe.Pointer, addr *C.MPI_Aint) C.int { return PMPI_Get_address(p, addr) }

//export PMPI_Pack_size
func PMPI_Pack_size(count C.int, dt C.MPI_Datatype, comm C.MPI_Comm, size *C.int) (mpirc C.int) {
	defer guard("MPI_Pack_size", &mpirc)
	l, _, err := layoutOf(dt)
	if err != nil {
		return retc(comm, "MPI_Pack_size", err)
	}
	if count < 0 {
		return retc(comm, "MPI_Pack_size", errorf(errCount, "negative count %d", int(count)))
	}
	*size = C.int(int64(count) * l.size)
	return errSuccess
}

//export PMPI_Pack
func PMPI_Pack(in unsafe.Pointer, count C.int, dt C.MPI_Datatype, out unsafe.Pointer, outsize C.int, pos *C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Pack", &mpirc)
	l, err := commLayout(dt)
	if err != nil {
		return retc(comm, "MPI_Pack", err)
	}
	n := int64(count) * l.size
	if count < 0 || *pos < 0 || int64(*pos)+n > int64(outsize) {
		return retc(comm, "MPI_Pack", errorf(errTruncate, "packing %d bytes at %d into %d", n, int(*pos), int(outsize)))
	}
	dst := goBytes(unsafe.Add(out, int(*pos)), int(n))
	*pos += C.int(l.pack(dst, in, int(count)))
	return errSuccess
}

//export PMPI_Unpack
func PMPI_Unpack(in unsafe.Pointer, insize C.int, pos *C.int, out unsafe.Pointer, count C.int, dt C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Unpack", &mpirc)
	l, err := commLayout(dt)
	if err != nil {
		return retc(comm, "MPI_Unpack", err)
	}
	n := int64(count) * l.size
	if count < 0 || *pos < 0 || int64(*pos)+n > int64(insize) {
		return retc(comm, "MPI_Unpack", errorf(errTruncate, "unpacking %d bytes at %d from %d", n, int(*pos), int(insize)))
	}
	src := goBytes(unsafe.Add(in, int(*pos)), int(n))
	*pos += C.int(l.unpack(out, src, int(count)))
	return errSuccess
}

// elements returns how many basic elements bytes of data of layout l
// make, or undefined when they do not end on an element boundary.
func elements(l *layout, bytes int64) int64 {
	return countOf(l.elemSize(), bytes)
}

// elemSize is the size of l's basic element: its one predefined type's,
// else (mixed types, pair types) a whole element's.
func (l *layout) elemSize() int64 {
	if l.basic != 0 && isBuiltin(C.MPI_Datatype(l.basic)) {
		if n, err := typeSize(C.MPI_Datatype(l.basic)); err == nil {
			return int64(n)
		}
	}
	return l.size
}

// countOf is how many items of per bytes bytes make: undefined when they
// do not end on an item (zero-sized items: none).
func countOf(per, bytes int64) int64 {
	switch {
	case per == 0:
		return 0
	case bytes%per != 0:
		return undefined
	}
	return bytes / per
}

//export PMPI_Get_elements
func PMPI_Get_elements(stArg C.uintptr_t, dt C.MPI_Datatype, count *C.int) (mpirc C.int) {
	defer guard("MPI_Get_elements", &mpirc)
	st := statusPtr(stArg)
	l, _, err := layoutOf(dt)
	if err != nil {
		return ret("MPI_Get_elements", err)
	}
	*count = C.int(elements(l, statusCount(st)))
	return errSuccess
}

//export PMPI_Get_elements_x
func PMPI_Get_elements_x(stArg C.uintptr_t, dt C.MPI_Datatype, count *C.MPI_Count) (mpirc C.int) {
	defer guard("MPI_Get_elements_x", &mpirc)
	st := statusPtr(stArg)
	l, _, err := layoutOf(dt)
	if err != nil {
		return ret("MPI_Get_elements_x", err)
	}
	*count = C.MPI_Count(elements(l, statusCount(st)))
	return errSuccess
}
