package mplite

import (
	"math"
)

// Pipelined (segmented chain) Bcast and Reduce for long messages. The
// members form a chain in rank order from the root; the message travels in
// segments, each rank passing segment i on (Bcast) or combining it with
// its own and passing the result towards the root (Reduce) while segment
// i+1 arrives. Every port then carries the message once, where a binomial
// tree's root carries it ceil(log2 n) times, at the price of n-2 segment
// times to fill the pipe: (k+n-2)·(t_s + s·t_c) for k segments of s bytes.

const (
	chainMinSeg = 4 << 10
	chainMaxSeg = 256 << 10
)

// chainSegment is the segment size for m bytes on n ranks that minimises
// (m/s + n-2)·(t_s + s·t_c): s = sqrt(m·t_s / ((n-2)·t_c)), within
// [chainMinSeg, chainMaxSeg] and a whole number of elem-byte elements.
func chainSegment(t Tuning, n, m, elem int) int {
	s := chainMaxSeg
	if tc := t.byteTime(); n > 2 && tc > 0 {
		s = int(math.Sqrt(float64(m) * t.Ts / (float64(n-2) * tc)))
	}
	s = min(max(s, chainMinSeg), chainMaxSeg, max(m, 1))
	elem = max(elem, 1)
	return max(s-s%elem, elem)
}

// chainCost is the pipeline's C1 and C2 for m bytes on n ranks in
// segments of s: k+n-2 steps of one segment each.
func chainCost(n, m, s int) (c1, c2 float64) {
	if n < 2 || m == 0 {
		return 0, 0
	}
	k := (m + s - 1) / s
	steps := float64(k + n - 2)
	return steps, steps * float64(min(s, m))
}

// defaultChainCost is Cost's pipeline: segments as DefaultTuning sizes
// them.
func defaultChainCost(n, m int) (c1, c2 float64) {
	return chainCost(n, m, chainSegment(DefaultTuning(), n, m, 1))
}

// chainWork is Work's pipeline: every rank but the last sends every
// segment once.
func chainWork(n, m int) (msgs, bytes float64) {
	return chainWorkSeg(n, m, chainSegment(DefaultTuning(), n, m, 1))
}

func chainWorkSeg(n, m, seg int) (msgs, bytes float64) {
	return float64(n-1) * float64((m+seg-1)/seg), float64(n-1) * float64(m)
}

// chainTuned is the cost model's view of a pipeline: its segment comes
// from the tuning.
func chainTuned(s selection) (c1, c2, w1, w2 float64, ok bool) {
	seg := chainSegment(s.t, s.n, s.m, 1)
	c1, c2 = chainCost(s.n, s.m, seg)
	w1, w2 = chainWorkSeg(s.n, s.m, seg)
	return c1, c2, w1, w2, true
}

// segment is segment i of buf, in segments of seg bytes (a pipeline's
// segment, a multicast's chunk).
func segment(buf []byte, i, seg int) []byte {
	lo := i * seg
	return buf[lo:min(lo+seg, len(buf))]
}

// recvSegments posts the receives of buf's k segments of seg bytes from
// rank from, as requests 0 to k-1 of the set (sends come after them).
func (x *xfer) recvSegments(buf []byte, seg, k, from int) error {
	for i := range k {
		if err := x.recv(segment(buf, i, seg), from, 0); err != nil {
			_ = x.wait()
			return err
		}
	}
	return nil
}

// waitOne completes request i of the set (the set keeps it; wait frees
// it) and returns its error.
func (x *xfer) waitOne(i int) error {
	x.one = append(x.one[:0], x.reqs[i])
	x.c.wait(&x.one)
	x.c.mu.Lock()
	defer x.c.mu.Unlock()
	err := x.one[0].err
	x.one[0] = nil
	return err
}

// bcastPipeline is the segmented chain Bcast.
func (c *Comm) bcastPipeline(buf []byte, root int) error {
	n, m := c.csize, len(buf)
	if m == 0 {
		return nil
	}
	v := (c.crank - root + n) % n
	prev, next := (v-1+n+root)%n, (v+1+root)%n
	seg := chainSegment(c.Tuning(), n, m, 1)
	k := (m + seg - 1) / seg
	x := c.newXfer()
	if v == 0 {
		for i := range k {
			if err := x.send(segment(buf, i, seg), next, 0); err != nil {
				_ = x.wait()
				return err
			}
		}
		return x.wait()
	}
	if err := x.recvSegments(buf, seg, k, prev); err != nil {
		return err
	}
	for i := range k {
		if err := x.waitOne(i); err != nil {
			_ = x.wait()
			return err
		}
		if v < n-1 {
			if err := x.send(segment(buf, i, seg), next, 0); err != nil {
				_ = x.wait()
				return err
			}
		}
	}
	return x.wait()
}

// reducePipeline is the segmented chain Reduce: the last rank of the chain
// sends its segments, every other rank combines each with its own and
// passes it on, the root keeps the result. The chain combines in its own
// order, so the operator must be commutative (a forced pipeline with one
// that is not runs the binomial tree, which keeps rank order).
func (c *Comm) reducePipeline(send, recv []byte, red *Reducer, root int) error {
	if !red.Commutative {
		return c.reduceBinomial(send, recv, red, root)
	}
	n, m := c.csize, len(send)
	if n == 1 || m == 0 {
		copy(recv, send) // the root's recv
		return nil
	}
	v := (c.crank - root + n) % n
	prev, next := (v-1+n+root)%n, (v+1+root)%n
	seg := chainSegment(c.Tuning(), n, m, red.Elem)
	k := (m + seg - 1) / seg
	acc := c.coll.scr.clone(send)
	x := c.newXfer()
	if v == n-1 {
		for i := range k {
			if err := x.send(segment(acc, i, seg), prev, 0); err != nil {
				_ = x.wait()
				return err
			}
		}
		return x.wait()
	}
	tmp := c.coll.scr.get(m)
	if err := x.recvSegments(tmp, seg, k, next); err != nil {
		return err
	}
	for i := range k {
		if err := x.waitOne(i); err != nil {
			_ = x.wait()
			return err
		}
		a := segment(acc, i, seg)
		red.Fn(a, a, segment(tmp, i, seg))
		if v > 0 {
			if err := x.send(a, prev, 0); err != nil {
				_ = x.wait()
				return err
			}
		}
	}
	if err := x.wait(); err != nil {
		return err
	}
	if v == 0 {
		copy(recv, acc)
	}
	return nil
}
