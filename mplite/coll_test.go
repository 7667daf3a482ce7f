package mplite_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/mplite/cc"
	"github.com/ethervia/ethervia/nic/memnic"
)

// gen is the deterministic data of rank r for a test case: every rank can
// compute every other's contribution, so references are computed locally.
func gen(n, r, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + r*31 + seed*13 + i>>8 + 1)
	}
	return b
}

func genI64(n, r, seed int) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = int64((i+1)*(r+3)) - int64(seed*5) + int64(r*r)
	}
	return v
}

// affine maps x -> m*x + c mod 2^32, packed m<<32|c; compose applies a
// then b. Associative, not commutative: a wrong order shows.
func compose(a, b uint64) uint64 {
	ma, ca := uint32(a>>32), uint32(a)
	mb, cb := uint32(b>>32), uint32(b)
	return uint64(ma*mb)<<32 | uint64(mb*ca+cb)
}

func genAffine(n, r, seed int) []uint64 {
	v := make([]uint64, n)
	for i := range v {
		m := uint32(2*(i+r*7+seed)+3) | 1
		c := uint32(i*11 + r*101 + seed + 1)
		v[i] = uint64(m)<<32 | uint64(c)
	}
	return v
}

// collSizes are block sizes in bytes: empty, one, odd, above the eager limit.
var collSizes = []int{0, 1, 13, mplite.DefaultEagerLimit + 1000}

// vcount is the irregular block size from rank i to rank j for base size s.
func vcount(i, j, s int) int {
	if s == 0 {
		return 0
	}
	return (i*3 + j*5 + s) % (s + 3)
}

func layout(counts []int) (displs []int, total int) {
	displs = make([]int, len(counts))
	for i, k := range counts {
		displs[i] = total + 2 // gaps between blocks
		total += k + 2
	}
	return displs, total
}

// collWorld is runWorld, except that a rank whose check fails abandons the
// world at once (instead of waiting in Finalize), so that the others fail
// fast with ErrPeerDead rather than hang until the limit.
func collWorld(t *testing.T, n int, limit time.Duration, opts []mplite.Option, f func(c *mplite.Comm) error) []error {
	t.Helper()
	errs := runWorldFinal(t, n, limit, opts, func(c *mplite.Comm) error {
		err := f(c)
		if err != nil {
			mplite.Abandon(c)
		}
		return err
	}, func(err error) bool { return errors.Is(err, mplite.ErrFinalized) || errors.Is(err, mplite.ErrPeerDead) })
	// Report the root causes first: errors that are not a peer's death.
	var first []error
	for i, err := range errs {
		if err != nil && !errors.Is(err, mplite.ErrPeerDead) {
			first = append(first, fmt.Errorf("rank %d: %w", i, err))
		}
	}
	if len(first) > 0 {
		for _, err := range first {
			t.Error(err)
		}
		return make([]error, n)
	}
	return errs
}

type collCase struct {
	name string
	run  func(c *mplite.Comm, size, seed int) error
}

// mismatch describes the first difference of got from want.
func mismatch(what string, got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Errorf("%s: byte %d of %d is %d, want %d", what, i, len(want), got[i], want[i])
		}
	}
	return fmt.Errorf("%s: %d bytes, want %d", what, len(got), len(want))
}

func eqI64(what string, got, want []int64) error {
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s: got %v, want %v", what, head(got), head(want))
	}
	return nil
}

func eqU64(what string, got, want []uint64) error {
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s: got %v, want %v", what, head(got), head(want))
	}
	return nil
}

func head[T any](v []T) []T { return v[:min(len(v), 6)] }

