package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// Matched probes: MPI_Mprobe and MPI_Improbe take a message off the
// matching queues; MPI_Mrecv and MPI_Imrecv receive exactly it.

const (
	messageNull   = 0x2c000000
	messageNoProc = 0x6c000000
	messageFirst  = -0x14000000 // 0xec000000 as an int32, apart from request handles
)

// probed is a taken message and the communicator it came on.
type probed struct {
	msg *mplite.Message
	ce  *commEntry
}

func (l *library) takeProbed(h *C.MPI_Message) (*probed, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.messages.at(int32(*h))
	if p == nil {
		return nil, errorf(errRequest, "invalid message handle %#x", uint32(*h))
	}
	l.messages.del(int32(*h))
	*h = messageNull
	return p, nil
}

func handOutMessage(ce *commEntry, msg *mplite.Message, out *C.MPI_Message) {
	lib.mu.Lock()
	h := lib.messages.add(messageFirst, &probed{msg: msg, ce: ce})
	lib.mu.Unlock()
	*out = C.MPI_Message(h)
}

//export PMPI_Mprobe
func PMPI_Mprobe(src, tag C.int, comm C.MPI_Comm, message *C.MPI_Message, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Mprobe", &mpirc)
	st := statusPtr(stArg)
	if src == procNull {
		*message = messageNoProc
		emptyStatus(st, procNull)
		return errSuccess
	}
	ce, s, err := probeArgs(src, tag, comm)
	if err != nil {
		return retc(comm, "MPI_Mprobe", err)
	}
	msg, ps, err := ce.c.Mprobe(s, int(tag))
	if err != nil {
		return retc(comm, "MPI_Mprobe", err)
	}
	handOutMessage(ce, msg, message)
	setStatus(st, ps.Source, ps.Tag, int64(ps.Count))
	return errSuccess
}

//export PMPI_Improbe
func PMPI_Improbe(src, tag C.int, comm C.MPI_Comm, flag *C.int, message *C.MPI_Message, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Improbe", &mpirc)
	st := statusPtr(stArg)
	if src == procNull {
		*flag, *message = 1, messageNoProc
		emptyStatus(st, procNull)
		return errSuccess
	}
	ce, s, err := probeArgs(src, tag, comm)
	if err != nil {
		return retc(comm, "MPI_Improbe", err)
	}
	msg, ps, ok, err := ce.c.Improbe(s, int(tag))
	if err != nil {
		return retc(comm, "MPI_Improbe", err)
	}
	*flag = 0
	if ok {
		*flag = 1
		handOutMessage(ce, msg, message)
		setStatus(st, ps.Source, ps.Tag, int64(ps.Count))
	}
	return errSuccess
}

//export PMPI_Mrecv
func PMPI_Mrecv(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, message *C.MPI_Message, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Mrecv", &mpirc)
	st := statusPtr(stArg)
	if *message == messageNoProc {
		*message = messageNull
		emptyStatus(st, procNull)
		return errSuccess
	}
	p, err := lib.takeProbed(message)
	if err != nil {
		return ret("MPI_Mrecv", err)
	}
	b, err := typedBuf(buf, count, dt)
	if err != nil {
		return retc(p.ce.h, "MPI_Mrecv", err)
	}
	q := &request{ce: p.ce, recv: true}
	q.finish(p.msg.Recv(b.b))
	b.unpack(q.st.Count)
	b.release()
	q.status(st)
	return retc(p.ce.h, "MPI_Mrecv", q.err)
}

//export PMPI_Imrecv
func PMPI_Imrecv(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, message *C.MPI_Message, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Imrecv", &mpirc)
	q := lib.newReq()
	q.recv = true
	if *message == messageNoProc {
		*message = messageNull
		ce, err := lib.comm(commWorld)
		if err != nil {
			lib.drop(q)
			return ret("MPI_Imrecv", err)
		}
		q.ce, q.procNull, q.done = ce, true, true
		return ret("MPI_Imrecv", lib.handOut(q, req))
	}
	p, err := lib.takeProbed(message)
	if err != nil {
		lib.drop(q)
		return ret("MPI_Imrecv", err)
	}
	b, err := typedBuf(buf, count, dt)
	if err != nil {
		lib.drop(q)
		return retc(p.ce.h, "MPI_Imrecv", err)
	}
	q.ce, q.stage = p.ce, b
	if q.r, err = p.msg.Irecv(b.b); err != nil {
		lib.drop(q)
		return retc(p.ce.h, "MPI_Imrecv", err)
	}
	return retc(p.ce.h, "MPI_Imrecv", lib.handOut(q, req))
}
