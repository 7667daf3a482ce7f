package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import "unsafe"

// MPI_Type_create_darray: the part of a distributed array that one process
// of a process grid owns (as HPF distributes arrays). Its type map is the
// owned elements in array order, its bounds the whole array's: the
// elements are a grid of the owned indices of each dimension.

// MPI_DISTRIBUTE_* of MPICH's mpi.h.
const (
	distBlock    = 121
	distCyclic   = 122
	distNone     = 123
	distDfltDarg = -49767
)

// ownedIndices returns the indices along a dimension of gsize elements
// that the process at coordinate coord of psize owns.
func ownedIndices(dim int, gsize int64, distrib, darg, psize, coord int) ([]int64, error) {
	if gsize <= 0 || psize <= 0 {
		return nil, errorf(errArg, "dimension %d: %d elements over %d processes", dim, gsize, psize)
	}
	if darg != distDfltDarg && darg <= 0 {
		return nil, errorf(errArg, "dimension %d: distribution argument %d", dim, darg)
	}
	var out []int64
	switch distrib {
	case distNone:
		if psize != 1 {
			return nil, errorf(errArg, "dimension %d: MPI_DISTRIBUTE_NONE over %d processes (must be 1)", dim, psize)
		}
		for j := int64(0); j < gsize; j++ {
			out = append(out, j)
		}
	case distBlock:
		b := (gsize + int64(psize) - 1) / int64(psize)
		if darg != distDfltDarg {
			b = int64(darg)
			if b*int64(psize) < gsize {
				return nil, errorf(errArg, "dimension %d: blocks of %d over %d processes hold fewer than %d elements", dim, b, psize, gsize)
			}
		}
		for j := int64(coord) * b; j < min(int64(coord+1)*b, gsize); j++ {
			out = append(out, j)
		}
	case distCyclic:
		k := int64(1)
		if darg != distDfltDarg {
			k = int64(darg)
		}
		for j := int64(coord) * k; j < gsize; j += int64(psize) * k {
			for i := j; i < min(j+k, gsize); i++ {
				out = append(out, i)
			}
		}
	default:
		return nil, errorf(errArg, "dimension %d: distribution %d", dim, distrib)
	}
	return out, nil
}

// darray is the layout of process rank's part of an array of gsizes
// elements of old distributed over a process grid of psizes (row-major,
// whatever the array's order).
func darray(size, rank int, gsizes []int64, distribs, dargs, psizes []int, fortran bool, old *layout) (*layout, error) {
	n := len(gsizes)
	if size <= 0 || rank < 0 || rank >= size {
		return nil, errorf(errArg, "rank %d of %d processes", rank, size)
	}
	procs := 1
	for _, p := range psizes {
		if p <= 0 || procs > size/p {
			return nil, errorf(errArg, "a process grid of %v for %d processes", psizes, size)
		}
		procs *= p
	}
	if procs != size {
		return nil, errorf(errArg, "a process grid of %v for %d processes", psizes, size)
	}
	idx := make([][]int64, n)
	rest := rank
	for i := n - 1; i >= 0; i-- {
		coord := rest % psizes[i]
		rest /= psizes[i]
		if err := checkRuns(gsizes[i]); err != nil {
			return nil, err
		}
		var err error
		if idx[i], err = ownedIndices(i, gsizes[i], distribs[i], dargs[i], psizes[i], coord); err != nil {
			return nil, err
		}
	}
	return grid(gsizes, idx, fortran, old)
}

//export PMPI_Type_create_darray
func PMPI_Type_create_darray(size, rank, ndims C.int, gsizes, distribs, dargs, psizes *C.int, order C.int, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_darray", &mpirc)
	const fn = "MPI_Type_create_darray"
	if ndims <= 0 {
		return ret(fn, errorf(errArg, "%d dimensions", int(ndims)))
	}
	return createDarray(fn, size, rank, ndims, cInt64s(gsizes, int(ndims)), gsizes == nil, distribs, dargs, psizes, order, old, out)
}

//export PMPI_Type_create_darray_c
func PMPI_Type_create_darray_c(size, rank, ndims C.int, gsizes *C.MPI_Count, distribs, dargs, psizes *C.int, order C.int, old C.MPI_Datatype, out *C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Type_create_darray_c", &mpirc)
	const fn = "MPI_Type_create_darray_c"
	if ndims <= 0 {
		return ret(fn, errorf(errArg, "%d dimensions", int(ndims)))
	}
	g := make([]int64, int(ndims))
	if gsizes != nil {
		for i, v := range unsafe.Slice(gsizes, int(ndims)) {
			g[i] = int64(v)
		}
	}
	return createDarray(fn, size, rank, ndims, g, gsizes == nil, distribs, dargs, psizes, order, old, out)
}

// createDarray checks the arguments of both forms and makes the type.
func createDarray(fn string, size, rank, ndims C.int, g []int64, noSizes bool, distribs, dargs, psizes *C.int, order C.int, old C.MPI_Datatype, out *C.MPI_Datatype) C.int {
	if noSizes {
		return ret(fn, errorf(errArg, "NULL array"))
	}
	if err := checkArrays(ndims, unsafe.Pointer(distribs), unsafe.Pointer(dargs), unsafe.Pointer(psizes)); err != nil {
		return ret(fn, err)
	}
	if order != orderC && order != orderFortran {
		return ret(fn, errorf(errArg, "order %d (MPI_ORDER_C or MPI_ORDER_FORTRAN)", int(order)))
	}
	n := int(ndims)
	ds, da, ps := cIntList(distribs, n), cIntList(dargs, n), cIntList(psizes, n)
	ints := []int{int(size), int(rank), n}
	for _, v := range g {
		ints = append(ints, int(v))
	}
	ints = append(append(append(append(ints, ds...), da...), ps...), int(order))
	return construct(fn, &envelope{combiner: combinerDarray, ints: ints}, old, out, func(o *layout) (*layout, error) {
		return darray(int(size), int(rank), g, ds, da, ps, order == orderFortran, o)
	})
}
