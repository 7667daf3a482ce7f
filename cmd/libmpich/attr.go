package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"slices"
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// keyval is a user attribute key: the kind of object it is for, its copy
// and delete callbacks (C functions, NULL for MPI_COMM_NULL_COPY_FN,
// MPI_TYPE_NULL_DELETE_FN and the like) and the program's extra state.
//
// The extra state and the attribute values are the program's void *, which
// often hold plain integers: they are kept as uintptr, never in a Go
// pointer, where the runtime would take a small one for a bad pointer and
// abort (it did, copying a stack under load).
type keyval struct {
	kind             keyKind
	copyFn, deleteFn unsafe.Pointer
	extra            C.uintptr_t
	freed            bool // MPI_*_free_keyval: no new attributes
	// Fortran's bindings call the program's callbacks through proxies
	// (MPII_Keyval_set_proxy), which take the arguments as C passes them
	// and hand them on by reference.
	copyProxy, deleteProxy unsafe.Pointer
}

// keyKind is the kind of object a keyval's attributes hang on: a key made
// for one kind is invalid on another, as in MPICH.
type keyKind int

const (
	keyComm keyKind = iota
	keyType
)

func (k keyKind) String() string { return [...]string{"communicator", "datatype"}[k] }

// attr is an attribute an object holds: its value and how it was set, as
// MPICH's attribute types say (attrPtr from C, attrAint or attrInt from
// Fortran, where the value is the integer itself).
type attr struct {
	val C.uintptr_t
	typ C.int
}

const (
	attrPtr  = 0 // MPIR_ATTR_PTR
	attrAint = 1 // MPIR_ATTR_AINT: INTEGER(KIND=MPI_ADDRESS_KIND)
	attrInt  = 3 // MPIR_ATTR_INT: INTEGER
)

// attrSet is the attributes an object holds, by keyval. Guarded by lib.mu.
type attrSet struct{ m map[int32]attr }

// holder is an object with attributes: a communicator or a datatype. The
// callbacks get its handle (MPI_Comm and MPI_Datatype are both ints).
type holder struct {
	kind keyKind
	h    C.int
	set  *attrSet
}

// keyFirst is the first user keyval: MPICH's indirect keyval handles,
// apart from MPI_KEYVAL_INVALID and the predefined keys.
const keyFirst = -0x5c000000 // 0xa4000000 as an int32

// predefined lists the predefined attributes in the order of their slots
// in library.attrVals (C memory: MPI_Comm_get_attr hands out pointers to
// them, which must stay put).
var predefined = [...]int32{keyTagUB, keyHost, keyIO, keyWtimeIsGlobal, keyUniverseSize, keyLastUsedCode, keyAppNum}

// predefinedValue is the value of predefined attribute key (one for which
// predefinedAttr answers). l.mu is held.
func (l *library) predefinedValue(key int32) C.int {
	vals := unsafe.Slice((*C.int)(l.attrVals), len(predefined))
	for i, k := range predefined {
		if k == key {
			return vals[i]
		}
	}
	return 0
}

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

// createKeyval makes a keyval of kind for MPI_Comm_create_keyval and
// MPI_Type_create_keyval.
func createKeyval(kind keyKind, copyFn, deleteFn unsafe.Pointer, key *C.int, extra C.uintptr_t) error {
	if key == nil {
		return errorf(errArg, "NULL keyval")
	}
	lib.mu.Lock()
	k := lib.keyvals.add(keyFirst, &keyval{kind: kind, copyFn: copyFn, deleteFn: deleteFn, extra: extra})
	lib.mu.Unlock()
	*key = C.int(k)
	return nil
}

// freeKeyval marks a keyval of kind freed and resets *key.
func freeKeyval(kind keyKind, key *C.int) error {
	if key == nil {
		return errorf(errArg, "NULL keyval")
	}
	lib.mu.Lock()
	kv := lib.keyvals.at(int32(*key))
	if kv != nil && kv.kind == kind {
		kv.freed = true // attributes already set keep it until deleted
	}
	lib.mu.Unlock()
	if kv == nil || kv.kind != kind {
		return errorf(errArg, "invalid %s keyval %#x", kind, uint32(*key))
	}
	*key = keyvalInvalid
	return nil
}

