package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import "math"

// The large-count (_c) forms of MPI 4.0 that report counts: they give the
// whole count, beyond the largest int. The forms that only take counts are
// generated (largecount_gen.go): counts up to the largest int go to the int
// forms, larger ones fail with MPI_ERR_COUNT (the library moves at most
// 2^31 - 1 elements per call).

func intCount(fn string, comm C.MPI_Comm, n C.MPI_Count) (C.int, C.int, bool) {
	if n < 0 || n > math.MaxInt32 {
		return 0, retc(comm, fn, errorf(errCount, "count %d: more than the largest int is not supported", int64(n))), false
	}
	return C.int(n), 0, true
}

//export PMPI_Get_count_c
func PMPI_Get_count_c(stArg C.uintptr_t, dt C.MPI_Datatype, count *C.MPI_Count) (mpirc C.int) {
	defer guard("MPI_Get_count_c", &mpirc)
	st := statusPtr(stArg)
	l, _, err := layoutOf(dt)
	if err != nil {
		return ret("MPI_Get_count_c", err)
	}
	*count = C.MPI_Count(countOf(l.size, statusCount(st)))
	return errSuccess
}

//export PMPI_Get_elements_c
func PMPI_Get_elements_c(stArg C.uintptr_t, dt C.MPI_Datatype, count *C.MPI_Count) (mpirc C.int) {
	defer guard("MPI_Get_elements_c", &mpirc)
	var x C.MPI_Count
	if rc := PMPI_Get_elements_x(stArg, dt, &x); rc != errSuccess {
		return rc
	}
	*count = x
	return errSuccess
}

//export PMPI_Type_size_c
func PMPI_Type_size_c(dt C.MPI_Datatype, size *C.MPI_Count) (mpirc C.int) {
	defer guard("MPI_Type_size_c", &mpirc)
	return PMPI_Type_size_x(dt, size)
}
