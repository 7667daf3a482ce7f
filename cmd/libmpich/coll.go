package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"unsafe"
)

func isInPlace(p unsafe.Pointer) bool { return uintptr(p) == inPlace }

// collBuf views count elements of dt at p as packed bytes, with the
// staging copy (derived datatypes) filled: for send buffers, and receive
// buffers that MPI_IN_PLACE also reads. unpack it after the collective.
func collBuf(p unsafe.Pointer, count C.int, dt C.MPI_Datatype) (tbuf, error) {
	t, err := typedBuf(p, count, dt)
	if err != nil {
		return tbuf{}, err
	}
	t.pack()
	return t, nil
}

// perRank is count elements of dt for each of n ranks at p (a root's or
// an allgather's receive buffer), packed.
func perRank(p unsafe.Pointer, n int, count C.int, dt C.MPI_Datatype) (tbuf, int, error) {
	if count < 0 {
		return tbuf{}, 0, errorf(errCount, "negative count %d", int(count))
	}
	if int64(n)*int64(count) > maxCount {
		return tbuf{}, 0, errorf(errCount, "%d ranks of %d elements", n, int(count))
	}
	t, err := collBuf(p, C.int(n)*count, dt)
	if err != nil {
		return tbuf{}, 0, err
	}
	return t, len(t.b) / max(n, 1), nil
}

// vecSend is the send buffer of a vector collective (one block, any
// datatype), packed.
func vecSend(p unsafe.Pointer, count C.int, dt C.MPI_Datatype) ([]byte, error) {
	t, err := collBuf(p, count, dt)
	return t.b, err
}

// vecArgs converts counts and displacements in elements of dt (n of each)
// to bytes.
func vecArgs(n int, counts, displs *C.int, dt C.MPI_Datatype) ([]int, []int, error) {
	size, err := typeSize(dt)
	if err != nil {
		return nil, nil, err
	}
	cs, ds := cInts(counts, n), cInts(displs, n)
	if len(cs) != n || len(ds) != n {
		return nil, nil, errorf(errArg, "NULL counts or displacements")
	}
	bc, bd := make([]int, n), make([]int, n)
	for i := range n {
		if cs[i] < 0 {
			return nil, nil, errorf(errCount, "negative count %d for rank %d", int(cs[i]), i)
		}
		bc[i], bd[i] = int(cs[i])*size, int(ds[i])*size
	}
	return bc, bd, nil
}

// extent returns the bytes a vector layout spans.
func extent(counts, displs []int) int {
	n := 0
	for i := range counts {
		if counts[i] > 0 {
			n = max(n, displs[i]+counts[i])
		}
	}
	return n
}

func checkRoot(root C.int, size int) error {
	if root < 0 || int(root) >= size {
		return errorf(errRoot, "invalid root %d (communicator of %d)", int(root), size)
	}
	return nil
}

//export PMPI_Barrier
func PMPI_Barrier(comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Barrier", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Barrier", err)
	}
	return retc(comm, "MPI_Barrier", ce.coll(func() error { return ce.c.Barrier() }))
}

//export PMPI_Bcast
func PMPI_Bcast(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, root C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Bcast", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Bcast", err)
	}
	if err := checkRoot(root, ce.c.Size()); err != nil {
		return retc(comm, "MPI_Bcast", err)
	}
	b, err := collBuf(buf, count, dt)
	if err != nil {
		return retc(comm, "MPI_Bcast", err)
	}
	err = ce.coll(func() error { return ce.c.Bcast(b.b, int(root)) })
	b.unpack(len(b.b))
	return retc(comm, "MPI_Bcast", err)
}

//export PMPI_Reduce
func PMPI_Reduce(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, root C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Reduce", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Reduce", err)
	}
	if err := checkRoot(root, ce.c.Size()); err != nil {
		return retc(comm, "MPI_Reduce", err)
	}
	red, err := reducer(op, dt)
	if err != nil {
		return retc(comm, "MPI_Reduce", err)
	}
	isRoot := ce.c.Rank() == int(root)
	var send, recv tbuf
	if isRoot {
		if recv, err = collBuf(rbuf, count, dt); err != nil {
			return retc(comm, "MPI_Reduce", err)
		}
	}
	if isRoot && isInPlace(sbuf) {
		send.b = append([]byte(nil), recv.b...)
	} else if send, err = collBuf(sbuf, count, dt); err != nil {
		return retc(comm, "MPI_Reduce", err)
	}
	err = ce.coll(func() error { return ce.c.Reduce(send.b, recv.b, red, int(root)) })
	recv.unpack(len(recv.b))
	return retc(comm, "MPI_Reduce", err)
}

