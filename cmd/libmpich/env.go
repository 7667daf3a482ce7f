package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// initialize is MPI_Init's: the world model starts, on the runtime a
// session may already have started.
func initialize() error {
	lib.mu.Lock()
	st, called := lib.state, lib.worldCalled
	if st == stateInit && !called {
		lib.worldCalled = true // the runtime is up for sessions
		lib.mu.Unlock()
		return nil
	}
	lib.mu.Unlock()
	switch {
	case called && st != stateFinal:
		return errorf(errOther, "MPI is already initialized")
	case st == stateFinal || called:
		return errorf(errOther, "MPI was finalized: it cannot be initialized again")
	}
	if err := startRuntime(); err != nil {
		return err
	}
	lib.mu.Lock()
	lib.worldCalled = true
	lib.mu.Unlock()
	return nil
}

// startRuntime brings up the rank: mplite's world, MPI_COMM_WORLD and
// MPI_COMM_SELF, for MPI_Init or the first MPI_Session_init.
func startRuntime() error {
	if n, ok := goProcs(os.Getenv, runtime.NumCPU()); ok {
		runtime.GOMAXPROCS(n)
	}
	// Every call comes from a C thread, locked to its M by cgo.
	world, err := mplite.Init(mplite.WithLockedCallers())
	if err != nil {
		return fmt.Errorf("mplite.Init: %w", err)
	}
	return install(world)
}

