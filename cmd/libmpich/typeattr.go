package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import "unsafe"

// Attributes on datatypes: the communicators' machinery (attr.go) with
// keyvals of their own kind. MPI_Type_dup runs the copy callbacks,
// MPI_Type_free and MPI_Type_delete_attr the delete callbacks.

// typeAttrs returns the attribute holder of dt. Predefined datatypes hold
// attributes too, kept in the library by handle.
func typeAttrs(dt C.MPI_Datatype) (holder, error) {
	if _, _, err := layoutOf(dt); err != nil {
		return holder{}, err
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if te := lib.types.at(int32(dt)); te != nil {
		return holder{keyType, C.int(dt), &te.attrSet}, nil
	}
	if lib.typeAttrs == nil {
		lib.typeAttrs = make(map[int32]*attrSet)
	}
	set := lib.typeAttrs[int32(dt)]
	if set == nil {
		set = &attrSet{}
		lib.typeAttrs[int32(dt)] = set
	}
	return holder{keyType, C.int(dt), set}, nil
}

//export PMPI_Type_create_keyval
func PMPI_Type_create_keyval(copyFn, deleteFn unsafe.Pointer, key *C.int, extra C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Type_create_keyval", &mpirc)
	return ret("MPI_Type_create_keyval", createKeyval(keyType, copyFn, deleteFn, key, extra))
}

//export PMPI_Type_free_keyval
func PMPI_Type_free_keyval(key *C.int) (mpirc C.int) {
	defer guard("MPI_Type_free_keyval", &mpirc)
	return ret("MPI_Type_free_keyval", freeKeyval(keyType, key))
}

//export PMPI_Type_set_attr
func PMPI_Type_set_attr(dt C.MPI_Datatype, key C.int, val C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Type_set_attr", &mpirc)
	o, err := typeAttrs(dt)
	if err == nil {
		err = o.setAttr(int32(key), attr{val: val})
	}
	return ret("MPI_Type_set_attr", err)
}

// MPI_Type_get_attr stores the value the program set in *(void **)out.
//
//export PMPI_Type_get_attr
func PMPI_Type_get_attr(dt C.MPI_Datatype, key C.int, out unsafe.Pointer, flag *C.int) (mpirc C.int) {
	defer guard("MPI_Type_get_attr", &mpirc)
	o, err := typeAttrs(dt)
	if err == nil {
		err = o.getInto(int32(key), out, flag, attrPtr)
	}
	return ret("MPI_Type_get_attr", err)
}

//export PMPI_Type_delete_attr
func PMPI_Type_delete_attr(dt C.MPI_Datatype, key C.int) (mpirc C.int) {
	defer guard("MPI_Type_delete_attr", &mpirc)
	o, err := typeAttrs(dt)
	if err == nil {
		err = o.removeAttr(int32(key))
	}
	return ret("MPI_Type_delete_attr", err)
}
