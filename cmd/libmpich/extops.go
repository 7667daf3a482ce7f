package main

/*
#include <complex.h>
#include <stddef.h>
#include "ethervia_mpi_types.h"

// Long double (x87 80-bit in 16 bytes here) has no Go type: its
// reductions run in C, one call per buffer.
static size_t ev_ld_size(void) { return sizeof(long double); }

static void ev_ld_op(int op, void *dv, const void *av, const void *bv, size_t n) {
	long double *d = dv;
	const long double *a = av, *b = bv;
	for (size_t i = 0; i < n; i++) {
		switch (op) {
		case 0: d[i] = a[i] + b[i]; break;
		case 1: d[i] = a[i] * b[i]; break;
		case 2: d[i] = a[i] > b[i] ? a[i] : b[i]; break;
		default: d[i] = a[i] < b[i] ? a[i] : b[i]; break;
		}
	}
}

static void ev_ldc_op(int op, void *dv, const void *av, const void *bv, size_t n) {
	long double _Complex *d = dv;
	const long double _Complex *a = av, *b = bv;
	for (size_t i = 0; i < n; i++)
		d[i] = op == 0 ? a[i] + b[i] : a[i] * b[i];
}
*/
import "C"

import (
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// Reductions on the complex and long double datatypes: SUM and PROD on
// complex numbers (MPI defines no order on them), and SUM, PROD, MAX and
// MIN on long double.

// Element kinds beyond the Go number types.
const (
	kComplex64 = iota + 100
	kComplex128
	kLongDouble
	kLongDoubleComplex
)

// extKinds maps MPICH's complex and long double handles to their kind.
// MPI_REAL16 and MPI_COMPLEX32 (Fortran quad precision, __float128) are
// not here: their arithmetic is not long double's.
var extKinds = map[uint32]int{
	0x4c000840: kComplex64,         // MPI_C_FLOAT_COMPLEX, MPI_C_COMPLEX
	0x4c000834: kComplex64,         // MPI_CXX_FLOAT_COMPLEX
	0x4c00081e: kComplex64,         // MPI_COMPLEX
	0x4c000828: kComplex64,         // MPI_COMPLEX8
	0x4c001041: kComplex128,        // MPI_C_DOUBLE_COMPLEX
	0x4c001035: kComplex128,        // MPI_CXX_DOUBLE_COMPLEX
	0x4c001022: kComplex128,        // MPI_DOUBLE_COMPLEX
	0x4c00102a: kComplex128,        // MPI_COMPLEX16
	0x4c00100c: kLongDouble,        // MPI_LONG_DOUBLE
	0x4c002042: kLongDoubleComplex, // MPI_C_LONG_DOUBLE_COMPLEX
	0x4c002036: kLongDoubleComplex, // MPI_CXX_LONG_DOUBLE_COMPLEX
}

// complexOp is SUM or PROD on a Go complex type.
func complexOp[T complex64 | complex128](op C.MPI_Op) (mplite.Reducer, bool) {
	var f func(a, b T) T
	switch op {
	case opSum:
		f = func(a, b T) T { return a + b }
	case opProd:
		f = func(a, b T) T { return a * b }
	default:
		return mplite.Reducer{}, false
	}
	var zero T
	es := int(unsafe.Sizeof(zero))
	return mplite.Reducer{Elem: es, Commutative: true, Fn: func(dst, a, b []byte) {
		n := len(dst) / es
		if n == 0 {
			return
		}
		d := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(dst))), n)
		x := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(a))), n)
		y := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
		for i := range d {
			d[i] = f(x[i], y[i])
		}
	}}, true
}

// longDoubleOp is op on long double, or on long double complex (SUM and
// PROD only), computed in C.
func longDoubleOp(op C.MPI_Op, cplx bool) (mplite.Reducer, bool) {
	var c C.int // ev_ld_op's operation code
	switch op {
	case opSum:
		c = 0
	case opProd:
		c = 1
	case opMax:
		c = 2
	case opMin:
		c = 3
	default:
		return mplite.Reducer{}, false
	}
	if cplx && c > 1 {
		return mplite.Reducer{}, false
	}
	es := int(C.ev_ld_size())
	if cplx {
		es *= 2
	}
	return mplite.Reducer{Elem: es, Commutative: true, Fn: func(dst, a, b []byte) {
		n := len(dst) / es
		if n == 0 {
			return
		}
		d, x, y := unsafe.Pointer(&dst[0]), unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0])
		if cplx {
			C.ev_ldc_op(c, d, x, y, C.size_t(n))
		} else {
			C.ev_ld_op(c, d, x, y, C.size_t(n))
		}
	}}, true
}

// extReducer returns the reducer of op on a complex or long double kind.
func extReducer(op C.MPI_Op, k int) (mplite.Reducer, bool) {
	switch k {
	case kComplex64:
		return complexOp[complex64](op)
	case kComplex128:
		return complexOp[complex128](op)
	case kLongDouble:
		return longDoubleOp(op, false)
	case kLongDoubleComplex:
		return longDoubleOp(op, true)
	}
	return mplite.Reducer{}, false
}
