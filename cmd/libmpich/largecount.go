package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"math"
	"unsafe"
)

// The large-count (_c) forms of MPI 4.0 for the most used calls. Counts up
// to the largest int go to the int forms; larger ones fail with
// MPI_ERR_COUNT (the library moves at most 2^31 - 1 elements per call).

func intCount(fn string, comm C.MPI_Comm, n C.MPI_Count) (C.int, C.int, bool) {
	if n < 0 || n > math.MaxInt32 {
		return 0, retc(comm, fn, errorf(errCount, "count %d: more than the largest int is not supported", int64(n))), false
	}
	return C.int(n), 0, true
}

//export PMPI_Send_c
func PMPI_Send_c(buf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Send_c", &mpirc)
	n, rc, ok := intCount("MPI_Send_c", comm, count)
	if !ok {
		return rc
	}
	return PMPI_Send(buf, n, dt, dest, tag, comm)
}

//export PMPI_Recv_c
func PMPI_Recv_c(buf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, src, tag C.int, comm C.MPI_Comm, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Recv_c", &mpirc)
	n, rc, ok := intCount("MPI_Recv_c", comm, count)
	if !ok {
		return rc
	}
	return PMPI_Recv(buf, n, dt, src, tag, comm, stArg)
}

//export PMPI_Isend_c
func PMPI_Isend_c(buf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Isend_c", &mpirc)
	n, rc, ok := intCount("MPI_Isend_c", comm, count)
	if !ok {
		return rc
	}
	return PMPI_Isend(buf, n, dt, dest, tag, comm, req)
}

//export PMPI_Irecv_c
func PMPI_Irecv_c(buf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, src, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Irecv_c", &mpirc)
	n, rc, ok := intCount("MPI_Irecv_c", comm, count)
	if !ok {
		return rc
	}
	return PMPI_Irecv(buf, n, dt, src, tag, comm, req)
}

//export PMPI_Bcast_c
func PMPI_Bcast_c(buf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, root C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Bcast_c", &mpirc)
	n, rc, ok := intCount("MPI_Bcast_c", comm, count)
	if !ok {
		return rc
	}
	return PMPI_Bcast(buf, n, dt, root, comm)
}

//export PMPI_Reduce_c
func PMPI_Reduce_c(sbuf, rbuf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, root C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Reduce_c", &mpirc)
	n, rc, ok := intCount("MPI_Reduce_c", comm, count)
	if !ok {
		return rc
	}
	return PMPI_Reduce(sbuf, rbuf, n, dt, op, root, comm)
}

//export PMPI_Allreduce_c
func PMPI_Allreduce_c(sbuf, rbuf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Allreduce_c", &mpirc)
	n, rc, ok := intCount("MPI_Allreduce_c", comm, count)
	if !ok {
		return rc
	}
	return PMPI_Allreduce(sbuf, rbuf, n, dt, op, comm)
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
