package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import "unsafe"

// tbuf is count elements of a datatype at a C address, seen as the packed
// bytes a message carries: the memory itself when the layout is
// contiguous (every predefined type, and derived types without gaps), else
// a staging copy that pack fills before sending and unpack empties after
// receiving.
type tbuf struct {
	b     []byte
	l     *layout // nil: b is the caller's memory
	p     unsafe.Pointer
	count int
}

// typedBuf views count elements of dt at p. Predefined types take no
// allocation.
func typedBuf(p unsafe.Pointer, count C.int, dt C.MPI_Datatype) (tbuf, error) {
	if isBuiltin(dt) {
		n, err := bufLen(count, dt)
		return tbuf{b: goBytes(p, n)}, err
	}
	l, err := commLayout(dt)
	if err != nil {
		return tbuf{}, err
	}
	if count < 0 {
		return tbuf{}, errorf(errCount, "negative count %d", int(count))
	}
	n := int64(count) * l.size
	if l.contiguous() {
		return tbuf{b: goBytes(p, int(n))}, nil
	}
	if n > 0 && p == nil && l.tlb == 0 {
		return tbuf{}, errorf(errBuffer, "NULL buffer")
	}
	return tbuf{b: make([]byte, n), l: l, p: p, count: int(count)}, nil
}

// pack fills the staging copy from the caller's memory.
func (t tbuf) pack() {
	if t.l != nil {
		t.l.pack(t.b, t.p, t.count)
	}
}

// unpack copies the first n received bytes of the staging copy out to
// the caller's memory.
func (t tbuf) unpack(n int) {
	if t.l != nil {
		t.l.unpack(t.p, t.b[:min(n, len(t.b))], t.count)
	}
}
