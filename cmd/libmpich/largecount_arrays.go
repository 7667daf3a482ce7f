package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"math"
	"unsafe"
)

// The large-count (_c) forms whose counts come in arrays: the vector
// collectives (blocking, nonblocking and persistent), the indexed, struct
// and subarray constructors. Each converts its arrays to the int form's,
// refusing an entry beyond the range of int with MPI_ERR_COUNT, and calls
// the int form. Only the arrays the int form would read are converted (a
// root's arrays at the root, none for MPI_IN_PLACE sends), with the length
// it would read them at: the nonblocking and persistent forms capture the
// converted arrays, which then live as long as their requests.

// arrays converts one call's arrays; the first entry out of range is kept
// as the call's error.
type arrays struct{ err error }

func (a *arrays) fits(v int64, what string, i int) bool {
	if a.err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		a.err = errorf(errCount, "%s[%d] = %d: beyond the largest int, which this library does not support", what, i, v)
	}
	return a.err == nil
}

// counts returns n MPI_Count entries at p as ints (nil for a NULL p, which
// the int form reports).
func (a *arrays) counts(p *C.MPI_Count, n int) *C.int { return toInts(a, p, n, "counts") }

// displs returns n MPI_Aint displacements at p as ints.
func (a *arrays) displs(p *C.MPI_Aint, n int) *C.int { return toInts(a, p, n, "displacements") }

// toInts converts n entries at p (MPI_Count and MPI_Aint are both C's
// long) to ints.
func toInts(a *arrays, p *C.long, n int, what string) *C.int {
	if p == nil || n < 0 || a.err != nil { // after an error, n may be anything
		return nil
	}
	out := make([]C.int, n+1) // +1: a valid pointer for n = 0
	for i, v := range unsafe.Slice(p, n) {
		if !a.fits(int64(v), what, i) {
			return nil
		}
		out[i] = C.int(v)
	}
	return &out[0]
}

// addrs returns n MPI_Count byte displacements at p as MPI_Aint (the same
// width: nothing to refuse).
func (a *arrays) addrs(p *C.MPI_Count, n int) *C.MPI_Aint {
	if p == nil || n < 0 || a.err != nil { // after an error, n may be anything
		return nil
	}
	out := make([]C.MPI_Aint, n+1)
	for i, v := range unsafe.Slice(p, n) {
		out[i] = C.MPI_Aint(v)
	}
	return &out[0]
}

// shape returns the size of comm and this rank in it; ok is false when the
// int form will refuse the communicator itself (then no array is read).
func shape(comm C.MPI_Comm) (n, rank int, ok bool) {
	ce, err := lib.comm(comm)
	if err != nil || ce.c.IsInter() {
		return 0, 0, false
	}
	return ce.c.Size(), ce.c.Rank(), true
}

// degrees returns how many blocks this rank receives and sends in a
// neighbourhood collective on comm (-1 each if comm has no topology).
func degrees(comm C.MPI_Comm) (in, out int) {
	ce, err := lib.comm(comm)
	if err != nil {
		return -1, -1
	}
	srcs, dsts, err := neighbors(ce)
	if err != nil {
		return -1, -1
	}
	return len(srcs), len(dsts)
}

// scalar converts a scalar count of a _c call.
func (a *arrays) scalar(v C.MPI_Count) C.int {
	a.fits(int64(v), "count", 0)
	return C.int(v)
}

// rootArrays converts the counts and displacements only the root reads.
func (a *arrays) rootArrays(counts *C.MPI_Count, displs *C.MPI_Aint, root C.int, comm C.MPI_Comm) (*C.int, *C.int) {
	n, rank, ok := shape(comm)
	if !ok || rank != int(root) {
		return nil, nil
	}
	return a.counts(counts, n), a.displs(displs, n)
}

// allArrays converts counts and displacements every rank reads, n of each.
func (a *arrays) allArrays(counts *C.MPI_Count, displs *C.MPI_Aint, comm C.MPI_Comm) (*C.int, *C.int) {
	n, _, ok := shape(comm)
	if !ok {
		return nil, nil
	}
	return a.counts(counts, n), a.displs(displs, n)
}

// ---- Gatherv ----