// install makes world MPI_COMM_WORLD (it is closed if that fails).
func install(world *mplite.Comm) error {
	self, err := world.Split(world.Rank(), 0)
	if err != nil {
		world.Close()
		return fmt.Errorf("making MPI_COMM_SELF: %w", err)
	}
	we, err := newCommEntry(world, false, nil)
	if err != nil {
		world.Close()
		return err
	}
	se, err := newCommEntry(self, false, nil)
	if err != nil {
		world.Close()
		return err
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	lib.world = world
	we.h, se.h = commWorld, commSelf
	lib.comms = map[int32]*commEntry{commWorld: we, commSelf: se}
	lib.setPredefined(world.Size())
	lib.nextComm = commFirst
	lib.reqs = reqTable{}
	lib.state = stateInit
	lib.worldEntry.Store(we)
	lib.worldDone = false
	return nil
}

// goProcs sizes the library's Go runtime to this rank's share of the
// host's CPUs, from the number of ranks the launcher started on the host
// (Hydra's MPI_LOCALNRANKS, Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE), unless
// GOMAXPROCS is set (mprun sets it). The calling thread drives progress, so
// the runtime needs no P of its own while MPI runs; spare Ps only wake
// threads that preempt the host's other polling ranks (see mprun's
// goProcs).
func goProcs(getenv func(string) string, cpus int) (int, bool) {
	if getenv("GOMAXPROCS") != "" {
		return 0, false
	}
	for _, v := range []string{"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"} {
		if n, err := strconv.Atoi(getenv(v)); err == nil && n > 0 {
			return max(1, cpus/n), true
		}
	}
	return 0, false
}

//export PMPI_Init
func PMPI_Init(argc *C.int, argv unsafe.Pointer) (mpirc C.int) {
	defer guard("MPI_Init", &mpirc)
	return ret("MPI_Init", initialize())
}

//export PMPI_Init_thread
func PMPI_Init_thread(argc *C.int, argv unsafe.Pointer, required C.int, provided *C.int) (mpirc C.int) {
	defer guard("MPI_Init_thread", &mpirc)
	if err := initialize(); err != nil {
		return ret("MPI_Init_thread", err)
	}
	// Point-to-point calls are safe from any thread, but the collectives of
	// a communicator must not run concurrently: MPI_THREAD_SERIALIZED.
	*provided = min(required, threadSerialized)
	return errSuccess
}

//export PMPI_Query_thread
func PMPI_Query_thread(provided *C.int) (mpirc C.int) {
	defer guard("MPI_Query_thread", &mpirc)
	*provided = threadSerialized
	return errSuccess
}

//export PMPI_Initialized
func PMPI_Initialized(flag *C.int) (mpirc C.int) {
	defer guard("MPI_Initialized", &mpirc)
	lib.mu.Lock()
	defer lib.mu.Unlock()
	*flag = 0
	if lib.worldCalled {
		*flag = 1
	}
	return errSuccess
}

//export PMPI_Finalized
func PMPI_Finalized(flag *C.int) (mpirc C.int) {
	defer guard("MPI_Finalized", &mpirc)
	lib.mu.Lock()
	defer lib.mu.Unlock()
	*flag = 0
	if lib.state == stateFinal || lib.worldDone {
		*flag = 1
	}
	return errSuccess
}

//export PMPI_Finalize
func PMPI_Finalize() (mpirc C.int) {
	defer guard("MPI_Finalize", &mpirc)
	lib.mu.Lock()
	if lib.state != stateInit || !lib.worldCalled || lib.worldDone {
		lib.mu.Unlock()
		return ret("MPI_Finalize", errorf(errOther, "MPI is not initialized (or already finalized)"))
	}
	lib.worldDone = true
	if lib.sessions > 0 {
		// Open sessions keep the runtime; the last MPI_Session_finalize
		// ends it.
		lib.mu.Unlock()
		return errSuccess
	}
	lib.mu.Unlock()
	return ret("MPI_Finalize", stopRuntime())
}

// stopRuntime ends the rank: the workers, MPI_COMM_SELF's attributes, the
// buffered sends, then mplite's world.
func stopRuntime() error {
	lib.mu.Lock()
	bs := lib.bsends
	lib.bsends = nil
	world := lib.world
	self := lib.comms[commSelf]
	all := make([]*commEntry, 0, len(lib.comms))
	for _, ce := range lib.comms {
		all = append(all, ce)
	}
	lib.mu.Unlock()
	for _, ce := range all {
		ce.stopWorker()
	}
	// MPI_COMM_SELF's attributes are deleted first, while MPI still works:
	// libraries hang their clean-up on them.
	if code := self.attrs().deleteAll(); code != 0 {
		return errorf(code, "an attribute delete callback of MPI_COMM_SELF failed with %d", code)
	}
	errB := mplite.Waitall(bs...)
	err := world.Finalize()
	lib.mu.Lock()
	lib.state = stateFinal
	lib.worldEntry.Store(nil)
	lib.comms, lib.reqs = nil, reqTable{}
	lib.mu.Unlock()
	return errors.Join(errB, err)
}

//export PMPI_Abort
func PMPI_Abort(comm C.MPI_Comm, code C.int) (mpirc C.int) {
	defer guard("MPI_Abort", &mpirc)
	fmt.Fprintf(os.Stderr, "libmpich(ethervia): MPI_Abort with error code %d\n", int(code))
	lib.mu.Lock()
	world := lib.world
	lib.mu.Unlock()
	if code == 0 {
		code = 1
	}
	if world != nil {
		// The launcher (if it speaks PMI) ends every rank; the peers see
		// this one leave at once.
		world.Abort(int(code), fmt.Sprintf("MPI_Abort with error code %d", int(code)))
	}
	os.Exit(int(code))
	return errSuccess
}

//export PMPI_Comm_rank
func PMPI_Comm_rank(comm C.MPI_Comm, rank *C.int) (mpirc C.int) {
	defer guard("MPI_Comm_rank", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_rank", err)
	}
	*rank = C.int(ce.c.Rank())
	return errSuccess
}

//export PMPI_Comm_size
func PMPI_Comm_size(comm C.MPI_Comm, size *C.int) (mpirc C.int) {
	defer guard("MPI_Comm_size", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_size", err)
	}
	*size = C.int(commSize(ce))
	return errSuccess
}

//export PMPI_Comm_dup
func PMPI_Comm_dup(comm C.MPI_Comm, newcomm *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Comm_dup", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_dup", err)
	}
	var c *mplite.Comm
	err = ce.coll(func() (e error) { c, e = ce.c.Dup(); return })
	if err != nil {
		return retc(comm, "MPI_Comm_dup", err)
	}
	ne, err := newCommEntry(c, true, ce)
	if err != nil {
		return retc(comm, "MPI_Comm_dup", err)
	}
	ne.cart, ne.graph, ne.dist = ce.cart, ce.graph, ce.dist // a duplicate keeps the topology
	h := lib.addComm(ne)
	if code := ce.attrs().copyAttrs(ne.attrs()); code != 0 {
		lib.forget(h)
		_ = ne.free()
		return retc(comm, "MPI_Comm_dup", errorf(code, "an attribute copy callback failed with %d", code))
	}
	*newcomm = h
	return errSuccess
}

//export PMPI_Comm_split
func PMPI_Comm_split(comm C.MPI_Comm, color, key C.int, newcomm *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Comm_split", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_split", err)
	}
	col := int(color)
	if col == undefined {
		col = mplite.Undefined
	} else if col < 0 {
		return retc(comm, "MPI_Comm_split", errorf(errArg, "negative color %d (only MPI_UNDEFINED may be)", col))
	}
	var c *mplite.Comm
	err = ce.coll(func() (e error) { c, e = ce.c.Split(col, int(key)); return })
	if err != nil {
		return retc(comm, "MPI_Comm_split", err)
	}
	if c == nil {
		*newcomm = commNull
		return errSuccess
	}
	ne, err := newCommEntry(c, true, ce)
	if err != nil {
		return retc(comm, "MPI_Comm_split", err)
	}
	*newcomm = lib.addComm(ne)
	return errSuccess
}

