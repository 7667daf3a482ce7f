package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// Persistent requests (MPI_Send_init and friends) and cancellation.

// persistent is the operation a persistent request starts each time.
type persistent struct {
	kind  int          // opSend, opSsend, opBsend, opRecv or opColl
	coll  func() C.int // opColl: the blocking collective each Start queues
	buf   unsafe.Pointer
	count C.int
	dt    C.MPI_Datatype
	peer  C.int // destination or source
	tag   C.int
	comm  C.MPI_Comm
}

const (
	opSend = iota
	opSsend
	opBsend
	opRecv
	opColl
)

// initPersistent checks the arguments as the nonblocking call would and
// hands out an inactive persistent request.
func initPersistent(fn string, kind int, buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, peer, tag C.int,
	comm C.MPI_Comm, req *C.MPI_Request) C.int {
	ce, _, err := p2pArgs(buf, count, dt, tag, kind == opRecv, comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	if kind == opRecv && peer != procNull {
		if _, err := source(peer); err != nil {
			return retc(comm, fn, err)
		}
	}
	q := lib.newReq()
	q.ce, q.recv = ce, kind == opRecv
	q.persist = &persistent{kind: kind, buf: buf, count: count, dt: dt, peer: peer, tag: tag, comm: comm}
	q.done, q.inactive = true, true
	return retc(comm, fn, lib.handOut(q, req))
}

//export PMPI_Send_init
func PMPI_Send_init(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Send_init", &mpirc)
	return initPersistent("MPI_Send_init", opSend, buf, count, dt, dest, tag, comm, req)
}

// MPI_Rsend_init is MPI_Send_init: a ready send may be a standard send.
//
//export PMPI_Rsend_init
func PMPI_Rsend_init(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Rsend_init", &mpirc)
	return initPersistent("MPI_Rsend_init", opSend, buf, count, dt, dest, tag, comm, req)
}

//export PMPI_Ssend_init
func PMPI_Ssend_init(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ssend_init", &mpirc)
	return initPersistent("MPI_Ssend_init", opSsend, buf, count, dt, dest, tag, comm, req)
}

//export PMPI_Bsend_init
func PMPI_Bsend_init(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Bsend_init", &mpirc)
	return initPersistent("MPI_Bsend_init", opBsend, buf, count, dt, dest, tag, comm, req)
}

//export PMPI_Recv_init
func PMPI_Recv_init(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, src, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Recv_init", &mpirc)
	return initPersistent("MPI_Recv_init", opRecv, buf, count, dt, src, tag, comm, req)
}

// start starts persistent request q.
func start(q *request) error {
	p := q.persist
	if !q.inactive {
		return errorf(errRequest, "MPI_Start on a request already active")
	}
	if p.kind == opColl {
		q.done, q.inactive, q.err, q.st = false, false, nil, mplite.Status{}
		q.nbc = q.ce.enqueue(asOp(p.coll))
		return nil
	}
	t, err := typedBuf(p.buf, p.count, p.dt)
	if err != nil {
		return err
	}
	q.stage = t // unpacked (receives) and released at completion
	if p.kind != opRecv {
		t.pack()
	}
	b := t.b
	q.done, q.inactive, q.err, q.st, q.procNull = false, false, nil, mplite.Status{}, false
	if p.peer == procNull {
		q.procNull, q.done = true, true
		return nil
	}
	switch p.kind {
	case opSend:
		q.r, err = q.ce.c.Isend(b, int(p.peer), int(p.tag))
	case opSsend:
		q.r, err = q.ce.c.Issend(b, int(p.peer), int(p.tag))
	case opBsend:
		// Buffered: done once the data is copied.
		q.done = true
		if rc := PMPI_Bsend(p.buf, p.count, p.dt, p.peer, p.tag, p.comm); rc != errSuccess {
			err = errorf(int(rc), "buffered send failed")
		}
	case opRecv:
		var src int
		if src, err = source(p.peer); err == nil {
			q.r, err = q.ce.c.Irecv(b, src, int(p.tag))
		}
	}
	if err != nil {
		q.done, q.inactive = true, true
	}
	return err
}

//export PMPI_Start
func PMPI_Start(req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Start", &mpirc)
	q, err := lib.req(*req)
	if err == nil && q.persist == nil {
		err = errorf(errRequest, "MPI_Start on a request that is not persistent")
	}
	if err != nil {
		return ret("MPI_Start", err)
	}
	return retc(q.ce.h, "MPI_Start", start(q))
}

//export PMPI_Startall
func PMPI_Startall(n C.int, reqs *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Startall", &mpirc)
	if n < 0 {
		return ret("MPI_Startall", errorf(errCount, "negative count %d", int(n)))
	}
	for _, h := range unsafe.Slice(reqs, int(n)) {
		if rc := PMPI_Start(&h); rc != errSuccess {
			return rc
		}
	}
	return errSuccess
}

// MPI_Cancel cancels a receive that nothing has matched yet; the request
// must still be completed, and MPI_Test_cancelled on its status tells.
// Sends are not cancelled (MPI 4 deprecates it): they complete as usual.
//
//export PMPI_Cancel
func PMPI_Cancel(req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Cancel", &mpirc)
	q, err := lib.req(*req)
	if err != nil {
		return ret("MPI_Cancel", err)
	}
	if q.greq != nil && !q.done {
		// The program's cancel function; the request still completes only
		// by MPI_Grequest_complete.
		if code := callGreqCancel(q.greq.cancel, q.greq.extra, isClosed(q.greq.done)); code != errSuccess {
			return ret("MPI_Cancel", errorf(code, "the cancel function of the generalized request returned %d", code))
		}
		return errSuccess
	}
	if q.r != nil && !q.done {
		q.cancelAsked = true
		q.r.Cancel()
	}
	return errSuccess
}

//export PMPI_Test_cancelled
func PMPI_Test_cancelled(stArg C.uintptr_t, flag *C.int) (mpirc C.int) {
	defer guard("MPI_Test_cancelled", &mpirc)
	st := statusPtr(stArg)
	*flag = st.count_hi_and_cancelled & 1
	return errSuccess
}

// Persistent collectives (MPI 4.0): each MPI_Start queues the collective
// as a nonblocking one.

func initColl(fn string, comm C.MPI_Comm, req *C.MPI_Request, call func() C.int) C.int {
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	if req == nil {
		return retc(comm, fn, errorf(errArg, "NULL request"))
	}
	q := lib.newReq()
	q.ce = ce
	q.persist = &persistent{kind: opColl, coll: call, comm: comm}
	q.done, q.inactive = true, true
	return retc(comm, fn, lib.handOut(q, req))
}

//export PMPI_Barrier_init
func PMPI_Barrier_init(comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Barrier_init", &mpirc)
	return initColl("MPI_Barrier_init", comm, req, func() C.int { return PMPI_Barrier(comm) })
}

//export PMPI_Bcast_init
func PMPI_Bcast_init(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, root C.int, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Bcast_init", &mpirc)
	return initColl("MPI_Bcast_init", comm, req, func() C.int { return PMPI_Bcast(buf, count, dt, root, comm) })
}

//export PMPI_Reduce_init
func PMPI_Reduce_init(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, root C.int, comm C.MPI_Comm,
	info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Reduce_init", &mpirc)
	return initColl("MPI_Reduce_init", comm, req, func() C.int { return PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm) })
}

