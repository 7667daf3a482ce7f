package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"math"

	"github.com/ethervia/ethervia/mplite"
)

// typeSize returns the size of a predefined contiguous datatype. MPICH's
// builtin handles are 0x4c00SS.. with the size SS in bits 8-15.
func typeSize(dt C.MPI_Datatype) (int, error) {
	h := uint32(dt)
	switch {
	case h == datatypeNull:
		return 0, errorf(errType, "MPI_DATATYPE_NULL")
	case h&0xff000000 == 0x4c000000:
		if n := int(h>>8) & 0xff; n > 0 {
			return n, nil
		}
		return 0, errorf(errType, "datatype %#x (MPI_LB/MPI_UB) has no size", h)
	case h&0xff000000 == 0x8c000000:
		return 0, errorf(errType, "pair datatype %#x (MPI_DOUBLE_INT and the like) is not supported", h)
	}
	return 0, errorf(errType, "datatype %#x is not a predefined contiguous datatype: derived datatypes are not supported", h)
}

// bufLen returns the bytes of count elements of dt.
func bufLen(count C.int, dt C.MPI_Datatype) (int, error) {
	if count < 0 {
		return 0, errorf(errCount, "negative count %d", int(count))
	}
	n, err := typeSize(dt)
	if err != nil {
		return 0, err
	}
	return int(count) * n, nil
}

// Element kinds of the reductions.
const (
	kInt8 = iota + 1
	kUint8
	kInt16
	kUint16
	kInt32
	kUint32
	kInt64
	kUint64
	kFloat32
	kFloat64
)

// kinds maps the predefined datatypes that reductions accept to their
// element kind (values of MPICH's mpi.h; char is signed on x86-64).
var kinds = map[uint32]int{
	0x4c000101: kInt8,    // MPI_CHAR
	0x4c000118: kInt8,    // MPI_SIGNED_CHAR
	0x4c000137: kInt8,    // MPI_INT8_T
	0x4c00012d: kInt8,    // MPI_INTEGER1
	0x4c000102: kUint8,   // MPI_UNSIGNED_CHAR
	0x4c00010d: kUint8,   // MPI_BYTE
	0x4c00013b: kUint8,   // MPI_UINT8_T
	0x4c00013f: kUint8,   // MPI_C_BOOL
	0x4c000133: kUint8,   // MPI_CXX_BOOL
	0x4c000203: kInt16,   // MPI_SHORT
	0x4c000238: kInt16,   // MPI_INT16_T
	0x4c00022f: kInt16,   // MPI_INTEGER2
	0x4c000204: kUint16,  // MPI_UNSIGNED_SHORT
	0x4c00023c: kUint16,  // MPI_UINT16_T
	0x4c000405: kInt32,   // MPI_INT
	0x4c000439: kInt32,   // MPI_INT32_T
	0x4c00041b: kInt32,   // MPI_INTEGER
	0x4c000430: kInt32,   // MPI_INTEGER4
	0x4c00041d: kInt32,   // MPI_LOGICAL
	0x4c00040e: kInt32,   // MPI_WCHAR
	0x4c000406: kUint32,  // MPI_UNSIGNED
	0x4c00043d: kUint32,  // MPI_UINT32_T
	0x4c000807: kInt64,   // MPI_LONG
	0x4c000809: kInt64,   // MPI_LONG_LONG_INT
	0x4c00083a: kInt64,   // MPI_INT64_T
	0x4c000831: kInt64,   // MPI_INTEGER8
	0x4c000843: kInt64,   // MPI_AINT
	0x4c000844: kInt64,   // MPI_OFFSET
	0x4c000845: kInt64,   // MPI_COUNT
	0x4c000808: kUint64,  // MPI_UNSIGNED_LONG
	0x4c000819: kUint64,  // MPI_UNSIGNED_LONG_LONG
	0x4c00083e: kUint64,  // MPI_UINT64_T
	0x4c00040a: kFloat32, // MPI_FLOAT
	0x4c00041c: kFloat32, // MPI_REAL
	0x4c000427: kFloat32, // MPI_REAL4
	0x4c00080b: kFloat64, // MPI_DOUBLE
	0x4c00081f: kFloat64, // MPI_DOUBLE_PRECISION
	0x4c000829: kFloat64, // MPI_REAL8
}

// MPI_Op handles of MPICH's mpi.h.
const (
	opMax    = 0x58000001
	opMin    = 0x58000002
	opSum    = 0x58000003
	opProd   = 0x58000004
	opLand   = 0x58000005
	opBand   = 0x58000006
	opLor    = 0x58000007
	opBor    = 0x58000008
	opLxor   = 0x58000009
	opBxor   = 0x5800000a
	opMinloc = 0x5800000b
	opMaxloc = 0x5800000c
	opNull   = 0x18000000 // MPI_OP_NULL
)

