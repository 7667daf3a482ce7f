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
// (kind 0 or 1, as keyKind) and the name of its set or get call.
func attrObject(kind C.int, h C.int, get bool) (holder, string, error) {
	if keyKind(kind) == keyType {
		fn := "MPI_Type_set_attr"
		if get {
			fn = "MPI_Type_get_attr"
		}
		o, err := typeAttrs(C.MPI_Datatype(h))
		return o, fn, err
	}
	fn := "MPI_Comm_set_attr"
	if get {
		fn = "MPI_Comm_get_attr"
	}
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

// evAttrGet is MPII_Comm_get_attr and MPII_Type_get_attr (getInto).
//
//export evAttrGet
func evAttrGet(kind, h, key C.int, out unsafe.Pointer, flag *C.int, outtype C.int) (mpirc C.int) {
	defer guard("MPI_Comm_get_attr", &mpirc)
	o, fn, err := attrObject(kind, h, true)
	if err == nil {
		err = o.getInto(int32(key), out, flag, outtype)
	}
	return retc(commWorld, fn, err)
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
