package mplite

import (
	"errors"
	"fmt"
	"math/bits"
)

// Reducer combines buffers of fixed-size elements for Reduce, Allreduce,
// Scan and Exscan at the byte level. The typed helpers (Allreduce[T] and
// the others, with Sum, Prod, Min, Max or NewOp) build one.
type Reducer struct {
	// Elem is the size of one element in bytes; buffers are whole
	// elements.
	Elem int
	// Commutative says a ⊕ b = b ⊕ a. When false, results are combined
	// in rank order: x0 ⊕ x1 ⊕ … ⊕ x(n-1). The operator must be
	// associative either way.
	Commutative bool
	// Fn sets dst = a ⊕ b element by element, where a holds lower ranks'
	// contributions than b. dst is a or b, or disjoint from both.
	Fn func(dst, a, b []byte)
}

func (r *Reducer) check(n int) error {
	if r.Fn == nil || r.Elem <= 0 {
		return errors.New("mplite: reducer without a function or element size")
	}
	if n%r.Elem != 0 {
		return fmt.Errorf("mplite: %d bytes are not whole %d-byte elements", n, r.Elem)
	}
	return nil
}

// collState is a communicator's collective state.
type collState struct {
	busy  bool              // under endpoint.mu: a collective runs on the communicator
	algos map[string]string // SetAlgorithm's overrides
	radix int               // SetAlltoallRadix's Bruck radix (0: the cost model's)
	sched string            // SetScheduler's scheduler ("": all-to-all-based)
	scr   scratch           // the running collective's temporary buffers
	xs    []*xfer           // its request sets (newXfer); nx of them lent
	nx    int
	ints  []int // its block layout (layout: uniform, blocks)
	// hosts groups the communicator's ranks by host (hier.go), once.
	hosts *hostLayout
}

// layout lends the running collective n ints for a block layout.
func (cs *collState) layout(n int) []int {
	if cap(cs.ints) < n {
		cs.ints = make([]int, n)
	}
	return cs.ints[:n:n]
}

// collErr wraps a collective's error with the rank and collective.
func (c *Comm) collErr(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("mplite rank %d: %s: %w", c.crank, name, err)
}

// enter checks that the communicator can run a collective and marks it
// busy; leave must follow.
func (c *Comm) enter(name string) error { return c.enterTuned(name, true) }

// enterTuned is enter; with tune false it leaves the tuning alone (its
// first measurement is a world collective, which a call that not every
// rank makes must not start).
func (c *Comm) enterTuned(name string, tune bool) error {
	if err := c.checkUsable(); err != nil {
		return c.collErr(name, err)
	}
	c.mu.Lock()
	if c.finalized {
		c.mu.Unlock()
		return c.collErr(name, ErrFinalized)
	}
	if c.coll.busy {
		c.mu.Unlock()
		return c.collErr(name, errors.New("another collective is running on this communicator"))
	}
	c.coll.busy = true
	c.coll.scr.reset()
	c.coll.nx = 0
	c.mu.Unlock()
	if !tune {
		return nil
	}
	if err := c.ensureTuned(); err != nil {
		c.leave()
		return c.collErr(name, err)
	}
	return nil
}

func (c *Comm) leave() {
	c.mu.Lock()
	c.coll.busy = false
	c.mu.Unlock()
}

func (c *Comm) checkRoot(root int) error {
	if root < 0 || root >= c.csize {
		return fmt.Errorf("root %d of %d: %w", root, c.csize, ErrRank)
	}
	return nil
}

// ---- message sets ----

// xfer is a set of collective sends and receives in flight, on the
// collective context, addressed by ranks of the communicator.
type xfer struct {
	c    *Comm
	reqs reqSet
	want []int  // expected length of each receive; -1 for sends
	one  reqSet // waitOne's view of one request
}

// reqSet is ready when every request is.
type reqSet []*Request

func (s *reqSet) ready() bool {
	for _, r := range *s {
		if !r.done {
			return false
		}
	}
	return true
}

// newXfer lends the running collective a request set, kept across calls
// with its slices' room (like its scratch), so that a collective allocates
// nothing on its way.
func (c *Comm) newXfer() *xfer {
	cs := &c.coll
	if cs.nx == len(cs.xs) {
		cs.xs = append(cs.xs, &xfer{c: c})
	}
	x := cs.xs[cs.nx]
	cs.nx++
	x.reqs, x.want = x.reqs[:0], x.want[:0]
	return x
}

