package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import "unsafe"

// The nonblocking (MPI_Ineighbor_*) and persistent (MPI_Neighbor_*_init)
// forms queue the blocking one, as the other nonblocking and persistent
// collectives do (nbc.go, persist.go).

//export PMPI_Ineighbor_allgather
func PMPI_Ineighbor_allgather(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ineighbor_allgather", &mpirc)
	return startNBC("MPI_Ineighbor_allgather", comm, req, func() C.int { return PMPI_Neighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm) })
}

//export PMPI_Neighbor_allgather_init
func PMPI_Neighbor_allgather_init(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Neighbor_allgather_init", &mpirc)
	return initColl("MPI_Neighbor_allgather_init", comm, req, func() C.int { return PMPI_Neighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm) })
}

//export PMPI_Ineighbor_allgatherv
func PMPI_Ineighbor_allgatherv(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, displs *C.int, rtype C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ineighbor_allgatherv", &mpirc)
	return startNBC("MPI_Ineighbor_allgatherv", comm, req, func() C.int { return PMPI_Neighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm) })
}

//export PMPI_Neighbor_allgatherv_init
func PMPI_Neighbor_allgatherv_init(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, displs *C.int, rtype C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Neighbor_allgatherv_init", &mpirc)
	return initColl("MPI_Neighbor_allgatherv_init", comm, req, func() C.int { return PMPI_Neighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm) })
}

//export PMPI_Ineighbor_alltoall
func PMPI_Ineighbor_alltoall(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ineighbor_alltoall", &mpirc)
	return startNBC("MPI_Ineighbor_alltoall", comm, req, func() C.int { return PMPI_Neighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm) })
}

//export PMPI_Neighbor_alltoall_init
func PMPI_Neighbor_alltoall_init(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Neighbor_alltoall_init", &mpirc)
	return initColl("MPI_Neighbor_alltoall_init", comm, req, func() C.int { return PMPI_Neighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm) })
}

//export PMPI_Ineighbor_alltoallv
func PMPI_Ineighbor_alltoallv(sbuf unsafe.Pointer, scounts, sdispls *C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, rdispls *C.int, rtype C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ineighbor_alltoallv", &mpirc)
	return startNBC("MPI_Ineighbor_alltoallv", comm, req, func() C.int {
		return PMPI_Neighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm)
	})
}

//export PMPI_Neighbor_alltoallv_init
func PMPI_Neighbor_alltoallv_init(sbuf unsafe.Pointer, scounts, sdispls *C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, rdispls *C.int, rtype C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Neighbor_alltoallv_init", &mpirc)
	return initColl("MPI_Neighbor_alltoallv_init", comm, req, func() C.int {
		return PMPI_Neighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm)
	})
}

//export PMPI_Ineighbor_alltoallw
func PMPI_Ineighbor_alltoallw(sbuf unsafe.Pointer, scounts *C.int, sdispls *C.MPI_Aint, stypes *C.MPI_Datatype, rbuf unsafe.Pointer, rcounts *C.int, rdispls *C.MPI_Aint, rtypes *C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ineighbor_alltoallw", &mpirc)
	return startNBC("MPI_Ineighbor_alltoallw", comm, req, func() C.int {
		return PMPI_Neighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm)
	})
}

//export PMPI_Neighbor_alltoallw_init
func PMPI_Neighbor_alltoallw_init(sbuf unsafe.Pointer, scounts *C.int, sdispls *C.MPI_Aint, stypes *C.MPI_Datatype, rbuf unsafe.Pointer, rcounts *C.int, rdispls *C.MPI_Aint, rtypes *C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Neighbor_alltoallw_init", &mpirc)
	return initColl("MPI_Neighbor_alltoallw_init", comm, req, func() C.int {
		return PMPI_Neighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm)
	})
}