//export PMPI_Allreduce_init
func PMPI_Allreduce_init(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm,
	info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Allreduce_init", &mpirc)
	return initColl("MPI_Allreduce_init", comm, req, func() C.int { return PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm) })
}

//export PMPI_Scan_init
func PMPI_Scan_init(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm,
	info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Scan_init", &mpirc)
	return initColl("MPI_Scan_init", comm, req, func() C.int { return PMPI_Scan(sbuf, rbuf, count, dt, op, comm) })
}

//export PMPI_Exscan_init
func PMPI_Exscan_init(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm,
	info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Exscan_init", &mpirc)
	return initColl("MPI_Exscan_init", comm, req, func() C.int { return PMPI_Exscan(sbuf, rbuf, count, dt, op, comm) })
}

//export PMPI_Gather_init
func PMPI_Gather_init(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype,
	root C.int, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Gather_init", &mpirc)
	return initColl("MPI_Gather_init", comm, req, func() C.int { return PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm) })
}

//export PMPI_Scatter_init
func PMPI_Scatter_init(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype,
	root C.int, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Scatter_init", &mpirc)
	return initColl("MPI_Scatter_init", comm, req, func() C.int { return PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm) })
}

//export PMPI_Allgather_init
func PMPI_Allgather_init(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype,
	comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Allgather_init", &mpirc)
	return initColl("MPI_Allgather_init", comm, req, func() C.int { return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm) })
}

//export PMPI_Alltoall_init
func PMPI_Alltoall_init(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype,
	comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Alltoall_init", &mpirc)
	return initColl("MPI_Alltoall_init", comm, req, func() C.int { return PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm) })
}
