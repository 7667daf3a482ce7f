package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// The point-to-point calls' common case, a predefined datatype on a valid
// communicator, skips the general path's buffer views (p2pBuf) and, in
// MPI_Send and MPI_Recv, its request bookkeeping: profiled under Debian's
// NPmpich2 between two ranks of a host, those took more CPU than mplite's
// own send of a 1-byte message. Anything else, errors included, takes the
// general path, which reports them.

// simpleBuf returns the communicator and the bytes of count elements of dt
// at p when dt is a predefined datatype with a size; ok is false when the
// call needs the general path. (Moving this shortcut into p2pBuf, for
// every caller, measured 5-15 % slower on NPmpich2's 1-byte round trip
// between two ranks of a host than these dedicated paths.)
func simpleBuf(p unsafe.Pointer, count C.int, dt C.MPI_Datatype, comm C.MPI_Comm) (ce *commEntry, b []byte, ok bool) {
	if !isBuiltin(dt) {
		return nil, nil, false
	}
	n, err := bufLen(count, dt)
	if err != nil {
		return nil, nil, false
	}
	if ce, err = lib.comm(comm); err != nil {
		return nil, nil, false
	}
	return ce, goBytes(p, n), true
}

// sendSimple is MPI_Send's common case; ok is false when the call needs
// the general path.
func sendSimple(fn string, buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm) (rc C.int, ok bool) {
	if tag < 0 || dest == procNull {
		return 0, false
	}
	ce, b, ok := simpleBuf(buf, count, dt, comm)
	if !ok {
		return 0, false
	}
	return retc(comm, fn, ce.c.Send(b, int(dest), int(tag))), true
}

// recvSimple is MPI_Recv's common case; ok is false when the call needs
// the general path.
func recvSimple(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, src, tag C.int, comm C.MPI_Comm, st *C.MPI_Status) (rc C.int, ok bool) {
	if tag < 0 && tag != anyTag || src < 0 && src != anySource {
		return 0, false // MPI_PROC_NULL, or an error the general path reports
	}
	ce, b, ok := simpleBuf(buf, count, dt, comm)
	if !ok {
		return 0, false
	}
	s := int(src)
	if src == anySource {
		s = mplite.AnySource
	}
	// mplite's status of a truncated message already counts the
	// capacity, as request.finish makes the general path's.
	ms, err := ce.c.Recv(b, s, int(tag))
	setStatus(st, ms.Source, ms.Tag, int64(ms.Count))
	return retc(comm, "MPI_Recv", err), true
}

// isendBuf is p2pArgs (p2pView for a layout send) for MPI_Isend and
// MPI_Issend, through simpleBuf in the common case.
func isendBuf(layout bool, buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, tag C.int, comm C.MPI_Comm) (*commEntry, tbuf, error) {
	if tag >= 0 {
		if ce, b, ok := simpleBuf(buf, count, dt, comm); ok {
			return ce, tbuf{b: b}, nil
		}
	}
	if layout {
		return p2pView(buf, count, dt, tag, false, comm)
	}
	return p2pArgs(buf, count, dt, tag, false, comm)
}

// irecvBuf is p2pView for MPI_Irecv, through simpleBuf in the common case.
func irecvBuf(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, tag C.int, comm C.MPI_Comm) (*commEntry, tbuf, error) {
	if tag >= 0 || tag == anyTag {
		if ce, b, ok := simpleBuf(buf, count, dt, comm); ok {
			return ce, tbuf{b: b}, nil
		}
	}
	return p2pView(buf, count, dt, tag, true, comm)
}
