package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// keyval is a user attribute key: its copy and delete callbacks (C
// functions, NULL for MPI_COMM_NULL_COPY_FN and MPI_COMM_NULL_DELETE_FN)
// and the program's extra state.
//
// The extra state and the attribute values are the program's void *, which
// often hold plain integers: they are kept as uintptr, never in a Go
// pointer, where the runtime would take a small one for a bad pointer and
// abort (it did, copying a stack under load).
type keyval struct {
	copyFn, deleteFn unsafe.Pointer
	extra            C.uintptr_t
	freed            bool // MPI_Comm_free_keyval: no new attributes
}

// attr is an attribute a communicator holds.
type attr struct{ val C.uintptr_t }

// keyFirst is the first user keyval: MPICH's indirect keyval handles,
// apart from MPI_KEYVAL_INVALID and the predefined keys.
const keyFirst = -0x5c000000 // 0xa4000000 as an int32

// predefined lists the predefined attributes in the order of their slots
// in library.attrVals (C memory: MPI_Comm_get_attr hands out pointers to
// them, which must stay put).
var predefined = [...]int32{keyTagUB, keyHost, keyIO, keyWtimeIsGlobal, keyUniverseSize, keyLastUsedCode, keyAppNum}

// setPredefined fills the predefined attributes' values for a world of
// size ranks. l.mu is held.
func (l *library) setPredefined(size int) {
	if l.attrVals == nil {
		l.attrVals = cMalloc(len(predefined) * int(unsafe.Sizeof(C.int(0))))
	}
	vals := unsafe.Slice((*C.int)(l.attrVals), len(predefined))
	vals[0] = mplite.MaxTag
	vals[1] = procNull  // no host process
	vals[2] = anySource // every rank can do I/O
	vals[3] = 0         // clocks are not synchronized
	vals[4] = C.int(size)
	vals[5] = C.int(l.lastCode()) // MPI_LASTUSEDCODE
	vals[6] = 0
}

// predefinedAttr returns the value pointer of a predefined attribute.
// l.mu is held.
func (l *library) predefinedAttr(key int32) (C.uintptr_t, bool) {
	for i, k := range predefined {
		if k == key && l.attrVals != nil {
			return C.uintptr_t(uintptr(unsafe.Add(l.attrVals, i*int(unsafe.Sizeof(C.int(0)))))), true
		}
	}
	return 0, false
}

//export PMPI_Comm_create_keyval
func PMPI_Comm_create_keyval(copyFn, deleteFn unsafe.Pointer, key *C.int, extra C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Comm_create_keyval", &mpirc)
	if key == nil {
		return ret("MPI_Comm_create_keyval", errorf(errArg, "NULL keyval"))
	}
	lib.mu.Lock()
	k := lib.keyvals.add(keyFirst, &keyval{copyFn: copyFn, deleteFn: deleteFn, extra: extra})
	lib.mu.Unlock()
	*key = C.int(k)
	return errSuccess
}

//export PMPI_Keyval_create
func PMPI_Keyval_create(copyFn, deleteFn unsafe.Pointer, key *C.int, extra C.uintptr_t) C.int {
	return PMPI_Comm_create_keyval(copyFn, deleteFn, key, extra)
}

//export PMPI_Comm_free_keyval
func PMPI_Comm_free_keyval(key *C.int) (mpirc C.int) {
	defer guard("MPI_Comm_free_keyval", &mpirc)
	if key == nil {
		return ret("MPI_Comm_free_keyval", errorf(errArg, "NULL keyval"))
	}
	lib.mu.Lock()
	kv := lib.keyvals.at(int32(*key))
	if kv != nil {
		kv.freed = true // attributes already set keep it until deleted
	}
	lib.mu.Unlock()
	if kv == nil {
		return ret("MPI_Comm_free_keyval", errorf(errArg, "invalid keyval %#x", uint32(*key)))
	}
	*key = keyvalInvalid
	return errSuccess
}

//export PMPI_Keyval_free
func PMPI_Keyval_free(key *C.int) C.int { return PMPI_Comm_free_keyval(key) }

//export PMPI_Comm_set_attr
func PMPI_Comm_set_attr(comm C.MPI_Comm, key C.int, val C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Comm_set_attr", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_set_attr", err)
	}
	lib.mu.Lock()
	kv := lib.keyvals.at(int32(key))
	old, had := ce.attrs[int32(key)]
	lib.mu.Unlock()
	if kv == nil || kv.freed {
		return retc(comm, "MPI_Comm_set_attr", errorf(errArg, "invalid keyval %#x", uint32(key)))
	}
	if had {
		// Replacing a value deletes the old one first.
		if code := deleteAttr(ce, int32(key), kv, old); code != 0 {
			return retc(comm, "MPI_Comm_set_attr", errorf(code, "the delete callback of keyval %#x failed with %d", uint32(key), code))
		}
	}
	lib.mu.Lock()
	if ce.attrs == nil {
		ce.attrs = make(map[int32]attr)
	}
	ce.attrs[int32(key)] = attr{val: val}
	lib.mu.Unlock()
	return errSuccess
}

