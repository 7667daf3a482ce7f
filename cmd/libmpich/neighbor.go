package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// Neighbourhood collectives (MPI 3.0, section 7.6) on Cartesian, graph and
// distributed-graph communicators. Each rank posts a receive per in-edge
// and a send per out-edge on a communicator duplicated from the topology
// one the first time (so that they never match the program's own
// messages), then waits: a halo exchange costs one message per edge, not
// an all-to-all. On a graph, messages between one pair of ranks match in
// edge order. On a Cartesian grid each message's tag names its direction,
// so that where both neighbours are one rank (a periodic dimension of two)
// the block sent towards the positive side lands in the receiver's slot
// for its negative neighbour, as in MPICH.

// neighbors returns the in-neighbours (sources) and out-neighbours
// (destinations) of this rank in the order MPI fixes for the topology:
// for a Cartesian one, per dimension the negative then the positive
// neighbour (MPI_PROC_NULL off a non-periodic edge), both ways.
func neighbors(ce *commEntry) (srcs, dsts []int, err error) {
	me := ce.c.Rank()
	switch {
	case ce.cart != nil:
		t := ce.cart
		for d := range t.dims {
			for _, step := range [2]int{-1, 1} {
				c := t.coords(me)
				c[d] += step
				r, ok := t.rank(c)
				if !ok {
					r = procNull
				}
				srcs = append(srcs, r)
			}
		}
		return srcs, srcs, nil
	case ce.graph != nil:
		if me >= len(ce.graph.index) {
			return nil, nil, nil
		}
		nb := ce.graph.neighbors(me)
		return nb, nb, nil
	case ce.dist != nil:
		return ce.dist.sources, ce.dist.dests, nil
	}
	return nil, nil, errorf(errTopology, "communicator %#x has no topology", uint32(ce.h))
}

// neighborComm returns the communicator the neighbourhood collectives of
// ce use, duplicating it the first time. Neighbourhood collectives are
// collective over ce and run in its collective queue, so every rank makes
// the duplicate at the same point of its collective sequence.
func (ce *commEntry) neighborComm() (*mplite.Comm, error) {
	if ce.nbr == nil {
		c, err := ce.c.Dup()
		if err != nil {
			return nil, err
		}
		ce.nbr = c
	}
	return ce.nbr, nil
}