func (x *xfer) send(buf []byte, to, tag int) error {
	c := x.c
	r := c.getReq()
	if err := c.startSend(r, buf, c.worldRank(to), tag, c.cctx); err != nil {
		c.putReq(r)
		return err
	}
	x.reqs = append(x.reqs, r)
	x.want = append(x.want, -1)
	return nil
}

func (x *xfer) recv(buf []byte, from, tag int) error {
	c := x.c
	r := c.getReq()
	if err := c.startRecv(r, buf, c.worldRank(from), tag, c.cctx); err != nil {
		c.putReq(r)
		return err
	}
	x.reqs = append(x.reqs, r)
	x.want = append(x.want, len(buf))
	return nil
}

// sendrecv starts a send and a receive and waits for both.
func (x *xfer) sendrecv(sbuf []byte, to int, rbuf []byte, from, tag int) error {
	if err := x.recv(rbuf, from, tag); err != nil {
		return err
	}
	if err := x.send(sbuf, to, tag); err != nil {
		_ = x.wait()
		return err
	}
	return x.wait()
}

// wait completes every request of the set and empties it. A receive that
// got fewer bytes than its buffer holds is an error: the members called
// the collective with different sizes.
func (x *xfer) wait() error {
	if len(x.reqs) == 0 {
		return nil
	}
	c := x.c
	c.wait(&x.reqs)
	var errs []error
	c.mu.Lock()
	for i, r := range x.reqs {
		if r.err != nil {
			errs = append(errs, r.err)
		} else if x.want[i] >= 0 && r.st.Count != x.want[i] {
			errs = append(errs, fmt.Errorf("got %d bytes from rank %d where %d were expected (mismatched calls?)",
				r.st.Count, c.commStatus(r.st).Source, x.want[i]))
		}
		c.putReqLocked(r)
		x.reqs[i] = nil
	}
	c.mu.Unlock()
	x.reqs, x.want = x.reqs[:0], x.want[:0]
	return errors.Join(errs...)
}

// ---- helpers ----

// ceilLog2 is the rounds of a doubling algorithm over n ranks.
func ceilLog2(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// floorPow2 is the largest power of two not above n (n >= 1).
func floorPow2(n int) int { return 1 << (bits.Len(uint(n)) - 1) }

// blocks splits cnt elements into k nearly equal blocks; off[i] is where
// block i starts and off[k] = cnt. The offsets live in memory the
// communicator keeps for its running collective.
func (c *Comm) blocks(cnt, k int) []int {
	off := c.coll.layout(k + 1)
	off[0] = 0
	q, r := cnt/k, cnt%k
	for i := range k {
		n := q
		if i < r {
			n++
		}
		off[i+1] = off[i] + n
	}
	return off
}

// ---- Barrier ----

// Barrier returns once every member of c has called it. Its messages never
// match user receives. Algorithm: dissemination (ceil(log2 n) rounds).
func (c *Comm) Barrier() error {
	if err := c.enter(collBarrier); err != nil {
		return err
	}
	defer c.leave()
	return c.collErr(collBarrier, c.run(&c.tables.barrier, 0, true, &collArgs{}))
}

// barrierColl is a dissemination barrier over the whole communicator.
func (c *Comm) barrierColl() error { return c.dissemination(c.newXfer(), c.whole()) }

// dissemination is a dissemination barrier among the members of s: in
// round k every member tells member me+2^k and hears from me-2^k.
func (c *Comm) dissemination(x *xfer, s span) error {
	n, me := s.n, s.me
	for k, round := 1, 0; k < n; k, round = k<<1, round+1 {
		if err := x.sendrecv(nil, s.rank((me+k)%n), nil, s.rank((me-k+n)%n), round); err != nil {
			return err
		}
	}
	return nil
}

// ---- Bcast ----

// Bcast sends root's buf to every member's buf (all of the same length).
// Algorithms: "binomial" (tree), "scatter_allgather" (binomial scatter of n
// pieces, then a ring allgather; for long messages), "pipeline" (segments
// down a chain), "mcast-ack" and "mcast-nak" (reliable multicast; the
// cost model takes mcast-nak for long messages on a switch of known line
// rate), and "hierarchical" (through one leader per host, where ranks share
// hosts).
func (c *Comm) Bcast(buf []byte, root int) error {
	if err := c.enter(collBcast); err != nil {
		return err
	}
	defer c.leave()
	if err := c.checkRoot(root); err != nil {
		return c.collErr(collBcast, err)
	}
	if c.csize == 1 {
		return nil
	}
	return c.collErr(collBcast, c.run(&c.tables.bcast, len(buf), true, &collArgs{buf: buf, root: root}))
}

func (c *Comm) bcastBinomial(buf []byte, root int) error {
	n := c.csize
	return binomialDown(c.newXfer(), buf, n, (c.crank-root+n)%n, func(v int) int { return (v + root) % n }, 0)
}

// binomialDown runs a binomial broadcast of buf over n members numbered
// from the root (0): member vr receives from its parent, then sends to
// its children; at maps a member's number to its rank.
func binomialDown(x *xfer, buf []byte, n, vr int, at func(v int) int, tag int) error {
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			if err := x.recv(buf, at(vr-mask), tag); err != nil {
				return err
			}
			if err := x.wait(); err != nil {
				return err
			}
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			if err := x.send(buf, at(vr+mask), tag); err != nil {
				_ = x.wait()
				return err
			}
		}
	}
	return x.wait()
}

