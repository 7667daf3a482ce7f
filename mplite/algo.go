package mplite

import (
	"fmt"
	"math"
	"strings"
)

// The collective algorithms: one table per collective (algoTables), each
// entry an algorithm's identifier, its name, CCL's cost of it, whether the
// cost model may choose it, and its implementation. A collective picks an
// entry (pick: the override, else the least estimated time) and runs it;
// every name a user gives (WithAlgorithm, SetAlgorithm, MPLITE_ALGO_<COLL>,
// a tuning file's "algo" lines) is looked up in the table.

// Collective names, as WithAlgorithm, SetAlgorithm and MPLITE_ALGO_<NAME>
// take them.
const (
	collBarrier    = "barrier"
	collBcast      = "bcast"
	collReduce     = "reduce"
	collAllreduce  = "allreduce"
	collGather     = "gather"
	collGatherv    = "gatherv"
	collScatter    = "scatter"
	collScatterv   = "scatterv"
	collAllgather  = "allgather"
	collAllgatherv = "allgatherv"
	collAlltoall   = "alltoall"
	collAlltoallv  = "alltoallv"
	collScan       = "scan"
	collExscan     = "exscan"
)

// Collectives lists the collective names that take an algorithm override.
func Collectives() []string {
	all := newAlgoTables().all()
	out := make([]string, len(all))
	for i, t := range all {
		out[i] = t.coll
	}
	return out
}

// Algorithms lists the algorithms of a collective (nil for an unknown
// one). The first is preferred when the cost model ties.
func Algorithms(coll string) []string {
	if t := newAlgoTables().table(coll); t != nil {
		return t.names()
	}
	return nil
}

// checkAlgo validates an override; the error lists the valid names.
func checkAlgo(coll, algo string) error {
	t := newAlgoTables().table(coll)
	if t == nil {
		return fmt.Errorf("mplite: unknown collective %q (valid: %s)", coll, strings.Join(Collectives(), ", "))
	}
	return t.parse(algo)
}

// lookupAlgo is the entry of a collective's named algorithm, or nil.
func lookupAlgo(coll, algo string) *algoEntry {
	if t := newAlgoTables().table(coll); t != nil {
		return t.lookup(algo)
	}
	return nil
}

// Cost returns CCL's cost measures of an algorithm: C1, the steps in
// sequence, and C2, the bytes any one rank sends in sequence, for n ranks
// and m bytes. m is the whole buffer for bcast, reduce, allreduce, scan and
// exscan, and one rank's block for the others (the average block for the v
// variants); the Bruck alltoall's is given for radix 2. The time estimate is C1·t_s + C2·t_c. ok is false for an unknown name.
func Cost(coll, algo string, n, m int) (c1, c2 float64, ok bool) {
	e := lookupAlgo(coll, algo)
	if e == nil {
		return 0, 0, false
	}
	c1, c2 = e.cost(n, m)
	return c1, c2, true
}

// Work returns what an algorithm costs the whole job: the messages and
// bytes every rank sends, summed over the n ranks (for the Bruck alltoall,
// radix 2). Where ranks share processors the job cannot finish faster than
// its work spread over them; CCL's model assumes a processor per rank and
// counts only the longest chain (Cost). ok is false for an unknown name.
func Work(coll, algo string, n, m int) (msgs, bytes float64, ok bool) {
	e := lookupAlgo(coll, algo)
	if e == nil {
		return 0, 0, false
	}
	_, _, msgs, bytes = e.costs(n, m)
	return msgs, bytes, true
}

// recDoublingCost is recursive doubling's, with the ranks beyond a power
// of two folded in and out.
func recDoublingCost(n, m int) (float64, float64) {
	_, lgp, fold := foldPow2(n)
	M := float64(m)
	return lgp + 2*fold, lgp*M + 2*fold*M
}

// disseminationCost is the dissemination barrier's.
func disseminationCost(n, _ int) (float64, float64) { return lg(n), 0 }

// bruckCost is the radix-r Bruck alltoall's: (r-1) exchanges per base-r
// digit, each of the blocks with that digit value.
func bruckCost(n, m, r int) (c1, c2 float64) {
	for w := 1; w < n; w *= r {
		for d := 1; d < r && d*w < n; d++ {
			k := 0
			for i := range n {
				if (i/w)%r == d {
					k++
				}
			}
			c1++
			c2 += float64(k * m)
		}
	}
	return c1, c2
}

// algo identifies a collective algorithm inside mplite. The name users see
// is in each collective's table: an algorithm that several collectives
// have (algoBinomial) has an entry in each.
type algo uint8

const (
	algoDissemination algo = iota + 1
	algoBinomial
	algoScatterAllgather
	algoMcastAck
	algoMcastNak
	algoRabenseifner
	algoRecursiveDoubling
	algoRing
	algoLinear
	algoBruck
	algoPairwise
	algoPhased
	algoMcast
	algoPipeline
	algoHierarchical
)

