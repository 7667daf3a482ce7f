package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"slices"
)

// Cartesian topologies.

const topoCart = 2 // MPI_CART

// cart is the Cartesian topology of a communicator, row-major.
type cart struct {
	dims    []int
	periods []bool
}

func (t *cart) size() int {
	n := 1
	for _, d := range t.dims {
		n *= d
	}
	return n
}

func (t *cart) coords(rank int) []int {
	c := make([]int, len(t.dims))
	for i := len(t.dims) - 1; i >= 0; i-- {
		c[i] = rank % t.dims[i]
		rank /= t.dims[i]
	}
	return c
}

// rank returns the rank at coords, wrapping periodic dimensions; ok is
// false off a non-periodic edge.
func (t *cart) rank(coords []int) (int, bool) {
	r := 0
	for i, c := range coords {
		d := t.dims[i]
		if c < 0 || c >= d {
			if !t.periods[i] {
				return 0, false
			}
			c = ((c % d) + d) % d
		}
		r = r*d + c
	}
	return r, true
}

// dimsCreate fills the zero entries of dims with a balanced factorization
// of nnodes over the fixed ones, in non-increasing order: each prime
// factor, largest first, goes to the free dimension with the smallest
// product so far.
func dimsCreate(nnodes int, dims []int) error {
	fixed, free := 1, 0
	for _, d := range dims {
		switch {
		case d < 0:
			return errorf(errDims, "negative dimension %d", d)
		case d == 0:
			free++
		default:
			fixed *= d
		}
	}
	if nnodes < 1 || nnodes%fixed != 0 {
		return errorf(errDims, "%d nodes do not fill dimensions whose fixed product is %d", nnodes, fixed)
	}
	if free == 0 {
		if fixed != nnodes {
			return errorf(errDims, "dimensions of product %d for %d nodes", fixed, nnodes)
		}
		return nil
	}
	n := nnodes / fixed
	var factors []int
	for p := 2; p*p <= n; p++ {
		for n%p == 0 {
			factors = append(factors, p)
			n /= p
		}
	}
	if n > 1 {
		factors = append(factors, n)
	}
	slices.Reverse(factors)
	got := make([]int, free)
	for i := range got {
		got[i] = 1
	}
	for _, f := range factors {
		i := slices.Index(got, slices.Min(got))
		got[i] *= f
	}
	slices.SortFunc(got, func(a, b int) int { return b - a })
	k := 0
	for i, d := range dims {
		if d == 0 {
			dims[i] = got[k]
			k++
		}
	}
	return nil
}

//export PMPI_Dims_create
func PMPI_Dims_create(nnodes, ndims C.int, dims *C.int) (mpirc C.int) {
	defer guard("MPI_Dims_create", &mpirc)
	if ndims < 0 {
		return ret("MPI_Dims_create", errorf(errDims, "%d dimensions", int(ndims)))
	}
	d := intRanks(ndims, dims)
	if err := dimsCreate(int(nnodes), d); err != nil {
		return ret("MPI_Dims_create", err)
	}
	for i, v := range d {
		cInts(dims, int(ndims))[i] = C.int(v)
	}
	return errSuccess
}

func cartOf(comm C.MPI_Comm) (*commEntry, *cart, error) {
	ce, err := lib.comm(comm)
	if err != nil {
		return nil, nil, err
	}
	if ce.cart == nil {
		return nil, nil, errorf(errTopology, "communicator %#x has no Cartesian topology", uint32(comm))
	}
	return ce, ce.cart, nil
}

//export PMPI_Cart_create
func PMPI_Cart_create(comm C.MPI_Comm, ndims C.int, dims, periods *C.int, reorder C.int, out *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Cart_create", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Cart_create", err)
	}
	if ndims < 0 {
		return retc(comm, "MPI_Cart_create", errorf(errDims, "%d dimensions", int(ndims)))
	}
	t := &cart{dims: intRanks(ndims, dims), periods: make([]bool, ndims)}
	for i, p := range cInts(periods, int(ndims)) {
		t.periods[i] = p != 0
	}
	for _, d := range t.dims {
		if d <= 0 {
			return retc(comm, "MPI_Cart_create", errorf(errDims, "dimension %d", d))
		}
	}
	if t.size() > ce.c.Size() {
		return retc(comm, "MPI_Cart_create", errorf(errDims, "a grid of %d for a communicator of %d", t.size(), ce.c.Size()))
	}
	color := -1
	if ce.c.Rank() < t.size() {
		color = 0
	}
	ne, err := splitInto(ce, color, ce.c.Rank(), out)
	if err != nil {
		return retc(comm, "MPI_Cart_create", err)
	}
	if ne != nil {
		ne.cart = t
	}
	return errSuccess
}

//export PMPI_Cart_map
func PMPI_Cart_map(comm C.MPI_Comm, ndims C.int, dims, periods *C.int, newrank *C.int) (mpirc C.int) {
	defer guard("MPI_Cart_map", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Cart_map", err)
	}
	n := 1
	for _, d := range intRanks(ndims, dims) {
		n *= d
	}
	*newrank = undefined
	if ce.c.Rank() < n {
		*newrank = C.int(ce.c.Rank())
	}
	return errSuccess
}