func (c *Comm) bcastScatterAllgather(buf []byte, root int) error {
	n, m := c.csize, len(buf)
	vr := (c.crank - root + n) % n
	cs := (m + n - 1) / n
	// piece returns the bytes of pieces [lo, hi).
	piece := func(lo, hi int) []byte {
		hi = min(hi, n)
		return buf[min(lo*cs, m):min(hi*cs, m)]
	}
	real := func(v int) int { return (v%n + n + root) % n }
	x := c.newXfer()
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			if err := x.recv(piece(vr, vr+mask), real(vr-mask), 0); err != nil {
				return err
			}
			if err := x.wait(); err != nil {
				return err
			}
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			if err := x.send(piece(vr+mask, vr+2*mask), real(vr+mask), 0); err != nil {
				_ = x.wait()
				return err
			}
		}
	}
	if err := x.wait(); err != nil {
		return err
	}
	for s := 0; s < n-1; s++ {
		out := ((vr-s)%n + n) % n
		in := ((vr-s-1)%n + n) % n
		if err := x.sendrecv(piece(out, out+1), real(vr+1), piece(in, in+1), real(vr-1), 1+s); err != nil {
			return err
		}
	}
	return nil
}

// ---- Reduce and Allreduce ----

// Reduce combines every member's send with red into root's recv (same
// length; other members' recv is not used and may be nil). Algorithms:
// "binomial" (tree), "rabenseifner" (reduce-scatter by recursive halving,
// then a binomial gather; for long messages), "pipeline" (segments
// combined along a chain; commutative operators) and "hierarchical"
// (through one leader per host, where ranks share hosts; commutative
// operators, others use binomial).
func (c *Comm) Reduce(send, recv []byte, red Reducer, root int) error {
	if err := c.enter(collReduce); err != nil {
		return err
	}
	defer c.leave()
	if err := c.checkRoot(root); err != nil {
		return c.collErr(collReduce, err)
	}
	if err := red.check(len(send)); err != nil {
		return c.collErr(collReduce, err)
	}
	if c.crank == root && len(recv) != len(send) {
		return c.collErr(collReduce, fmt.Errorf("receive buffer of %d bytes for %d", len(recv), len(send)))
	}
	return c.collErr(collReduce, c.runReducing(&c.tables.reduce, len(send), red.Commutative,
		&collArgs{send: send, recv: recv, root: root}, &red))
}

