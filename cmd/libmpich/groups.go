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

// Groups: ordered sets of world ranks, and the communicators made from
// them.

const (
	groupNull  = 0x08000000
	groupEmpty = 0x48000000
	groupFirst = -0x38000000 // 0xc8000000 as an int32: MPICH's indirect group handles

	cmpIdent     = 0
	cmpCongruent = 1
	cmpSimilar   = 2
	cmpUnequal   = 3
)

// group returns the world ranks of a group handle.
func (l *library) group(h C.MPI_Group) ([]int, error) {
	if h == groupEmpty {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.groups.has(int32(h)) {
		g := l.groups.at(int32(h))
		return g, nil
	}
	return nil, errorf(errArg, "invalid group %#x", uint32(h))
}

func (l *library) addGroup(g []int, out *C.MPI_Group) error {
	if out == nil {
		return errorf(errArg, "NULL result group")
	}
	if len(g) == 0 {
		*out = groupEmpty
		return nil
	}
	l.mu.Lock()
	h := l.groups.add(groupFirst, g)
	l.mu.Unlock()
	*out = C.MPI_Group(h)
	return nil
}

// members returns the world ranks of a communicator in rank order.
func members(ce *commEntry) []int {
	if ce.c.IsInter() {
		return ce.c.LocalGroup()
	}
	g := make([]int, ce.c.Size())
	for i := range g {
		g[i], _ = ce.c.WorldRank(i)
	}
	return g
}

// myHost is the world's Host: the color of the ranks of this host.
func myHost() int {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	return lib.world.Host()
}

func myWorldRank() int {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	return lib.world.Rank()
}

//export PMPI_Comm_group
func PMPI_Comm_group(comm C.MPI_Comm, out *C.MPI_Group) (mpirc C.int) {
	defer guard("MPI_Comm_group", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_group", err)
	}
	return retc(comm, "MPI_Comm_group", lib.addGroup(members(ce), out))
}

//export PMPI_Group_size
func PMPI_Group_size(h C.MPI_Group, size *C.int) (mpirc C.int) {
	defer guard("MPI_Group_size", &mpirc)
	g, err := lib.group(h)
	if err != nil {
		return ret("MPI_Group_size", err)
	}
	*size = C.int(len(g))
	return errSuccess
}

//export PMPI_Group_rank
func PMPI_Group_rank(h C.MPI_Group, rank *C.int) (mpirc C.int) {
	defer guard("MPI_Group_rank", &mpirc)
	g, err := lib.group(h)
	if err != nil {
		return ret("MPI_Group_rank", err)
	}
	*rank = undefined
	if i := slices.Index(g, myWorldRank()); i >= 0 {
		*rank = C.int(i)
	}
	return errSuccess
}

//export PMPI_Group_free
func PMPI_Group_free(h *C.MPI_Group) (mpirc C.int) {
	defer guard("MPI_Group_free", &mpirc)
	if *h != groupEmpty {
		if _, err := lib.group(*h); err != nil {
			return ret("MPI_Group_free", err)
		}
		lib.mu.Lock()
		lib.groups.del(int32(*h))
		lib.mu.Unlock()
	}
	*h = groupNull
	return errSuccess
}

// pick makes a group of g's members at ranks (each once, in range).
func pick(g []int, ranks []int) ([]int, error) {
	seen := make(map[int]bool, len(ranks))
	out := make([]int, 0, len(ranks))
	for _, r := range ranks {
		if r < 0 || r >= len(g) || seen[r] {
			return nil, errorf(errRank, "rank %d of a group of %d (or named twice)", r, len(g))
		}
		seen[r] = true
		out = append(out, g[r])
	}
	return out, nil
}

// complement is g without the members at ranks.
func complement(g []int, ranks []int) ([]int, error) {
	if _, err := pick(g, ranks); err != nil {
		return nil, err
	}
	out := make([]int, 0, len(g))
	for i, w := range g {
		if !slices.Contains(ranks, i) {
			out = append(out, w)
		}
	}
	return out, nil
}

func intRanks(n C.int, p *C.int) []int {
	out := make([]int, 0, max(int(n), 0))
	for _, v := range cInts(p, int(n)) {
		out = append(out, int(v))
	}
	return out
}

// rangeRanks expands (first, last, stride) triples.
func rangeRanks(n C.int, p unsafe.Pointer) ([]int, error) {
	t := intRanks(3*n, (*C.int)(p))
	var out []int
	for i := 0; i+2 < len(t); i += 3 {
		first, last, stride := t[i], t[i+1], t[i+2]
		if stride == 0 || (last-first)/stride < 0 {
			return nil, errorf(errArg, "range (%d, %d, %d)", first, last, stride)
		}
		for r := first; (stride > 0 && r <= last) || (stride < 0 && r >= last); r += stride {
			out = append(out, r)
		}
	}
	return out, nil
}

func groupOp(fn string, h C.MPI_Group, out *C.MPI_Group, f func(g []int) ([]int, error)) C.int {
	g, err := lib.group(h)
	if err != nil {
		return ret(fn, err)
	}
	ng, err := f(g)
	if err != nil {
		return ret(fn, err)
	}
	return ret(fn, lib.addGroup(ng, out))
}

//export PMPI_Group_incl
func PMPI_Group_incl(h C.MPI_Group, n C.int, ranks *C.int, out *C.MPI_Group) (mpirc C.int) {
	defer guard("MPI_Group_incl", &mpirc)
	return groupOp("MPI_Group_incl", h, out, func(g []int) ([]int, error) { return pick(g, intRanks(n, ranks)) })
}

//export PMPI_Group_excl
func PMPI_Group_excl(h C.MPI_Group, n C.int, ranks *C.int, out *C.MPI_Group) (mpirc C.int) {
	defer guard("MPI_Group_excl", &mpirc)
	return groupOp("MPI_Group_excl", h, out, func(g []int) ([]int, error) { return complement(g, intRanks(n, ranks)) })
}

//export PMPI_Group_range_incl
func PMPI_Group_range_incl(h C.MPI_Group, n C.int, ranges unsafe.Pointer, out *C.MPI_Group) (mpirc C.int) {
	defer guard("MPI_Group_range_incl", &mpirc)
	return groupOp("MPI_Group_range_incl", h, out, func(g []int) ([]int, error) {
		r, err := rangeRanks(n, ranges)
		if err != nil {
			return nil, err
		}
		return pick(g, r)
	})
}

//export PMPI_Group_range_excl
func PMPI_Group_range_excl(h C.MPI_Group, n C.int, ranges unsafe.Pointer, out *C.MPI_Group) (mpirc C.int) {
	defer guard("MPI_Group_range_excl", &mpirc)
	return groupOp("MPI_Group_range_excl", h, out, func(g []int) ([]int, error) {
		r, err := rangeRanks(n, ranges)
		if err != nil {
			return nil, err
		}
		return complement(g, r)
	})
}

func twoGroups(fn string, h1, h2 C.MPI_Group, out *C.MPI_Group, f func(a, b []int) []int) C.int {
	a, err := lib.group(h1)
	if err != nil {
		return ret(fn, err)
	}
	b, err := lib.group(h2)
	if err != nil {
		return ret(fn, err)
	}
	return ret(fn, lib.addGroup(f(a, b), out))
}

//export PMPI_Group_union
func PMPI_Group_union(h1, h2 C.MPI_Group, out *C.MPI_Group) (mpirc C.int) {
	defer guard("MPI_Group_union", &mpirc)
	return twoGroups("MPI_Group_union", h1, h2, out, func(a, b []int) []int {
		u := slices.Clone(a)
		for _, w := range b {
			if !slices.Contains(a, w) {
				u = append(u, w)
			}
		}
		return u
	})
}

//export PMPI_Group_intersection
func PMPI_Group_intersection(h1, h2 C.MPI_Group, out *C.MPI_Group) (mpirc C.int) {
	defer guard("MPI_Group_intersection", &mpirc)
	return twoGroups("MPI_Group_intersection", h1, h2, out, func(a, b []int) []int {
		var u []int
		for _, w := range a {
			if slices.Contains(b, w) {
				u = append(u, w)
			}
		}
		return u
	})
}

//export PMPI_Group_difference
func PMPI_Group_difference(h1, h2 C.MPI_Group, out *C.MPI_Group) (mpirc C.int) {
	defer guard("MPI_Group_difference", &mpirc)
	return twoGroups("MPI_Group_difference", h1, h2, out, func(a, b []int) []int {
		var u []int
		for _, w := range a {
			if !slices.Contains(b, w) {
				u = append(u, w)
			}
		}
		return u
	})
}

//export PMPI_Group_translate_ranks
func PMPI_Group_translate_ranks(h1 C.MPI_Group, n C.int, r1 *C.int, h2 C.MPI_Group, r2 *C.int) (mpirc C.int) {
	defer guard("MPI_Group_translate_ranks", &mpirc)
	a, err := lib.group(h1)
	if err != nil {
		return ret("MPI_Group_translate_ranks", err)
	}
	b, err := lib.group(h2)
	if err != nil {
		return ret("MPI_Group_translate_ranks", err)
	}
	out := cInts(r2, int(n))
	for i, r := range cInts(r1, int(n)) {
		switch {
		case r == procNull:
			out[i] = procNull
		case r < 0 || int(r) >= len(a):
			return ret("MPI_Group_translate_ranks", errorf(errRank, "rank %d of a group of %d", int(r), len(a)))
		default:
			out[i] = undefined
			if j := slices.Index(b, a[r]); j >= 0 {
				out[i] = C.int(j)
			}
		}
	}
	return errSuccess
}

// compareMembers is MPI_IDENT for the same members in the same order,
// MPI_SIMILAR for the same members, else MPI_UNEQUAL.
func compareMembers(a, b []int) int {
	if slices.Equal(a, b) {
		return cmpIdent
	}
	if len(a) == len(b) {
		x, y := slices.Clone(a), slices.Clone(b)
		slices.Sort(x)
		slices.Sort(y)
		if slices.Equal(x, y) {
			return cmpSimilar
		}
	}
	return cmpUnequal
}

//export PMPI_Group_compare
func PMPI_Group_compare(h1, h2 C.MPI_Group, result *C.int) (mpirc C.int) {
	defer guard("MPI_Group_compare", &mpirc)
	a, err := lib.group(h1)
	if err != nil {
		return ret("MPI_Group_compare", err)
	}
	b, err := lib.group(h2)
	if err != nil {
		return ret("MPI_Group_compare", err)
	}
	*result = C.int(compareMembers(a, b))
	return errSuccess
}

//export PMPI_Comm_compare
func PMPI_Comm_compare(c1, c2 C.MPI_Comm, result *C.int) (mpirc C.int) {
	defer guard("MPI_Comm_compare", &mpirc)
	a, err := lib.comm(c1)
	if err != nil {
		return retc(c1, "MPI_Comm_compare", err)
	}
	b, err := lib.comm(c2)
	if err != nil {
		return retc(c2, "MPI_Comm_compare", err)
	}
	r := compareMembers(members(a), members(b))
	switch {
	case c1 == c2:
		r = cmpIdent
	case r == cmpIdent:
		r = cmpCongruent // same members, another context
	}
	*result = C.int(r)
	return errSuccess
}

// splitInto makes the communicator of a Split of ce and registers it (nil
// handle MPI_COMM_NULL for a rank left out); the new one inherits ce's
// error handler.
func splitInto(ce *commEntry, color, key int, out *C.MPI_Comm) (*commEntry, error) {
	var c *mplite.Comm
	err := ce.coll(func() (e error) { c, e = ce.c.Split(color, key); return })
	if err != nil {
		return nil, err
	}
	if c == nil {
		*out = commNull
		return nil, nil
	}
	ne, err := newCommEntry(c, true, ce)
	if err != nil {
		return nil, err
	}
	*out = lib.addComm(ne)
	return ne, nil
}

// MPI_Comm_create makes the communicator of group's members (a subset of
// comm's, all of comm calling): a split, ordered as the group.
//
//export PMPI_Comm_create
func PMPI_Comm_create(comm C.MPI_Comm, h C.MPI_Group, out *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Comm_create", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_create", err)
	}
	g, err := lib.group(h)
	if err != nil {
		return retc(comm, "MPI_Comm_create", err)
	}
	mem := members(ce)
	for _, w := range g {
		if !slices.Contains(mem, w) {
			return retc(comm, "MPI_Comm_create", errorf(errGroup, "world rank %d of the group is not in the communicator", w))
		}
	}
	color, key := -1, 0 // not a member: no communicator
	if i := slices.Index(g, myWorldRank()); i >= 0 {
		color, key = 0, i
	}
	_, err = splitInto(ce, color, key, out)
	return retc(comm, "MPI_Comm_create", err)
}

