package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"math"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Info objects, object names, and small status and thread queries.

const (
	infoNull  = 0x1c000000
	infoEnv   = 0x5c000001
	infoFirst = -0x64000000 // 0x9c000000 as an int32: MPICH's indirect info handles

	maxInfoKey    = 255
	maxInfoVal    = 1024
	maxObjectName = 128
)

// info is an ordered set of (key, value) strings.
type info struct{ keys, vals []string }

func (in *info) find(k string) int { return slices.Index(in.keys, k) }

func (l *library) info(h C.MPI_Info) (*info, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if in := l.infos.at(int32(h)); in != nil {
		return in, nil
	}
	if h == infoEnv {
		return &info{}, nil // nothing from the environment
	}
	return nil, errorf(errArg, "invalid info %#x", uint32(h))
}

func (l *library) addInfo(in *info, out *C.MPI_Info) {
	l.mu.Lock()
	h := l.infos.add(infoFirst, in)
	l.mu.Unlock()
	*out = C.MPI_Info(h)
}

func goString(p *C.char, max int) (string, error) {
	if p == nil {
		return "", errorf(errArg, "NULL string")
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(p)), max+1)
	n := slices.Index(b, 0)
	if n < 0 {
		return "", errorf(errArg, "string longer than %d bytes", max)
	}
	return string(b[:n]), nil
}

//export PMPI_Info_create
func PMPI_Info_create(out *C.MPI_Info) (mpirc C.int) {
	defer guard("MPI_Info_create", &mpirc)
	lib.addInfo(&info{}, out)
	return errSuccess
}

//export PMPI_Info_dup
func PMPI_Info_dup(h C.MPI_Info, out *C.MPI_Info) (mpirc C.int) {
	defer guard("MPI_Info_dup", &mpirc)
	in, err := lib.info(h)
	if err != nil {
		return ret("MPI_Info_dup", err)
	}
	lib.mu.Lock()
	cp := &info{keys: slices.Clone(in.keys), vals: slices.Clone(in.vals)}
	lib.mu.Unlock()
	lib.addInfo(cp, out)
	return errSuccess
}

//export PMPI_Info_free
func PMPI_Info_free(h *C.MPI_Info) (mpirc C.int) {
	defer guard("MPI_Info_free", &mpirc)
	lib.mu.Lock()
	ok := lib.infos.del(int32(*h))
	lib.mu.Unlock()
	if !ok {
		return ret("MPI_Info_free", errorf(errArg, "invalid info %#x", uint32(*h)))
	}
	*h = infoNull
	return errSuccess
}

//export PMPI_Info_set
func PMPI_Info_set(h C.MPI_Info, key, val *C.char) (mpirc C.int) {
	defer guard("MPI_Info_set", &mpirc)
	in, err := lib.info(h)
	if err != nil {
		return ret("MPI_Info_set", err)
	}
	k, err := goString(key, maxInfoKey)
	if err != nil {
		return ret("MPI_Info_set", err)
	}
	v, err := goString(val, maxInfoVal)
	if err != nil {
		return ret("MPI_Info_set", err)
	}
	lib.mu.Lock()
	if i := in.find(k); i >= 0 {
		in.vals[i] = v
	} else {
		in.keys, in.vals = append(in.keys, k), append(in.vals, v)
	}
	lib.mu.Unlock()
	return errSuccess
}

//export PMPI_Info_delete
func PMPI_Info_delete(h C.MPI_Info, key *C.char) (mpirc C.int) {
	defer guard("MPI_Info_delete", &mpirc)
	in, err := lib.info(h)
	if err != nil {
		return ret("MPI_Info_delete", err)
	}
	k, err := goString(key, maxInfoKey)
	if err != nil {
		return ret("MPI_Info_delete", err)
	}
	lib.mu.Lock()
	i := in.find(k)
	if i >= 0 {
		in.keys, in.vals = slices.Delete(in.keys, i, i+1), slices.Delete(in.vals, i, i+1)
	}
	lib.mu.Unlock()
	if i < 0 {
		return ret("MPI_Info_delete", errorf(errArg, "no key %q", k))
	}
	return errSuccess
}