func (c *Comm) reduceBinomial(send, recv []byte, red *Reducer, root int) error {
	n, me := c.csize, c.crank
	acc := c.coll.scr.clone(send)
	tmp := c.coll.scr.get(len(send))
	// A non-commutative operator needs the tree in rank order: reduce to
	// rank 0, then pass the result on.
	lroot := root
	if !red.Commutative {
		lroot = 0
	}
	x := c.newXfer()
	if err := binomialUp(x, acc, tmp, red, n, (me-lroot+n)%n, func(v int) int { return (v + lroot) % n }, 0); err != nil {
		return err
	}
	switch {
	case lroot == root:
		if me == root {
			copy(recv, acc)
		}
	case me == lroot:
		if err := x.send(acc, root, 1); err != nil {
			return err
		}
	case me == root:
		if err := x.recv(recv, lroot, 1); err != nil {
			return err
		}
	}
	return x.wait()
}

// binomialUp reduces acc over n members numbered from the root (0) up a
// binomial tree: member vr folds in its children's (received into tmp),
// lower numbers first, then sends to its parent; at maps a member's number
// to its rank. The root's acc ends with the result.
func binomialUp(x *xfer, acc, tmp []byte, red *Reducer, n, vr int, at func(v int) int, tag int) error {
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			if err := x.send(acc, at(vr&^mask), tag); err != nil {
				return err
			}
			return x.wait()
		}
		if src := vr | mask; src < n {
			if err := x.recv(tmp, at(src), tag); err != nil {
				return err
			}
			if err := x.wait(); err != nil {
				return err
			}
			red.Fn(acc, acc, tmp)
		}
	}
	return nil
}

// Allreduce combines every member's send with red into every member's
// recv (same length; recv may be send). Algorithms: "recursive_doubling",
// "rabenseifner" (reduce-scatter by recursive halving, then allgather by
// recursive doubling) and "ring" (reduce-scatter and allgather around a
// ring; commutative operators only, others use rabenseifner) and
// "hierarchical" (through one leader per host, where ranks share hosts;
// commutative operators only, as the ring).
func (c *Comm) Allreduce(send, recv []byte, red Reducer) error {
	if err := c.enter(collAllreduce); err != nil {
		return err
	}
	defer c.leave()
	if err := red.check(len(send)); err != nil {
		return c.collErr(collAllreduce, err)
	}
	if len(recv) != len(send) {
		return c.collErr(collAllreduce, fmt.Errorf("receive buffer of %d bytes for %d", len(recv), len(send)))
	}
	return c.collErr(collAllreduce, c.runReducing(&c.tables.allreduce, len(send), red.Commutative,
		&collArgs{send: send, recv: recv}, &red))
}

// span is the set of members a recursive algorithm runs over: n of them,
// this rank being member me, member i being rank ranks[i] of the
// communicator (rank i when ranks is nil: the whole communicator).
type span struct {
	n, me int
	ranks []int
}

// whole is the span of the whole communicator.
func (c *Comm) whole() span { return span{n: c.csize, me: c.crank} }

// rank is member i's rank in the communicator.
func (s span) rank(i int) int {
	if s.ranks == nil {
		return i
	}
	return s.ranks[i]
}

// fold pairs the first 2*rem members (rem = n - pof2): each even one
// hands its data to the odd one above it and sits out. It returns the
// member's number among the pof2 that go on (-1 if it sits out).
func (c *Comm) fold(x *xfer, s span, acc, tmp []byte, red *Reducer, pof2 int) (int, error) {
	me, rem := s.me, s.n-pof2
	switch {
	case me >= 2*rem:
		return me - rem, nil
	case me%2 == 0:
		if err := x.send(acc, s.rank(me+1), 0); err != nil {
			return -1, err
		}
		return -1, x.wait()
	default:
		if err := x.recv(tmp[:len(acc)], s.rank(me-1), 0); err != nil {
			return -1, err
		}
		if err := x.wait(); err != nil {
			return -1, err
		}
		red.Fn(acc, tmp[:len(acc)], acc)
		return me / 2, nil
	}
}

// unfold gives the members that sat out the result.
func (c *Comm) unfold(x *xfer, s span, acc []byte, pof2 int) error {
	me, rem := s.me, s.n-pof2
	if me >= 2*rem {
		return nil
	}
	if me%2 == 0 {
		if err := x.recv(acc, s.rank(me+1), 250); err != nil {
			return err
		}
	} else if err := x.send(acc, s.rank(me-1), 250); err != nil {
		return err
	}
	return x.wait()
}

// realRank is the member number of the pof2-numbered member nr after a
// fold.
func realRank(nr, rem int) int {
	if nr < rem {
		return 2*nr + 1
	}
	return nr + rem
}

