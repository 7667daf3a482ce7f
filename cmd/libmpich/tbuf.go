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
	return tbuf{b: lib.stageBuf(int(n)), l: l, p: p, count: int(count)}, nil
}

// maxStages bounds the staging copies kept for reuse.
const maxStages = 16

// stageBuf returns a staging copy of n bytes, reused if one is free: a
// derived-datatype message then allocates nothing in steady state.
func (l *library) stageBuf(n int) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, b := range l.stages {
		if cap(b) >= n {
			l.stages = append(l.stages[:i], l.stages[i+1:]...)
			return b[:n]
		}
	}
	return make([]byte, n)
}

// release gives a staging copy back once no operation uses it.
func (t tbuf) release() {
	if t.l == nil || t.b == nil {
		return
	}
	lib.mu.Lock()
	if len(lib.stages) < maxStages {
		lib.stages = append(lib.stages, t.b)
	}
	lib.mu.Unlock()
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
