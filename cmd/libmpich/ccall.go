package main

/*
#include "ethervia_mpi_types.h"

typedef void (*ev_errh_fn)(MPI_Comm *, int *, ...);
typedef int (*ev_copy_fn)(MPI_Comm, int, void *, void *, void *, int *);
typedef int (*ev_delete_fn)(MPI_Comm, int, void *, void *);

static void ev_call_errh(void *fn, MPI_Comm comm, int code) {
	((ev_errh_fn)fn)(&comm, &code);
}

static int ev_call_copy(void *fn, MPI_Comm comm, int key, void *extra, void *in, void **out, int *flag) {
	return ((ev_copy_fn)fn)(comm, key, extra, in, (void *)out, flag);
}

static int ev_call_delete(void *fn, MPI_Comm comm, int key, void *val, void *extra) {
	return ((ev_delete_fn)fn)(comm, key, val, extra);
}
*/
import "C"

import "unsafe"

// Calls of the program's C callbacks (a Go file with //export cannot
// define C functions in its preamble).

func callErrhandler(fn unsafe.Pointer, comm C.MPI_Comm, code int) {
	C.ev_call_errh(fn, comm, C.int(code))
}

// callCopy runs an attribute copy callback; it returns the callback's
// code, the new value and whether to attach it.
func callCopy(fn unsafe.Pointer, comm C.MPI_Comm, key int32, extra, in unsafe.Pointer) (int, unsafe.Pointer, bool) {
	var out unsafe.Pointer
	var flag C.int
	rc := C.ev_call_copy(fn, comm, C.int(key), extra, in, &out, &flag)
	return int(rc), out, flag != 0
}

func callDelete(fn unsafe.Pointer, comm C.MPI_Comm, key int32, val, extra unsafe.Pointer) int {
	return int(C.ev_call_delete(fn, comm, C.int(key), val, extra))
}