func (c *Comm) allreduceRecDoubling(send, recv []byte, red *Reducer) error {
	acc := recv
	copy(acc, send)
	if c.csize == 1 {
		return nil
	}
	return c.recDoubling(c.newXfer(), c.whole(), acc, c.coll.scr.get(len(send)), red)
}

// recDoubling allreduces acc among the members of s by recursive
// doubling, the members beyond the largest power of two folded into their
// neighbours first; tmp is scratch of acc's length.
func (c *Comm) recDoubling(x *xfer, s span, acc, tmp []byte, red *Reducer) error {
	pof2 := floorPow2(s.n)
	rem := s.n - pof2
	nr, err := c.fold(x, s, acc, tmp, red, pof2)
	if err != nil {
		return err
	}
	if nr >= 0 {
		for mask, step := 1, 1; mask < pof2; mask, step = mask<<1, step+1 {
			nd := nr ^ mask
			peer := s.rank(realRank(nd, rem))
			if err := x.sendrecv(acc, peer, tmp, peer, step); err != nil {
				return err
			}
			if nd < nr {
				red.Fn(acc, tmp, acc)
			} else {
				red.Fn(acc, acc, tmp)
			}
		}
	}
	return c.unfold(x, s, acc, pof2)
}

// reduceRabenseifner reduces by recursive halving (each of the pof2 ranks
// ends with one fully reduced block), then either gathers every block
// everywhere (all) or to root.
func (c *Comm) reduceRabenseifner(send, recv []byte, red *Reducer, root int, all bool) error {
	n, me, es := c.csize, c.crank, red.Elem
	var acc []byte
	if all || me == root {
		acc = recv
		copy(acc, send)
	} else {
		acc = c.coll.scr.clone(send)
	}
	if n == 1 {
		return nil
	}
	tmp := c.coll.scr.get(len(send))
	pof2 := floorPow2(n)
	rem := n - pof2
	off := c.blocks(len(send)/es, pof2)
	rng := func(b []byte, lo, hi int) []byte { return b[off[lo]*es : off[hi]*es] }
	x := c.newXfer()
	nr, err := c.fold(x, c.whole(), acc, tmp, red, pof2)
	if err != nil {
		return err
	}
	type step struct{ partner, sLo, sHi, rLo, rHi int }
	var stepBuf [64]step // one per halving: log2 of the ranks
	steps := stepBuf[:0]
	if nr >= 0 {
		lo, hi := 0, pof2
		for mask := 1; mask < pof2; mask <<= 1 {
			nd := nr ^ mask
			half := (hi - lo) / 2
			s := step{partner: realRank(nd, rem)}
			if nr < nd {
				s.rLo, s.rHi, s.sLo, s.sHi = lo, lo+half, lo+half, hi
			} else {
				s.sLo, s.sHi, s.rLo, s.rHi = lo, lo+half, lo+half, hi
			}
			a, t := rng(acc, s.rLo, s.rHi), rng(tmp, s.rLo, s.rHi)
			if err := x.sendrecv(rng(acc, s.sLo, s.sHi), s.partner, t, s.partner, 1+len(steps)); err != nil {
				return err
			}
			if nd < nr {
				red.Fn(a, t, a)
			} else {
				red.Fn(a, a, t)
			}
			steps = append(steps, s)
			lo, hi = s.rLo, s.rHi
		}
	}
	if all {
		for k := len(steps) - 1; k >= 0; k-- {
			s := steps[k]
			if err := x.sendrecv(rng(acc, s.rLo, s.rHi), s.partner, rng(acc, s.sLo, s.sHi), s.partner, 100+k); err != nil {
				return err
			}
		}
		return c.unfold(x, c.whole(), acc, pof2)
	}
	// Gather to pof2-rank 0, then to root.
	if nr >= 0 {
		for k := len(steps) - 1; k >= 0; k-- {
			s := steps[k]
			if nr&(1<<k) != 0 {
				if err := x.send(rng(acc, s.rLo, s.rHi), s.partner, 100+k); err != nil {
					return err
				}
				if err := x.wait(); err != nil {
					return err
				}
				break
			}
			if err := x.recv(rng(acc, s.sLo, s.sHi), s.partner, 100+k); err != nil {
				return err
			}
			if err := x.wait(); err != nil {
				return err
			}
		}
	}
	if top := realRank(0, rem); top != root {
		if me == top {
			if err := x.send(acc, root, 200); err != nil {
				return err
			}
		} else if me == root {
			if err := x.recv(recv, top, 200); err != nil {
				return err
			}
		}
	}
	return x.wait()
}