func gathervC(fn string, scount C.MPI_Count, rcounts *C.MPI_Count, displs *C.MPI_Aint, root C.int, comm C.MPI_Comm,
	call func(sc C.int, rc, rd *C.int) C.int) C.int {
	var a arrays
	sc := a.scalar(scount)
	rc, rd := a.rootArrays(rcounts, displs, root, comm)
	if a.err != nil {
		return retc(comm, fn, a.err)
	}
	return call(sc, rc, rd)
}

//export PMPI_Gatherv_c
func PMPI_Gatherv_c(sbuf unsafe.Pointer, scount C.MPI_Count, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts *C.MPI_Count,
	displs *C.MPI_Aint, rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Gatherv_c", &mpirc)
	return gathervC("MPI_Gatherv_c", scount, rcounts, displs, root, comm, func(sc C.int, rc, rd *C.int) C.int {
		return PMPI_Gatherv(sbuf, sc, stype, rbuf, rc, rd, rtype, root, comm)
	})
}

//export PMPI_Igatherv_c
func PMPI_Igatherv_c(sbuf unsafe.Pointer, scount C.MPI_Count, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts *C.MPI_Count,
	displs *C.MPI_Aint, rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Igatherv_c", &mpirc)
	return gathervC("MPI_Igatherv_c", scount, rcounts, displs, root, comm, func(sc C.int, rc, rd *C.int) C.int {
		return PMPI_Igatherv(sbuf, sc, stype, rbuf, rc, rd, rtype, root, comm, req)
	})
}

//export PMPI_Gatherv_init_c
func PMPI_Gatherv_init_c(sbuf unsafe.Pointer, scount C.MPI_Count, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts *C.MPI_Count,
	displs *C.MPI_Aint, rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Gatherv_init_c", &mpirc)
	return gathervC("MPI_Gatherv_init_c", scount, rcounts, displs, root, comm, func(sc C.int, rc, rd *C.int) C.int {
		return PMPI_Gatherv_init(sbuf, sc, stype, rbuf, rc, rd, rtype, root, comm, info, req)
	})
}

// ---- Scatterv ----

func scattervC(fn string, scounts *C.MPI_Count, displs *C.MPI_Aint, rcount C.MPI_Count, root C.int, comm C.MPI_Comm,
	call func(sc, sd *C.int, rc C.int) C.int) C.int {
	var a arrays
	rc := a.scalar(rcount)
	sc, sd := a.rootArrays(scounts, displs, root, comm)
	if a.err != nil {
		return retc(comm, fn, a.err)
	}
	return call(sc, sd, rc)
}

//export PMPI_Scatterv_c
func PMPI_Scatterv_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, displs *C.MPI_Aint, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcount C.MPI_Count, rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Scatterv_c", &mpirc)
	return scattervC("MPI_Scatterv_c", scounts, displs, rcount, root, comm, func(sc, sd *C.int, rc C.int) C.int {
		return PMPI_Scatterv(sbuf, sc, sd, stype, rbuf, rc, rtype, root, comm)
	})
}

//export PMPI_Iscatterv_c
func PMPI_Iscatterv_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, displs *C.MPI_Aint, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcount C.MPI_Count, rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Iscatterv_c", &mpirc)
	return scattervC("MPI_Iscatterv_c", scounts, displs, rcount, root, comm, func(sc, sd *C.int, rc C.int) C.int {
		return PMPI_Iscatterv(sbuf, sc, sd, stype, rbuf, rc, rtype, root, comm, req)
	})
}

//export PMPI_Scatterv_init_c
func PMPI_Scatterv_init_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, displs *C.MPI_Aint, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcount C.MPI_Count, rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Scatterv_init_c", &mpirc)
	return scattervC("MPI_Scatterv_init_c", scounts, displs, rcount, root, comm, func(sc, sd *C.int, rc C.int) C.int {
		return PMPI_Scatterv_init(sbuf, sc, sd, stype, rbuf, rc, rtype, root, comm, info, req)
	})
}

// ---- Allgatherv ----

func allgathervC(fn string, scount C.MPI_Count, rcounts *C.MPI_Count, displs *C.MPI_Aint, comm C.MPI_Comm,
	call func(sc C.int, rc, rd *C.int) C.int) C.int {
	var a arrays
	sc := a.scalar(scount)
	rc, rd := a.allArrays(rcounts, displs, comm)
	if a.err != nil {
		return retc(comm, fn, a.err)
	}
	return call(sc, rc, rd)
}

