package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import "encoding/binary"

// Intercommunicators: point-to-point between two disjoint groups, and
// MPI_Intercomm_merge. The communicator entry's mplite view names the
// remote group's ranks in sends and receives (mplite.Comm.Intercomm);
// MPI_Comm_rank, MPI_Comm_size and MPI_Comm_group describe the local
// group. Collectives over an intercommunicator are not implemented.

// commSize is MPI_Comm_size: the local group's size.
func commSize(ce *commEntry) int {
	if ce.c.IsInter() {
		return len(ce.c.LocalGroup())
	}
	return ce.c.Size()
}

// encodeRanks and decodeRanks carry a group's world ranks between leaders.
func encodeRanks(rs []int) []byte {
	b := make([]byte, 4*len(rs))
	for i, r := range rs {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(r))
	}
	return b
}

func decodeRanks(b []byte) []int {
	rs := make([]int, len(b)/4)
	for i := range rs {
		rs[i] = int(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return rs
}

// MPI_Intercomm_create: the two leaders swap their groups over peer_comm
// (with the program's tag, as MPI says), each leader broadcasts the other
// group in its own, and every member of both makes the view.
//
//export PMPI_Intercomm_create
func PMPI_Intercomm_create(local C.MPI_Comm, localLeader C.int, peer C.MPI_Comm, remoteLeader, tag C.int, out *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Intercomm_create", &mpirc)
	const fn = "MPI_Intercomm_create"
	lce, err := lib.comm(local)
	if err != nil {
		return retc(local, fn, err)
	}
	if out == nil {
		return retc(local, fn, errorf(errArg, "NULL result"))
	}
	if lce.c.IsInter() {
		return retc(local, fn, errorf(errComm, "the local communicator is an intercommunicator"))
	}
	if err := checkRoot(localLeader, lce.c.Size()); err != nil {
		return retc(local, fn, err)
	}
	mine := members(lce)
	var theirs []byte
	if lce.c.Rank() == int(localLeader) {
		pce, err := lib.comm(peer)
		if err != nil {
			return retc(local, fn, err)
		}
		var n [4]byte
		var m [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(mine)))
		if _, err := pce.c.Sendrecv(n[:], int(remoteLeader), int(tag), m[:], int(remoteLeader), int(tag)); err != nil {
			return retc(local, fn, err)
		}
		theirs = make([]byte, 4*binary.LittleEndian.Uint32(m[:]))
		if _, err := pce.c.Sendrecv(encodeRanks(mine), int(remoteLeader), int(tag), theirs, int(remoteLeader), int(tag)); err != nil {
			return retc(local, fn, err)
		}
	}
	err = lce.coll(func() error {
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(theirs)))
		if err := lce.c.Bcast(n[:], int(localLeader)); err != nil {
			return err
		}
		if lce.c.Rank() != int(localLeader) {
			theirs = make([]byte, binary.LittleEndian.Uint32(n[:]))
		}
		return lce.c.Bcast(theirs, int(localLeader))
	})
	if err != nil {
		return retc(local, fn, err)
	}
	lib.mu.Lock()
	w := lib.world
	lib.mu.Unlock()
	v, err := w.Intercomm(mine, decodeRanks(theirs))
	if err != nil {
		return retc(local, fn, err)
	}
	ne, err := newCommEntry(v, true, lce)
	if err != nil {
		return retc(local, fn, err)
	}
	*out = lib.addComm(ne)
	return errSuccess
}

//export PMPI_Intercomm_merge
func PMPI_Intercomm_merge(comm C.MPI_Comm, high C.int, out *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Intercomm_merge", &mpirc)
	const fn = "MPI_Intercomm_merge"
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	if !ce.c.IsInter() {
		return retc(comm, fn, errorf(errComm, "not an intercommunicator"))
	}
	if out == nil {
		return retc(comm, fn, errorf(errArg, "NULL result"))
	}
	c, err := ce.c.Merge(high != 0)
	if err != nil {
		return retc(comm, fn, err)
	}
	ne, err := newCommEntry(c, true, ce)
	if err != nil {
		return retc(comm, fn, err)
	}
	*out = lib.addComm(ne)
	return errSuccess
}

//export PMPI_Comm_remote_size
func PMPI_Comm_remote_size(comm C.MPI_Comm, size *C.int) (mpirc C.int) {
	defer guard("MPI_Comm_remote_size", &mpirc)
	ce, err := lib.comm(comm)
	if err == nil && !ce.c.IsInter() {
		err = errorf(errComm, "not an intercommunicator")
	}
	if err != nil {
		return retc(comm, "MPI_Comm_remote_size", err)
	}
	*size = C.int(ce.c.Size())
	return errSuccess
}

//export PMPI_Comm_remote_group
func PMPI_Comm_remote_group(comm C.MPI_Comm, out *C.MPI_Group) (mpirc C.int) {
	defer guard("MPI_Comm_remote_group", &mpirc)
	ce, err := lib.comm(comm)
	if err == nil && !ce.c.IsInter() {
		err = errorf(errComm, "not an intercommunicator")
	}
	if err != nil {
		return retc(comm, "MPI_Comm_remote_group", err)
	}
	g := make([]int, ce.c.Size())
	for i := range g {
		g[i], _ = ce.c.WorldRank(i)
	}
	return retc(comm, "MPI_Comm_remote_group", lib.addGroup(g, out))
}

// interColl is the error of a collective on an intercommunicator.
func interColl(ce *commEntry) error {
	if ce.c.IsInter() {
		return errorf(errComm, "collectives on intercommunicators are not implemented (merge it first: MPI_Intercomm_merge)")
	}
	return nil
}
