package mplite

import (
	"slices"
	"strings"
	"testing"
)

// TestAlgoTables: the names users see (WithAlgorithm, MPLITE_ALGO_<COLL>,
// tuning files, collbench's algo=) are exactly these, in this order; every
// table names each algorithm once, has a cost and an implementation for
// each, and has its fallback.
func TestAlgoTables(t *testing.T) {
	want := []string{
		"barrier: dissemination hierarchical",
		"bcast: binomial scatter_allgather pipeline mcast-ack mcast-nak hierarchical",
		"reduce: binomial pipeline rabenseifner hierarchical",
		"allreduce: recursive_doubling rabenseifner ring hierarchical",
		"gather: binomial linear",
		"gatherv: linear",
		"scatter: binomial linear mcast",
		"scatterv: linear",
		"allgather: recursive_doubling bruck ring mcast hierarchical",
		"allgatherv: ring linear",
		"alltoall: bruck pairwise linear phased",
		"alltoallv: pairwise linear phased",
		"scan: recursive_doubling linear",
		"exscan: recursive_doubling",
	}
	var got []string
	for _, coll := range Collectives() {
		got = append(got, coll+": "+strings.Join(Algorithms(coll), " "))
	}
	if !slices.Equal(got, want) {
		t.Errorf("algorithms:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, tb := range newAlgoTables().all() {
		seen := map[algo]bool{}
		for _, e := range tb.algos {
			if seen[e.id] || slices.Index(tb.names(), e.name) != slices.IndexFunc(tb.algos, func(x algoEntry) bool { return x.id == e.id }) {
				t.Errorf("%s: %s (%d) twice", tb.coll, e.name, e.id)
			}
			seen[e.id] = true
			// (Every algorithm's implementation runs in the collective
			// tests, runCollsWith: exec fails for one it lacks.)
			if e.cost == nil {
				t.Errorf("%s/%s: no cost", tb.coll, e.name)
			}
		}
		if !seen[tb.fallback] {
			t.Errorf("%s: fallback %d is not in the table", tb.coll, tb.fallback)
		}
	}
}

// TestParseAlgo: a name goes through the collective's table; an unknown
// one is an error listing the valid names.
func TestParseAlgo(t *testing.T) {
	if err := checkAlgo(collAlltoall, "pairwise"); err != nil {
		t.Error(err)
	}
	if err := checkAlgo(collAlltoall, algoAuto); err != nil {
		t.Error(err)
	}
	err := checkAlgo(collAlltoall, "pairwse")
	if err == nil || !strings.Contains(err.Error(), "valid: auto, bruck, pairwise, linear, phased") {
		t.Errorf("misspelt algorithm: %v", err)
	}
	if err := checkAlgo("alltoallw", "pairwise"); err == nil || !strings.Contains(err.Error(), "exscan") {
		t.Errorf("unknown collective: %v", err)
	}
}