func collCases(barrierCount *atomic.Int64) map[string]collCase {
	cases := map[string]collCase{}
	add := func(coll string, run func(c *mplite.Comm, size, seed int) error) {
		cases[coll] = collCase{coll, run}
	}
	add("barrier", func(c *mplite.Comm, size, seed int) error {
		// Every rank adds one before the barrier; after it all n adds
		// must be visible, and a second barrier keeps the next round's
		// adds from racing with this check.
		base := barrierCount.Load() / int64(c.Size()) * int64(c.Size())
		barrierCount.Add(1)
		if err := c.Barrier(); err != nil {
			return err
		}
		if got := barrierCount.Load(); got < base+int64(c.Size()) {
			return fmt.Errorf("after the barrier %d ranks had arrived, want %d", got-base, c.Size())
		}
		return c.Barrier()
	})
	add("bcast", func(c *mplite.Comm, size, seed int) error {
		n := c.Size()
		for _, root := range []int{0, n - 1, n / 2} {
			buf := make([]byte, size*n+size)
			want := gen(len(buf), root, seed)
			if c.Rank() == root {
				copy(buf, want)
			}
			if err := c.Bcast(buf, root); err != nil {
				return err
			}
			if err := mismatch(fmt.Sprintf("bcast root %d", root), buf, want); err != nil {
				return err
			}
		}
		return nil
	})
	add("reduce", func(c *mplite.Comm, size, seed int) error {
		n, cnt := c.Size(), size/8*2+size%8
		for _, root := range []int{0, n - 1} {
			got := make([]int64, cnt)
			if err := mplite.Reduce(c, genI64(cnt, c.Rank(), seed), got, mplite.Sum[int64](), root); err != nil {
				return err
			}
			gotA := make([]uint64, cnt)
			if err := mplite.Reduce(c, genAffine(cnt, c.Rank(), seed), gotA, mplite.NewOp(compose, false), root); err != nil {
				return err
			}
			if c.Rank() != root {
				continue
			}
			want, wantA := genI64(cnt, 0, seed), genAffine(cnt, 0, seed)
			for r := 1; r < n; r++ {
				x, a := genI64(cnt, r, seed), genAffine(cnt, r, seed)
				for i := range want {
					want[i] += x[i]
					wantA[i] = compose(wantA[i], a[i])
				}
			}
			if err := eqI64(fmt.Sprintf("reduce sum root %d", root), got, want); err != nil {
				return err
			}
			if err := eqU64(fmt.Sprintf("reduce compose root %d", root), gotA, wantA); err != nil {
				return err
			}
		}
		return nil
	})
	add("allreduce", func(c *mplite.Comm, size, seed int) error {
		n, cnt := c.Size(), size/8*2+size%8
		got := make([]int64, cnt)
		if err := mplite.Allreduce(c, genI64(cnt, c.Rank(), seed), got, mplite.Sum[int64]()); err != nil {
			return err
		}
		gotMax := genI64(cnt, c.Rank(), seed+1) // in place
		if err := mplite.Allreduce(c, gotMax, gotMax, mplite.Max[int64]()); err != nil {
			return err
		}
		gotA := make([]uint64, cnt)
		if err := mplite.Allreduce(c, genAffine(cnt, c.Rank(), seed), gotA, mplite.NewOp(compose, false)); err != nil {
			return err
		}
		want, wantMax, wantA := genI64(cnt, 0, seed), genI64(cnt, 0, seed+1), genAffine(cnt, 0, seed)
		for r := 1; r < n; r++ {
			x, y, a := genI64(cnt, r, seed), genI64(cnt, r, seed+1), genAffine(cnt, r, seed)
			for i := range want {
				want[i] += x[i]
				wantMax[i] = max(wantMax[i], y[i])
				wantA[i] = compose(wantA[i], a[i])
			}
		}
		return errors.Join(eqI64("allreduce sum", got, want), eqI64("allreduce max", gotMax, wantMax),
			eqU64("allreduce compose", gotA, wantA))
	})
	scan := func(excl bool) func(c *mplite.Comm, size, seed int) error {
		return func(c *mplite.Comm, size, seed int) error {
			me, cnt := c.Rank(), size/8*2+size%8
			got := make([]int64, cnt)
			gotA := make([]uint64, cnt)
			f := mplite.Scan[int64]
			fa := mplite.Scan[uint64]
			if excl {
				f, fa = mplite.Exscan[int64], mplite.Exscan[uint64]
			}
			if err := f(c, genI64(cnt, me, seed), got, mplite.Sum[int64]()); err != nil {
				return err
			}
			if err := fa(c, genAffine(cnt, me, seed), gotA, mplite.NewOp(compose, false)); err != nil {
				return err
			}
			last := me
			if excl {
				last = me - 1
			}
			if last < 0 {
				return nil // rank 0's Exscan result is undefined
			}
			want, wantA := genI64(cnt, 0, seed), genAffine(cnt, 0, seed)
			for r := 1; r <= last; r++ {
				x, a := genI64(cnt, r, seed), genAffine(cnt, r, seed)
				for i := range want {
					want[i] += x[i]
					wantA[i] = compose(wantA[i], a[i])
				}
			}
			return errors.Join(eqI64("scan sum", got, want), eqU64("scan compose", gotA, wantA))
		}
	}
	add("scan", scan(false))
	add("exscan", scan(true))
	add("gather", func(c *mplite.Comm, size, seed int) error {
		n := c.Size()
		for _, root := range []int{0, n - 1, n / 2} {
			recv := make([]byte, n*size)
			if err := c.Gather(gen(size, c.Rank(), seed), recv, root); err != nil {
				return err
			}
			if c.Rank() != root {
				continue
			}
			for r := range n {
				if err := mismatch(fmt.Sprintf("gather root %d block %d", root, r), recv[r*size:(r+1)*size], gen(size, r, seed)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	add("scatter", func(c *mplite.Comm, size, seed int) error {
		n := c.Size()
		for _, root := range []int{0, n - 1, n / 2} {
			var send []byte
			if c.Rank() == root {
				for r := range n {
					send = append(send, gen(size, r, seed)...)
				}
			}
			recv := make([]byte, size)
			if err := c.Scatter(send, recv, root); err != nil {
				return err
			}
			if err := mismatch(fmt.Sprintf("scatter root %d", root), recv, gen(size, c.Rank(), seed)); err != nil {
				return err
			}
		}
		return nil
	})
	add("gatherv", func(c *mplite.Comm, size, seed int) error {
		n := c.Size()
		root := n / 2
		counts := make([]int, n)
		for r := range n {
			counts[r] = vcount(r, root, size)
		}
		displs, total := layout(counts)
		recv := make([]byte, total)
		if err := c.Gatherv(gen(counts[c.Rank()], c.Rank(), seed), recv, counts, displs, root); err != nil {
			return err
		}
		if c.Rank() == root {
			for r := range n {
				if err := mismatch(fmt.Sprintf("gatherv block %d", r), recv[displs[r]:displs[r]+counts[r]], gen(counts[r], r, seed)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	add("scatterv", func(c *mplite.Comm, size, seed int) error {
		n := c.Size()
		root := n - 1
		counts := make([]int, n)
		for r := range n {
			counts[r] = vcount(root, r, size)
		}
		displs, total := layout(counts)
		send := make([]byte, total)
		for r := range n {
			copy(send[displs[r]:], gen(counts[r], r, seed))
		}
		recv := make([]byte, counts[c.Rank()])
		if err := c.Scatterv(send, counts, displs, recv, root); err != nil {
			return err
		}
		return mismatch("scatterv", recv, gen(counts[c.Rank()], c.Rank(), seed))
	})
	add("allgather", func(c *mplite.Comm, size, seed int) error {
		n := c.Size()
		recv := make([]byte, n*size)
		if err := c.Allgather(gen(size, c.Rank(), seed), recv); err != nil {
			return err
		}
		for r := range n {
			if err := mismatch(fmt.Sprintf("allgather block %d", r), recv[r*size:(r+1)*size], gen(size, r, seed)); err != nil {
				return err
			}
		}
		return nil
	})
	add("allgatherv", func(c *mplite.Comm, size, seed int) error {
		n := c.Size()
		counts := make([]int, n)
		for r := range n {
			counts[r] = vcount(r, 0, size)
		}
		displs, total := layout(counts)
		recv := make([]byte, total)
		if err := c.Allgatherv(gen(counts[c.Rank()], c.Rank(), seed), recv, counts, displs); err != nil {
			return err
		}
		for r := range n {
			if err := mismatch(fmt.Sprintf("allgatherv block %d", r), recv[displs[r]:displs[r]+counts[r]], gen(counts[r], r, seed)); err != nil {
				return err
			}
		}
		return nil
	})
	add("alltoall", func(c *mplite.Comm, size, seed int) error {
		n, me := c.Size(), c.Rank()
		send := make([]byte, 0, n*size)
		for j := range n {
			send = append(send, gen(size, me*n+j, seed)...)
		}
		recv := make([]byte, n*size)
		if err := c.Alltoall(send, recv); err != nil {
			return err
		}
		for i := range n {
			if err := mismatch(fmt.Sprintf("alltoall block from %d", i), recv[i*size:(i+1)*size], gen(size, i*n+me, seed)); err != nil {
				return err
			}
		}
		return nil
	})
	add("alltoallv", func(c *mplite.Comm, size, seed int) error {
		n, me := c.Size(), c.Rank()
		sc, rc := make([]int, n), make([]int, n)
		for j := range n {
			sc[j], rc[j] = vcount(me, j, size), vcount(j, me, size)
		}
		sd, stotal := layout(sc)
		rd, rtotal := layout(rc)
		send, recv := make([]byte, stotal), make([]byte, rtotal)
		for j := range n {
			copy(send[sd[j]:], gen(sc[j], me*n+j, seed))
		}
		if err := c.Alltoallv(send, sc, sd, recv, rc, rd); err != nil {
			return err
		}
		for i := range n {
			if err := mismatch(fmt.Sprintf("alltoallv block from %d", i), recv[rd[i]:rd[i]+rc[i]], gen(rc[i], i*n+me, seed)); err != nil {
				return err
			}
		}
		return nil
	})
	return cases
}

// runCollsWith runs every collective with every algorithm (forced with
// SetAlgorithm) and every size on c, checking against local references;
// only limits the collectives.
func runCollsWith(c *mplite.Comm, sizes []int, only []string, barrierCount *atomic.Int64) error {
	if barrierCount == nil {
		barrierCount = new(atomic.Int64)
	}
	cases := collCases(barrierCount)
	seed := 0
	for _, coll := range mplite.Collectives() {
		if only != nil && !slices.Contains(only, coll) {
			continue
		}
		cc := cases[coll]
		for _, algo := range mplite.Algorithms(coll) {
			if err := c.SetAlgorithm(coll, algo); err != nil {
				return err
			}
			radices := []int{0}
			if coll == "alltoall" && algo == "bruck" {
				radices = []int{2, 3, max(2, c.Size())}
			}
			for _, r := range radices {
				if err := c.SetAlltoallRadix(r); err != nil {
					return err
				}
				for _, size := range sizes {
					seed++
					if err := cc.run(c, size, seed); err != nil {
						return fmt.Errorf("%s/%s radix %d size %d on %d ranks: %w", coll, algo, r, size, c.Size(), err)
					}
				}
			}
		}
		if err := c.SetAlgorithm(coll, "auto"); err != nil {
			return err
		}
	}
	return nil
}

// TestCollectives checks every collective and algorithm against a local
// reference, for 1 to 8 ranks and sizes from 0 to past the eager limit.
// Barrier's shared counter makes one world per size.
func TestCollectives(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var count atomic.Int64
			noErrors(t, collWorld(t, n, 60*time.Second, nil, func(c *mplite.Comm) error {
				return runCollsWith(c, collSizes, nil, &count)
			}))
		})
	}
}

// TestCollectivesPhasedSched runs Alltoallv's phased algorithm with the
// greedy scheduler too, above and below a raised threshold, and with
// blocks on both sides of the size from which phases are separated by
// barriers rather than ready messages (128 KiB).
func TestCollectivesPhasedSched(t *testing.T) {
	noErrors(t, collWorld(t, 5, 30*time.Second, []mplite.Option{mplite.WithPhasedThreshold(100, true)},
		func(c *mplite.Comm) error {
			if err := c.SetScheduler(cc.SchedGreedy); err != nil {
				return err
			}
			return runCollsWith(c, []int{0, 50, 300, 20000, 130 << 10}, []string{"alltoall", "alltoallv"}, nil)
		}))
}

// TestCollectivesLossy runs a subset over a switch that loses, duplicates
// and reorders frames.
func TestCollectivesLossy(t *testing.T) {
	opts := []mplite.Option{mplite.WithLocalFaults(11, memnic.Faults{Loss: 0.01, Duplicate: 0.005, Reorder: 0.01})}
	noErrors(t, collWorld(t, 5, 60*time.Second, opts, func(c *mplite.Comm) error {
		return runCollsWith(c, []int{1, mplite.DefaultEagerLimit + 1000},
			[]string{"bcast", "allreduce", "allgather", "alltoall", "alltoallv"}, nil)
	}))
}

// TestCollectivesSplit runs the collectives on the communicators of a
// Split, of 3, 2 and 2 ranks.
func TestCollectivesSplit(t *testing.T) {
	noErrors(t, collWorld(t, 7, 60*time.Second, nil, func(c *mplite.Comm) error {
		sub, err := c.Split(c.Rank()%3, 0)
		if err != nil {
			return err
		}
		return runCollsWith(sub, []int{0, 13, mplite.DefaultEagerLimit + 1000},
			[]string{"bcast", "reduce", "allreduce", "gather", "scatterv", "allgather", "alltoall", "alltoallv", "scan"}, nil)
	}))
}

// TestSplit checks membership and order (key, then parent rank), the
// Undefined color, p2p in communicator ranks, and nested Split and Dup.
func TestSplit(t *testing.T) {
	const n = 7
	color := func(r int) int {
		if r == 5 {
			return mplite.Undefined
		}
		return []int{10, 3, 10, 3, 10, -1, 10}[r]
	}
	key := func(r int) int { return []int{2, 0, 1, 0, 1, 0, -4}[r] }
	// Color 10: ranks 0 (key 2), 2 (1), 4 (1), 6 (-4) -> order 6, 2, 4, 0.
	// Color 3: ranks 1, 3 (both key 0) -> order 1, 3.
	want := map[int][]int{10: {6, 2, 4, 0}, 3: {1, 3}}
	noErrors(t, collWorld(t, n, 30*time.Second, nil, func(c *mplite.Comm) error {
		me := c.Rank()
		sub, err := c.Split(color(me), key(me))
		if err != nil {
			return err
		}
		if color(me) < 0 {
			if sub != nil {
				return errors.New("Undefined color got a communicator")
			}
			return nil
		}
		order := want[color(me)]
		if sub.Size() != len(order) || order[sub.Rank()] != me {
			return fmt.Errorf("rank %d of %d in the split, want order %v", sub.Rank(), sub.Size(), order)
		}
		for i, w := range order {
			if got, err := sub.WorldRank(i); err != nil || got != w {
				return fmt.Errorf("WorldRank(%d) = %d, %v; want %d", i, got, err, w)
			}
		}
		// A ring in communicator ranks; the status names communicator
		// ranks too.
		k, r := sub.Size(), sub.Rank()
		out := []byte{byte(me), byte(color(me))}
		in := make([]byte, 2)
		st, err := sub.Sendrecv(out, (r+1)%k, 5, in, mplite.AnySource, 5)
		if err != nil {
			return err
		}
		left := (r - 1 + k) % k
		if st.Source != left || in[0] != byte(order[left]) || in[1] != byte(color(me)) {
			return fmt.Errorf("ring: status %+v data %v, want source %d world rank %d", st, in, left, order[left])
		}
		// Nested: split again by parity of the sub rank, then dup.
		sub2, err := sub.Split(r%2, -r)
		if err != nil {
			return err
		}
		dup, err := sub2.Dup()
		if err != nil {
			return err
		}
		var members []int
		for i := k - 1; i >= 0; i-- {
			if i%2 == r%2 {
				members = append(members, order[i])
			}
		}
		sum := []int64{int64(me)}
		if err := mplite.Allreduce(dup, sum, sum, mplite.Sum[int64]()); err != nil {
			return err
		}
		var wantSum int64
		for _, m := range members {
			wantSum += int64(m)
		}
		if dup.Size() != len(members) || sum[0] != wantSum {
			return fmt.Errorf("nested dup: size %d sum %d, want members %v", dup.Size(), sum[0], members)
		}
		if err := dup.Free(); err != nil {
			return err
		}
		if err := dup.Send(nil, 0, 0); !errors.Is(err, mplite.ErrFreed) {
			return fmt.Errorf("send on a freed communicator: %v", err)
		}
		if err := dup.Barrier(); !errors.Is(err, mplite.ErrFreed) {
			return fmt.Errorf("barrier on a freed communicator: %v", err)
		}
		if err := c.Free(); err == nil {
			return errors.New("the world was freed")
		}
		if err := sub.Finalize(); err == nil {
			return errors.New("a split communicator finalized")
		}
		return nil
	}))
}

// TestCommIsolation: user p2p on the world, on a Dup and collectives on a
// Split run at the same time with the same tags and never mix.
func TestCommIsolation(t *testing.T) {
	const n, rounds = 4, 30
	noErrors(t, collWorld(t, n, 60*time.Second, nil, func(c *mplite.Comm) error {
		me := c.Rank()
		dup, err := c.Dup()
		if err != nil {
			return err
		}
		sub, err := c.Split(me%2, me)
		if err != nil {
			return err
		}
		errs := make(chan error, 3)
		p2p := func(comm *mplite.Comm, mark byte) {
			errs <- func() error {
				for i := range rounds {
					size := []int{3, mplite.DefaultEagerLimit + 10}[i%2]
					out := bytes.Repeat([]byte{mark, byte(me), byte(i)}, size/3+1)[:size]
					in := make([]byte, size)
					st, err := comm.Sendrecv(out, (me+1)%n, 0, in, mplite.AnySource, 0)
					if err != nil {
						return err
					}
					left := (me - 1 + n) % n
					if st.Source != left || in[0] != mark || in[1] != byte(left) || in[2] != byte(i) {
						return fmt.Errorf("p2p %c round %d: status %+v head %v", mark, i, st, in[:3])
					}
				}
				return nil
			}()
		}
		go p2p(c, 'w')
		go p2p(dup, 'd')
		go func() {
			errs <- func() error {
				for i := range rounds {
					v := []int64{int64(me), int64(i)}
					if err := mplite.Allreduce(sub, v, v, mplite.Sum[int64]()); err != nil {
						return err
					}
					want := int64(me%2 + me%2 + 2)
					if v[0] != want || v[1] != int64(2*i) {
						return fmt.Errorf("split allreduce round %d: %v, want [%d %d]", i, v, want, 2*i)
					}
					buf := make([]byte, mplite.DefaultEagerLimit+10)
					if sub.Rank() == 0 {
						copy(buf, gen(len(buf), i, 0))
					}
					if err := sub.Bcast(buf, 0); err != nil {
						return err
					}
					if err := mismatch("split bcast", buf, gen(len(buf), i, 0)); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
		return errors.Join(<-errs, <-errs, <-errs)
	}))
}

// TestCollectivesRanksPerHost checks the collectives with hierarchical
// algorithms on worlds whose hosts hold several ranks (and one host fewer
// than the others), and that the cost model picks them for short messages
// there.
func TestCollectivesRanksPerHost(t *testing.T) {
	for _, n := range []int{7, 9} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var count atomic.Int64
			opts := []mplite.Option{mplite.WithLocalRanksPerHost(3)}
			noErrors(t, collWorld(t, n, 60*time.Second, opts, func(c *mplite.Comm) error {
				for _, coll := range []string{"barrier", "bcast", "allreduce", "reduce", "allgather"} {
					if algo, err := c.Algorithm(coll, 8); err != nil || algo != "hierarchical" {
						return fmt.Errorf("%s of 8 bytes over hosts of 3 ranks: the model picks %q (%v)", coll, algo, err)
					}
				}
				if err := runCollsWith(c, collSizes, []string{"barrier", "bcast", "allreduce", "reduce", "allgather"}, &count); err != nil {
					return err
				}
				// A communicator that splits the hosts differently.
				sub, err := c.Split(c.Rank()%2, -c.Rank())
				if err != nil {
					return err
				}
				defer sub.Free()
				if err := runCollsWith(sub, []int{8, 1000}, []string{"bcast", "allreduce", "reduce", "allgather"}, nil); err != nil {
					return err
				}
				// One that deals the ranks of a host out (0, 3, 6, 1, 4,
				// ...), so that no host's ranks are consecutive.
				dealt, err := c.Split(0, c.Rank()%3*c.Size()+c.Rank())
				if err != nil {
					return err
				}
				defer dealt.Free()
				return runCollsWith(dealt, []int{8, 1000}, []string{"bcast", "reduce", "allgather"}, nil)
			}))
		})
	}
}
