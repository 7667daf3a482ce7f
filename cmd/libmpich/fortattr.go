package main

/*
#include "ethervia_mpi_types.h"
#include <stdint.h>
*/
import "C"

import "unsafe"

// Attributes from Fortran. Debian's libmpichfort.so.12 sets and reads
// attributes through MPICH's MPII_ helpers (fortran.c), which pass the
// attribute's type: from Fortran the value is the integer itself, read
// back as an INTEGER (4 bytes, MPI_ATTR_GET) or an address-sized one
// (MPI_COMM_GET_ATTR). Fortran's predefined keyvals are C's plus one
// (mpif.h: MPI_TAG_UB is 0x64400002 where mpi.h has 0x64400001).

// attrObject returns the attribute holder of communicator or datatype h
// (kind 0 or 1, as keyKind) and the name of the call, for errors.
func attrObject(kind C.int, h C.int, get bool) (holder, string, error) {
	if keyKind(kind) == keyType {
		fn := map[bool]string{false: "MPI_Type_set_attr", true: "MPI_Type_get_attr"}[get]
		o, err := typeAttrs(C.MPI_Datatype(h))
		return o, fn, err
	}
	fn := map[bool]string{false: "MPI_Comm_set_attr", true: "MPI_Comm_get_attr"}[get]
	ce, err := lib.comm(C.MPI_Comm(h))
	if err != nil {
		return holder{}, fn, err
	}
	return ce.attrs(), fn, nil
}

// evAttrSet is MPII_Comm_set_attr and MPII_Type_set_attr: val is the
// value itself (typ attrAint or attrInt, from Fortran) or C's pointer.
//
//export evAttrSet
func evAttrSet(kind, h, key C.int, val C.uintptr_t, typ C.int) (mpirc C.int) {
	defer guard("MPI_Comm_set_attr", &mpirc)
	o, fn, err := attrObject(kind, h, false)
	if err == nil {
		err = o.setAttr(int32(key), attr{val: val, typ: typ})
	}
	return retc(commWorld, fn, err)
}

// evAttrGet is MPII_Comm_get_attr and MPII_Type_get_attr: it stores the
// attribute in *out as outtype says (a Fortran INTEGER, an address-sized
// integer, or C's void *).
//
//export evAttrGet
func evAttrGet(kind, h, key C.int, out unsafe.Pointer, flag *C.int, outtype C.int) (mpirc C.int) {
	defer guard("MPI_Comm_get_attr", &mpirc)
	o, fn, err := attrObject(kind, h, true)
	if err == nil && (out == nil || flag == nil) {
		err = errorf(errArg, "NULL value or flag")
	}
	if err != nil {
		return retc(commWorld, fn, err)
	}
	k := int32(key)
	if uint32(k)>>24 == 0x64 && k&1 == 0 && outtype != attrPtr {
		k-- // Fortran's name of a predefined key
	}
	var a attr
	ok := false
	if keyKind(kind) == keyComm {
		lib.mu.Lock()
		var p C.uintptr_t
		if p, ok = lib.predefinedAttr(k); ok {
			a = attr{val: p}
			if outtype != attrPtr {
				a.val = C.uintptr_t(lib.predefinedValue(k))
			}
		}
		lib.mu.Unlock()
	}
	if !ok {
		if a, ok, err = o.getAttr(k); err != nil {
			return retc(commWorld, fn, err)
		}
	}
	*flag = 0
	if !ok {
		return errSuccess
	}
	*flag = 1
	switch outtype {
	case attrInt:
		*(*C.int)(out) = C.int(a.val)
	case attrAint:
		*(*C.intptr_t)(out) = C.intptr_t(a.val)
	default:
		*(*C.uintptr_t)(out) = a.val
	}
	return errSuccess
}

// evKeyvalSetProxy is MPII_Keyval_set_proxy: the keyval's callbacks are
// Fortran's, called through these proxies.
//
//export evKeyvalSetProxy
func evKeyvalSetProxy(key C.int, copyProxy, deleteProxy unsafe.Pointer) {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if kv := lib.keyvals.at(int32(key)); kv != nil {
		kv.copyProxy, kv.deleteProxy = copyProxy, deleteProxy
	}
}