//export PMPI_Allgatherv_c
func PMPI_Allgatherv_c(sbuf unsafe.Pointer, scount C.MPI_Count, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts *C.MPI_Count,
	displs *C.MPI_Aint, rtype C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Allgatherv_c", &mpirc)
	return allgathervC("MPI_Allgatherv_c", scount, rcounts, displs, comm, func(sc C.int, rc, rd *C.int) C.int {
		return PMPI_Allgatherv(sbuf, sc, stype, rbuf, rc, rd, rtype, comm)
	})
}

//export PMPI_Iallgatherv_c
func PMPI_Iallgatherv_c(sbuf unsafe.Pointer, scount C.MPI_Count, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts *C.MPI_Count,
	displs *C.MPI_Aint, rtype C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Iallgatherv_c", &mpirc)
	return allgathervC("MPI_Iallgatherv_c", scount, rcounts, displs, comm, func(sc C.int, rc, rd *C.int) C.int {
		return PMPI_Iallgatherv(sbuf, sc, stype, rbuf, rc, rd, rtype, comm, req)
	})
}

//export PMPI_Allgatherv_init_c
func PMPI_Allgatherv_init_c(sbuf unsafe.Pointer, scount C.MPI_Count, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts *C.MPI_Count,
	displs *C.MPI_Aint, rtype C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Allgatherv_init_c", &mpirc)
	return allgathervC("MPI_Allgatherv_init_c", scount, rcounts, displs, comm, func(sc C.int, rc, rd *C.int) C.int {
		return PMPI_Allgatherv_init(sbuf, sc, stype, rbuf, rc, rd, rtype, comm, info, req)
	})
}

// ---- Alltoallv and Alltoallw ----

func alltoallvC(fn string, sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, rcounts *C.MPI_Count, rdispls *C.MPI_Aint,
	comm C.MPI_Comm, call func(sc, sd, rc, rd *C.int) C.int) C.int {
	var a arrays
	var sc, sd *C.int
	if !isInPlace(sbuf) { // MPI_IN_PLACE: the send arrays are not read
		sc, sd = a.allArrays(scounts, sdispls, comm)
	}
	rc, rd := a.allArrays(rcounts, rdispls, comm)
	if a.err != nil {
		return retc(comm, fn, a.err)
	}
	return call(sc, sd, rc, rd)
}

//export PMPI_Alltoallv_c
func PMPI_Alltoallv_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, rtype C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Alltoallv_c", &mpirc)
	return alltoallvC("MPI_Alltoallv_c", sbuf, scounts, sdispls, rcounts, rdispls, comm, func(sc, sd, rc, rd *C.int) C.int {
		return PMPI_Alltoallv(sbuf, sc, sd, stype, rbuf, rc, rd, rtype, comm)
	})
}

//export PMPI_Ialltoallv_c
func PMPI_Ialltoallv_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, rtype C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ialltoallv_c", &mpirc)
	return alltoallvC("MPI_Ialltoallv_c", sbuf, scounts, sdispls, rcounts, rdispls, comm, func(sc, sd, rc, rd *C.int) C.int {
		return PMPI_Ialltoallv(sbuf, sc, sd, stype, rbuf, rc, rd, rtype, comm, req)
	})
}

//export PMPI_Alltoallv_init_c
func PMPI_Alltoallv_init_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, rtype C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Alltoallv_init_c", &mpirc)
	return alltoallvC("MPI_Alltoallv_init_c", sbuf, scounts, sdispls, rcounts, rdispls, comm, func(sc, sd, rc, rd *C.int) C.int {
		return PMPI_Alltoallv_init(sbuf, sc, sd, stype, rbuf, rc, rd, rtype, comm, info, req)
	})
}

//export PMPI_Alltoallw_c
func PMPI_Alltoallw_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, stypes *C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, rtypes *C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Alltoallw_c", &mpirc)
	return alltoallvC("MPI_Alltoallw_c", sbuf, scounts, sdispls, rcounts, rdispls, comm, func(sc, sd, rc, rd *C.int) C.int {
		return PMPI_Alltoallw(sbuf, sc, sd, stypes, rbuf, rc, rd, rtypes, comm)
	})
}

