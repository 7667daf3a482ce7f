package main

/*
#include "ethervia_mpi_types.h"

extern int MPIR_C_MPI_UNWEIGHTED;
extern int MPIR_C_MPI_WEIGHTS_EMPTY;
*/
import "C"

import (
	"encoding/binary"
	"unsafe"
)

// Graph and distributed graph topologies: bookkeeping on the communicator
// (no reordering: MPI allows keeping the ranks).

const (
	topoGraph     = 1 // MPI_GRAPH
	topoDistGraph = 3 // MPI_DIST_GRAPH
)

// graph is MPI_Graph_create's topology: index and edges as given.
type graph struct{ index, edges []int }

// neighbors returns the neighbours of rank.
func (g *graph) neighbors(rank int) []int {
	lo := 0
	if rank > 0 {
		lo = g.index[rank-1]
	}
	return g.edges[lo:g.index[rank]]
}

// distGraph is this rank's part of a distributed graph: its in and out
// neighbours with their weights (nil: unweighted).
type distGraph struct {
	sources, sweights, dests, dweights []int
	weighted                           bool
}

//export PMPI_Graph_create
func PMPI_Graph_create(comm C.MPI_Comm, nnodes C.int, index, edges *C.int, reorder C.int, out *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Graph_create", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Graph_create", err)
	}
	n := int(nnodes)
	if n < 0 || n > ce.c.Size() {
		return retc(comm, "MPI_Graph_create", errorf(errArg, "%d nodes for a communicator of %d", n, ce.c.Size()))
	}
	g := &graph{index: intRanks(nnodes, index)}
	for i, v := range g.index {
		if v < 0 || (i > 0 && v < g.index[i-1]) {
			return retc(comm, "MPI_Graph_create", errorf(errArg, "index[%d] = %d", i, v))
		}
	}
	if n > 0 {
		g.edges = intRanks(C.int(g.index[n-1]), edges)
	}
	for _, e := range g.edges {
		if e < 0 || e >= n {
			return retc(comm, "MPI_Graph_create", errorf(errRank, "edge to %d in a graph of %d nodes", e, n))
		}
	}
	color := -1
	if ce.c.Rank() < n {
		color = 0
	}
	ne, err := splitInto(ce, color, ce.c.Rank(), out)
	if err != nil {
		return retc(comm, "MPI_Graph_create", err)
	}
	if ne != nil {
		ne.graph = g
	}
	return errSuccess
}

func graphOf(comm C.MPI_Comm) (*commEntry, *graph, error) {
	ce, err := lib.comm(comm)
	if err != nil {
		return nil, nil, err
	}
	if ce.graph == nil {
		return nil, nil, errorf(errTopology, "communicator %#x has no graph topology", uint32(comm))
	}
	return ce, ce.graph, nil
}

//export PMPI_Graphdims_get
func PMPI_Graphdims_get(comm C.MPI_Comm, nnodes, nedges *C.int) (mpirc C.int) {
	defer guard("MPI_Graphdims_get", &mpirc)
	_, g, err := graphOf(comm)
	if err != nil {
		return retc(comm, "MPI_Graphdims_get", err)
	}
	*nnodes, *nedges = C.int(len(g.index)), C.int(len(g.edges))
	return errSuccess
}

//export PMPI_Graph_get
func PMPI_Graph_get(comm C.MPI_Comm, maxindex, maxedges C.int, index, edges *C.int) (mpirc C.int) {
	defer guard("MPI_Graph_get", &mpirc)
	_, g, err := graphOf(comm)
	if err != nil {
		return retc(comm, "MPI_Graph_get", err)
	}
	copyInts(index, int(maxindex), g.index)
	copyInts(edges, int(maxedges), g.edges)
	return errSuccess
}

//export PMPI_Graph_neighbors_count
func PMPI_Graph_neighbors_count(comm C.MPI_Comm, rank C.int, n *C.int) (mpirc C.int) {
	defer guard("MPI_Graph_neighbors_count", &mpirc)
	_, g, err := graphOf(comm)
	if err == nil && (rank < 0 || int(rank) >= len(g.index)) {
		err = errorf(errRank, "rank %d of a graph of %d nodes", int(rank), len(g.index))
	}
	if err != nil {
		return retc(comm, "MPI_Graph_neighbors_count", err)
	}
	*n = C.int(len(g.neighbors(int(rank))))
	return errSuccess
}