//export PMPI_Topo_test
func PMPI_Topo_test(comm C.MPI_Comm, status *C.int) (mpirc C.int) {
	defer guard("MPI_Topo_test", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Topo_test", err)
	}
	switch {
	case ce.cart != nil:
		*status = topoCart
	case ce.graph != nil:
		*status = topoGraph
	case ce.dist != nil:
		*status = topoDistGraph
	default:
		*status = undefined
	}
	return errSuccess
}

//export PMPI_Cartdim_get
func PMPI_Cartdim_get(comm C.MPI_Comm, ndims *C.int) (mpirc C.int) {
	defer guard("MPI_Cartdim_get", &mpirc)
	_, t, err := cartOf(comm)
	if err != nil {
		return retc(comm, "MPI_Cartdim_get", err)
	}
	*ndims = C.int(len(t.dims))
	return errSuccess
}

//export PMPI_Cart_get
func PMPI_Cart_get(comm C.MPI_Comm, maxdims C.int, dims, periods, coords *C.int) (mpirc C.int) {
	defer guard("MPI_Cart_get", &mpirc)
	ce, t, err := cartOf(comm)
	if err != nil {
		return retc(comm, "MPI_Cart_get", err)
	}
	n := min(int(maxdims), len(t.dims))
	c := t.coords(ce.c.Rank())
	d, p, o := cInts(dims, n), cInts(periods, n), cInts(coords, n)
	for i := 0; i < n; i++ {
		d[i], o[i] = C.int(t.dims[i]), C.int(c[i])
		p[i] = 0
		if t.periods[i] {
			p[i] = 1
		}
	}
	return errSuccess
}

//export PMPI_Cart_coords
func PMPI_Cart_coords(comm C.MPI_Comm, rank, maxdims C.int, coords *C.int) (mpirc C.int) {
	defer guard("MPI_Cart_coords", &mpirc)
	_, t, err := cartOf(comm)
	if err != nil {
		return retc(comm, "MPI_Cart_coords", err)
	}
	if rank < 0 || int(rank) >= t.size() {
		return retc(comm, "MPI_Cart_coords", errorf(errRank, "rank %d of a grid of %d", int(rank), t.size()))
	}
	o := cInts(coords, min(int(maxdims), len(t.dims)))
	for i, c := range t.coords(int(rank))[:len(o)] {
		o[i] = C.int(c)
	}
	return errSuccess
}

//export PMPI_Cart_rank
func PMPI_Cart_rank(comm C.MPI_Comm, coords *C.int, rank *C.int) (mpirc C.int) {
	defer guard("MPI_Cart_rank", &mpirc)
	_, t, err := cartOf(comm)
	if err != nil {
		return retc(comm, "MPI_Cart_rank", err)
	}
	r, ok := t.rank(intRanks(C.int(len(t.dims)), coords))
	if !ok {
		return retc(comm, "MPI_Cart_rank", errorf(errArg, "coordinates off a non-periodic edge"))
	}
	*rank = C.int(r)
	return errSuccess
}

//export PMPI_Cart_shift
func PMPI_Cart_shift(comm C.MPI_Comm, dir, disp C.int, src, dst *C.int) (mpirc C.int) {
	defer guard("MPI_Cart_shift", &mpirc)
	ce, t, err := cartOf(comm)
	if err != nil {
		return retc(comm, "MPI_Cart_shift", err)
	}
	if dir < 0 || int(dir) >= len(t.dims) {
		return retc(comm, "MPI_Cart_shift", errorf(errArg, "direction %d of %d dimensions", int(dir), len(t.dims)))
	}
	at := func(d int) C.int {
		c := t.coords(ce.c.Rank())
		c[dir] += d
		if r, ok := t.rank(c); ok {
			return C.int(r)
		}
		return procNull
	}
	*dst, *src = at(int(disp)), at(-int(disp))
	return errSuccess
}

//export PMPI_Cart_sub
func PMPI_Cart_sub(comm C.MPI_Comm, remain *C.int, out *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Cart_sub", &mpirc)
	ce, t, err := cartOf(comm)
	if err != nil {
		return retc(comm, "MPI_Cart_sub", err)
	}
	keep := cInts(remain, len(t.dims))
	c := t.coords(ce.c.Rank())
	color, key := 0, 0
	sub := &cart{}
	for i, d := range t.dims {
		if keep[i] != 0 {
			key = key*d + c[i]
			sub.dims = append(sub.dims, d)
			sub.periods = append(sub.periods, t.periods[i])
		} else {
			color = color*d + c[i]
		}
	}
	ne, err := splitInto(ce, color, key, out)
	if err != nil {
		return retc(comm, "MPI_Cart_sub", err)
	}
	if ne != nil {
		ne.cart = sub
	}
	return errSuccess
}
