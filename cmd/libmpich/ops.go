package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// User-defined reduction operations (MPI_Op_create), MPI_Reduce_local and
// the reduce-scatters.

// opFirst is the first user operation handle: MPICH's indirect op handles.
const opFirst = -0x68000000 // 0x98000000 as an int32

// userOp is the program's function void fn(void *in, void *inout, int
// *len, MPI_Datatype *dt) (MPI_Count *len if large), computing inout = in ∘ inout element by
// element.
type userOp struct {
	fn      unsafe.Pointer
	cxx     unsafe.Pointer // MPICH's C++ bindings' trampoline, or nil
	commute bool
	large   bool // MPI_Op_create_c: len is an MPI_Count *
}

//export PMPI_Op_create
func PMPI_Op_create(fn unsafe.Pointer, commute C.int, op *C.MPI_Op) (mpirc C.int) {
	defer guard("MPI_Op_create", &mpirc)
	if fn == nil || op == nil {
		return ret("MPI_Op_create", errorf(errArg, "NULL function or result"))
	}
	lib.mu.Lock()
	h := lib.ops.add(opFirst, &userOp{fn: fn, commute: commute != 0})
	lib.mu.Unlock()
	*op = C.MPI_Op(h)
	return errSuccess
}

// MPII_Op_set_cxx is how MPICH's C++ bindings mark an operation made by
// MPI::Op::Init: its function is called through their trampoline.
//
//export MPII_Op_set_cxx
func MPII_Op_set_cxx(op C.MPI_Op, cxx unsafe.Pointer) {
	defer func() { _ = recover() }() // a void function: nothing to report
	lib.mu.Lock()
	if u := lib.ops.at(int32(op)); u != nil {
		u.cxx = cxx
	}
	lib.mu.Unlock()
}

//export PMPI_Op_free
func PMPI_Op_free(op *C.MPI_Op) (mpirc C.int) {
	defer guard("MPI_Op_free", &mpirc)
	lib.mu.Lock()
	ok := lib.ops.del(int32(*op))
	lib.mu.Unlock()
	if !ok {
		return ret("MPI_Op_free", errorf(errOp, "operation %#x is not a user operation", uint32(*op)))
	}
	*op = opNull
	return errSuccess
}

//export PMPI_Op_commutative
func PMPI_Op_commutative(op C.MPI_Op, commute *C.int) (mpirc C.int) {
	defer guard("MPI_Op_commutative", &mpirc)
	*commute = 1
	if uint32(op)&0xff000000 == 0x58000000 {
		return errSuccess
	}
	lib.mu.Lock()
	u := lib.ops.at(int32(op))
	lib.mu.Unlock()
	if u == nil {
		return ret("MPI_Op_commutative", errorf(errOp, "invalid operation %#x", uint32(op)))
	}
	if !u.commute {
		*commute = 0
	}
	return errSuccess
}

// userReducer applies a user operation to elements of dt, which must be
// contiguous (its packed form is its memory form, which the function
// expects).
func userReducer(u *userOp, dt C.MPI_Datatype) (mplite.Reducer, error) {
	l, err := commLayout(dt)
	if err != nil {
		return mplite.Reducer{}, err
	}
	if !l.contiguous() || l.size == 0 {
		return mplite.Reducer{}, errorf(errType, "user operations take contiguous datatypes; %#x has gaps", uint32(dt))
	}
	elem := int(l.size)
	return mplite.Reducer{Elem: elem, Commutative: u.commute, Fn: func(dst, a, b []byte) {
		n := len(dst) / elem
		if n == 0 {
			return
		}
		inout := dst
		switch {
		case &dst[0] == &b[0]:
		case &dst[0] == &a[0]:
			inout = append([]byte(nil), b...)
		default:
			copy(dst, b)
		}
		callOp(u, unsafe.Pointer(&a[0]), unsafe.Pointer(&inout[0]), n, dt)
		if &inout[0] != &dst[0] {
			copy(dst, inout)
		}
	}}, nil
}

//export PMPI_Reduce_local
func PMPI_Reduce_local(in, inout unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op) (mpirc C.int) {
	defer guard("MPI_Reduce_local", &mpirc)
	red, err := reducer(op, dt)
	if err != nil {
		return ret("MPI_Reduce_local", err)
	}
	a, err := collBuf(in, count, dt)
	if err != nil {
		return ret("MPI_Reduce_local", err)
	}
	b, err := collBuf(inout, count, dt)
	if err != nil {
		return ret("MPI_Reduce_local", err)
	}
	red.Fn(b.b, a.b, b.b)
	b.unpack(len(b.b))
	return errSuccess
}

// reduceScatter reduces every rank's n blocks to rank 0 and scatters block
// i to rank i (counts in elements of dt).
func reduceScatter(fn string, sbuf, rbuf unsafe.Pointer, counts []int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) C.int {
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	n, rank := ce.c.Size(), ce.c.Rank()
	if len(counts) != n {
		return retc(comm, fn, errorf(errArg, "%d counts for %d ranks", len(counts), n))
	}
	red, err := reducer(op, dt)
	if err != nil {
		return retc(comm, fn, err)
	}
	total := 0
	for _, k := range counts {
		if k < 0 {
			return retc(comm, fn, errorf(errCount, "negative count %d", k))
		}
		total += k
	}
	src := sbuf
	if isInPlace(sbuf) {
		src = rbuf
	}
	send, err := collBuf(src, C.int(total), dt)
	if err != nil {
		return retc(comm, fn, err)
	}
	elem := len(send.b) / max(total, 1)
	var sum []byte
	if rank == 0 {
		sum = make([]byte, len(send.b))
	}
	if err := ce.coll(func() error { return ce.c.Reduce(send.b, sum, red, 0) }); err != nil {
		return retc(comm, fn, err)
	}
	recv, err := collBuf(rbuf, C.int(counts[rank]), dt)
	if err != nil {
		return retc(comm, fn, err)
	}
	cs, ds := make([]int, n), make([]int, n)
	off := 0
	for i, k := range counts {
		cs[i], ds[i] = k*elem, off
		off += k * elem
	}
	err = ce.coll(func() error { return ce.c.Scatterv(sum, cs, ds, recv.b, 0) })
	recv.unpack(len(recv.b))
	return retc(comm, fn, err)
}

//export PMPI_Reduce_scatter_block
func PMPI_Reduce_scatter_block(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Reduce_scatter_block", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Reduce_scatter_block", err)
	}
	counts := make([]int, ce.c.Size())
	for i := range counts {
		counts[i] = int(count)
	}
	return reduceScatter("MPI_Reduce_scatter_block", sbuf, rbuf, counts, dt, op, comm)
}

//export PMPI_Reduce_scatter
func PMPI_Reduce_scatter(sbuf, rbuf unsafe.Pointer, counts *C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Reduce_scatter", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Reduce_scatter", err)
	}
	return reduceScatter("MPI_Reduce_scatter", sbuf, rbuf, intRanks(C.int(ce.c.Size()), counts), dt, op, comm)
}