//export PMPI_Graph_neighbors
func PMPI_Graph_neighbors(comm C.MPI_Comm, rank, maxn C.int, out *C.int) (mpirc C.int) {
	defer guard("MPI_Graph_neighbors", &mpirc)
	_, g, err := graphOf(comm)
	if err == nil && (rank < 0 || int(rank) >= len(g.index)) {
		err = errorf(errRank, "rank %d of a graph of %d nodes", int(rank), len(g.index))
	}
	if err != nil {
		return retc(comm, "MPI_Graph_neighbors", err)
	}
	copyInts(out, int(maxn), g.neighbors(int(rank)))
	return errSuccess
}

//export PMPI_Graph_map
func PMPI_Graph_map(comm C.MPI_Comm, nnodes C.int, index, edges *C.int, newrank *C.int) (mpirc C.int) {
	defer guard("MPI_Graph_map", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Graph_map", err)
	}
	*newrank = undefined
	if ce.c.Rank() < int(nnodes) {
		*newrank = C.int(ce.c.Rank())
	}
	return errSuccess
}

// copyInts writes up to max of src to the C array dst.
func copyInts(dst *C.int, max int, src []int) {
	for i, v := range src[:min(max, len(src))] {
		cInts(dst, len(src))[i] = C.int(v)
	}
}

// weights reads a weights argument: MPI_UNWEIGHTED (or NULL for no
// neighbours) means none.
func weights(p *C.int, n int) ([]int, bool) {
	if unsafe.Pointer(p) == unsafe.Pointer(&C.MPIR_C_MPI_UNWEIGHTED) || p == nil {
		return nil, false
	}
	if unsafe.Pointer(p) == unsafe.Pointer(&C.MPIR_C_MPI_WEIGHTS_EMPTY) {
		return nil, true
	}
	return intRanks(C.int(n), p), true
}

//export PMPI_Dist_graph_create_adjacent
func PMPI_Dist_graph_create_adjacent(comm C.MPI_Comm, indeg C.int, sources, sweights *C.int, outdeg C.int, dests, dweights *C.int,
	info C.MPI_Info, reorder C.int, out *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Dist_graph_create_adjacent", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Dist_graph_create_adjacent", err)
	}
	if indeg < 0 || outdeg < 0 {
		return retc(comm, "MPI_Dist_graph_create_adjacent", errorf(errArg, "degrees %d and %d", int(indeg), int(outdeg)))
	}
	d := &distGraph{sources: intRanks(indeg, sources), dests: intRanks(outdeg, dests)}
	var win, wout bool
	d.sweights, win = weights(sweights, int(indeg))
	d.dweights, wout = weights(dweights, int(outdeg))
	d.weighted = win || wout
	for _, r := range append(append([]int(nil), d.sources...), d.dests...) {
		if r < 0 || r >= ce.c.Size() {
			return retc(comm, "MPI_Dist_graph_create_adjacent", errorf(errRank, "neighbour %d of %d ranks", r, ce.c.Size()))
		}
	}
	ne, err := splitInto(ce, 0, ce.c.Rank(), out)
	if err != nil {
		return retc(comm, "MPI_Dist_graph_create_adjacent", err)
	}
	ne.dist = d
	return errSuccess
}

