package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import "unsafe"

// vecBuf is one side of a vector collective (Gatherv, Scatterv,
// Allgatherv, Alltoallv): n blocks, block i being counts[i] elements of dt
// at displs[i] extents of dt from p, as the byte counts and displacements
// mplite takes. A predefined type maps the caller's memory; a derived one
// is staged block by block, packed on the way in and unpacked by
// finish, so that any committed datatype works on either side.
type vecBuf struct {
	buf            []byte
	counts, displs []int
	parts          []tbuf // the staged blocks; nil for a predefined type
}

func vecBufOf(p unsafe.Pointer, n int, counts, displs *C.int, dt C.MPI_Datatype) (vecBuf, error) {
	if isBuiltin(dt) {
		cs, ds, err := vecArgs(n, counts, displs, dt)
		if err != nil {
			return vecBuf{}, err
		}
		return vecBuf{buf: goBytes(p, extent(cs, ds)), counts: cs, displs: ds}, nil
	}
	ext, err := typeExtent(dt)
	if err != nil {
		return vecBuf{}, err
	}
	cs, ds := cInts(counts, n), cInts(displs, n)
	if len(cs) != n || len(ds) != n {
		return vecBuf{}, errorf(errArg, "NULL counts or displacements")
	}
	v := vecBuf{counts: make([]int, n), displs: make([]int, n), parts: make([]tbuf, n)}
	total := 0
	for i := range n {
		if cs[i] < 0 {
			v.release()
			return vecBuf{}, errorf(errCount, "negative count %d for rank %d", int(cs[i]), i)
		}
		t, err := typedBuf(unsafe.Add(p, int64(ds[i])*ext), cs[i], dt)
		if err != nil {
			v.release()
			return vecBuf{}, err
		}
		t.pack()
		v.parts[i], v.counts[i], v.displs[i] = t, len(t.b), total
		total += len(t.b)
	}
	v.buf = make([]byte, total)
	for i, t := range v.parts {
		copy(v.buf[v.displs[i]:], t.b)
	}
	return v, nil
}

// finish unpacks the received blocks of a staged buffer (recv) and gives
// the staging back.
func (v vecBuf) finish(recv bool) {
	if recv {
		for i, t := range v.parts {
			copy(t.b, v.buf[v.displs[i]:v.displs[i]+v.counts[i]])
			t.unpack(v.counts[i])
		}
	}
	v.release()
}

func (v vecBuf) release() {
	for _, t := range v.parts {
		t.release()
	}
}
