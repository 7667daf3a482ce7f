package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"slices"
	"strconv"
)

// Sessions (MPI 4.0) for the two process sets every MPI has, mpi://WORLD
// and mpi://SELF. The first MPI_Session_init starts the rank's runtime if
// MPI_Init has not; the runtime ends with the last of MPI_Finalize and
// MPI_Session_finalize. Once ended it cannot start again (as after
// MPI_Finalize). MPI_Comm_create_from_group is made by the group's members
// alone; its string tag, which tells apart concurrent calls from several
// threads, is not needed here (collectives of one rank run one at a time).

const (
	sessionNull  = 0x38000000 // MPI_SESSION_NULL
	sessionFirst = 0x38000001
	psetWorld    = "mpi://WORLD"
	psetSelf     = "mpi://SELF"
)

var psets = [...]string{psetWorld, psetSelf}

// session checks a session handle.
func session(h C.int) error {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if !lib.sessOpen[int32(h)] {
		return errorf(errArg, "invalid session %#x", uint32(h))
	}
	return nil
}

//export PMPI_Session_init
func PMPI_Session_init(in C.MPI_Info, eh C.MPI_Errhandler, out *C.int) (mpirc C.int) {
	defer guard("MPI_Session_init", &mpirc)
	const fn = "MPI_Session_init"
	if out == nil {
		return ret(fn, errorf(errArg, "NULL session"))
	}
	if err := checkInfo(in); err != nil {
		return ret(fn, err)
	}
	lib.mu.Lock()
	st := lib.state
	lib.mu.Unlock()
	switch st {
	case stateFinal:
		return ret(fn, errorf(errOther, "MPI was finalized: it cannot be initialized again"))
	case stateNone:
		if err := startRuntime(); err != nil {
			return ret(fn, err)
		}
	}
	lib.mu.Lock()
	if lib.sessOpen == nil {
		lib.sessOpen = make(map[int32]bool)
	}
	lib.sessions++
	lib.nextSess++
	h := int32(sessionFirst) + lib.nextSess - 1
	lib.sessOpen[h] = true
	lib.mu.Unlock()
	*out = C.int(h)
	return errSuccess
}

//export PMPI_Session_finalize
func PMPI_Session_finalize(h *C.int) (mpirc C.int) {
	defer guard("MPI_Session_finalize", &mpirc)
	const fn = "MPI_Session_finalize"
	if h == nil {
		return ret(fn, errorf(errArg, "NULL session"))
	}
	if err := session(*h); err != nil {
		return ret(fn, err)
	}
	lib.mu.Lock()
	delete(lib.sessOpen, int32(*h))
	lib.sessions--
	last := lib.sessions == 0 && (!lib.worldCalled || lib.worldDone)
	lib.mu.Unlock()
	*h = sessionNull
	if last {
		return ret(fn, stopRuntime())
	}
	return errSuccess
}

//export PMPI_Session_get_num_psets
func PMPI_Session_get_num_psets(h C.int, in C.MPI_Info, n *C.int) (mpirc C.int) {
	defer guard("MPI_Session_get_num_psets", &mpirc)
	if err := session(h); err != nil {
		return ret("MPI_Session_get_num_psets", err)
	}
	*n = C.int(len(psets))
	return errSuccess
}

// MPI_Session_get_nth_pset: with *length 0, only the length the name
// needs (its terminating NUL included) comes back.
//
//export PMPI_Session_get_nth_pset
func PMPI_Session_get_nth_pset(h C.int, in C.MPI_Info, n C.int, length *C.int, name *C.char) (mpirc C.int) {
	defer guard("MPI_Session_get_nth_pset", &mpirc)
	const fn = "MPI_Session_get_nth_pset"
	if err := session(h); err != nil {
		return ret(fn, err)
	}
	if n < 0 || int(n) >= len(psets) || length == nil {
		return ret(fn, errorf(errArg, "process set %d of %d", int(n), len(psets)))
	}
	p := psets[n]
	if *length > 0 && name != nil {
		cString(name, int(*length), p, nil)
	}
	*length = C.int(len(p) + 1)
	return errSuccess
}

// psetMembers returns a process set's world ranks.
func psetMembers(name *C.char) ([]int, error) {
	s, err := goString(name, 1024)
	if err != nil {
		return nil, err
	}
	lib.mu.Lock()
	w := lib.world
	lib.mu.Unlock()
	switch s {
	case psetWorld:
		g := make([]int, w.Size())
		for i := range g {
			g[i] = i
		}
		return g, nil
	case psetSelf:
		return []int{w.Rank()}, nil
	}
	return nil, errorf(errArg, "unknown process set %q (%s, %s)", s, psetWorld, psetSelf)
}

//export PMPI_Session_get_pset_info
func PMPI_Session_get_pset_info(h C.int, name *C.char, out *C.MPI_Info) (mpirc C.int) {
	defer guard("MPI_Session_get_pset_info", &mpirc)
	const fn = "MPI_Session_get_pset_info"
	if err := session(h); err != nil {
		return ret(fn, err)
	}
	g, err := psetMembers(name)
	if err != nil {
		return ret(fn, err)
	}
	if out == nil {
		return ret(fn, errorf(errArg, "NULL info"))
	}
	lib.addInfo(&info{keys: []string{"mpi_size"}, vals: []string{strconv.Itoa(len(g))}}, out)
	return errSuccess
}

//export PMPI_Session_get_info
func PMPI_Session_get_info(h C.int, out *C.MPI_Info) (mpirc C.int) {
	defer guard("MPI_Session_get_info", &mpirc)
	if err := session(h); err != nil {
		return ret("MPI_Session_get_info", err)
	}
	if out == nil {
		return ret("MPI_Session_get_info", errorf(errArg, "NULL info"))
	}
	lib.addInfo(&info{}, out)
	return errSuccess
}

//export PMPI_Group_from_session_pset
func PMPI_Group_from_session_pset(h C.int, name *C.char, out *C.MPI_Group) (mpirc C.int) {
	defer guard("MPI_Group_from_session_pset", &mpirc)
	const fn = "MPI_Group_from_session_pset"
	if err := session(h); err != nil {
		return ret(fn, err)
	}
	g, err := psetMembers(name)
	if err != nil {
		return ret(fn, err)
	}
	return ret(fn, lib.addGroup(g, out))
}

//export PMPI_Comm_create_from_group
func PMPI_Comm_create_from_group(h C.MPI_Group, tag *C.char, in C.MPI_Info, eh C.MPI_Errhandler, out *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Comm_create_from_group", &mpirc)
	const fn = "MPI_Comm_create_from_group"
	g, err := lib.group(h)
	if err != nil {
		return ret(fn, err)
	}
	if out == nil {
		return ret(fn, errorf(errArg, "NULL result"))
	}
	if err := checkInfo(in); err != nil {
		return ret(fn, err)
	}
	lib.mu.Lock()
	w := lib.world
	validEH := eh == 0 || lib.validHandler(int32(eh))
	lib.mu.Unlock()
	if !validEH {
		return ret(fn, errorf(errArg, "invalid error handler %#x", uint32(eh)))
	}
	if !slices.Contains(g, w.Rank()) {
		return ret(fn, errorf(errGroup, "this rank is not in the group"))
	}
	c, err := w.CreateGroup(g) // world ranks are the world's ranks
	if err != nil {
		return ret(fn, err)
	}
	ne, err := newCommEntry(c, true, nil)
	if err != nil {
		return ret(fn, err)
	}
	if eh != 0 {
		ne.eh = int32(eh)
	}
	*out = lib.addComm(ne)
	return errSuccess
}
