package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import "unsafe"

// MPI_Type_get_envelope and MPI_Type_get_contents: every derived datatype
// remembers the constructor that made it and its arguments, so that
// libraries which walk a program's datatypes (I/O layers, tracers,
// serializers) can decode them.

// MPI_COMBINER_* of MPICH's mpi.h.
const (
	combinerNamed         = 1
	combinerDup           = 2
	combinerContiguous    = 3
	combinerVector        = 4
	combinerHvector       = 6
	combinerIndexed       = 7
	combinerHindexed      = 9
	combinerIndexedBlock  = 10
	combinerStruct        = 12
	combinerSubarray      = 13
	combinerDarray        = 14
	combinerResized       = 18
	combinerHindexedBlock = 19
)

// envelope is a constructor call: its combiner, its integer, address and
// datatype arguments in MPI_Type_get_contents' order.
type envelope struct {
	combiner int
	ints     []int
	aints    []int64
	types    []typeRef
}

// typeRef is a datatype argument: a predefined handle, or a derived type's
// entry (kept alive here even if the program frees its handle).
type typeRef struct {
	h  C.MPI_Datatype
	te *typeEntry // nil for a predefined type
}

// refOf returns the reference to dt (already checked by layoutOf).
func refOf(dt C.MPI_Datatype) typeRef {
	if isBuiltin(dt) {
		return typeRef{h: dt}
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	return typeRef{h: dt, te: lib.types.at(int32(dt))}
}

// env builds the envelope of a constructor over one old type.
func env(combiner int, old C.MPI_Datatype, ints []int, aints []int64) *envelope {
	return &envelope{combiner: combiner, ints: ints, aints: aints, types: []typeRef{refOf(old)}}
}

// cIntList copies n C ints.
func cIntList(p *C.int, n int) []int {
	out := make([]int, n)
	for i, v := range cInts(p, n) {
		out[i] = int(v)
	}
	return out
}

func typeEnvelope(dt C.MPI_Datatype) (*envelope, error) {
	if _, _, err := layoutOf(dt); err != nil {
		return nil, err
	}
	if isBuiltin(dt) {
		return &envelope{combiner: combinerNamed}, nil
	}
	lib.mu.Lock()
	te := lib.types.at(int32(dt))
	lib.mu.Unlock()
	if te == nil || te.env == nil { // a pair type
		return &envelope{combiner: combinerNamed}, nil
	}
	return te.env, nil
}

//export PMPI_Type_get_envelope
func PMPI_Type_get_envelope(dt C.MPI_Datatype, ni, na, nd, combiner *C.int) (mpirc C.int) {
	defer guard("MPI_Type_get_envelope", &mpirc)
	e, err := typeEnvelope(dt)
	if err != nil {
		return ret("MPI_Type_get_envelope", err)
	}
	*ni, *na, *nd, *combiner = C.int(len(e.ints)), C.int(len(e.aints)), C.int(len(e.types)), C.int(e.combiner)
	return errSuccess
}

// MPI_Type_get_contents hands out the datatype arguments; a derived one is
// a new handle to the same type, which the program frees.
//
//export PMPI_Type_get_contents
func PMPI_Type_get_contents(dt C.MPI_Datatype, maxi, maxa, maxd C.int, ints *C.int, aints *C.MPI_Aint, types *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_get_contents", &mpirc)
	const fn = "MPI_Type_get_contents"
	e, err := typeEnvelope(dt)
	if err != nil {
		return ret(fn, err)
	}
	if e.combiner == combinerNamed {
		return ret(fn, errorf(errType, "datatype %#x is predefined: it has no contents", uint32(dt)))
	}
	if int(maxi) < len(e.ints) || int(maxa) < len(e.aints) || int(maxd) < len(e.types) {
		return ret(fn, errorf(errArg, "arrays of %d, %d and %d for %d ints, %d addresses and %d datatypes",
			int(maxi), int(maxa), int(maxd), len(e.ints), len(e.aints), len(e.types)))
	}
	copyInts(ints, len(e.ints), e.ints)
	if len(e.aints) > 0 {
		for i, v := range e.aints {
			unsafe.Slice(aints, len(e.aints))[i] = C.MPI_Aint(v)
		}
	}
	if len(e.types) > 0 {
		out := unsafe.Slice(types, len(e.types))
		for i, r := range e.types {
			out[i] = r.h
			if r.te != nil {
				lib.mu.Lock()
				cp := *r.te
				cp.attrSet = attrSet{} // a new handle: no attributes
				out[i] = C.MPI_Datatype(lib.types.add(typeFirst, &cp))
				lib.mu.Unlock()
			}
		}
	}
	return errSuccess
}