// infoLookup returns the value of key in h.
func infoLookup(h C.MPI_Info, key *C.char) (string, bool, error) {
	in, err := lib.info(h)
	if err != nil {
		return "", false, err
	}
	k, err := goString(key, maxInfoKey)
	if err != nil {
		return "", false, err
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if i := in.find(k); i >= 0 {
		return in.vals[i], true, nil
	}
	return "", false, nil
}

//export PMPI_Info_get
func PMPI_Info_get(h C.MPI_Info, key *C.char, valuelen C.int, val *C.char, flag *C.int) (mpirc C.int) {
	defer guard("MPI_Info_get", &mpirc)
	v, ok, err := infoLookup(h, key)
	if err != nil {
		return ret("MPI_Info_get", err)
	}
	*flag = 0
	if ok {
		*flag = 1
		cString(val, int(valuelen)+1, v, nil)
	}
	return errSuccess
}

//export PMPI_Info_get_string
func PMPI_Info_get_string(h C.MPI_Info, key *C.char, buflen *C.int, val *C.char, flag *C.int) (mpirc C.int) {
	defer guard("MPI_Info_get_string", &mpirc)
	v, ok, err := infoLookup(h, key)
	if err != nil {
		return ret("MPI_Info_get_string", err)
	}
	*flag = 0
	if ok {
		*flag = 1
		if *buflen > 0 {
			cString(val, int(*buflen), v, nil)
		}
		*buflen = C.int(len(v) + 1)
	}
	return errSuccess
}

//export PMPI_Info_get_valuelen
func PMPI_Info_get_valuelen(h C.MPI_Info, key *C.char, valuelen, flag *C.int) (mpirc C.int) {
	defer guard("MPI_Info_get_valuelen", &mpirc)
	v, ok, err := infoLookup(h, key)
	if err != nil {
		return ret("MPI_Info_get_valuelen", err)
	}
	*flag = 0
	if ok {
		*flag, *valuelen = 1, C.int(len(v))
	}
	return errSuccess
}

//export PMPI_Info_get_nkeys
func PMPI_Info_get_nkeys(h C.MPI_Info, n *C.int) (mpirc C.int) {
	defer guard("MPI_Info_get_nkeys", &mpirc)
	in, err := lib.info(h)
	if err != nil {
		return ret("MPI_Info_get_nkeys", err)
	}
	lib.mu.Lock()
	*n = C.int(len(in.keys))
	lib.mu.Unlock()
	return errSuccess
}

//export PMPI_Info_get_nthkey
func PMPI_Info_get_nthkey(h C.MPI_Info, n C.int, key *C.char) (mpirc C.int) {
	defer guard("MPI_Info_get_nthkey", &mpirc)
	in, err := lib.info(h)
	if err != nil {
		return ret("MPI_Info_get_nthkey", err)
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if n < 0 || int(n) >= len(in.keys) {
		return ret("MPI_Info_get_nthkey", errorf(errArg, "key %d of %d", int(n), len(in.keys)))
	}
	cString(key, maxInfoKey+1, in.keys[n], nil)
	return errSuccess
}

//export PMPI_Comm_set_name
func PMPI_Comm_set_name(comm C.MPI_Comm, name *C.char) (mpirc C.int) {
	defer guard("MPI_Comm_set_name", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_set_name", err)
	}
	s, err := goString(name, maxObjectName)
	if err != nil {
		return retc(comm, "MPI_Comm_set_name", err)
	}
	lib.mu.Lock()
	ce.name = &s
	lib.mu.Unlock()
	return errSuccess
}

//export PMPI_Comm_get_name
func PMPI_Comm_get_name(comm C.MPI_Comm, name *C.char, n *C.int) (mpirc C.int) {
	defer guard("MPI_Comm_get_name", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_get_name", err)
	}
	lib.mu.Lock()
	s := ""
	switch {
	case ce.name != nil:
		s = *ce.name
	case comm == commWorld:
		s = "MPI_COMM_WORLD"
	case comm == commSelf:
		s = "MPI_COMM_SELF"
	}
	lib.mu.Unlock()
	cString(name, maxObjectName, s, n)
	return errSuccess
}

//export PMPI_Is_thread_main
func PMPI_Is_thread_main(flag *C.int) (mpirc C.int) {
	defer guard("MPI_Is_thread_main", &mpirc)
	// MPI_Init is called from the main thread in the programs we serve.
	*flag = 0
	if isMainThread() {
		*flag = 1
	}
	return errSuccess
}

//export PMPI_Status_set_cancelled
func PMPI_Status_set_cancelled(stArg C.uintptr_t, flag C.int) (mpirc C.int) {
	defer guard("MPI_Status_set_cancelled", &mpirc)
	st := statusPtr(stArg)
	st.count_hi_and_cancelled &^= 1
	if flag != 0 {
		st.count_hi_and_cancelled |= 1
	}
	return errSuccess
}

//export PMPI_Status_set_elements
func PMPI_Status_set_elements(stArg C.uintptr_t, dt C.MPI_Datatype, count C.int) (mpirc C.int) {
	defer guard("MPI_Status_set_elements", &mpirc)
	st := statusPtr(stArg)
	l, _, err := layoutOf(dt)
	if err != nil {
		return ret("MPI_Status_set_elements", err)
	}
	cancelled := st.count_hi_and_cancelled & 1
	setStatus(st, int(st.MPI_SOURCE), int(st.MPI_TAG), int64(count)*l.elemSize())
	st.count_hi_and_cancelled |= cancelled
	return errSuccess
}

//export PMPI_Status_set_elements_x
func PMPI_Status_set_elements_x(stArg C.uintptr_t, dt C.MPI_Datatype, count C.MPI_Count) (mpirc C.int) {
	defer guard("MPI_Status_set_elements_x", &mpirc)
	st := statusPtr(stArg)
	l, _, err := layoutOf(dt)
	if err == nil && (count < 0 || l.elemSize() > 0 && int64(count) > math.MaxInt64/l.elemSize()) {
		err = errorf(errCount, "count %d", int64(count))
	}
	if err != nil {
		return ret("MPI_Status_set_elements_x", err)
	}
	cancelled := st.count_hi_and_cancelled & 1
	setStatus(st, int(st.MPI_SOURCE), int(st.MPI_TAG), int64(count)*l.elemSize())
	st.count_hi_and_cancelled |= cancelled
	return errSuccess
}

// isMainThread reports whether the caller runs on the process's first
// thread (whose thread id is the process id).
func isMainThread() bool { return unix.Gettid() == unix.Getpid() }