// keyvalFor returns the keyval key for an object of o's kind. lib.mu is
// held.
func (o holder) keyvalFor(key int32) (*keyval, error) {
	kv := lib.keyvals.at(key)
	if kv == nil || kv.kind != o.kind {
		return nil, errorf(errArg, "invalid %s keyval %#x", o.kind, uint32(key))
	}
	return kv, nil
}

// setAttr attaches a under key, deleting the value it replaces first.
func (o holder) setAttr(key int32, a attr) error {
	lib.mu.Lock()
	kv, err := o.keyvalFor(key)
	old, had := o.set.m[key]
	lib.mu.Unlock()
	if err == nil && kv.freed {
		err = errorf(errArg, "keyval %#x was freed", uint32(key))
	}
	if err != nil {
		return err
	}
	if had {
		if err := o.deleteAttr(key, kv, old); err != nil {
			return err
		}
	}
	lib.mu.Lock()
	if o.set.m == nil {
		o.set.m = make(map[int32]attr)
	}
	o.set.m[key] = a
	lib.mu.Unlock()
	return nil
}

// getAttr returns the attribute under key and whether there is one.
func (o holder) getAttr(key int32) (attr, bool, error) {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if _, err := o.keyvalFor(key); err != nil {
		return attr{}, false, err
	}
	a, ok := o.set.m[key]
	return a, ok, nil
}