// exchange sends sends[i] to dsts[i] and receives recvs[i] from srcs[i]
// (MPI_PROC_NULL entries do nothing), unpacking each receive.
func (ce *commEntry) exchange(sends []tbuf, dsts []int, recvs []tbuf, srcs []int) error {
	// Cartesian: block i goes in direction i (2d negative, 2d+1 positive
	// along dimension d), and slot i receives what its neighbour sent in
	// the opposite direction, i^1.
	sendTag, recvTag := func(int) int { return 0 }, func(int) int { return 0 }
	if ce.cart != nil {
		sendTag, recvTag = func(i int) int { return i }, func(i int) int { return i ^ 1 }
	}
	nc, err := ce.neighborComm()
	if err != nil {
		return err
	}
	rreqs := make([]*mplite.Request, len(srcs))
	sreqs := make([]*mplite.Request, len(dsts))
	abandon := func(err error) error {
		for _, r := range append(rreqs, sreqs...) {
			if r != nil && !r.Cancel() {
				_, _ = r.Wait()
			}
		}
		return err
	}
	for i, s := range srcs {
		if s == procNull {
			continue
		}
		if rreqs[i], err = nc.Irecv(recvs[i].b, s, recvTag(i)); err != nil {
			return abandon(err)
		}
	}
	for i, d := range dsts {
		if d == procNull {
			continue
		}
		if sreqs[i], err = nc.Isend(sends[i].b, d, sendTag(i)); err != nil {
			return abandon(err)
		}
	}
	var first error
	for i, r := range rreqs {
		if r == nil {
			continue
		}
		st, err := r.Wait()
		if err != nil && first == nil {
			first = err
		}
		recvs[i].unpack(st.Count)
	}
	for _, r := range sreqs {
		if r == nil {
			continue
		}
		if _, err := r.Wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// typeExtent returns the extent of dt in bytes.
func typeExtent(dt C.MPI_Datatype) (int64, error) {
	if isBuiltin(dt) {
		n, err := typeSize(dt)
		return int64(n), err
	}
	l, err := commLayout(dt)
	if err != nil {
		return 0, err
	}
	return l.extent(), nil
}

// block is one neighbour's part of a neighbourhood collective's buffer:
// count elements of dt at p.
type block struct {
	p     unsafe.Pointer
	count C.int
	dt    C.MPI_Datatype
}

// uniform returns n blocks of count elements of dt, one after another.
func uniform(p unsafe.Pointer, n int, count C.int, dt C.MPI_Datatype) ([]block, error) {
	ext, err := typeExtent(dt)
	if err != nil {
		return nil, err
	}
	if count < 0 {
		return nil, errorf(errCount, "negative count %d", int(count))
	}
	bs := make([]block, n)
	for i := range bs {
		bs[i] = block{unsafe.Add(p, int64(i)*int64(count)*ext), count, dt}
	}
	return bs, nil
}

// varying returns n blocks with their own counts and displacements, in
// elements of dt.
func varying(p unsafe.Pointer, n int, counts, displs *C.int, dt C.MPI_Datatype) ([]block, error) {
	ext, err := typeExtent(dt)
	if err != nil {
		return nil, err
	}
	cs, ds := cInts(counts, n), cInts(displs, n)
	if len(cs) != n || len(ds) != n {
		return nil, errorf(errArg, "NULL counts or displacements")
	}
	bs := make([]block, n)
	for i := range bs {
		bs[i] = block{unsafe.Add(p, int64(ds[i])*ext), cs[i], dt}
	}
	return bs, nil
}

// typed returns n blocks with their own counts, byte displacements and
// datatypes (the w forms).
func typed(p unsafe.Pointer, n int, counts *C.int, displs *C.MPI_Aint, types *C.MPI_Datatype) ([]block, error) {
	cs, ds := cInts(counts, n), cAints(displs, n)
	if len(cs) != n || len(ds) != n || (n > 0 && types == nil) {
		return nil, errorf(errArg, "NULL counts, displacements or types")
	}
	ts := unsafe.Slice(types, n)
	bs := make([]block, n)
	for i := range bs {
		bs[i] = block{unsafe.Add(p, ds[i]), cs[i], ts[i]}
	}
	return bs, nil
}

// neighborColl runs one neighbourhood collective: sendBlocks and
// recvBlocks build the blocks for the rank's out- and in-degree.
func neighborColl(fn string, comm C.MPI_Comm, sendBlocks, recvBlocks func(n int) ([]block, error)) C.int {
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	srcs, dsts, err := neighbors(ce)
	if err != nil {
		return retc(comm, fn, err)
	}
	sb, err := sendBlocks(len(dsts))
	if err != nil {
		return retc(comm, fn, err)
	}
	rb, err := recvBlocks(len(srcs))
	if err != nil {
		return retc(comm, fn, err)
	}
	sends, recvs := make([]tbuf, len(sb)), make([]tbuf, len(rb))
	defer func() {
		for _, t := range append(sends, recvs...) {
			t.release()
		}
	}()
	for i, b := range sb {
		if sends[i], err = collBuf(b.p, b.count, b.dt); err != nil {
			return retc(comm, fn, err)
		}
	}
	for i, b := range rb {
		if recvs[i], err = typedBuf(b.p, b.count, b.dt); err != nil {
			return retc(comm, fn, err)
		}
	}
	return retc(comm, fn, ce.coll(func() error { return ce.exchange(sends, dsts, recvs, srcs) }))
}

// same repeats one block for every out-neighbour (the allgather forms).
func same(p unsafe.Pointer, count C.int, dt C.MPI_Datatype) func(n int) ([]block, error) {
	return func(n int) ([]block, error) {
		if count < 0 {
			return nil, errorf(errCount, "negative count %d", int(count))
		}
		bs := make([]block, n)
		for i := range bs {
			bs[i] = block{p, count, dt}
		}
		return bs, nil
	}
}

//export PMPI_Neighbor_allgather
func PMPI_Neighbor_allgather(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int,
	rtype C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Neighbor_allgather", &mpirc)
	return neighborColl("MPI_Neighbor_allgather", comm, same(sbuf, scount, stype),
		func(n int) ([]block, error) { return uniform(rbuf, n, rcount, rtype) })
}

//export PMPI_Neighbor_allgatherv
func PMPI_Neighbor_allgatherv(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, displs *C.int,
	rtype C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Neighbor_allgatherv", &mpirc)
	return neighborColl("MPI_Neighbor_allgatherv", comm, same(sbuf, scount, stype),
		func(n int) ([]block, error) { return varying(rbuf, n, rcounts, displs, rtype) })
}

//export PMPI_Neighbor_alltoall
func PMPI_Neighbor_alltoall(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int,
	rtype C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Neighbor_alltoall", &mpirc)
	return neighborColl("MPI_Neighbor_alltoall", comm,
		func(n int) ([]block, error) { return uniform(sbuf, n, scount, stype) },
		func(n int) ([]block, error) { return uniform(rbuf, n, rcount, rtype) })
}

//export PMPI_Neighbor_alltoallv
func PMPI_Neighbor_alltoallv(sbuf unsafe.Pointer, scounts, sdispls *C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts, rdispls *C.int, rtype C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Neighbor_alltoallv", &mpirc)
	return neighborColl("MPI_Neighbor_alltoallv", comm,
		func(n int) ([]block, error) { return varying(sbuf, n, scounts, sdispls, stype) },
		func(n int) ([]block, error) { return varying(rbuf, n, rcounts, rdispls, rtype) })
}

//export PMPI_Neighbor_alltoallw
func PMPI_Neighbor_alltoallw(sbuf unsafe.Pointer, scounts *C.int, sdispls *C.MPI_Aint, stypes *C.MPI_Datatype, rbuf unsafe.Pointer,
	rcounts *C.int, rdispls *C.MPI_Aint, rtypes *C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Neighbor_alltoallw", &mpirc)
	return neighborColl("MPI_Neighbor_alltoallw", comm,
		func(n int) ([]block, error) { return typed(sbuf, n, scounts, sdispls, stypes) },
		func(n int) ([]block, error) { return typed(rbuf, n, rcounts, rdispls, rtypes) })
}
