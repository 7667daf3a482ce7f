package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// someDone completes every finished request of qs: it writes index i of
// each at indices[k] and its status at statuses[k], and returns how many
// there were and whether any request was active.
func someDone(hs []C.MPI_Request, qs []*request, indices *C.int, sts *C.MPI_Status) (int, bool, []error) {
	out := unsafe.Slice(indices, len(qs))
	k := 0
	active := false
	var errs []error
	for i, q := range qs {
		if q == nil {
			continue
		}
		active = true
		if !q.test() {
			continue
		}
		st := statusAt(sts, k)
		out[k] = C.int(i)
		err := lib.release(&hs[i], q, st)
		if st != nil {
			st.MPI_ERROR = C.int(codeOf(err))
		}
		if err != nil {
			errs = append(errs, err)
		}
		k++
	}
	return k, active, errs
}

//export PMPI_Waitsome
func PMPI_Waitsome(n C.int, reqs *C.MPI_Request, outcount *C.int, indices *C.int, stsArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Waitsome", &mpirc)
	sts := statusPtr(stsArg)
	var scratch [16]*request
	hs, qs, err := lookupAll(n, reqs, scratch[:0])
	if err != nil {
		return ret("MPI_Waitsome", err)
	}
	for round := 0; ; round++ {
		k, active, errs := someDone(hs, qs, indices, sts)
		switch {
		case !active:
			*outcount = undefined
			return errSuccess
		case len(errs) > 0:
			*outcount = C.int(k)
			ret("MPI_Waitsome", errs[0])
			return errInStatus
		case k > 0:
			*outcount = C.int(k)
			return errSuccess
		}
		poll(round)
	}
}

//export PMPI_Testsome
func PMPI_Testsome(n C.int, reqs *C.MPI_Request, outcount *C.int, indices *C.int, stsArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Testsome", &mpirc)
	sts := statusPtr(stsArg)
	var scratch [16]*request
	hs, qs, err := lookupAll(n, reqs, scratch[:0])
	if err != nil {
		return ret("MPI_Testsome", err)
	}
	k, active, errs := someDone(hs, qs, indices, sts)
	if !active {
		*outcount = undefined
		return errSuccess
	}
	*outcount = C.int(k)
	if len(errs) > 0 {
		ret("MPI_Testsome", errs[0])
		return errInStatus
	}
	return errSuccess
}

// MPI_Request_get_status tests a request without freeing it.
//
//export PMPI_Request_get_status
func PMPI_Request_get_status(req C.MPI_Request, flag *C.int, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Request_get_status", &mpirc)
	st := statusPtr(stArg)
	*flag = 1
	if req == requestNull {
		emptyStatus(st, anySource)
		return errSuccess
	}
	q, err := lib.req(req)
	if err != nil {
		return ret("MPI_Request_get_status", err)
	}
	if !q.test() {
		*flag = 0
		return errSuccess
	}
	q.status(st)
	return errSuccess
}

// MPI_Sendrecv_replace sends buf and receives into it: the outgoing data
// is copied aside first.
//
//export PMPI_Sendrecv_replace
func PMPI_Sendrecv_replace(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, stag, src, rtag C.int,
	comm C.MPI_Comm, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Sendrecv_replace", &mpirc)
	st := statusPtr(stArg)
	ce, t, err := p2pArgs(buf, count, dt, stag, false, comm)
	if err == nil {
		err = checkTag(rtag, true)
	}
	if err != nil {
		return retc(comm, "MPI_Sendrecv_replace", err)
	}
	switch {
	case dest == procNull && src == procNull:
		emptyStatus(st, procNull)
		return errSuccess
	case dest == procNull:
		return PMPI_Recv(buf, count, dt, src, rtag, comm, stArg)
	case src == procNull:
		emptyStatus(st, procNull)
		return send("MPI_Sendrecv_replace", buf, count, dt, dest, stag, comm)
	}
	s, err := source(src)
	if err != nil {
		return retc(comm, "MPI_Sendrecv_replace", err)
	}
	out := append([]byte(nil), t.b...)
	q := &request{ce: ce, recv: true}
	q.finish(ce.c.Sendrecv(out, int(dest), int(stag), t.b, s, int(rtag)))
	t.unpack(q.st.Count)
	q.status(st)
	return retc(comm, "MPI_Sendrecv_replace", q.err)
}

