package main

import (
	"slices"
	"testing"
)

// TestDarrayOwnedIndices: what a process owns along one dimension, and
// the bounds of a darray (the whole array) and its true bounds (its own
// elements).
func TestDarrayOwnedIndices(t *testing.T) {
	for _, c := range []struct {
		distrib, darg, psize, coord int
		want                        []int64
	}{
		{distBlock, distDfltDarg, 3, 1, []int64{4, 5, 6, 7}},
		{distBlock, distDfltDarg, 4, 3, []int64{9}},
		{distBlock, 5, 3, 2, nil},
		{distCyclic, distDfltDarg, 3, 1, []int64{1, 4, 7}},
		{distCyclic, 2, 3, 1, []int64{2, 3, 8, 9}},
		{distNone, distDfltDarg, 1, 0, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
	} {
		got, err := ownedIndices(0, 10, c.distrib, c.darg, c.psize, c.coord)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, %v", c, got, err)
		}
	}
	if _, err := ownedIndices(0, 10, distBlock, 2, 3, 0); err == nil {
		t.Error("blocks of 2 over 3 processes cover 10 elements")
	}
	if _, err := ownedIndices(0, 10, distNone, distDfltDarg, 2, 0); err == nil {
		t.Error("MPI_DISTRIBUTE_NONE over 2 processes")
	}
	// rank 3 of a 2 x 2 grid: the lower right 2 x 2 of a 4 x 3 array of ints
	l, err := darray(4, 3, []int64{4, 3}, []int{distBlock, distBlock}, []int{distDfltDarg, distDfltDarg}, []int{2, 2}, false, basicLayout(0x4c000405, 4))
	if err != nil {
		t.Fatal(err)
	}
	if l.size != 8 || l.lb != 0 || l.extent() != 48 || l.tlb != (2*3+2)*4 || l.tub != 48 {
		t.Fatalf("darray: %v", l)
	}
}
