package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import "unsafe"

// The vector and w forms of the persistent collectives, the persistent
// reduce-scatters, and MPI_Ialltoallw: each queues the blocking call, as
// the other persistent and nonblocking collectives do.

//export PMPI_Gatherv_init
func PMPI_Gatherv_init(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, displs *C.int,
	rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Gatherv_init", &mpirc)
	return initColl("MPI_Gatherv_init", comm, req, func() C.int {
		return PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm)
	})
}

//export PMPI_Scatterv_init
func PMPI_Scatterv_init(sbuf unsafe.Pointer, scounts, displs *C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int,
	rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Scatterv_init", &mpirc)
	return initColl("MPI_Scatterv_init", comm, req, func() C.int {
		return PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm)
	})
}

//export PMPI_Allgatherv_init
func PMPI_Allgatherv_init(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, displs *C.int,
	rtype C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Allgatherv_init", &mpirc)
	return initColl("MPI_Allgatherv_init", comm, req, func() C.int {
		return PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm)
	})
}

//export PMPI_Alltoallv_init
func PMPI_Alltoallv_init(sbuf unsafe.Pointer, scounts, sdispls *C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, rdispls *C.int,
	rtype C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Alltoallv_init", &mpirc)
	return initColl("MPI_Alltoallv_init", comm, req, func() C.int {
		return PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm)
	})
}

//export PMPI_Alltoallw_init
func PMPI_Alltoallw_init(sbuf unsafe.Pointer, scounts, sdispls *C.int, stypes *C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, rdispls *C.int,
	rtypes *C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Alltoallw_init", &mpirc)
	return initColl("MPI_Alltoallw_init", comm, req, func() C.int {
		return PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm)
	})
}

//export PMPI_Ialltoallw
func PMPI_Ialltoallw(sbuf unsafe.Pointer, scounts, sdispls *C.int, stypes *C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, rdispls *C.int,
	rtypes *C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ialltoallw", &mpirc)
	return startNBC("MPI_Ialltoallw", comm, req, func() C.int {
		return PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm)
	})
}

//export PMPI_Reduce_scatter_init
func PMPI_Reduce_scatter_init(sbuf, rbuf unsafe.Pointer, counts *C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm,
	info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Reduce_scatter_init", &mpirc)
	return initColl("MPI_Reduce_scatter_init", comm, req, func() C.int { return PMPI_Reduce_scatter(sbuf, rbuf, counts, dt, op, comm) })
}

//export PMPI_Reduce_scatter_block_init
func PMPI_Reduce_scatter_block_init(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm,
	info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Reduce_scatter_block_init", &mpirc)
	return initColl("MPI_Reduce_scatter_block_init", comm, req, func() C.int { return PMPI_Reduce_scatter_block(sbuf, rbuf, count, dt, op, comm) })
}