// algoAuto is the override that restores the cost model's choice.
const algoAuto = "auto"

// algoEntry is one algorithm of one collective.
type algoEntry struct {
	id algo
	// name is the algorithm's name for WithAlgorithm, SetAlgorithm,
	// MPLITE_ALGO_<COLL>, tuning files, Algorithms and collbench.
	name string
	// cost is CCL's cost (Cost): C1, the steps in sequence, and C2, the
	// bytes any one rank sends in sequence, for n ranks and m bytes.
	cost func(n, m int) (c1, c2 float64)
	// work is what the whole job sends (Work); nil for a symmetric
	// algorithm, where every rank does the longest chain's work: n·cost.
	work func(n, m int) (msgs, bytes float64)
	// eligible says whether the cost model may choose the algorithm (nil:
	// always); an override runs it regardless.
	eligible func(s selection) bool
	// tuned, if set, replaces cost and work in the cost model's choice, for
	// an algorithm whose cost depends on the tuning; ok false skips it.
	tuned func(s selection) (c1, c2, w1, w2 float64, ok bool)
	// The implementation is exec's case for the entry's collective and id.
}

// costs are the entry's C1, C2 and the job's messages and bytes.
func (e *algoEntry) costs(n, m int) (c1, c2, w1, w2 float64) {
	c1, c2 = e.cost(n, m)
	if e.work != nil {
		w1, w2 = e.work(n, m)
	} else {
		w1, w2 = float64(n)*c1, float64(n)*c2
	}
	return c1, c2, w1, w2
}

// collTable is one collective's algorithms.
type collTable struct {
	coll  string      // the collective's name (collBcast ...)
	algos []algoEntry // the first is preferred when the cost model ties
	// fallback runs when the cost model rates every eligible algorithm
	// as infinitely slow (an infinite tuning).
	fallback algo
}

// lookup is the entry of the named algorithm, or nil.
func (t *collTable) lookup(name string) *algoEntry {
	for i := range t.algos {
		if t.algos[i].name == name {
			return &t.algos[i]
		}
	}
	return nil
}

// byID is the entry of algorithm a, which the table must have.
func (t *collTable) byID(a algo) *algoEntry {
	for i := range t.algos {
		if t.algos[i].id == a {
			return &t.algos[i]
		}
	}
	panic(fmt.Sprintf("mplite: %s has no algorithm %d", t.coll, a))
}

// names lists the table's algorithm names in order.
func (t *collTable) names() []string {
	out := make([]string, len(t.algos))
	for i := range t.algos {
		out[i] = t.algos[i].name
	}
	return out
}

// parse checks an override ("auto" or an algorithm of the table); the
// error lists the valid names.
func (t *collTable) parse(name string) error {
	if name != algoAuto && t.lookup(name) == nil {
		return fmt.Errorf("mplite: unknown %s algorithm %q (valid: %s, %s)", t.coll, name, algoAuto, strings.Join(t.names(), ", "))
	}
	return nil
}

// collArgs is one collective call as its algorithms see it; each
// collective sets the fields it has.
type collArgs struct {
	buf              []byte // Bcast
	send, recv       []byte
	scounts, sdispls []int // the send layout (Scatterv, Alltoallv)
	rcounts, rdispls []int // the receive layout (Gatherv, Allgatherv, Alltoallv)
	root             int
}

// selection is what the cost model knows when it chooses.
type selection struct {
	c           *Comm
	n, m        int
	commutative bool
	t           Tuning
}

// algoTables holds every collective's table, built once per world.
type algoTables struct {
	barrier, bcast, reduce, allreduce, gather, gatherv, scatter, scatterv,
	allgather, allgatherv, alltoall, alltoallv, scan, exscan collTable
}

// all lists the tables in Collectives' order.
func (t *algoTables) all() []*collTable {
	return []*collTable{&t.barrier, &t.bcast, &t.reduce, &t.allreduce, &t.gather, &t.gatherv, &t.scatter,
		&t.scatterv, &t.allgather, &t.allgatherv, &t.alltoall, &t.alltoallv, &t.scan, &t.exscan}
}

// table is the named collective's table, or nil.
func (t *algoTables) table(coll string) *collTable {
	for _, ct := range t.all() {
		if ct.coll == coll {
			return ct
		}
	}
	return nil
}