//export PMPI_Attr_put
func PMPI_Attr_put(comm C.MPI_Comm, key C.int, val C.uintptr_t) C.int {
	return PMPI_Comm_set_attr(comm, key, val)
}

// MPI_Comm_get_attr stores the attribute's value (the pointer the program
// set; for a predefined key, a pointer to an int) in *(void **)out.
//
//export PMPI_Comm_get_attr
func PMPI_Comm_get_attr(comm C.MPI_Comm, key C.int, out unsafe.Pointer, flag *C.int) (mpirc C.int) {
	defer guard("MPI_Comm_get_attr", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_get_attr", err)
	}
	if out == nil || flag == nil {
		return retc(comm, "MPI_Comm_get_attr", errorf(errArg, "NULL value or flag"))
	}
	lib.mu.Lock()
	val, ok := lib.predefinedAttr(int32(key))
	known := ok
	if !ok {
		var a attr
		a, ok = ce.attrs[int32(key)]
		val = a.val
		known = lib.keyvals.has(int32(key))
	}
	lib.mu.Unlock()
	if !known {
		return retc(comm, "MPI_Comm_get_attr", errorf(errArg, "invalid keyval %#x", uint32(key)))
	}
	*flag = 0
	if ok {
		*(*C.uintptr_t)(out) = val
		*flag = 1
	}
	return errSuccess
}

//export PMPI_Attr_get
func PMPI_Attr_get(comm C.MPI_Comm, key C.int, out unsafe.Pointer, flag *C.int) C.int {
	return PMPI_Comm_get_attr(comm, key, out, flag)
}

//export PMPI_Comm_delete_attr
func PMPI_Comm_delete_attr(comm C.MPI_Comm, key C.int) (mpirc C.int) {
	defer guard("MPI_Comm_delete_attr", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_delete_attr", err)
	}
	lib.mu.Lock()
	kv := lib.keyvals.at(int32(key))
	a, had := ce.attrs[int32(key)]
	lib.mu.Unlock()
	if kv == nil || !had {
		return retc(comm, "MPI_Comm_delete_attr", errorf(errArg, "no attribute for keyval %#x", uint32(key)))
	}
	if code := deleteAttr(ce, int32(key), kv, a); code != 0 {
		return retc(comm, "MPI_Comm_delete_attr", errorf(code, "the delete callback of keyval %#x failed with %d", uint32(key), code))
	}
	return errSuccess
}

//export PMPI_Attr_delete
func PMPI_Attr_delete(comm C.MPI_Comm, key C.int) C.int { return PMPI_Comm_delete_attr(comm, key) }

// deleteAttr runs the delete callback of ce's attribute under key and, if
// it succeeds, removes the attribute. It returns the callback's code.
func deleteAttr(ce *commEntry, key int32, kv *keyval, a attr) int {
	if kv.deleteFn != nil {
		if code := callDelete(kv.deleteFn, ce.h, key, a.val, kv.extra); code != 0 {
			return code
		}
	}
	lib.mu.Lock()
	delete(ce.attrs, key)
	lib.mu.Unlock()
	return 0
}

// deleteAll deletes every attribute of ce (MPI_Comm_free, and
// MPI_COMM_SELF's at MPI_Finalize); the first failing callback's code is
// returned.
func deleteAll(ce *commEntry) int {
	lib.mu.Lock()
	keys := make([]int32, 0, len(ce.attrs))
	for k := range ce.attrs {
		keys = append(keys, k)
	}
	lib.mu.Unlock()
	first := 0
	for _, k := range keys {
		lib.mu.Lock()
		kv, a := lib.keyvals.at(k), ce.attrs[k]
		lib.mu.Unlock()
		if kv == nil {
			continue
		}
		if code := deleteAttr(ce, k, kv, a); code != 0 && first == 0 {
			first = code
		}
	}
	return first
}

// copyAttrs gives the duplicate ne of ce the attributes whose copy
// callbacks say so (MPI_Comm_dup).
func copyAttrs(ce, ne *commEntry) int {
	lib.mu.Lock()
	type kva struct {
		k  int32
		kv *keyval
		a  attr
	}
	var all []kva
	for k, a := range ce.attrs {
		if kv := lib.keyvals.at(k); kv != nil && kv.copyFn != nil {
			all = append(all, kva{k, kv, a})
		}
	}
	lib.mu.Unlock()
	for _, x := range all {
		code, out, keep := callCopy(x.kv.copyFn, ce.h, x.k, x.kv.extra, x.a.val)
		if code != 0 {
			return code
		}
		if keep {
			lib.mu.Lock()
			if ne.attrs == nil {
				ne.attrs = make(map[int32]attr)
			}
			ne.attrs[x.k] = attr{val: out}
			lib.mu.Unlock()
		}
	}
	return 0
}