//export PMPI_Ialltoallw_c
func PMPI_Ialltoallw_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, stypes *C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, rtypes *C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ialltoallw_c", &mpirc)
	return alltoallvC("MPI_Ialltoallw_c", sbuf, scounts, sdispls, rcounts, rdispls, comm, func(sc, sd, rc, rd *C.int) C.int {
		return PMPI_Ialltoallw(sbuf, sc, sd, stypes, rbuf, rc, rd, rtypes, comm, req)
	})
}

//export PMPI_Alltoallw_init_c
func PMPI_Alltoallw_init_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, stypes *C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, rtypes *C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Alltoallw_init_c", &mpirc)
	return alltoallvC("MPI_Alltoallw_init_c", sbuf, scounts, sdispls, rcounts, rdispls, comm, func(sc, sd, rc, rd *C.int) C.int {
		return PMPI_Alltoallw_init(sbuf, sc, sd, stypes, rbuf, rc, rd, rtypes, comm, info, req)
	})
}

// ---- Reduce_scatter ----

func reduceScatterC(fn string, counts *C.MPI_Count, comm C.MPI_Comm, call func(rc *C.int) C.int) C.int {
	var a arrays
	rc, _ := a.allArrays(counts, nil, comm)
	if a.err != nil {
		return retc(comm, fn, a.err)
	}
	return call(rc)
}

//export PMPI_Reduce_scatter_c
func PMPI_Reduce_scatter_c(sbuf, rbuf unsafe.Pointer, counts *C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Reduce_scatter_c", &mpirc)
	return reduceScatterC("MPI_Reduce_scatter_c", counts, comm, func(rc *C.int) C.int {
		return PMPI_Reduce_scatter(sbuf, rbuf, rc, dt, op, comm)
	})
}

//export PMPI_Ireduce_scatter_c
func PMPI_Ireduce_scatter_c(sbuf, rbuf unsafe.Pointer, counts *C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm,
	req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ireduce_scatter_c", &mpirc)
	return reduceScatterC("MPI_Ireduce_scatter_c", counts, comm, func(rc *C.int) C.int {
		return PMPI_Ireduce_scatter(sbuf, rbuf, rc, dt, op, comm, req)
	})
}

//export PMPI_Reduce_scatter_init_c
func PMPI_Reduce_scatter_init_c(sbuf, rbuf unsafe.Pointer, counts *C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm,
	info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Reduce_scatter_init_c", &mpirc)
	return reduceScatterC("MPI_Reduce_scatter_init_c", counts, comm, func(rc *C.int) C.int {
		return PMPI_Reduce_scatter_init(sbuf, rbuf, rc, dt, op, comm, info, req)
	})
}

// ---- neighbourhood collectives ----

// neighborC converts the send arrays (one entry per out-neighbour) and the
// receive arrays (one per in-neighbour) a neighbourhood collective reads;
// sdispls and rdispls of nil are left alone (Alltoallw's are MPI_Aint in
// both forms).
func neighborC(fn string, comm C.MPI_Comm, scount C.MPI_Count, scounts *C.MPI_Count, sdispls *C.MPI_Aint,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, call func(sc C.int, scs, sds, rcs, rds *C.int) C.int) C.int {
	var a arrays
	sc := a.scalar(scount)
	in, out := degrees(comm)
	scs, sds := a.counts(scounts, out), a.displs(sdispls, out)
	rcs, rds := a.counts(rcounts, in), a.displs(rdispls, in)
	if a.err != nil {
		return retc(comm, fn, a.err)
	}
	return call(sc, scs, sds, rcs, rds)
}

//export PMPI_Neighbor_allgatherv_c
func PMPI_Neighbor_allgatherv_c(sbuf unsafe.Pointer, scount C.MPI_Count, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, displs *C.MPI_Aint, rtype C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Neighbor_allgatherv_c", &mpirc)
	return neighborC("MPI_Neighbor_allgatherv_c", comm, scount, nil, nil, rcounts, displs, func(sc C.int, _, _, rc, rd *C.int) C.int {
		return PMPI_Neighbor_allgatherv(sbuf, sc, stype, rbuf, rc, rd, rtype, comm)
	})
}

//export PMPI_Ineighbor_allgatherv_c
func PMPI_Ineighbor_allgatherv_c(sbuf unsafe.Pointer, scount C.MPI_Count, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, displs *C.MPI_Aint, rtype C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ineighbor_allgatherv_c", &mpirc)
	return neighborC("MPI_Ineighbor_allgatherv_c", comm, scount, nil, nil, rcounts, displs, func(sc C.int, _, _, rc, rd *C.int) C.int {
		return PMPI_Ineighbor_allgatherv(sbuf, sc, stype, rbuf, rc, rd, rtype, comm, req)
	})
}