// MPI_Comm_create_group is called by the group's members only. (The tag,
// which tells apart concurrent calls by several threads, is not needed:
// collectives of one communicator run one at a time here.)
//
//export PMPI_Comm_create_group
func PMPI_Comm_create_group(comm C.MPI_Comm, h C.MPI_Group, tag C.int, out *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Comm_create_group", &mpirc)
	const fn = "MPI_Comm_create_group"
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	g, err := lib.group(h)
	if err != nil {
		return retc(comm, fn, err)
	}
	if out == nil {
		return retc(comm, fn, errorf(errArg, "NULL result"))
	}
	if !slices.Contains(g, myWorldRank()) {
		*out = commNull // MPI: a non-member that calls gets MPI_COMM_NULL
		return errSuccess
	}
	mem := members(ce)
	ranks := make([]int, len(g))
	for i, w := range g {
		if ranks[i] = slices.Index(mem, w); ranks[i] < 0 {
			return retc(comm, fn, errorf(errGroup, "world rank %d of the group is not in the communicator", w))
		}
	}
	var c *mplite.Comm
	if err := ce.coll(func() (e error) { c, e = ce.c.CreateGroup(ranks); return }); err != nil {
		return retc(comm, fn, err)
	}
	ne, err := newCommEntry(c, true, ce)
	if err != nil {
		return retc(comm, fn, err)
	}
	*out = lib.addComm(ne)
	return errSuccess
}

// MPI_Comm_split_type with MPI_COMM_TYPE_SHARED groups the ranks of one
// host: those that share a NIC (mprun -ppn, several ranks per node under
// a launcher), which also share memory.
//
//export PMPI_Comm_split_type
func PMPI_Comm_split_type(comm C.MPI_Comm, kind, key C.int, info C.MPI_Info, out *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Comm_split_type", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_split_type", err)
	}
	color := -1
	switch kind {
	case undefined:
	case commTypeShared:
		color = myHost()
	default:
		return retc(comm, "MPI_Comm_split_type", errorf(errArg, "split type %d", int(kind)))
	}
	_, err = splitInto(ce, color, int(key), out)
	return retc(comm, "MPI_Comm_split_type", err)
}