func (c *Comm) allreduceRing(send, recv []byte, red *Reducer) error {
	n, me, es := c.csize, c.crank, red.Elem
	acc := recv
	copy(acc, send)
	if n == 1 {
		return nil
	}
	tmp := c.coll.scr.get(len(send))
	off := c.blocks(len(send)/es, n)
	blk := func(b []byte, i int) []byte {
		i = (i%n + n) % n
		return b[off[i]*es : off[i+1]*es]
	}
	right, left := (me+1)%n, (me-1+n)%n
	x := c.newXfer()
	for s := 0; s < n-1; s++ {
		t := blk(tmp, me-s-1)
		if err := x.sendrecv(blk(acc, me-s), right, t, left, s); err != nil {
			return err
		}
		a := blk(acc, me-s-1)
		red.Fn(a, t, a)
	}
	for s := 0; s < n-1; s++ {
		if err := x.sendrecv(blk(acc, me+1-s), right, blk(acc, me-s), left, n+s); err != nil {
			return err
		}
	}
	return nil
}

// ---- Scan and Exscan ----

// Scan sets each member's recv to the combination of the sends of members
// 0 through its own rank (inclusive prefix). Algorithms:
// "recursive_doubling" and "linear" (a chain).
func (c *Comm) Scan(send, recv []byte, red Reducer) error {
	return c.scan(&c.tables.scan, send, recv, red)
}

// Exscan sets each member's recv to the combination of the sends of
// members 0 through rank-1 (exclusive prefix); rank 0's recv is left
// unchanged. Algorithm: "recursive_doubling".
func (c *Comm) Exscan(send, recv []byte, red Reducer) error {
	return c.scan(&c.tables.exscan, send, recv, red)
}

func (c *Comm) scan(t *collTable, send, recv []byte, red Reducer) error {
	name := t.coll
	if err := c.enter(name); err != nil {
		return err
	}
	defer c.leave()
	if err := red.check(len(send)); err != nil {
		return c.collErr(name, err)
	}
	if len(recv) != len(send) {
		return c.collErr(name, fmt.Errorf("receive buffer of %d bytes for %d", len(recv), len(send)))
	}
	return c.collErr(name, c.runReducing(t, len(send), red.Commutative, &collArgs{send: send, recv: recv}, &red))
}

func (c *Comm) scanLinear(send, recv []byte, red *Reducer) error {
	n, me := c.csize, c.crank
	x := c.newXfer()
	if me > 0 {
		tmp := c.coll.scr.get(len(send))
		if err := x.recv(tmp, me-1, 0); err != nil {
			return err
		}
		if err := x.wait(); err != nil {
			return err
		}
		red.Fn(recv, tmp, send)
	} else {
		copy(recv, send)
	}
	if me+1 < n {
		if err := x.send(recv, me+1, 0); err != nil {
			return err
		}
	}
	return x.wait()
}

func (c *Comm) scanRecDoubling(send, recv []byte, red *Reducer, incl bool) error {
	n, me := c.csize, c.crank
	// partial: the combination over the aligned block this rank has
	// heard of; recv: over the ranks below (and, inclusive, at) it.
	partial := c.coll.scr.clone(send)
	tmp := c.coll.scr.get(len(send))
	have := incl // whether recv holds anything yet
	if incl {
		copy(recv, send)
	}
	x := c.newXfer()
	for mask, step := 1, 0; mask < n; mask, step = mask<<1, step+1 {
		dst := me ^ mask
		if dst >= n {
			continue
		}
		if err := x.sendrecv(partial, dst, tmp, dst, step); err != nil {
			return err
		}
		if dst < me {
			red.Fn(partial, tmp, partial)
			if have {
				red.Fn(recv, tmp, recv)
			} else {
				copy(recv, tmp)
				have = true
			}
		} else {
			red.Fn(partial, partial, tmp)
		}
	}
	return nil
}