//export PMPI_Neighbor_allgatherv_init_c
func PMPI_Neighbor_allgatherv_init_c(sbuf unsafe.Pointer, scount C.MPI_Count, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, displs *C.MPI_Aint, rtype C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Neighbor_allgatherv_init_c", &mpirc)
	return neighborC("MPI_Neighbor_allgatherv_init_c", comm, scount, nil, nil, rcounts, displs, func(sc C.int, _, _, rc, rd *C.int) C.int {
		return PMPI_Neighbor_allgatherv_init(sbuf, sc, stype, rbuf, rc, rd, rtype, comm, info, req)
	})
}

//export PMPI_Neighbor_alltoallv_c
func PMPI_Neighbor_alltoallv_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, rtype C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Neighbor_alltoallv_c", &mpirc)
	return neighborC("MPI_Neighbor_alltoallv_c", comm, 0, scounts, sdispls, rcounts, rdispls, func(_ C.int, sc, sd, rc, rd *C.int) C.int {
		return PMPI_Neighbor_alltoallv(sbuf, sc, sd, stype, rbuf, rc, rd, rtype, comm)
	})
}

//export PMPI_Ineighbor_alltoallv_c
func PMPI_Ineighbor_alltoallv_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, rtype C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ineighbor_alltoallv_c", &mpirc)
	return neighborC("MPI_Ineighbor_alltoallv_c", comm, 0, scounts, sdispls, rcounts, rdispls, func(_ C.int, sc, sd, rc, rd *C.int) C.int {
		return PMPI_Ineighbor_alltoallv(sbuf, sc, sd, stype, rbuf, rc, rd, rtype, comm, req)
	})
}

//export PMPI_Neighbor_alltoallv_init_c
func PMPI_Neighbor_alltoallv_init_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, rtype C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Neighbor_alltoallv_init_c", &mpirc)
	return neighborC("MPI_Neighbor_alltoallv_init_c", comm, 0, scounts, sdispls, rcounts, rdispls, func(_ C.int, sc, sd, rc, rd *C.int) C.int {
		return PMPI_Neighbor_alltoallv_init(sbuf, sc, sd, stype, rbuf, rc, rd, rtype, comm, info, req)
	})
}

//export PMPI_Neighbor_alltoallw_c
func PMPI_Neighbor_alltoallw_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, stypes *C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, rtypes *C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Neighbor_alltoallw_c", &mpirc)
	return neighborC("MPI_Neighbor_alltoallw_c", comm, 0, scounts, nil, rcounts, nil, func(_ C.int, sc, _, rc, _ *C.int) C.int {
		return PMPI_Neighbor_alltoallw(sbuf, sc, sdispls, stypes, rbuf, rc, rdispls, rtypes, comm)
	})
}

//export PMPI_Ineighbor_alltoallw_c
func PMPI_Ineighbor_alltoallw_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, stypes *C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, rtypes *C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ineighbor_alltoallw_c", &mpirc)
	return neighborC("MPI_Ineighbor_alltoallw_c", comm, 0, scounts, nil, rcounts, nil, func(_ C.int, sc, _, rc, _ *C.int) C.int {
		return PMPI_Ineighbor_alltoallw(sbuf, sc, sdispls, stypes, rbuf, rc, rdispls, rtypes, comm, req)
	})
}

//export PMPI_Neighbor_alltoallw_init_c
func PMPI_Neighbor_alltoallw_init_c(sbuf unsafe.Pointer, scounts *C.MPI_Count, sdispls *C.MPI_Aint, stypes *C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.MPI_Count, rdispls *C.MPI_Aint, rtypes *C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Neighbor_alltoallw_init_c", &mpirc)
	return neighborC("MPI_Neighbor_alltoallw_init_c", comm, 0, scounts, nil, rcounts, nil, func(_ C.int, sc, _, rc, _ *C.int) C.int {
		return PMPI_Neighbor_alltoallw_init(sbuf, sc, sdispls, stypes, rbuf, rc, rdispls, rtypes, comm, info, req)
	})
}