// getInto stores the attribute under key in *out as outtype says (a
// Fortran INTEGER, an address-sized integer, or C's void *) and sets
// *flag to whether there is one. A communicator answers for the
// predefined keys too (by C's name, and from Fortran by Fortran's): C gets
// a pointer to the value, Fortran the value.
func (o holder) getInto(key int32, out unsafe.Pointer, flag *C.int, outtype C.int) error {
	if out == nil || flag == nil {
		return errorf(errArg, "NULL value or flag")
	}
	if uint32(key)>>24 == 0x64 && key&1 == 0 && outtype != attrPtr {
		key-- // Fortran's name of a predefined key
	}
	var a attr
	ok := false
	if o.kind == keyComm {
		lib.mu.Lock()
		var p C.uintptr_t
		if p, ok = lib.predefinedAttr(key); ok {
			a = attr{val: p}
			if outtype != attrPtr {
				a.val = C.uintptr_t(lib.predefinedValue(key))
			}
		}
		lib.mu.Unlock()
	}
	if !ok {
		var err error
		if a, ok, err = o.getAttr(key); err != nil {
			return err
		}
	}
	*flag = 0
	if !ok {
		return nil
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
	return nil
}

// removeAttr deletes the attribute under key (MPI_*_delete_attr).
func (o holder) removeAttr(key int32) error {
	lib.mu.Lock()
	kv, err := o.keyvalFor(key)
	a, had := o.set.m[key]
	lib.mu.Unlock()
	if err != nil {
		return err
	}
	if !had {
		return errorf(errArg, "no attribute for keyval %#x", uint32(key))
	}
	return o.deleteAttr(key, kv, a)
}

// deleteAttr runs the delete callback of the attribute under key and, if
// it succeeds, removes the attribute; a failure carries the callback's
// code.
func (o holder) deleteAttr(key int32, kv *keyval, a attr) error {
	if kv.deleteFn != nil {
		if code := callDelete(kv, o.h, key, a); code != 0 {
			return errorf(code, "the delete callback of keyval %#x failed with %d", uint32(key), code)
		}
	}
	lib.mu.Lock()
	delete(o.set.m, key)
	lib.mu.Unlock()
	return nil
}

// deleteAll deletes every attribute of o (MPI_Comm_free, MPI_Type_free,
// and MPI_COMM_SELF's at MPI_Finalize); the first failing callback's code
// is returned.
func (o holder) deleteAll() int {
	lib.mu.Lock()
	keys := make([]int32, 0, len(o.set.m))
	for k := range o.set.m {
		keys = append(keys, k)
	}
	lib.mu.Unlock()
	slices.Sort(keys) // in the keyvals' order, as MPICH does
	first := 0
	for _, k := range keys {
		lib.mu.Lock()
		kv, a := lib.keyvals.at(k), o.set.m[k]
		lib.mu.Unlock()
		if kv == nil {
			continue
		}
		if err := o.deleteAttr(k, kv, a); err != nil && first == 0 {
			first = codeOf(err)
		}
	}
	return first
}

// copyAttrs gives the duplicate to of o the attributes whose copy
// callbacks say so (MPI_Comm_dup, MPI_Type_dup); a failing callback's code
// is returned.
func (o holder) copyAttrs(to holder) int {
	lib.mu.Lock()
	type kva struct {
		k  int32
		kv *keyval
		a  attr
	}
	var all []kva
	for k, a := range o.set.m {
		if kv := lib.keyvals.at(k); kv != nil && kv.copyFn != nil {
			all = append(all, kva{k, kv, a})
		}
	}
	lib.mu.Unlock()
	for _, x := range all {
		code, out, keep := callCopy(x.kv, o.h, x.k, x.a)
		if code != 0 {
			return code
		}
		if keep {
			lib.mu.Lock()
			if to.set.m == nil {
				to.set.m = make(map[int32]attr)
			}
			to.set.m[x.k] = attr{val: out, typ: x.a.typ}
			lib.mu.Unlock()
		}
	}
	return 0
}

// attrs is the attribute holder of a communicator.
func (ce *commEntry) attrs() holder { return holder{keyComm, C.int(ce.h), &ce.attrSet} }

//export PMPI_Comm_create_keyval
func PMPI_Comm_create_keyval(copyFn, deleteFn unsafe.Pointer, key *C.int, extra C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Comm_create_keyval", &mpirc)
	return ret("MPI_Comm_create_keyval", createKeyval(keyComm, copyFn, deleteFn, key, extra))
}

//export PMPI_Keyval_create
func PMPI_Keyval_create(copyFn, deleteFn unsafe.Pointer, key *C.int, extra C.uintptr_t) C.int {
	return PMPI_Comm_create_keyval(copyFn, deleteFn, key, extra)
}

//export PMPI_Comm_free_keyval
func PMPI_Comm_free_keyval(key *C.int) (mpirc C.int) {
	defer guard("MPI_Comm_free_keyval", &mpirc)
	return ret("MPI_Comm_free_keyval", freeKeyval(keyComm, key))
}

//export PMPI_Keyval_free
func PMPI_Keyval_free(key *C.int) C.int { return PMPI_Comm_free_keyval(key) }

//export PMPI_Comm_set_attr
func PMPI_Comm_set_attr(comm C.MPI_Comm, key C.int, val C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Comm_set_attr", &mpirc)
	ce, err := lib.comm(comm)
	if err == nil {
		err = ce.attrs().setAttr(int32(key), attr{val: val})
	}
	return retc(comm, "MPI_Comm_set_attr", err)
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
	if err == nil {
		err = ce.attrs().getInto(int32(key), out, flag, attrPtr)
	}
	return retc(comm, "MPI_Comm_get_attr", err)
}

//export PMPI_Attr_get
func PMPI_Attr_get(comm C.MPI_Comm, key C.int, out unsafe.Pointer, flag *C.int) C.int {
	return PMPI_Comm_get_attr(comm, key, out, flag)
}

//export PMPI_Comm_delete_attr
func PMPI_Comm_delete_attr(comm C.MPI_Comm, key C.int) (mpirc C.int) {
	defer guard("MPI_Comm_delete_attr", &mpirc)
	ce, err := lib.comm(comm)
	if err == nil {
		err = ce.attrs().removeAttr(int32(key))
	}
	return retc(comm, "MPI_Comm_delete_attr", err)
}

//export PMPI_Attr_delete
func PMPI_Attr_delete(comm C.MPI_Comm, key C.int) C.int { return PMPI_Comm_delete_attr(comm, key) }