//export PMPI_Allreduce
func PMPI_Allreduce(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Allreduce", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Allreduce", err)
	}
	red, err := reducer(op, dt)
	if err != nil {
		return retc(comm, "MPI_Allreduce", err)
	}
	recv, err := collBuf(rbuf, count, dt)
	if err != nil {
		return retc(comm, "MPI_Allreduce", err)
	}
	send := recv // MPI_IN_PLACE: mplite allows recv to be send
	if !isInPlace(sbuf) {
		if send, err = collBuf(sbuf, count, dt); err != nil {
			return retc(comm, "MPI_Allreduce", err)
		}
	}
	err = ce.coll(func() error { return ce.c.Allreduce(send.b, recv.b, red) })
	recv.unpack(len(recv.b))
	return retc(comm, "MPI_Allreduce", err)
}

func scan(fn string, sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, incl bool) C.int {
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	red, err := reducer(op, dt)
	if err != nil {
		return retc(comm, fn, err)
	}
	recv, err := collBuf(rbuf, count, dt)
	if err != nil {
		return retc(comm, fn, err)
	}
	var send tbuf
	if isInPlace(sbuf) {
		send.b = append([]byte(nil), recv.b...)
	} else if send, err = collBuf(sbuf, count, dt); err != nil {
		return retc(comm, fn, err)
	}
	if incl {
		err = ce.coll(func() error { return ce.c.Scan(send.b, recv.b, red) })
	} else {
		err = ce.coll(func() error { return ce.c.Exscan(send.b, recv.b, red) })
	}
	recv.unpack(len(recv.b))
	return retc(comm, fn, err)
}

//export PMPI_Scan
func PMPI_Scan(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Scan", &mpirc)
	return scan("MPI_Scan", sbuf, rbuf, count, dt, op, comm, true)
}

//export PMPI_Exscan
func PMPI_Exscan(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Exscan", &mpirc)
	return scan("MPI_Exscan", sbuf, rbuf, count, dt, op, comm, false)
}

//export PMPI_Gather
func PMPI_Gather(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype,
	rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Gather", &mpirc)
	const fn = "MPI_Gather"
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	n, rank := ce.c.Size(), ce.c.Rank()
	if err := checkRoot(root, n); err != nil {
		return retc(comm, fn, err)
	}
	var send, recv tbuf
	if rank == int(root) {
		var m int
		if recv, m, err = perRank(rbuf, n, rcount, rtype); err != nil {
			return retc(comm, fn, err)
		}
		if isInPlace(sbuf) {
			send.b = append([]byte(nil), recv.b[rank*m:][:m]...)
		} else if send, err = collBuf(sbuf, scount, stype); err != nil {
			return retc(comm, fn, err)
		} else if len(send.b) != m {
			return retc(comm, fn, errorf(errTruncate, "root receives %d bytes per rank, its own send is %d", m, len(send.b)))
		}
	} else if send, err = collBuf(sbuf, scount, stype); err != nil {
		return retc(comm, fn, err)
	}
	err = ce.coll(func() error { return ce.c.Gather(send.b, recv.b, int(root)) })
	recv.unpack(len(recv.b))
	return retc(comm, fn, err)
}

//export PMPI_Gatherv
func PMPI_Gatherv(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype,
	rbuf unsafe.Pointer, rcounts, displs *C.int, rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Gatherv", &mpirc)
	const fn = "MPI_Gatherv"
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	n, rank := ce.c.Size(), ce.c.Rank()
	if err := checkRoot(root, n); err != nil {
		return retc(comm, fn, err)
	}
	var send []byte
	var rv vecBuf
	if rank == int(root) {
		if rv, err = vecBufOf(rbuf, n, rcounts, displs, rtype); err != nil {
			return retc(comm, fn, err)
		}
		if isInPlace(sbuf) {
			send = append([]byte(nil), rv.buf[rv.displs[rank]:][:rv.counts[rank]]...)
		} else if send, err = vecSend(sbuf, scount, stype); err != nil {
			rv.release()
			return retc(comm, fn, err)
		}
	} else if send, err = vecSend(sbuf, scount, stype); err != nil {
		return retc(comm, fn, err)
	}
	err = ce.coll(func() error { return ce.c.Gatherv(send, rv.buf, rv.counts, rv.displs, int(root)) })
	rv.finish(err == nil)
	return retc(comm, fn, err)
}