// MPI_Dist_graph_create: every rank names some edges, anyone's; the ranks
// exchange them (an allgather of counts, then of the edges) and each keeps
// its own in- and out-edges, in the order of the ranks that named them.
// The graph is weighted if any rank gave weights (a rank naming no edges
// may pass NULL).
//
//export PMPI_Dist_graph_create
func PMPI_Dist_graph_create(comm C.MPI_Comm, n C.int, sources, degrees, dests, weightsp *C.int,
	info C.MPI_Info, reorder C.int, out *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Dist_graph_create", &mpirc)
	const fn = "MPI_Dist_graph_create"
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	if n < 0 {
		return retc(comm, fn, errorf(errArg, "%d sources", int(n)))
	}
	src, deg := intRanks(n, sources), intRanks(n, degrees)
	total := 0
	for i, d := range deg {
		if d < 0 {
			return retc(comm, fn, errorf(errArg, "degree %d of source %d", d, src[i]))
		}
		total += d
	}
	dst := intRanks(C.int(total), dests)
	w, weighted := weights(weightsp, total)
	weighted = weighted && weightsp != nil
	size := ce.c.Size()
	// Each edge travels as three int32: source, destination, weight.
	mine := make([]byte, 0, 12*total)
	k := 0
	for i, s := range src {
		for range deg[i] {
			if s < 0 || s >= size || dst[k] < 0 || dst[k] >= size {
				return retc(comm, fn, errorf(errRank, "edge %d->%d among %d ranks", s, dst[k], size))
			}
			wt := 1
			if w != nil {
				wt = w[k]
			}
			mine = binary.LittleEndian.AppendUint32(mine, uint32(s))
			mine = binary.LittleEndian.AppendUint32(mine, uint32(dst[k]))
			mine = binary.LittleEndian.AppendUint32(mine, uint32(wt))
			k++
		}
	}
	counts := make([]byte, 8*size)
	var all []byte
	flag := uint64(0)
	if weighted {
		flag = 1
	}
	err = ce.coll(func() error {
		var cnt [8]byte // bytes of edges << 1 | weighted
		binary.LittleEndian.PutUint64(cnt[:], uint64(len(mine))<<1|flag)
		if err := ce.c.Allgather(cnt[:], counts); err != nil {
			return err
		}
		cs, ds, sum := make([]int, size), make([]int, size), 0
		for r := range size {
			v := binary.LittleEndian.Uint64(counts[8*r:])
			cs[r], ds[r] = int(v>>1), sum
			sum += cs[r]
			weighted = weighted || v&1 == 1
		}
		all = make([]byte, sum)
		return ce.c.Allgatherv(mine, all, cs, ds)
	})
	if err != nil {
		return retc(comm, fn, err)
	}
	me := ce.c.Rank()
	d := &distGraph{weighted: weighted}
	for e := 0; e+12 <= len(all); e += 12 {
		s := int(int32(binary.LittleEndian.Uint32(all[e:])))
		t := int(int32(binary.LittleEndian.Uint32(all[e+4:])))
		wt := int(int32(binary.LittleEndian.Uint32(all[e+8:])))
		if t == me {
			d.sources, d.sweights = append(d.sources, s), append(d.sweights, wt)
		}
		if s == me {
			d.dests, d.dweights = append(d.dests, t), append(d.dweights, wt)
		}
	}
	if !weighted {
		d.sweights, d.dweights = nil, nil
	}
	ne, err := splitInto(ce, 0, me, out)
	if err != nil {
		return retc(comm, fn, err)
	}
	ne.dist = d
	return errSuccess
}

func distOf(comm C.MPI_Comm) (*distGraph, error) {
	ce, err := lib.comm(comm)
	if err != nil {
		return nil, err
	}
	if ce.dist == nil {
		return nil, errorf(errTopology, "communicator %#x has no distributed graph topology", uint32(comm))
	}
	return ce.dist, nil
}

//export PMPI_Dist_graph_neighbors_count
func PMPI_Dist_graph_neighbors_count(comm C.MPI_Comm, indeg, outdeg, weighted *C.int) (mpirc C.int) {
	defer guard("MPI_Dist_graph_neighbors_count", &mpirc)
	d, err := distOf(comm)
	if err != nil {
		return retc(comm, "MPI_Dist_graph_neighbors_count", err)
	}
	*indeg, *outdeg, *weighted = C.int(len(d.sources)), C.int(len(d.dests)), 0
	if d.weighted {
		*weighted = 1
	}
	return errSuccess
}

//export PMPI_Dist_graph_neighbors
func PMPI_Dist_graph_neighbors(comm C.MPI_Comm, maxin C.int, sources, sweights *C.int, maxout C.int, dests, dweights *C.int) (mpirc C.int) {
	defer guard("MPI_Dist_graph_neighbors", &mpirc)
	d, err := distOf(comm)
	if err != nil {
		return retc(comm, "MPI_Dist_graph_neighbors", err)
	}
	copyInts(sources, int(maxin), d.sources)
	copyInts(dests, int(maxout), d.dests)
	if _, ok := weights(sweights, 0); ok && d.sweights != nil {
		copyInts(sweights, int(maxin), d.sweights)
	}
	if _, ok := weights(dweights, 0); ok && d.dweights != nil {
		copyInts(dweights, int(maxout), d.dweights)
	}
	return errSuccess
}