// pick is the algorithm a collective of c runs on m bytes (as Cost counts
// them): the override for the collective if any (SetAlgorithm, then the
// world's options), else the eligible algorithm of least estimated time;
// nil if every estimate is infinite.
func (c *Comm) pick(t *collTable, m int, commutative bool) *algoEntry {
	c.mu.Lock()
	name := c.coll.algos[t.coll]
	if name == "" || name == algoAuto {
		name = c.cfg.algos[t.coll]
	}
	tu := c.cfg.tuning
	if c.tuned {
		tu = c.tune
	}
	c.mu.Unlock()
	if name != "" && name != algoAuto {
		if e := t.lookup(name); e != nil {
			return e
		}
	}
	s := selection{c: c, n: c.csize, m: m, commutative: commutative, t: tu}
	// A bond of K rails stripes point-to-point bytes over all of them, so
	// those cross the line K times as fast; multicast goes out on the
	// first rail only. Measured over two rails at 100 Mbit/s, the 1 MiB
	// multicast Allgather took 625 ms, as over one, where the ring takes
	// half (bench/bond-coll.sh).
	railBT := tu.byteTime()
	if k := len(c.devs); k > 1 && tu.Rate > 0 {
		railBT = Tuning{Tc: tu.Tc, Rate: tu.Rate * uint64(k)}.byteTime()
	}
	var best *algoEntry
	bestT := math.Inf(1)
	for i := range t.algos {
		e := &t.algos[i]
		if e.eligible != nil && !e.eligible(s) {
			continue
		}
		var c1, c2, w1, w2 float64
		if e.tuned != nil {
			var ok bool
			if c1, c2, w1, w2, ok = e.tuned(s); !ok {
				continue
			}
		} else {
			c1, c2, w1, w2 = e.costs(s.n, m)
		}
		bt := railBT
		if e.oneRail() {
			bt = tu.byteTime()
		}
		est := c1*tu.Ts + c2*bt
		cpus := c.cfg.sharedCPUs
		if cpus > 0 {
			// Every rank of the job on cpus processors. The CPUs copy
			// bytes at Tc however slow the line: waiting for the wire
			// costs them nothing.
			est = max(est, (w1*tu.Ts+w2*tu.Tc)/float64(cpus))
		}
		// On a tie with the pairwise exchange, ranks that share CPUs do
		// better posting every message at once (linear): whichever rank
		// runs can move data, where a pairwise step waits for its partner
		// to be scheduled.
		if est < bestT || (est == bestT && cpus > 0 && e.id == algoLinear && best != nil && best.id == algoPairwise) {
			best, bestT = e, est
		}
	}
	return best
}

// run runs the collective of table t with the algorithm pick chooses.
func (c *Comm) run(t *collTable, m int, commutative bool, a *collArgs) error {
	return c.runReducing(t, m, commutative, a, nil)
}

// runReducing is run for the reducing collectives. The reducer travels
// beside the arguments, not among them: escape analysis does not tell
// fields apart, and the buffers in a escape (into requests), which would
// make every caller's Reducer closure a heap allocation.
func (c *Comm) runReducing(t *collTable, m int, commutative bool, a *collArgs, red *Reducer) error {
	e := c.pick(t, m, commutative)
	if e == nil {
		e = t.byID(t.fallback)
	}
	return c.exec(t.coll, e.id, a, red)
}

// oneRail reports whether the algorithm sends its bytes on one rail of a
// bond whatever its rail count: the multicast ones.
func (e *algoEntry) oneRail() bool {
	return e.id == algoMcast || e.id == algoMcastAck || e.id == algoMcastNak
}

// ---- the cost measures ----

// lg is ceil(log2 n), as a float.
func lg(n int) float64 { return float64(ceilLog2(n)) }

// treeCost is a binomial tree's over the whole buffer: ceil(log2 n) steps,
// each of m bytes.
func treeCost(n, m int) (c1, c2 float64) { return lg(n), lg(n) * float64(m) }

// blockTreeCost is a binomial tree's over n blocks of m (gather, scatter)
// and the logarithmic allgathers': ceil(log2 n) steps, n-1 blocks in all.
func blockTreeCost(n, m int) (c1, c2 float64) { return lg(n), float64(n-1) * float64(m) }

// linearCost is n-1 steps of m bytes: the rooted linear algorithms, the
// ring allgathers and the pairwise and linear exchanges. It is also what a
// rooted algorithm sends in all (rootedWork).
func linearCost(n, m int) (c1, c2 float64) { return float64(n - 1), float64(n-1) * float64(m) }

// rootedWork is the job's work of an algorithm that moves every byte once
// between the root and each other rank: n-1 messages of m bytes.
func rootedWork(n, m int) (msgs, bytes float64) { return linearCost(n, m) }

// blockTreeWork is a binomial gather's or scatter's: n-1 messages, each
// block moving ceil(log2 n)/2 times on average.
func blockTreeWork(n, m int) (msgs, bytes float64) {
	return float64(n - 1), float64(n) * lg(n) * float64(m) / 2
}

