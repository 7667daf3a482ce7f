package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import "unsafe"

// errhandler is a user error handler: a C function
// void (*)(MPI_Comm *, int *, ...).
type errhandler struct {
	fn  unsafe.Pointer
	cxx unsafe.Pointer // MPICH's C++ bindings' trampoline, or nil
}

// MPII_Errhandler_set_cxx is how MPICH's C++ bindings mark an error
// handler made by MPI::Comm::Create_errhandler.
//
//export MPII_Errhandler_set_cxx
func MPII_Errhandler_set_cxx(eh C.MPI_Errhandler, cxx unsafe.Pointer) {
	defer func() { _ = recover() }() // a void function: nothing to report
	lib.mu.Lock()
	if u := lib.errhs.at(int32(eh)); u != nil {
		u.cxx = cxx
	}
	lib.mu.Unlock()
}

// errhFirst is the first user error handler handle: MPICH's indirect
// errhandler handles, apart from the predefined 0x54... ones.
const errhFirst = -0x6c000000 // 0x94000000 as an int32

func (l *library) userHandler(h int32) *errhandler {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errhs.at(h)
}

// validHandler reports whether h names an error handler. l.mu is held.
func (l *library) validHandler(h int32) bool {
	switch h {
	case errorsAreFatal, errorsReturn, errorsAbort:
		return true
	}
	return l.errhs.has(h)
}

//export PMPI_Comm_create_errhandler
func PMPI_Comm_create_errhandler(fn unsafe.Pointer, eh *C.MPI_Errhandler) (mpirc C.int) {
	defer guard("MPI_Comm_create_errhandler", &mpirc)
	if fn == nil || eh == nil {
		return ret("MPI_Comm_create_errhandler", errorf(errArg, "NULL function or handle"))
	}
	lib.mu.Lock()
	h := lib.errhs.add(errhFirst, &errhandler{fn: fn})
	lib.mu.Unlock()
	*eh = C.MPI_Errhandler(h)
	return errSuccess
}

//export PMPI_Errhandler_create
func PMPI_Errhandler_create(fn unsafe.Pointer, eh *C.MPI_Errhandler) C.int {
	return PMPI_Comm_create_errhandler(fn, eh)
}

//export PMPI_Comm_set_errhandler
func PMPI_Comm_set_errhandler(comm C.MPI_Comm, eh C.MPI_Errhandler) (mpirc C.int) {
	defer guard("MPI_Comm_set_errhandler", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_set_errhandler", err)
	}
	lib.mu.Lock()
	ok := lib.validHandler(int32(eh))
	if ok {
		ce.eh = int32(eh)
	}
	lib.mu.Unlock()
	if !ok {
		return retc(comm, "MPI_Comm_set_errhandler", errorf(errArg, "invalid error handler %#x", uint32(eh)))
	}
	return errSuccess
}

//export PMPI_Errhandler_set
func PMPI_Errhandler_set(comm C.MPI_Comm, eh C.MPI_Errhandler) C.int {
	return PMPI_Comm_set_errhandler(comm, eh)
}

//export PMPI_Comm_get_errhandler
func PMPI_Comm_get_errhandler(comm C.MPI_Comm, eh *C.MPI_Errhandler) (mpirc C.int) {
	defer guard("MPI_Comm_get_errhandler", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_get_errhandler", err)
	}
	if eh == nil {
		return retc(comm, "MPI_Comm_get_errhandler", errorf(errArg, "NULL handle"))
	}
	lib.mu.Lock()
	*eh = C.MPI_Errhandler(ce.eh)
	lib.mu.Unlock()
	return errSuccess
}

//export PMPI_Errhandler_get
func PMPI_Errhandler_get(comm C.MPI_Comm, eh *C.MPI_Errhandler) C.int {
	return PMPI_Comm_get_errhandler(comm, eh)
}

// MPI_Errhandler_free releases the handle; communicators that use the
// handler keep it (MPI frees it with the last of them), so the entry
// stays.
//
//export PMPI_Errhandler_free
func PMPI_Errhandler_free(eh *C.MPI_Errhandler) (mpirc C.int) {
	defer guard("MPI_Errhandler_free", &mpirc)
	if eh == nil {
		return ret("MPI_Errhandler_free", errorf(errArg, "NULL handle"))
	}
	lib.mu.Lock()
	ok := lib.validHandler(int32(*eh))
	lib.mu.Unlock()
	if !ok {
		return ret("MPI_Errhandler_free", errorf(errArg, "invalid error handler %#x", uint32(*eh)))
	}
	*eh = errhandlerNull
	return errSuccess
}

//export PMPI_Comm_call_errhandler
func PMPI_Comm_call_errhandler(comm C.MPI_Comm, code C.int) (mpirc C.int) {
	defer guard("MPI_Comm_call_errhandler", &mpirc)
	if _, err := lib.comm(comm); err != nil {
		return retc(comm, "MPI_Comm_call_errhandler", err)
	}
	retc(comm, "MPI_Comm_call_errhandler", errorf(int(code), "error code %d raised by the program", int(code)))
	return errSuccess
}
