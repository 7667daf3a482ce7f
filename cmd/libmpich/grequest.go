package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// Generalized requests (MPI_Grequest_start, MPI_Grequest_complete): a
// request the program completes itself, for operations it runs on its own
// (an I/O thread, a library's progress engine). Waiting blocks until
// MPI_Grequest_complete; completion then asks the program's query
// function for the status and, once the request is also freed, calls its
// free function.

// grequest is the state of one generalized request.
type grequest struct {
	query, free, cancel unsafe.Pointer
	extra               C.uintptr_t // the program's void *, maybe not a pointer
	done                chan struct{}
	once                sync.Once
	st                  C.MPI_Status // what query wrote
}

//export PMPI_Grequest_start
func PMPI_Grequest_start(query, free, cancel unsafe.Pointer, extra C.uintptr_t, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Grequest_start", &mpirc)
	const fn = "MPI_Grequest_start"
	if query == nil || free == nil || cancel == nil || req == nil {
		return ret(fn, errorf(errArg, "NULL function or request"))
	}
	ce, err := lib.comm(commWorld) // its errors go to MPI_COMM_WORLD's handler
	if err != nil {
		return ret(fn, err)
	}
	q := lib.newReq()
	q.ce = ce
	q.greq = &grequest{query: query, free: free, cancel: cancel, extra: extra, done: make(chan struct{})}
	return ret(fn, lib.handOut(q, req))
}

//export PMPI_Grequest_complete
func PMPI_Grequest_complete(req C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Grequest_complete", &mpirc)
	q, err := lib.req(req)
	if err == nil && q.greq == nil {
		err = errorf(errRequest, "request %#x is not a generalized request", uint32(req))
	}
	if err != nil {
		return ret("MPI_Grequest_complete", err)
	}
	q.greq.once.Do(func() { close(q.greq.done) })
	return errSuccess
}

// finishGreq completes a generalized request whose operation is done:
// query fills the status, free releases the program's state.
func (q *request) finishGreq() {
	g := q.greq
	g.st.MPI_SOURCE, g.st.MPI_TAG = anySource, anyTag
	err := codeErr(callGreqQuery(g.query, g.extra, &g.st), "the query function")
	if ferr := codeErr(callGreqFree(g.free, g.extra), "the free function"); err == nil {
		err = ferr
	}
	q.finish(mplite.Status{}, err)
	q.cancelled = g.st.count_hi_and_cancelled&1 == 1
}

// codeErr turns a callback's MPI error code into an error.
func codeErr(code int, what string) error {
	if code == errSuccess {
		return nil
	}
	return errorf(code, "%s of the generalized request returned %d", what, code)
}