// isendrecv starts a send and a receive as one request, completing when
// both have; send is the packed outgoing data.
func isendrecv(fn string, ce *commEntry, send []byte, sstage tbuf, dest, stag C.int, recv tbuf, src, rtag C.int,
	comm C.MPI_Comm, req *C.MPI_Request) C.int {
	q := lib.newReq()
	q.ce, q.recv, q.stage, q.stage2 = ce, true, recv, sstage
	var err error
	if src == procNull || dest == procNull {
		err = errorf(errRank, "MPI_PROC_NULL in a nonblocking send-receive is not supported")
	} else if s, serr := source(src); serr != nil {
		err = serr
	} else if q.r, err = ce.c.Irecv(recv.b, s, int(rtag)); err == nil {
		q.r2, err = ce.c.Isend(send, int(dest), int(stag))
	}
	if err != nil {
		lib.drop(q)
		return retc(comm, fn, err)
	}
	return retc(comm, fn, lib.handOut(q, req))
}

//export PMPI_Isendrecv
func PMPI_Isendrecv(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, dest, stag C.int,
	rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, src, rtag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Isendrecv", &mpirc)
	ce, sb, err := p2pArgs(sbuf, scount, stype, stag, false, comm)
	if err != nil {
		return retc(comm, "MPI_Isendrecv", err)
	}
	_, rb, err := p2pArgs(rbuf, rcount, rtype, rtag, true, comm)
	if err != nil {
		return retc(comm, "MPI_Isendrecv", err)
	}
	return isendrecv("MPI_Isendrecv", ce, sb.b, sb, dest, stag, rb, src, rtag, comm, req)
}

//export PMPI_Isendrecv_replace
func PMPI_Isendrecv_replace(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, stag, src, rtag C.int,
	comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Isendrecv_replace", &mpirc)
	ce, t, err := p2pArgs(buf, count, dt, stag, false, comm)
	if err == nil {
		err = checkTag(rtag, true)
	}
	if err != nil {
		return retc(comm, "MPI_Isendrecv_replace", err)
	}
	out := append([]byte(nil), t.b...)
	return isendrecv("MPI_Isendrecv_replace", ce, out, tbuf{}, dest, stag, t, src, rtag, comm, req)
}

// MPI_Comm_idup hands out the new communicator's handle at once; the
// duplication runs in the communicator's collective queue, and the handle
// may be used once the request completes.
//
//export PMPI_Comm_idup
func PMPI_Comm_idup(comm C.MPI_Comm, newcomm *C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Comm_idup", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_idup", err)
	}
	ne, _ := newCommEntry(nil, true, ce)
	h := lib.addComm(ne)
	*newcomm = h
	q := lib.newReq()
	q.ce = ce
	q.nbc = ce.enqueue(func() error {
		c, err := ce.c.Dup()
		if err != nil {
			return err
		}
		lib.mu.Lock()
		ne.c, ne.cart, ne.graph, ne.dist = c, ce.cart, ce.graph, ce.dist // a duplicate keeps the topology
		lib.mu.Unlock()
		if code := ce.attrs().copyAttrs(ne.attrs()); code != 0 {
			return errorf(code, "an attribute copy callback failed with %d", code)
		}
		return nil
	})
	return retc(comm, "MPI_Comm_idup", lib.handOut(q, req))
}

// MPI_Ibsend buffers like MPI_Bsend and hands out a request that is
// already complete: the program may reuse its buffer at once, and waiting
// for it never waits for the receiver.
//
//export PMPI_Ibsend
func PMPI_Ibsend(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ibsend", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Ibsend", err)
	}
	if req == nil {
		return retc(comm, "MPI_Ibsend", errorf(errArg, "NULL request"))
	}
	if rc := PMPI_Bsend(buf, count, dt, dest, tag, comm); rc != errSuccess {
		return rc
	}
	q := lib.newReq()
	q.ce, q.done = ce, true
	return retc(comm, "MPI_Ibsend", lib.handOut(q, req))
}

// MPI_Irsend is MPI_Isend: a ready send may always be sent as a standard one.
//
//export PMPI_Irsend
func PMPI_Irsend(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Irsend", &mpirc)
	return isend("MPI_Irsend", (*mplite.Comm).Isend, buf, count, dt, dest, tag, comm, req)
}