//export PMPI_Scatter
func PMPI_Scatter(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype,
	rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Scatter", &mpirc)
	const fn = "MPI_Scatter"
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	n, rank := ce.c.Size(), ce.c.Rank()
	if err := checkRoot(root, n); err != nil {
		return retc(comm, fn, err)
	}
	var send, recv tbuf
	if rank == int(root) {
		var m int
		if send, m, err = perRank(sbuf, n, scount, stype); err != nil {
			return retc(comm, fn, err)
		}
		if isInPlace(rbuf) {
			recv.b = make([]byte, m) // root's block stays where it is
		} else if recv, err = collBuf(rbuf, rcount, rtype); err != nil {
			return retc(comm, fn, err)
		} else if len(recv.b) != m {
			return retc(comm, fn, errorf(errTruncate, "root sends %d bytes per rank, its own receive is %d", m, len(recv.b)))
		}
	} else if recv, err = collBuf(rbuf, rcount, rtype); err != nil {
		return retc(comm, fn, err)
	}
	err = ce.coll(func() error { return ce.c.Scatter(send.b, recv.b, int(root)) })
	recv.unpack(len(recv.b))
	return retc(comm, fn, err)
}

//export PMPI_Scatterv
func PMPI_Scatterv(sbuf unsafe.Pointer, scounts, displs *C.int, stype C.MPI_Datatype,
	rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Scatterv", &mpirc)
	const fn = "MPI_Scatterv"
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	n, rank := ce.c.Size(), ce.c.Rank()
	if err := checkRoot(root, n); err != nil {
		return retc(comm, fn, err)
	}
	var sv vecBuf
	var rt tbuf
	if rank == int(root) {
		if sv, err = vecBufOf(sbuf, n, scounts, displs, stype); err != nil {
			return retc(comm, fn, err)
		}
		if isInPlace(rbuf) {
			rt.b = make([]byte, sv.counts[rank])
		} else if rt, err = collBuf(rbuf, rcount, rtype); err != nil {
			sv.release()
			return retc(comm, fn, err)
		}
	} else if rt, err = collBuf(rbuf, rcount, rtype); err != nil {
		return retc(comm, fn, err)
	}
	err = ce.coll(func() error { return ce.c.Scatterv(sv.buf, sv.counts, sv.displs, rt.b, int(root)) })
	sv.finish(false)
	rt.unpack(len(rt.b))
	return retc(comm, fn, err)
}

//export PMPI_Allgather
func PMPI_Allgather(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype,
	rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Allgather", &mpirc)
	const fn = "MPI_Allgather"
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	n, rank := ce.c.Size(), ce.c.Rank()
	recv, m, err := perRank(rbuf, n, rcount, rtype)
	if err != nil {
		return retc(comm, fn, err)
	}
	var send tbuf
	if isInPlace(sbuf) {
		send.b = append([]byte(nil), recv.b[rank*m:][:m]...)
	} else if send, err = collBuf(sbuf, scount, stype); err != nil {
		return retc(comm, fn, err)
	} else if len(send.b) != m {
		return retc(comm, fn, errorf(errTruncate, "receiving %d bytes per rank, sending %d", m, len(send.b)))
	}
	err = ce.coll(func() error { return ce.c.Allgather(send.b, recv.b) })
	recv.unpack(len(recv.b))
	return retc(comm, fn, err)
}

//export PMPI_Allgatherv
func PMPI_Allgatherv(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype,
	rbuf unsafe.Pointer, rcounts, displs *C.int, rtype C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Allgatherv", &mpirc)
	const fn = "MPI_Allgatherv"
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	n, rank := ce.c.Size(), ce.c.Rank()
	rv, err := vecBufOf(rbuf, n, rcounts, displs, rtype)
	if err != nil {
		return retc(comm, fn, err)
	}
	var send []byte
	if isInPlace(sbuf) {
		send = append([]byte(nil), rv.buf[rv.displs[rank]:][:rv.counts[rank]]...)
	} else if send, err = vecSend(sbuf, scount, stype); err != nil {
		rv.release()
		return retc(comm, fn, err)
	}
	err = ce.coll(func() error { return ce.c.Allgatherv(send, rv.buf, rv.counts, rv.displs) })
	rv.finish(err == nil)
	return retc(comm, fn, err)
}

