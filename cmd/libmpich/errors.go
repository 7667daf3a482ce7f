package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// mpiError is an error with its MPI error code.
type mpiError struct {
	code int
	err  error
}

func (e *mpiError) Error() string { return e.err.Error() }
func (e *mpiError) Unwrap() error { return e.err }

func errorf(code int, format string, args ...any) error {
	return &mpiError{code, fmt.Errorf(format, args...)}
}

// codeOf maps an error to its MPI error code.
func codeOf(err error) int {
	var me *mpiError
	switch {
	case err == nil:
		return errSuccess
	case errors.As(err, &me):
		return me.code
	case errors.Is(err, mplite.ErrTruncate):
		return errTruncate
	case errors.Is(err, mplite.ErrRank):
		return errRank
	case errors.Is(err, mplite.ErrTag):
		return errTag
	case errors.Is(err, mplite.ErrFreed):
		return errComm
	}
	return errOther
}

// ret raises the error of a call that concerns no communicator on
// MPI_COMM_WORLD's error handler (MPI_ERRORS_ARE_FATAL unless the program
// set another) and returns its code.
func ret(fn string, err error) C.int { return retc(commWorld, fn, err) }

// retc raises the error of a call on comm with comm's error handler (an
// invalid comm: MPI_COMM_WORLD's) and returns its code: with
// MPI_ERRORS_ARE_FATAL or MPI_ERRORS_ABORT the job ends here; with
// MPI_ERRORS_RETURN the code is returned (and the reason printed on
// stderr, which MPICH's codes cannot carry); a user handler is called
// first.
func retc(comm C.MPI_Comm, fn string, err error) C.int {
	if err == nil {
		return errSuccess
	}
	if code, ok := isRaised(err); ok {
		return C.int(code) // its handler ran when it happened
	}
	code := codeOf(err)
	eh, h := lib.handlerOf(comm)
	switch eh {
	case errorsReturn:
		fmt.Fprintf(os.Stderr, "libmpich(ethervia): %s: %v\n", fn, err)
	case errorsAreFatal, errorsAbort:
		fmt.Fprintf(os.Stderr, "libmpich(ethervia): Fatal error in %s: %s: %v\n", fn, errText[code], err)
		abortJob(code)
	default:
		if uh := lib.userHandler(eh); uh != nil {
			callErrhandler(uh, h, code)
		}
	}
	return C.int(code)
}

// handlerOf returns the error handler of comm (MPI_COMM_WORLD's if comm is
// not a communicator, MPI_ERRORS_ARE_FATAL before MPI_Init) and the handle
// the handler is called with.
func (l *library) handlerOf(comm C.MPI_Comm) (int32, C.MPI_Comm) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ce := l.comms[int32(comm)]; ce != nil {
		return ce.eh, comm
	}
	if ce := l.comms[commWorld]; ce != nil {
		return ce.eh, commWorld
	}
	return errorsAreFatal, commWorld
}

// abortJob ends the job as MPI_Abort does: the peers see this rank leave
// at once, and the process exits with code (at least 1).
func abortJob(code int) {
	lib.mu.Lock()
	world := lib.world
	lib.mu.Unlock()
	if world != nil {
		world.Close()
	}
	os.Exit(max(code, 1))
}

// guard turns a Go panic inside an exported function into MPI_ERR_ARG
// raised on MPI_COMM_WORLD's handler: no panic may cross the C ABI (a C
// caller cannot handle one, and the runtime would kill the process with a
// Go stack trace). Every exported function defers it. Nearly every panic
// there is a NULL pointer argument dereferenced, which MPICH reports as
// MPI_ERR_ARG.
func guard(fn string, rc *C.int) {
	if p := recover(); p != nil {
		*rc = ret(fn, errorf(errArg, "invalid argument (a NULL or bad pointer?): %v", p))
	}
}

// userErr is an error class or code added by MPI_Add_error_class or
// MPI_Add_error_code, with its MPI_Add_error_string text.
type userErr struct {
	class int
	text  string
	codes int // of a class: how many codes were added to it
}

// errLastCode is MPICH's MPI_ERR_LASTCODE: added classes and codes lie
// above it, as in MPICH (classes 0x40000001 up, code m of class c at
// c + m<<8).
const errLastCode = 0x3fffffff

// lastCode returns MPI_LASTUSEDCODE: the largest class or code in use.
// l.mu is held.
func (l *library) lastCode() int { return max(errLastCode, l.lastErr) }

//export PMPI_Add_error_class
func PMPI_Add_error_class(class *C.int) (mpirc C.int) {
	defer guard("MPI_Add_error_class", &mpirc)
	lib.mu.Lock()
	c := lib.addErr(-1)
	lib.mu.Unlock()
	*class = C.int(c)
	return errSuccess
}

//export PMPI_Add_error_code
func PMPI_Add_error_code(class C.int, code *C.int) (mpirc C.int) {
	defer guard("MPI_Add_error_code", &mpirc)
	lib.mu.Lock()
	u, ok := lib.userErrs[int(class)]
	ok = ok && u.class == int(class)
	if ok {
		*code = C.int(lib.addErr(int(class)))
	}
	lib.mu.Unlock()
	if !ok {
		// (Adding codes to the predefined classes is not supported.)
		return ret("MPI_Add_error_code", errorf(errArg, "%d is not an error class added by MPI_Add_error_class", int(class)))
	}
	return errSuccess
}

//export PMPI_Add_error_string
func PMPI_Add_error_string(code C.int, text *C.char) (mpirc C.int) {
	defer guard("MPI_Add_error_string", &mpirc)
	s, err := goString(text, maxErrorString)
	if err != nil {
		return ret("MPI_Add_error_string", err)
	}
	lib.mu.Lock()
	u, ok := lib.userErrs[int(code)]
	if ok {
		u.text = s
		lib.userErrs[int(code)] = u
	}
	lib.mu.Unlock()
	if !ok {
		return ret("MPI_Add_error_string", errorf(errArg, "error code %d was not added by MPI_Add_error_class/code", int(code)))
	}
	return errSuccess
}

// addErr adds a new class (class < 0) or the next code of class, and
// publishes MPI_LASTUSEDCODE. l.mu is held.
func (l *library) addErr(class int) int {
	if l.userErrs == nil {
		l.userErrs = make(map[int]userErr)
	}
	var c int
	if class < 0 {
		l.classes++
		c = errLastCode + 1 + l.classes
		class = c
	} else {
		u := l.userErrs[class]
		u.codes++
		l.userErrs[class] = u
		c = class + u.codes<<8
	}
	l.lastErr = max(l.lastErr, c)
	l.userErrs[c] = userErr{class: class}
	if l.attrVals != nil {
		unsafe.Slice((*C.int)(l.attrVals), len(predefined))[5] = C.int(l.lastCode())
	}
	return c
}