// foldPow2 gives the largest power of two p not above n, log2 p, and 1 if
// n is not a power of two (the extra fold step), else 0.
func foldPow2(n int) (p int, lgp, fold float64) {
	p = floorPow2(max(n, 1))
	if p != n {
		fold = 1
	}
	return p, float64(ceilLog2(p)), fold
}

// phasedCost is CC-MPI's phased all-to-all's: n-1 phases and n-2 barriers
// of ceil(log2 n) steps each.
func phasedCost(n, m int) (c1, c2 float64) {
	N := float64(n)
	return N - 1 + max(N-2, 0)*lg(n), (N - 1) * float64(m)
}

// ---- eligibility ----

// overrideOnly keeps an algorithm from the cost model: the multicast
// collectives need a NIC multicast filter and a LAN that carries multicast
// well, which the cost model cannot see, so they run only when asked for
// (WithAlgorithm, SetAlgorithm, MPLITE_ALGO_<COLL>).
func overrideOnly(selection) bool { return false }

// lineRateMcast lets the cost model choose the multicast Bcast on a
// switch of known line rate (Tuning.Rate), for messages of at least
// mcastAutoMin: there the root's port carries each byte once where a tree
// carries it ceil(log2 n) times. Below it the multicast's fixed costs (the
// completion tree, a datagram wait) are not repaid: at 100 Mbit/s on 8
// ranks a 1 KiB multicast Bcast took 0.3-0.4 ms against the binomial
// tree's 0.1; at 64 KiB 5.45 against the tree's and the pipeline's 5.7-5.8
// (on 16 ranks 5.45 against 5.7-8.2), half the tree's time at 1 MiB
// (docs/performance.md). A member that cannot join the group makes every
// member fall back to the tree, so the choice needs no local knowledge.
func lineRateMcast(s selection) bool { return lineBound(s) && s.m >= mcastAutoMin }

const mcastAutoMin = 64 << 10

// lineRateMcastAllgather lets the cost model choose the concurrent
// multicast Allgather at a known line rate for blocks of at least
// mcastAllgatherMin. At 100 Mbit/s on 8 ranks it took 38.7 ms against the
// ring's 40.2 at 64 KiB and 616 against 643 at 1 MiB (the receive side's
// minimum: 36.7 and 587); at 1000 bytes 1.8 ms against 0.66, its
// completion round dominating.
func lineRateMcastAllgather(s selection) bool { return lineBound(s) && s.m >= mcastAllgatherMin }

const mcastAllgatherMin = 64 << 10

// lineBound says whether the line, not the CPUs, limits a collective: the
// line rate is known and a byte takes lineBoundMargin times longer on the
// wire than the job's CPUs need for it (every port receiving at the line
// rate, the CPUs sharing all n ports' bytes). Multicast pays only there: it
// saves wire time and costs receivers work (every receiver handles every
// frame). At 1 Gbit/s on 8 ranks sharing 2 CPUs the job moved 450 MB/s
// in all, 4.4 ns a byte per CPU against the default Tc of 0.8, and the
// multicast Bcast and 64 KiB Allgather lost to the unicast ones (19.2
// against 14.7 ms, 14.4 against 6.2); at 100 Mbit/s they won.
func lineBound(s selection) bool {
	if s.t.Rate == 0 {
		return false
	}
	cpus := s.c.cfg.sharedCPUs
	if cpus == 0 {
		cpus = s.n // a CPU per rank
	}
	return 8/float64(s.t.Rate) >= lineBoundMargin*float64(s.n)*s.t.Tc/float64(cpus)
}

const lineBoundMargin = 4

// commutativeOnly is for algorithms that combine in no fixed order.
func commutativeOnly(s selection) bool { return s.commutative }

// phasedEligible: the cost model picks phased only for blocks of at least
// the threshold, and only when WithPhasedThreshold allowed it or the line
// binds (linePhased).
func phasedEligible(s selection) bool {
	return s.m >= s.c.cfg.phasedTh && (s.c.cfg.phasedAuto || lineBound(s))
}

// linePhased: where the line binds, an Alltoall of blocks from the phased
// threshold up takes CC-MPI's phased schedule, whose phases keep every
// port receiving from one sender. Its model cost (a barrier a phase) never
// wins on paper, but at 100 Mbit/s on 16 ranks it took 89 ms at 64 KiB
// against the pairwise exchange's 117 and Bruck's 109, and was level with
// the best at 1 MiB and on 8 ranks (docs/performance.md).
func linePhased(s selection) bool { return lineBound(s) && s.m >= s.c.cfg.phasedTh }

// shortAllgather: the logarithmic allgathers only below allgatherLong.
func shortAllgather(s selection) bool { return s.n*s.m < allgatherLong }

// shortAllreduce: the logarithmic allreduces only below allreduceLong, or
// for an op that is not commutative (the ring is not eligible then).
func shortAllreduce(s selection) bool { return s.m < allreduceLong || !s.commutative }