type integer interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64
}

func b2i[T integer](b bool) T {
	if b {
		return 1
	}
	return 0
}

// arith is the reducer of SUM, PROD, MAX and MIN on T.
func arith[T mplite.Number](op C.MPI_Op) (mplite.Reducer, bool) {
	switch op {
	case opSum:
		return mplite.Sum[T]().Reducer(), true
	case opProd:
		return mplite.Prod[T]().Reducer(), true
	case opMax:
		return mplite.Max[T]().Reducer(), true
	case opMin:
		return mplite.Min[T]().Reducer(), true
	}
	return mplite.Reducer{}, false
}

// intOp is the reducer of op on the integer type T.
func intOp[T integer](op C.MPI_Op) (mplite.Reducer, bool) {
	if r, ok := arith[T](op); ok {
		return r, true
	}
	var f func(a, b T) T
	switch op {
	case opLand:
		f = func(a, b T) T { return b2i[T](a != 0 && b != 0) }
	case opLor:
		f = func(a, b T) T { return b2i[T](a != 0 || b != 0) }
	case opLxor:
		f = func(a, b T) T { return b2i[T]((a != 0) != (b != 0)) }
	case opBand:
		f = func(a, b T) T { return a & b }
	case opBor:
		f = func(a, b T) T { return a | b }
	case opBxor:
		f = func(a, b T) T { return a ^ b }
	default:
		return mplite.Reducer{}, false
	}
	return mplite.NewOp(f, true).Reducer(), true
}

// reducer returns the byte-level reducer of a predefined operation on a
// predefined datatype.
func reducer(op C.MPI_Op, dt C.MPI_Datatype) (mplite.Reducer, error) {
	if op == opMinloc || op == opMaxloc {
		return pairReducer(op, dt)
	}
	if uint32(op)&0xff000000 != 0x58000000 {
		lib.mu.Lock()
		u := lib.ops.at(int32(op))
		lib.mu.Unlock()
		if u == nil {
			return mplite.Reducer{}, errorf(errOp, "invalid operation %#x", uint32(op))
		}
		return userReducer(u, dt)
	}
	if !isBuiltin(dt) {
		// The predefined operations are defined on predefined types only
		// (MPICH refuses the rest as we do).
		return mplite.Reducer{}, errorf(errOp, "operation %#x is not defined for derived datatype %#x", uint32(op), uint32(dt))
	}
	if _, err := typeSize(dt); err != nil {
		return mplite.Reducer{}, err
	}
	k, ok := kinds[uint32(dt)]
	if !ok {
		if k, ok = extKinds[uint32(dt)]; !ok {
			return mplite.Reducer{}, errorf(errType, "reductions on datatype %#x are not supported", uint32(dt))
		}
	}
	var r mplite.Reducer
	switch k {
	case kComplex64, kComplex128, kLongDouble, kLongDoubleComplex:
		r, ok = extReducer(op, k)
	case kInt8:
		r, ok = intOp[int8](op)
	case kUint8:
		r, ok = intOp[uint8](op)
	case kInt16:
		r, ok = intOp[int16](op)
	case kUint16:
		r, ok = intOp[uint16](op)
	case kInt32:
		r, ok = intOp[int32](op)
	case kUint32:
		r, ok = intOp[uint32](op)
	case kInt64:
		r, ok = intOp[int64](op)
	case kUint64:
		r, ok = intOp[uint64](op)
	case kFloat32:
		r, ok = arith[float32](op)
	case kFloat64:
		r, ok = arith[float64](op)
	}
	if !ok {
		if uint32(op)&0xff000000 != 0x58000000 {
			return r, errorf(errOp, "operation %#x: user-defined operations are not supported", uint32(op))
		}
		return r, errorf(errOp, "operation %#x is not supported on datatype %#x", uint32(op), uint32(dt))
	}
	return r, nil
}

// maxCount guards count arithmetic on 32-bit counts.
const maxCount = math.MaxInt32

//export PMPI_Type_size
func PMPI_Type_size(dt C.MPI_Datatype, size *C.int) (mpirc C.int) {
	defer guard("MPI_Type_size", &mpirc)
	l, _, err := layoutOf(dt)
	if err != nil {
		return ret("MPI_Type_size", err)
	}
	*size = C.int(l.size)
	return errSuccess
}

//export PMPI_Get_count
func PMPI_Get_count(stArg C.uintptr_t, dt C.MPI_Datatype, count *C.int) (mpirc C.int) {
	defer guard("MPI_Get_count", &mpirc)
	st := statusPtr(stArg)
	l, _, err := layoutOf(dt)
	if err != nil {
		return ret("MPI_Get_count", err)
	}
	n := countOf(l.size, statusCount(st))
	if n > maxCount {
		n = undefined
	}
	*count = C.int(n)
	return errSuccess
}