//export PMPI_Comm_free
func PMPI_Comm_free(comm *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Comm_free", &mpirc)
	ce, err := lib.comm(*comm)
	if err != nil {
		return ret("MPI_Comm_free", err)
	}
	if !ce.freeable {
		return ret("MPI_Comm_free", errorf(errComm, "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed"))
	}
	// MPI calls the attributes' delete callbacks first, with the handle
	// still valid.
	if code := ce.attrs().deleteAll(); code != 0 {
		return ret("MPI_Comm_free", errorf(code, "an attribute delete callback failed with %d", code))
	}
	ce.stopWorker()
	lib.forget(*comm)
	*comm = commNull
	return ret("MPI_Comm_free", ce.free())
}

//export PMPI_Wtime
func PMPI_Wtime() C.double { return C.double(mplite.Wtime()) }

//export PMPI_Wtick
func PMPI_Wtick() C.double { return 1e-9 }

//export PMPI_Get_processor_name
func PMPI_Get_processor_name(name *C.char, resultlen *C.int) (mpirc C.int) {
	defer guard("MPI_Get_processor_name", &mpirc)
	h, err := os.Hostname()
	if err != nil {
		return ret("MPI_Get_processor_name", err)
	}
	cString(name, maxProcessorName, h, resultlen)
	return errSuccess
}

//export PMPI_Error_string
func PMPI_Error_string(code C.int, str *C.char, resultlen *C.int) (mpirc C.int) {
	defer guard("MPI_Error_string", &mpirc)
	s, ok := errText[int(code)]
	if !ok {
		lib.mu.Lock()
		u, added := lib.userErrs[int(code)]
		lib.mu.Unlock()
		s = u.text
		if !added {
			s = fmt.Sprintf("Unknown error code %d", int(code))
		}
	}
	cString(str, maxErrorString, s, resultlen)
	return errSuccess
}

//export PMPI_Error_class
func PMPI_Error_class(code C.int, class *C.int) (mpirc C.int) {
	defer guard("MPI_Error_class", &mpirc)
	*class = code // the library's own codes are classes
	lib.mu.Lock()
	if u, ok := lib.userErrs[int(code)]; ok {
		*class = C.int(u.class)
	}
	lib.mu.Unlock()
	return errSuccess
}

//export PMPI_Get_version
func PMPI_Get_version(version, subversion *C.int) (mpirc C.int) {
	defer guard("MPI_Get_version", &mpirc)
	*version, *subversion = 4, 0 // MPI_VERSION, MPI_SUBVERSION of the header
	return errSuccess
}

//export PMPI_Get_library_version
func PMPI_Get_library_version(version *C.char, resultlen *C.int) (mpirc C.int) {
	defer guard("MPI_Get_library_version", &mpirc)
	cString(version, 8192, "Ethervia libmpich (MPICH 4.0.2 ABI subset over mplite)", resultlen)
	return errSuccess
}

//export PMPI_Buffer_attach
func PMPI_Buffer_attach(buf unsafe.Pointer, size C.int) (mpirc C.int) {
	defer guard("MPI_Buffer_attach", &mpirc)
	// MPI_Bsend copies into Go memory; the buffer is only kept for detach.
	lib.mu.Lock()
	lib.bufAddr, lib.bufSize = uintptr(buf), int(size)
	lib.mu.Unlock()
	return errSuccess
}

//export PMPI_Buffer_detach
func PMPI_Buffer_detach(bufAddr unsafe.Pointer, size *C.int) (mpirc C.int) {
	defer guard("MPI_Buffer_detach", &mpirc)
	lib.mu.Lock()
	bs := lib.bsends
	lib.bsends = nil
	addr, n := lib.bufAddr, lib.bufSize
	lib.bufAddr, lib.bufSize = 0, 0
	lib.mu.Unlock()
	*(*uintptr)(bufAddr) = addr
	*size = C.int(n)
	return ret("MPI_Buffer_detach", mplite.Waitall(bs...))
}

// MPI_Alloc_mem is malloc: every buffer is registered on first use, so
// special memory would gain nothing.
//
//export PMPI_Alloc_mem
func PMPI_Alloc_mem(size C.MPI_Aint, in C.MPI_Info, base unsafe.Pointer) (mpirc C.int) {
	defer guard("MPI_Alloc_mem", &mpirc)
	if size < 0 || base == nil {
		return ret("MPI_Alloc_mem", errorf(errArg, "size %d, base %p", int64(size), base))
	}
	p := cMalloc(int(size))
	if p == nil {
		return ret("MPI_Alloc_mem", errorf(errNoMem, "cannot allocate %d bytes", int64(size)))
	}
	*(*unsafe.Pointer)(base) = p
	return errSuccess
}

//export PMPI_Free_mem
func PMPI_Free_mem(base unsafe.Pointer) (mpirc C.int) {
	defer guard("MPI_Free_mem", &mpirc)
	cFree(base)
	return errSuccess
}
