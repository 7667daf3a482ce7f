package main

/*
#include "ethervia_mpi_types.h"

typedef void (*ev_errh_fn)(MPI_Comm *, int *, ...);
typedef void (*ev_user_fn)(void *, void *, int *, MPI_Datatype *);

static void ev_call_op(void *fn, void *in, void *inout, int len, MPI_Datatype dt) {
	((ev_user_fn)fn)(in, inout, &len, &dt);
}
typedef void (*ev_user_fn_c)(void *, void *, MPI_Count *, MPI_Datatype *);

static void ev_call_op_c(void *fn, void *in, void *inout, MPI_Count len, MPI_Datatype dt) {
	((ev_user_fn_c)fn)(in, inout, &len, &dt);
}
// The attribute callbacks of communicators and datatypes differ only in
// the handle's type, an int for both.
typedef int (*ev_copy_fn)(int, int, void *, void *, void *, int *);
typedef int (*ev_delete_fn)(int, int, void *, void *);

#include <stdint.h>

static void ev_call_errh(void *fn, MPI_Comm comm, int code) {
	((ev_errh_fn)fn)(&comm, &code);
}

// MPICH's C++ bindings (libmpichcxx) register a trampoline per error
// handler and operation (MPII_Errhandler_set_cxx, MPII_Op_set_cxx), which
// the library calls with the program's function: kind 0 is a communicator.
typedef void (*ev_errh_cxx)(int, int *, int *, void *);
typedef void (*ev_op_cxx)(void *, void *, int, MPI_Datatype, void *);

static void ev_call_errh_cxx(void *cxx, void *fn, MPI_Comm comm, int code) {
	int h = (int)comm;
	((ev_errh_cxx)cxx)(0, &h, &code, fn);
}

static void ev_call_op_cxx(void *cxx, void *fn, void *in, void *inout, int len, MPI_Datatype dt) {
	((ev_op_cxx)cxx)(in, inout, len, dt, fn);
}

static int ev_call_copy(void *fn, int obj, int key, uintptr_t extra, uintptr_t in, uintptr_t *out, int *flag) {
	return ((ev_copy_fn)fn)(obj, key, (void *)extra, (void *)in, (void *)out, flag);
}

typedef int (*ev_greq_query)(void *, MPI_Status *);
typedef int (*ev_greq_free)(void *);
typedef int (*ev_greq_cancel)(void *, int);

static int ev_call_greq_query(void *fn, uintptr_t extra, MPI_Status *st) { return ((ev_greq_query)fn)((void *)extra, st); }
static int ev_call_greq_free(void *fn, uintptr_t extra) { return ((ev_greq_free)fn)((void *)extra); }
static int ev_call_greq_cancel(void *fn, uintptr_t extra, int complete) { return ((ev_greq_cancel)fn)((void *)extra, complete); }

static int ev_call_delete(void *fn, int obj, int key, uintptr_t val, uintptr_t extra) {
	return ((ev_delete_fn)fn)(obj, key, (void *)val, (void *)extra);
}

// MPICH's attribute proxies (MPII_Attr_copy_proxy, MPII_Attr_delete_proxy):
// the program's function first, then the callback's arguments and the
// attribute's type.
typedef int (*ev_copy_proxy)(void *, int, int, void *, int, void *, void **, int *);
typedef int (*ev_delete_proxy)(void *, int, int, int, void *, void *);

static int ev_call_copy_proxy(void *proxy, void *fn, int obj, int key, uintptr_t extra, int typ, uintptr_t in, uintptr_t *out, int *flag) {
	return ((ev_copy_proxy)proxy)(fn, obj, key, (void *)extra, typ, (void *)in, (void **)out, flag);
}

static int ev_call_delete_proxy(void *proxy, void *fn, int obj, int key, int typ, uintptr_t val, uintptr_t extra) {
	return ((ev_delete_proxy)proxy)(fn, obj, key, typ, (void *)val, (void *)extra);
}
*/
import "C"

import "unsafe"

// Calls of the program's C callbacks (a Go file with //export cannot
// define C functions in its preamble).

// statusPtr is a status argument as a pointer, nil for MPI_STATUS_IGNORE
// and MPI_STATUSES_IGNORE ((MPI_Status *)1): such sentinels must never sit
// in a Go pointer, where the runtime's stack copier and collector take
// them for bad pointers and abort. It reads p's bits as a pointer in Go
// (a cgo call here cost every MPI_Recv and MPI_Wait a C round trip).
func statusPtr(p C.uintptr_t) *C.MPI_Status {
	if p <= statusIgn {
		return nil
	}
	return *(**C.MPI_Status)(unsafe.Pointer(&p))
}

func callErrhandler(eh *errhandler, comm C.MPI_Comm, code int) {
	if eh.cxx != nil {
		C.ev_call_errh_cxx(eh.cxx, eh.fn, comm, C.int(code))
		return
	}
	C.ev_call_errh(eh.fn, comm, C.int(code))
}

// callOp runs a user operation on n elements: inout = in ∘ inout.
func callOp(u *userOp, in, inout unsafe.Pointer, n int, dt C.MPI_Datatype) {
	if u.cxx != nil {
		C.ev_call_op_cxx(u.cxx, u.fn, in, inout, C.int(n), dt)
		return
	}
	if u.large {
		C.ev_call_op_c(u.fn, in, inout, C.MPI_Count(n), dt)
		return
	}
	C.ev_call_op(u.fn, in, inout, C.int(n), dt)
}

// callCopy runs kv's copy callback on attribute a of the object obj (a
// communicator or a datatype), through its proxy if it has one; it returns
// the callback's code, the new value and whether to attach it.
func callCopy(kv *keyval, obj C.int, key int32, a attr) (int, C.uintptr_t, bool) {
	var out C.uintptr_t
	var flag C.int
	var rc C.int
	if kv.copyProxy != nil {
		rc = C.ev_call_copy_proxy(kv.copyProxy, kv.copyFn, obj, C.int(key), kv.extra, a.typ, a.val, &out, &flag)
	} else {
		rc = C.ev_call_copy(kv.copyFn, obj, C.int(key), kv.extra, a.val, &out, &flag)
	}
	return int(rc), out, flag != 0
}

// callDelete runs kv's delete callback on attribute a of obj.
func callDelete(kv *keyval, obj C.int, key int32, a attr) int {
	if kv.deleteProxy != nil {
		return int(C.ev_call_delete_proxy(kv.deleteProxy, kv.deleteFn, obj, C.int(key), a.typ, a.val, kv.extra))
	}
	return int(C.ev_call_delete(kv.deleteFn, obj, C.int(key), a.val, kv.extra))
}

func callGreqQuery(fn unsafe.Pointer, extra C.uintptr_t, st *C.MPI_Status) int {
	return int(C.ev_call_greq_query(fn, extra, st))
}

func callGreqFree(fn unsafe.Pointer, extra C.uintptr_t) int {
	return int(C.ev_call_greq_free(fn, extra))
}

func callGreqCancel(fn unsafe.Pointer, extra C.uintptr_t, complete bool) int {
	c := C.int(0)
	if complete {
		c = 1
	}
	return int(C.ev_call_greq_cancel(fn, extra, c))
}
