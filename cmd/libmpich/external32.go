package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"encoding/binary"
	"unsafe"
)

// The external32 data representation (MPI_Pack_external): every basic
// element big-endian, in the sizes the MPI standard fixes, with no gaps.
// It is the native packing (layout.pack) with each element converted, so
// the layout's spans say which basic type each packed byte is.

// extConv is how one element of a predefined type is converted.
type extConv struct {
	native, ext int  // bytes of one element here and in external32
	signed      bool // a narrowed integer is sign-extended when unpacked
	x87         bool // long double: x87 80-bit here, IEEE binary128 there
}

// Predefined types whose external32 form is not one big-endian element of
// their own size.
var (
	// two elements of half the size: complex numbers and Fortran pairs
	halves = map[uint32]bool{
		0x4c00081e: true, 0x4c001022: true, // MPI_COMPLEX, MPI_DOUBLE_COMPLEX
		0x4c000828: true, 0x4c00102a: true, 0x4c00202c: true, // MPI_COMPLEX8, 16, 32
		0x4c000840: true, 0x4c001041: true, // MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX
		0x4c000834: true, 0x4c001035: true, // MPI_CXX_FLOAT_COMPLEX, MPI_CXX_DOUBLE_COMPLEX
		type2Int: true, 0x4c000820: true, 0x4c000821: true, 0x4c001023: true, // MPI_2INT, MPI_2INTEGER, MPI_2REAL, MPI_2DOUBLE_PRECISION
	}
	// long double and its complex forms
	x87Types = map[uint32]int{0x4c00100c: 1, 0x4c002042: 2, 0x4c002036: 2}
	// narrower in external32: MPI_LONG and MPI_UNSIGNED_LONG are 4 bytes,
	// MPI_WCHAR 2
	narrowed = map[uint32]extConv{
		0x4c000807: {native: 8, ext: 4, signed: true},
		0x4c000808: {native: 8, ext: 4},
		0x4c00040e: {native: 4, ext: 2},
	}
)

// extConvOf returns the conversion of the predefined type h.
func extConvOf(h uint32) (extConv, error) {
	n, err := typeSize(C.MPI_Datatype(h))
	if err != nil {
		return extConv{}, err
	}
	if c, ok := narrowed[h]; ok {
		return c, nil
	}
	if k, ok := x87Types[h]; ok {
		return extConv{native: n / k, ext: n / k, x87: true}, nil
	}
	if halves[h] {
		n /= 2
	}
	return extConv{native: n, ext: n}, nil
}

// typeSpans returns l's spans, also for a layout of one plain type.
func (l *layout) typeSpans() ([]span, error) {
	switch {
	case l.spans != nil:
		return l.spans, nil
	case l.size == 0:
		return nil, nil
	case l.spansLost || !plainBasic(l.basic):
		return nil, errorf(errType, "external32: a datatype mixing more than %d runs of basic types is not supported", maxSpans)
	}
	return []span{{l.size, l.basic}}, nil
}

// extSize returns the bytes of one element of l in external32.
func (l *layout) extSize() (int64, error) {
	spans, err := l.typeSpans()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, sp := range spans {
		c, err := extConvOf(sp.basic)
		if err != nil {
			return 0, err
		}
		n += sp.n / int64(c.native) * int64(c.ext)
	}
	return n, nil
}

// eachValue calls f with the conversion of every basic value of count
// elements of l, in type-map order.
func (l *layout) eachValue(count int, f func(c extConv)) error {
	spans, err := l.typeSpans()
	if err != nil {
		return err
	}
	for e := 0; e < count; e++ {
		for _, sp := range spans {
			c, err := extConvOf(sp.basic)
			if err != nil {
				return err
			}
			for i := int64(0); i < sp.n; i += int64(c.native) {
				f(c)
			}
		}
	}
	return nil
}

// packExternal converts count elements of l at src (C memory) into dst,
// which holds count*extSize bytes.
func (l *layout) packExternal(dst []byte, src unsafe.Pointer, count int) error {
	native := make([]byte, int64(count)*l.size)
	l.pack(native, src, count)
	return l.eachValue(count, func(c extConv) {
		toExternal(dst[:c.ext], native[:c.native], c)
		dst, native = dst[c.ext:], native[c.native:]
	})
}

// unpackExternal converts count elements in external32 from src into l's
// layout at dst.
func (l *layout) unpackExternal(dst unsafe.Pointer, src []byte, count int) error {
	native := make([]byte, int64(count)*l.size)
	out := native
	if err := l.eachValue(count, func(c extConv) {
		fromExternal(out[:c.native], src[:c.ext], c)
		out, src = out[c.native:], src[c.ext:]
	}); err != nil {
		return err
	}
	l.unpack(dst, native, count)
	return nil
}

// toExternal converts one little-endian element.
func toExternal(ext, native []byte, c extConv) {
	if c.x87 {
		x87ToQuad(ext, native)
		return
	}
	for i := range ext { // the low c.ext bytes, most significant first
		ext[i] = native[c.ext-1-i]
	}
}