// allreduceLong is the vector size (bytes) from which a commutative
// Allreduce takes the ring. The model gives Rabenseifner's algorithm and
// the ring the same bytes and Rabenseifner fewer start-ups, but its
// halving steps swap half the vector between pairs while the ring moves
// equal pieces between neighbours: at 1 MiB on 8 ranks at 100 Mbit/s the
// ring took 160 ms against 199 over one NIC and 90 against 113 over two
// bonded ones (docs/performance.md, Bonding), 166 against 243 in another
// sitting; at 64 KiB the two were level.
const allreduceLong = 512 << 10

// pairwiseAlltoall and linearAlltoall split the direct exchanges (of
// Alltoall and Alltoallv) at alltoallShort bytes per block: below it the
// linear exchange, every message in flight at once, and from it the
// pairwise one, one partner a step, so that no port receives from every
// rank at once. Unlimited veth, 8 ranks on 2 CPUs (2026-11-27, AF_XDP):
// Alltoallv linear 226, 257, 545 and 1 727 µs at 1 B, 1, 4 and 16 KiB
// against pairwise 297, 340, 652 and 1 806; pairwise 7.2 and 99 ms at 64
// KiB and 1 MiB against 7.7 and 119 (Alltoall alike, 16 ranks and AF_PACKET
// too: 100 against 143 ms at 1 MiB). An older rule took the linear one from
// 512 KiB, measured before waits let the calling thread drive progress.
//
// On a switch of known line rate the linear exchange is chosen only below
// the phased threshold, as CC-MPI's phased schedule itself sends such
// blocks all at once: for larger blocks seven senders fill one port's
// queue, and the control messages of the next step wait behind the data.
// Small blocks gain more from not waiting for each partner in turn: 8
// ranks at 100 Mbit/s (2026-11-28, medians of 3) linear 685 µs at 1 KiB
// against pairwise 866, 16 ranks 3 729 against 4 709; at 1 Gbit/s 573
// against 778 at 1 KiB and 1 274 against 1 441 at 4 KiB, level at 8 KiB.
func pairwiseAlltoall(s selection) bool { return !linearAlltoall(s) && !linePhased(s) }
func linearAlltoall(s selection) bool {
	return s.m < alltoallShort && (s.t.Rate == 0 || s.m < s.c.cfg.phasedTh)
}

const alltoallShort = 32 << 10

// alltoallBruckMax is the largest block the cost model gives Bruck's
// Alltoall, whose steps forward other ranks' blocks: the model prices those
// bytes at t_c and misses what they cost in frames. Unlimited veth, 8
// ranks: Bruck 123 µs at 1 byte against the linear exchange's 203, but
// 268 against 233 at 1 KiB and 2 488 against 1 673 at 16 KiB. MPICH
// switches at the same 256 bytes (and from its medium algorithm to the
// pairwise one at the same 32 KiB as alltoallShort).
const alltoallBruckMax = 256

// allgatherLong is the result size (bytes, all ranks' blocks) from which
// Allgather takes the ring whatever the model says. MPICH switches at the
// same 512 KiB (Thakur, Rabenseifner and Gropp, "Optimization of
// Collective Communication Operations in MPICH", 2005): the model gives
// the ring and recursive doubling the same bytes, and the ring's extra
// start-ups vanish beside them, but the ring moves them as n-1 equal
// neighbour exchanges where recursive doubling's last step has every rank
// swap half the result with one partner. Measured here (docs/performance.md, issue 7)
// the ring was 10-25 % faster at 1 MiB blocks on 8 ranks in every sitting.
const allgatherLong = 512 << 10

// ---- the tables ----