//export PMPI_Alltoall
func PMPI_Alltoall(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype,
	rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Alltoall", &mpirc)
	const fn = "MPI_Alltoall"
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	n := ce.c.Size()
	recv, m, err := perRank(rbuf, n, rcount, rtype)
	if err != nil {
		return retc(comm, fn, err)
	}
	var send tbuf
	if isInPlace(sbuf) {
		send.b = append([]byte(nil), recv.b...)
	} else {
		var sm int
		if send, sm, err = perRank(sbuf, n, scount, stype); err != nil {
			return retc(comm, fn, err)
		}
		if sm != m {
			return retc(comm, fn, errorf(errTruncate, "receiving %d bytes per rank, sending %d", m, sm))
		}
	}
	err = ce.coll(func() error { return ce.c.Alltoall(send.b, recv.b) })
	recv.unpack(len(recv.b))
	return retc(comm, fn, err)
}

//export PMPI_Alltoallv
func PMPI_Alltoallv(sbuf unsafe.Pointer, scounts, sdispls *C.int, stype C.MPI_Datatype,
	rbuf unsafe.Pointer, rcounts, rdispls *C.int, rtype C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Alltoallv", &mpirc)
	const fn = "MPI_Alltoallv"
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	n := ce.c.Size()
	rv, err := vecBufOf(rbuf, n, rcounts, rdispls, rtype)
	if err != nil {
		return retc(comm, fn, err)
	}
	var sv vecBuf
	if isInPlace(sbuf) {
		sv = vecBuf{buf: append([]byte(nil), rv.buf...), counts: rv.counts, displs: rv.displs}
	} else if sv, err = vecBufOf(sbuf, n, scounts, sdispls, stype); err != nil {
		rv.release()
		return retc(comm, fn, err)
	}
	err = ce.coll(func() error { return ce.c.Alltoallv(sv.buf, sv.counts, sv.displs, rv.buf, rv.counts, rv.displs) })
	sv.finish(false)
	rv.finish(err == nil)
	return retc(comm, fn, err)
}

// MPI_Alltoallw sends each rank a block of its own datatype at its own
// byte displacement: the blocks are packed into one buffer each way and
// exchanged with mplite's Alltoallv.
//
//export PMPI_Alltoallw
func PMPI_Alltoallw(sbuf unsafe.Pointer, scounts, sdispls *C.int, stypes *C.MPI_Datatype,
	rbuf unsafe.Pointer, rcounts, rdispls *C.int, rtypes *C.MPI_Datatype, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Alltoallw", &mpirc)
	const fn = "MPI_Alltoallw"
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	if isInPlace(sbuf) {
		return retc(comm, fn, errorf(errBuffer, "MPI_IN_PLACE is not supported in MPI_Alltoallw"))
	}
	n := ce.c.Size()
	blocks := func(p unsafe.Pointer, counts, displs *C.int, types *C.MPI_Datatype) ([]tbuf, []int, []int, int, error) {
		cs, ds, ts := cInts(counts, n), cInts(displs, n), unsafe.Slice(types, n)
		bufs, bc, bd := make([]tbuf, n), make([]int, n), make([]int, n)
		off := 0
		for i := 0; i < n; i++ {
			t, err := collBuf(unsafe.Add(p, int(ds[i])), cs[i], ts[i])
			if err != nil {
				return nil, nil, nil, 0, err
			}
			bufs[i], bc[i], bd[i] = t, len(t.b), off
			off += len(t.b)
		}
		return bufs, bc, bd, off, nil
	}
	sbufs, sc, sd, stotal, err := blocks(sbuf, scounts, sdispls, stypes)
	if err != nil {
		return retc(comm, fn, err)
	}
	rbufs, rc, rd, rtotal, err := blocks(rbuf, rcounts, rdispls, rtypes)
	if err != nil {
		return retc(comm, fn, err)
	}
	send, recv := make([]byte, stotal), make([]byte, rtotal)
	for i, t := range sbufs {
		copy(send[sd[i]:], t.b)
	}
	err = ce.coll(func() error { return ce.c.Alltoallv(send, sc, sd, recv, rc, rd) })
	for i, t := range rbufs {
		copy(t.b, recv[rd[i]:rd[i]+rc[i]])
		t.unpack(len(t.b))
	}
	return retc(comm, fn, err)
}