// fromExternal converts one big-endian element back.
func fromExternal(native, ext []byte, c extConv) {
	if c.x87 {
		quadToX87(native, ext)
		return
	}
	for i := 0; i < c.ext; i++ {
		native[i] = ext[c.ext-1-i]
	}
	fill := byte(0)
	if c.signed && ext[0]&0x80 != 0 {
		fill = 0xff
	}
	for i := c.ext; i < c.native; i++ {
		native[i] = fill
	}
}

// x87ToQuad converts an x87 extended number (64-bit mantissa with its
// integer bit, then sign and 15-bit exponent; 16 bytes with padding) to
// IEEE binary128, big-endian: the same sign and biased exponent, the
// mantissa's 63 fraction bits at the top of the 112-bit fraction.
func x87ToQuad(q, x []byte) {
	m := binary.LittleEndian.Uint64(x[0:8])
	se := binary.LittleEndian.Uint16(x[8:10])
	binary.BigEndian.PutUint16(q[0:2], se)
	binary.BigEndian.PutUint64(q[2:10], m<<1) // the integer bit drops out
	clear(q[10:16])
}

// quadToX87 is x87ToQuad's inverse (the fraction's low 49 bits, which x87
// cannot hold, are dropped).
func quadToX87(x, q []byte) {
	se := binary.BigEndian.Uint16(q[0:2])
	m := binary.BigEndian.Uint64(q[2:10]) >> 1
	if se&0x7fff != 0 {
		m |= 1 << 63 // normal numbers, infinities and NaNs have the integer bit
	}
	binary.LittleEndian.PutUint64(x[0:8], m)
	binary.LittleEndian.PutUint16(x[8:10], se)
	clear(x[10:16])
}

// checkDatarep accepts the one representation there is.
func checkDatarep(datarep *C.char) error {
	if datarep == nil {
		return errorf(errArg, "NULL datarep")
	}
	if r := C.GoString(datarep); r != "external32" {
		return errorf(errArg, "data representation %q: only \"external32\" is supported", r)
	}
	return nil
}

//export PMPI_Pack_external_size
func PMPI_Pack_external_size(datarep *C.char, count C.int, dt C.MPI_Datatype, size *C.MPI_Aint) (mpirc C.int) {
	defer guard("MPI_Pack_external_size", &mpirc)
	const fn = "MPI_Pack_external_size"
	if err := checkDatarep(datarep); err != nil {
		return ret(fn, err)
	}
	l, _, err := layoutOf(dt)
	if err != nil {
		return ret(fn, err)
	}
	if count < 0 {
		return ret(fn, errorf(errCount, "negative count %d", int(count)))
	}
	n, err := l.extSize()
	if err != nil {
		return ret(fn, err)
	}
	*size = C.MPI_Aint(int64(count) * n)
	return errSuccess
}

// externalArgs checks the arguments shared by MPI_Pack_external and
// MPI_Unpack_external: the representation, the datatype, and that count
// elements (n bytes in external32) fit at *pos in a buffer of size bytes.
func externalArgs(what string, datarep *C.char, count C.int, dt C.MPI_Datatype, pos *C.MPI_Aint, size C.MPI_Aint) (l *layout, n int64, err error) {
	if err := checkDatarep(datarep); err != nil {
		return nil, 0, err
	}
	if pos == nil {
		return nil, 0, errorf(errArg, "NULL position")
	}
	if l, err = commLayout(dt); err != nil {
		return nil, 0, err
	}
	per, err := l.extSize()
	if err != nil {
		return nil, 0, err
	}
	n = int64(count) * per
	if count < 0 || *pos < 0 || int64(*pos)+n > int64(size) {
		return nil, 0, errorf(errTruncate, "%s %d bytes at %d of %d", what, n, int64(*pos), int64(size))
	}
	return l, n, nil
}

//export PMPI_Pack_external
func PMPI_Pack_external(datarep *C.char, in unsafe.Pointer, count C.int, dt C.MPI_Datatype, out unsafe.Pointer, outsize C.MPI_Aint, pos *C.MPI_Aint) (mpirc C.int) {
	defer guard("MPI_Pack_external", &mpirc)
	l, n, err := externalArgs("packing", datarep, count, dt, pos, outsize)
	if err == nil {
		err = l.packExternal(goBytes(unsafe.Add(out, int(*pos)), int(n)), in, int(count))
	}
	if err != nil {
		return ret("MPI_Pack_external", err)
	}
	*pos += C.MPI_Aint(n)
	return errSuccess
}

//export PMPI_Unpack_external
func PMPI_Unpack_external(datarep *C.char, in unsafe.Pointer, insize C.MPI_Aint, pos *C.MPI_Aint, out unsafe.Pointer, count C.int, dt C.MPI_Datatype) (mpirc C.int) {
	defer guard("MPI_Unpack_external", &mpirc)
	l, n, err := externalArgs("unpacking", datarep, count, dt, pos, insize)
	if err == nil {
		err = l.unpackExternal(out, goBytes(unsafe.Add(in, int(*pos)), int(n)), int(count))
	}
	if err != nil {
		return ret("MPI_Unpack_external", err)
	}
	*pos += C.MPI_Aint(n)
	return errSuccess
}
