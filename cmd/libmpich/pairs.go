package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"encoding/binary"
	"math"

	"github.com/ethervia/ethervia/mplite"
)

// MPI_MINLOC and MPI_MAXLOC on the pair types, packed: a value followed
// by an int index, little endian, no padding (MPI_2INT, MPI_FLOAT_INT,
// MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT), or Fortran's, whose index
// has the value's type (MPI_2INTEGER, MPI_2REAL, MPI_2DOUBLE_PRECISION).

// pairKind compares the values of two packed pairs of one type.
type pairKind struct {
	vsize int
	less  func(a, b []byte) bool // a's value below b's
	eq    func(a, b []byte) bool
	// fortran: the index is a second value (compared with less), not an int
	fortran bool
}

var le = binary.LittleEndian

func pairKindOf(h uint32) (pairKind, bool) {
	switch h {
	case 0x4c000816: // MPI_2INT
		return pairKind{vsize: 4, less: func(a, b []byte) bool { return int32(le.Uint32(a)) < int32(le.Uint32(b)) },
			eq: func(a, b []byte) bool { return le.Uint32(a) == le.Uint32(b) }}, true
	case 0x8c000000: // MPI_FLOAT_INT
		f := func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) }
		return pairKind{vsize: 4, less: func(a, b []byte) bool { return f(a) < f(b) }, eq: func(a, b []byte) bool { return f(a) == f(b) }}, true
	case 0x8c000001: // MPI_DOUBLE_INT
		f := func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) }
		return pairKind{vsize: 8, less: func(a, b []byte) bool { return f(a) < f(b) }, eq: func(a, b []byte) bool { return f(a) == f(b) }}, true
	case 0x8c000002: // MPI_LONG_INT
		return pairKind{vsize: 8, less: func(a, b []byte) bool { return int64(le.Uint64(a)) < int64(le.Uint64(b)) },
			eq: func(a, b []byte) bool { return le.Uint64(a) == le.Uint64(b) }}, true
	case 0x8c000003: // MPI_SHORT_INT
		return pairKind{vsize: 2, less: func(a, b []byte) bool { return int16(le.Uint16(a)) < int16(le.Uint16(b)) },
			eq: func(a, b []byte) bool { return le.Uint16(a) == le.Uint16(b) }}, true
	case 0x4c000820: // MPI_2INTEGER
		k, _ := pairKindOf(0x4c000816)
		k.fortran = true
		return k, true
	case 0x4c000821: // MPI_2REAL
		k, _ := pairKindOf(0x8c000000)
		k.fortran = true
		return k, true
	case 0x4c001023: // MPI_2DOUBLE_PRECISION
		k, _ := pairKindOf(0x8c000001)
		k.fortran = true
		return k, true
	}
	return pairKind{}, false
}

// pairReducer is MPI_MINLOC or MPI_MAXLOC on a pair type: the smaller (or
// larger) value, and on a tie the smaller index.
func pairReducer(op C.MPI_Op, dt C.MPI_Datatype) (mplite.Reducer, error) {
	k, ok := pairKindOf(uint32(dt))
	if !ok {
		return mplite.Reducer{}, errorf(errOp, "MPI_MINLOC and MPI_MAXLOC need a pair type (MPI_2INT, MPI_DOUBLE_INT, ...), not %#x", uint32(dt))
	}
	elem := k.vsize + 4
	idxLess := func(x, y []byte) bool { return int32(le.Uint32(x)) < int32(le.Uint32(y)) }
	if k.fortran {
		elem, idxLess = 2*k.vsize, k.less
	}
	maxloc := op == opMaxloc
	return mplite.Reducer{Elem: elem, Commutative: true, Fn: func(dst, a, b []byte) {
		for i := 0; i+elem <= len(dst); i += elem {
			x, y := a[i:i+elem], b[i:i+elem]
			pick := x
			switch {
			case k.eq(x, y):
				if idxLess(y[k.vsize:], x[k.vsize:]) {
					pick = y
				}
			case k.less(x, y) == maxloc:
				pick = y
			}
			copy(dst[i:i+elem], pick)
		}
	}}, nil
}
