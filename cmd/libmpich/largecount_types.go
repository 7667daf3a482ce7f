package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import "unsafe"

// The large-count (_c) datatype constructors whose counts and displacements
// come in arrays, the envelope queries, and MPI_Op_create_c. A type made by
// a _c constructor is the type its int form makes, and the envelope queries
// describe it so (MPI_Type_get_envelope_c reports no large counts, where
// MPICH would report the _c constructor's).

//export PMPI_Type_indexed_c
func PMPI_Type_indexed_c(count C.MPI_Count, lens, disps *C.MPI_Count, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_indexed_c", &mpirc)
	var a arrays
	n := a.scalar(count)
	l, d := a.counts(lens, int(n)), a.counts(disps, int(n))
	if a.err != nil {
		return ret("MPI_Type_indexed_c", a.err)
	}
	return PMPI_Type_indexed(n, l, d, old, out)
}

//export PMPI_Type_create_hindexed_c
func PMPI_Type_create_hindexed_c(count C.MPI_Count, lens, disps *C.MPI_Count, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_hindexed_c", &mpirc)
	var a arrays
	n := a.scalar(count)
	l, d := a.counts(lens, int(n)), a.addrs(disps, int(n))
	if a.err != nil {
		return ret("MPI_Type_create_hindexed_c", a.err)
	}
	return PMPI_Type_create_hindexed(n, l, d, old, out)
}

//export PMPI_Type_create_indexed_block_c
func PMPI_Type_create_indexed_block_c(count, blocklen C.MPI_Count, disps *C.MPI_Count, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_indexed_block_c", &mpirc)
	var a arrays
	n, b := a.scalar(count), a.scalar(blocklen)
	d := a.counts(disps, int(n))
	if a.err != nil {
		return ret("MPI_Type_create_indexed_block_c", a.err)
	}
	return PMPI_Type_create_indexed_block(n, b, d, old, out)
}

//export PMPI_Type_create_hindexed_block_c
func PMPI_Type_create_hindexed_block_c(count, blocklen C.MPI_Count, disps *C.MPI_Count, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_hindexed_block_c", &mpirc)
	var a arrays
	n, b := a.scalar(count), a.scalar(blocklen)
	d := a.addrs(disps, int(n))
	if a.err != nil {
		return ret("MPI_Type_create_hindexed_block_c", a.err)
	}
	return PMPI_Type_create_hindexed_block(n, b, d, old, out)
}

//export PMPI_Type_create_struct_c
func PMPI_Type_create_struct_c(count C.MPI_Count, lens, disps *C.MPI_Count, types *C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_struct_c", &mpirc)
	var a arrays
	n := a.scalar(count)
	l, d := a.counts(lens, int(n)), a.addrs(disps, int(n))
	if a.err != nil {
		return ret("MPI_Type_create_struct_c", a.err)
	}
	return PMPI_Type_create_struct(n, l, d, types, out)
}

//export PMPI_Type_create_subarray_c
func PMPI_Type_create_subarray_c(ndims C.int, sizes, subsizes, starts *C.MPI_Count, order C.int, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_subarray_c", &mpirc)
	var a arrays
	sz, sub, st := a.counts(sizes, int(ndims)), a.counts(subsizes, int(ndims)), a.counts(starts, int(ndims))
	if a.err != nil {
		return ret("MPI_Type_create_subarray_c", a.err)
	}
	return PMPI_Type_create_subarray(ndims, sz, sub, st, order, old, out)
}

//export PMPI_Type_get_envelope_c
func PMPI_Type_get_envelope_c(dt C.MPI_Datatype, ni, na, nc, nd *C.MPI_Count, combiner *C.int) (mpirc C.int) {
	defer guard("MPI_Type_get_envelope_c", &mpirc)
	if ni == nil || na == nil || nc == nil || nd == nil || combiner == nil {
		return ret("MPI_Type_get_envelope_c", errorf(errArg, "NULL result"))
	}
	var i, ad, d C.int
	if rc := PMPI_Type_get_envelope(dt, &i, &ad, &d, combiner); rc != errSuccess {
		return rc
	}
	*ni, *na, *nc, *nd = C.MPI_Count(i), C.MPI_Count(ad), 0, C.MPI_Count(d)
	return errSuccess
}

//export PMPI_Type_get_contents_c
func PMPI_Type_get_contents_c(dt C.MPI_Datatype, maxi, maxa, maxc, maxd C.MPI_Count, ints *C.int, aints *C.MPI_Aint,
	counts *C.MPI_Count, types *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_get_contents_c", &mpirc)
	var a arrays
	mi, ma, md := a.scalar(maxi), a.scalar(maxa), a.scalar(maxd)
	if a.err != nil {
		return ret("MPI_Type_get_contents_c", a.err)
	}
	return PMPI_Type_get_contents(dt, mi, ma, md, ints, aints, types)
}

//export PMPI_Op_create_c
func PMPI_Op_create_c(fn unsafe.Pointer, commute C.int, op *C.MPI_Op) (mpirc C.int) {
	defer guard("MPI_Op_create_c", &mpirc)
	if fn == nil || op == nil {
		return ret("MPI_Op_create_c", errorf(errArg, "NULL function or result"))
	}
	lib.mu.Lock()
	h := lib.ops.add(opFirst, &userOp{fn: fn, commute: commute != 0, large: true})
	lib.mu.Unlock()
	*op = C.MPI_Op(h)
	return errSuccess
}
