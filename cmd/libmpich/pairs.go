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
// MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT).

// pairKind compares the values of two packed pairs of one type.
type pairKind struct {
	vsize int
	less  func(a, b []byte) bool // a's value below b's
	eq    func(a, b []byte) bool
}

var le = binary.LittleEndian

func pairKindOf(h uint32) (pairKind, bool) {
	switch h {
	case 0x4c000816: // MPI_2INT
		return pairKind{4, func(a, b []byte) bool { return int32(le.Uint32(a)) < int32(le.Uint32(b)) },
			func(a, b []byte) bool { return le.Uint32(a) == le.Uint32(b) }}, true
	case 0x8c000000: // MPI_FLOAT_INT
		f := func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) }
		return pairKind{4, func(a, b []byte) bool { return f(a) < f(b) }, func(a, b []byte) bool { return f(a) == f(b) }}, true
	case 0x8c000001: // MPI_DOUBLE_INT
		f := func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) }
		return pairKind{8, func(a, b []byte) bool { return f(a) < f(b) }, func(a, b []byte) bool { return f(a) == f(b) }}, true
	case 0x8c000002: // MPI_LONG_INT
		return pairKind{8, func(a, b []byte) bool { return int64(le.Uint64(a)) < int64(le.Uint64(b)) },
			func(a, b []byte) bool { return le.Uint64(a) == le.Uint64(b) }}, true
	case 0x8c000003: // MPI_SHORT_INT
		return pairKind{2, func(a, b []byte) bool { return int16(le.Uint16(a)) < int16(le.Uint16(b)) },
			func(a, b []byte) bool { return le.Uint16(a) == le.Uint16(b) }}, true
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
	maxloc := op == opMaxloc
	return mplite.Reducer{Elem: elem, Commutative: true, Fn: func(dst, a, b []byte) {
		for i := 0; i+elem <= len(dst); i += elem {
			x, y := a[i:i+elem], b[i:i+elem]
			pick := x
			switch {
			case k.eq(x, y):
				if int32(le.Uint32(y[k.vsize:])) < int32(le.Uint32(x[k.vsize:])) {
					pick = y
				}
			case k.less(x, y) == maxloc:
				pick = y
			}
			copy(dst[i:i+elem], pick)
		}
	}}, nil
}