// newAlgoTables builds every collective's table.
func newAlgoTables() *algoTables {
	return &algoTables{
		barrier: collTable{coll: collBarrier, fallback: algoDissemination, algos: []algoEntry{
			{id: algoDissemination, name: "dissemination",
				cost: func(n, _ int) (float64, float64) { return lg(n), 0 }},
			// Cost and Work give the flat network's figures: the hosts
			// are the communicator's.
			{id: algoHierarchical, name: "hierarchical",
				cost:  func(n, _ int) (float64, float64) { return lg(n), 0 },
				tuned: func(s selection) (float64, float64, float64, float64, bool) { return hierTuned(s, disseminationCost) }},
		}},

		bcast: collTable{coll: collBcast, fallback: algoBinomial, algos: []algoEntry{
			{id: algoBinomial, name: "binomial", cost: treeCost, work: rootedWork},
			{id: algoScatterAllgather, name: "scatter_allgather",
				cost: func(n, m int) (float64, float64) {
					N := float64(n)
					return lg(n) + N - 1, 2 * float64(m) * (N - 1) / N
				},
				work: func(n, m int) (float64, float64) {
					// A binomial scatter of n pieces, then a ring allgather.
					N, M := float64(n), float64(m)
					return N - 1 + N*(N-1), lg(n)*M/2 + (N-1)*M
				}},
			{id: algoPipeline, name: "pipeline", cost: defaultChainCost, work: chainWork, tuned: chainTuned},
			{id: algoMcastAck, name: "mcast-ack", eligible: overrideOnly,
				cost: func(n, m int) (float64, float64) { return mcastCost(false, n, m), float64(m) },
				work: func(n, m int) (float64, float64) { return float64(n), float64(m) }},
			{id: algoMcastNak, name: "mcast-nak", eligible: lineRateMcast,
				cost: func(n, m int) (float64, float64) { return mcastCost(true, n, m), float64(m) },
				work: func(n, m int) (float64, float64) { return float64(n), float64(m) }},
			{id: algoHierarchical, name: "hierarchical", cost: treeCost, work: rootedWork,
				tuned: func(s selection) (float64, float64, float64, float64, bool) { return hierTuned(s, treeCost) }},
		}},

		reduce: collTable{coll: collReduce, fallback: algoBinomial, algos: []algoEntry{
			{id: algoBinomial, name: "binomial", cost: treeCost, work: rootedWork},
			{id: algoPipeline, name: "pipeline", eligible: commutativeOnly, cost: defaultChainCost, work: chainWork, tuned: chainTuned},
			{id: algoRabenseifner, name: "rabenseifner",
				cost: func(n, m int) (float64, float64) {
					p, lgp, fold := foldPow2(n)
					M := float64(m)
					return 2*lgp + fold + 1, 2*M*(float64(p)-1)/float64(p) + fold*M + M
				},
				work: func(n, m int) (float64, float64) {
					N := float64(n)
					return N*lg(n) + N - 1, 2 * (N - 1) * float64(m)
				}},
			{id: algoHierarchical, name: "hierarchical", eligible: commutativeOnly, cost: treeCost, work: rootedWork,
				tuned: func(s selection) (float64, float64, float64, float64, bool) { return hierTuned(s, treeCost) }},
		}},

		allreduce: collTable{coll: collAllreduce, fallback: algoRecursiveDoubling, algos: []algoEntry{
			{id: algoRecursiveDoubling, name: "recursive_doubling", eligible: shortAllreduce, cost: recDoublingCost},
			{id: algoRabenseifner, name: "rabenseifner", eligible: shortAllreduce,
				cost: func(n, m int) (float64, float64) {
					p, lgp, fold := foldPow2(n)
					M := float64(m)
					return 2*lgp + 2*fold, 2*M*(float64(p)-1)/float64(p) + 2*fold*M
				},
				work: func(n, m int) (float64, float64) {
					N := float64(n)
					return 2 * N * lg(n), 2 * (N - 1) * float64(m)
				}},
			{id: algoRing, name: "ring", eligible: commutativeOnly,
				cost: func(n, m int) (float64, float64) {
					N := float64(n)
					return 2 * (N - 1), 2 * float64(m) * (N - 1) / N
				},
				work: func(n, m int) (float64, float64) {
					N := float64(n)
					return 2 * N * (N - 1), 2 * (N - 1) * float64(m)
				}},
			{id: algoHierarchical, name: "hierarchical", eligible: commutativeOnly, cost: recDoublingCost,
				tuned: func(s selection) (float64, float64, float64, float64, bool) {
					if !shortAllreduce(s) {
						return 0, 0, 0, 0, false
					}
					return hierTuned(s, recDoublingCost)
				}},
		}},

		gather: collTable{coll: collGather, fallback: algoBinomial, algos: []algoEntry{
			{id: algoBinomial, name: "binomial", cost: blockTreeCost, work: blockTreeWork},
			{id: algoLinear, name: "linear", cost: linearCost, work: rootedWork},
		}},

		gatherv: collTable{coll: collGatherv, fallback: algoLinear, algos: []algoEntry{
			{id: algoLinear, name: "linear", cost: linearCost, work: rootedWork},
		}},

		scatter: collTable{coll: collScatter, fallback: algoBinomial, algos: []algoEntry{
			{id: algoBinomial, name: "binomial", cost: blockTreeCost, work: blockTreeWork},
			{id: algoLinear, name: "linear", cost: linearCost, work: rootedWork},
			{id: algoMcast, name: "mcast", eligible: overrideOnly,
				// The root multicasts all n blocks once.
				cost: func(n, m int) (float64, float64) { return mcastCost(true, n, n*m), float64(n) * float64(m) },
				work: func(n, m int) (float64, float64) { return float64(n), float64(n) * float64(m) }},
		}},

		scatterv: collTable{coll: collScatterv, fallback: algoLinear, algos: []algoEntry{
			{id: algoLinear, name: "linear", cost: linearCost, work: rootedWork},
		}},

		allgather: collTable{coll: collAllgather, fallback: algoBruck, algos: []algoEntry{
			{id: algoRecursiveDoubling, name: "recursive_doubling", cost: blockTreeCost,
				eligible: func(s selection) bool { return s.n&(s.n-1) == 0 && shortAllgather(s) }},
			{id: algoBruck, name: "bruck", cost: blockTreeCost, eligible: shortAllgather},
			{id: algoRing, name: "ring", cost: linearCost},
			{id: algoMcast, name: "mcast", eligible: lineRateMcastAllgather,
				// n reliable multicast Bcasts, one per rank.
				cost: func(n, m int) (float64, float64) {
					return float64(n) * mcastCost(true, n, m), float64(n) * float64(m)
				},
				work: func(n, m int) (float64, float64) { return float64(n) * float64(n), float64(n) * float64(m) },
				// At a known rate all ranks multicast at once (one step
				// in which a port receives the n-1 other blocks), then
				// every rank tells every other it has them (one more).
				tuned: func(s selection) (c1, c2, w1, w2 float64, ok bool) {
					n, m := float64(s.n), float64(s.m)
					return 2, (n - 1) * m, n * n, n * m, s.t.Rate > 0
				}},
			{id: algoHierarchical, name: "hierarchical", cost: linearCost, tuned: allgatherHierTuned},
		}},

		allgatherv: collTable{coll: collAllgatherv, fallback: algoRing, algos: []algoEntry{
			{id: algoRing, name: "ring", cost: linearCost},
			{id: algoLinear, name: "linear", cost: linearCost},
		}},

		alltoall: collTable{coll: collAlltoall, fallback: algoLinear, algos: []algoEntry{
			{id: algoBruck, name: "bruck",
				// Radix 2 for Cost and Work; the cost model takes the
				// radix of least estimated time.
				cost: func(n, m int) (float64, float64) { return bruckCost(n, m, 2) },
				tuned: func(s selection) (c1, c2, w1, w2 float64, ok bool) {
					if s.m > alltoallBruckMax {
						return 0, 0, 0, 0, false
					}
					c1, c2 = bruckCost(s.n, s.m, s.c.bestRadix(s.m, s.t))
					// As many steps as a direct exchange and never fewer
					// bytes: every block goes straight to its rank, plus
					// Bruck's two local rotations.
					if c1 >= float64(s.n-1) {
						return 0, 0, 0, 0, false
					}
					return c1, c2, float64(s.n) * c1, float64(s.n) * c2, true
				}},
			{id: algoPairwise, name: "pairwise", cost: linearCost, eligible: pairwiseAlltoall},
			{id: algoLinear, name: "linear", cost: linearCost, eligible: linearAlltoall},
			{id: algoPhased, name: "phased", cost: phasedCost, eligible: phasedEligible},
		}},

		alltoallv: collTable{coll: collAlltoallv, fallback: algoLinear, algos: []algoEntry{
			{id: algoPairwise, name: "pairwise", cost: linearCost, eligible: pairwiseAlltoall},
			{id: algoLinear, name: "linear", cost: linearCost, eligible: linearAlltoall},
			{id: algoPhased, name: "phased", cost: phasedCost, eligible: phasedEligible},
		}},

		scan: collTable{coll: collScan, fallback: algoRecursiveDoubling, algos: []algoEntry{
			{id: algoRecursiveDoubling, name: "recursive_doubling", cost: treeCost},
			{id: algoLinear, name: "linear", cost: linearCost, work: rootedWork},
		}},

		exscan: collTable{coll: collExscan, fallback: algoRecursiveDoubling, algos: []algoEntry{
			{id: algoRecursiveDoubling, name: "recursive_doubling", cost: treeCost},
		}},
	}
}

// exec runs algorithm id of collective coll. The implementations are
// called from this switch rather than through function values in the
// tables: arguments passed through a function value escape, and a
// Reducer's closure would then be allocated on every reducing call.
func (c *Comm) exec(coll string, id algo, a *collArgs, red *Reducer) error {
	switch coll {
	case collBarrier:
		switch id {
		case algoDissemination:
			return c.barrierColl()
		case algoHierarchical:
			return c.barrierHier()
		}
	case collBcast:
		switch id {
		case algoBinomial:
			return c.bcastBinomial(a.buf, a.root)
		case algoHierarchical:
			return c.bcastHier(a.buf, a.root)
		case algoScatterAllgather:
			return c.bcastScatterAllgather(a.buf, a.root)
		case algoPipeline:
			return c.bcastPipeline(a.buf, a.root)
		case algoMcastAck:
			return c.bcastMulticast(a.buf, a.root, false)
		case algoMcastNak:
			return c.bcastMulticast(a.buf, a.root, true)
		}
	case collReduce:
		switch id {
		case algoBinomial:
			return c.reduceBinomial(a.send, a.recv, red, a.root)
		case algoRabenseifner:
			return c.reduceRabenseifner(a.send, a.recv, red, a.root, false)
		case algoPipeline:
			return c.reducePipeline(a.send, a.recv, red, a.root)
		case algoHierarchical:
			if !red.Commutative { // forced: the hosts' order is not rank order
				return c.reduceBinomial(a.send, a.recv, red, a.root)
			}
			return c.reduceHier(a.send, a.recv, red, a.root)
		}
	case collAllreduce:
		switch id {
		case algoRecursiveDoubling:
			return c.allreduceRecDoubling(a.send, a.recv, red)
		case algoRabenseifner:
			return c.reduceRabenseifner(a.send, a.recv, red, 0, true)
		case algoRing:
			if !red.Commutative { // forced: the ring's order is not rank order
				return c.reduceRabenseifner(a.send, a.recv, red, 0, true)
			}
			return c.allreduceRing(a.send, a.recv, red)
		case algoHierarchical:
			if !red.Commutative { // forced: neither is the hosts'
				return c.reduceRabenseifner(a.send, a.recv, red, 0, true)
			}
			return c.allreduceHier(a.send, a.recv, red)
		}
	case collGather:
		switch id {
		case algoBinomial:
			return c.gatherBinomial(a.send, a.recv, a.root)
		case algoLinear:
			counts, displs := c.uniform(c.csize, len(a.send))
			return c.gathervLinear(a.send, a.recv, counts, displs, a.root)
		}
	case collGatherv:
		switch id {
		case algoLinear:
			return c.gathervLinear(a.send, a.recv, a.rcounts, a.rdispls, a.root)
		}
	case collScatter:
		switch id {
		case algoBinomial:
			return c.scatterBinomial(a.send, a.recv, a.root)
		case algoLinear:
			counts, displs := c.uniform(c.csize, len(a.recv))
			return c.scattervLinear(a.send, counts, displs, a.recv, a.root)
		case algoMcast:
			return c.scatterMulticast(a.send, a.recv, a.root)
		}
	case collScatterv:
		switch id {
		case algoLinear:
			return c.scattervLinear(a.send, a.scounts, a.sdispls, a.recv, a.root)
		}
	case collAllgather:
		switch id {
		case algoRecursiveDoubling:
			return c.allgatherRecDoubling(a.send, a.recv)
		case algoBruck:
			return c.allgatherBruck(a.send, a.recv)
		case algoRing:
			counts, displs := c.uniform(c.csize, len(a.send))
			return c.allgathervRing(a.send, a.recv, counts, displs)
		case algoMcast:
			return c.allgatherMulticast(a.send, a.recv)
		case algoHierarchical:
			return c.allgatherHier(a.send, a.recv)
		}
	case collAllgatherv:
		switch id {
		case algoRing:
			return c.allgathervRing(a.send, a.recv, a.rcounts, a.rdispls)
		case algoLinear:
			return c.allgathervLinear(a.send, a.recv, a.rcounts, a.rdispls)
		}
	case collAlltoall:
		switch id {
		case algoBruck:
			m := len(a.send) / c.csize
			return c.alltoallBruck(a.send, a.recv, m, c.alltoallRadix(m))
		case algoPairwise:
			counts, displs := c.uniform(c.csize, len(a.send)/c.csize)
			return c.alltoallvPairwise(a.send, counts, displs, a.recv, counts, displs)
		case algoLinear:
			counts, displs := c.uniform(c.csize, len(a.send)/c.csize)
			return c.alltoallvLinear(a.send, counts, displs, a.recv, counts, displs)
		case algoPhased:
			return c.alltoallPhased(a.send, a.recv)
		}
	case collAlltoallv:
		switch id {
		case algoPairwise:
			return c.alltoallvPairwise(a.send, a.scounts, a.sdispls, a.recv, a.rcounts, a.rdispls)
		case algoLinear:
			return c.alltoallvLinear(a.send, a.scounts, a.sdispls, a.recv, a.rcounts, a.rdispls)
		case algoPhased:
			return c.alltoallvPhased(a.send, a.scounts, a.sdispls, a.recv, a.rcounts, a.rdispls)
		}
	case collScan:
		switch id {
		case algoRecursiveDoubling:
			return c.scanRecDoubling(a.send, a.recv, red, true)
		case algoLinear:
			return c.scanLinear(a.send, a.recv, red)
		}
	case collExscan:
		switch id {
		case algoRecursiveDoubling:
			return c.scanRecDoubling(a.send, a.recv, red, false)
		}
	}
	return fmt.Errorf("mplite: %s has no implementation of algorithm %d", coll, id)
}
