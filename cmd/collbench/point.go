package main

import (
	"bytes"
	"fmt"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/mplite/cc"
)

// point is one collective call with its buffers, and the check of its
// result against a naive reference.
type point struct {
	bytes  int // as printed: the cost model's m
	call   func() error
	verify func() error
}

// gapByte fills the bytes between blocks and unreceived buffers: a
// collective that writes where it should not shows.
const gapByte = 0xA5

// blk is the deterministic block rank src sends rank dst (or contributes,
// dst 0) at one point; every rank can compute every other's.
func blk(m, src, dst, salt int) []byte {
	b := make([]byte, m)
	for i := range b {
		b[i] = byte(i*7 + src*31 + dst*17 + salt*13 + i>>8 + 1)
	}
	return b
}

// vals is rank r's reduction input: small integers, so float64 sums are
// exact in any order and every algorithm must give the same bits.
func vals(k, r, salt int) []float64 {
	v := make([]float64, k)
	for i := range v {
		v[i] = float64(r + (i*7+salt)%1000)
	}
	return v
}

// sumOf is the naive reference reduction: ranks lo to hi-1 added in order.
func sumOf(k, lo, hi, salt int) []float64 {
	acc := make([]float64, k)
	for r := lo; r < hi; r++ {
		for i, x := range vals(k, r, salt) {
			acc[i] += x
		}
	}
	return acc
}

func eqF(got, want []float64) error {
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("element %d of %d is %v, want %v", i, len(want), got[i], want[i])
		}
	}
	return nil
}

func eqB(got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Errorf("byte %d of %d is %#x, want %#x", i, len(want), got[i], want[i])
		}
	}
	return fmt.Errorf("%d bytes, want %d", len(got), len(want))
}

func filled(n int) []byte { return bytes.Repeat([]byte{gapByte}, n) }

// gapped is n blocks of m bytes with one gap byte before each.
func gapped(n, m int) (counts, displs []int, total int) {
	counts, displs = make([]int, n), make([]int, n)
	for i := range n {
		counts[i], displs[i] = m, i*(m+1)+1
	}
	return counts, displs, n * (m + 1)
}

// gatherRef is the buffer holding block i = fill(i) at displs[i].
func gatherRef(total int, displs []int, fill func(i int) []byte) []byte {
	ref := filled(total)
	for i, d := range displs {
		copy(ref[d:], fill(i))
	}
	return ref
}

// newPoint builds the call of coll with algo (already forced on c) at size
// bytes, rank 0 the root.
func newPoint(c *mplite.Comm, coll, algo string, size, salt int) (*point, error) {
	n, me := c.Size(), c.Rank()
	m := size
	const root = 0
	switch coll {
	case "barrier":
		return &point{0, c.Barrier, func() error { return nil }}, nil
	case "bcast":
		buf := filled(m)
		if me == root {
			buf = blk(m, root, 0, salt)
		}
		want := blk(m, root, 0, salt)
		return &point{m, func() error { return c.Bcast(buf, root) }, func() error { return eqB(buf, want) }}, nil
	case "reduce", "allreduce", "scan", "exscan":
		k := elems(m)
		send := vals(k, me, salt)
		recv := make([]float64, k)
		for i := range recv {
			recv[i] = -1
		}
		op := mplite.Sum[float64]()
		p := &point{bytes: 8 * k}
		switch coll {
		case "reduce":
			p.call = func() error { return mplite.Reduce(c, send, recv, op, root) }
			p.verify = func() error {
				if me != root {
					return nil
				}
				return eqF(recv, sumOf(k, 0, n, salt))
			}
		case "allreduce":
			p.call = func() error { return mplite.Allreduce(c, send, recv, op) }
			p.verify = func() error { return eqF(recv, sumOf(k, 0, n, salt)) }
		case "scan":
			p.call = func() error { return mplite.Scan(c, send, recv, op) }
			p.verify = func() error { return eqF(recv, sumOf(k, 0, me+1, salt)) }
		default:
			p.call = func() error { return mplite.Exscan(c, send, recv, op) }
			p.verify = func() error {
				if me == 0 { // rank 0's recv is left as it was
					want := make([]float64, k)
					for i := range want {
						want[i] = -1
					}
					return eqF(recv, want)
				}
				return eqF(recv, sumOf(k, 0, me, salt))
			}
		}
		return p, nil
	case "gather", "allgather":
		send := blk(m, me, 0, salt)
		recv := filled(n * m)
		want := gatherRef(n*m, uniformDispls(n, m), func(i int) []byte { return blk(m, i, 0, salt) })
		if coll == "gather" {
			return &point{m, func() error { return c.Gather(send, recv, root) }, func() error {
				if me != root {
					return nil
				}
				return eqB(recv, want)
			}}, nil
		}
		return &point{m, func() error { return c.Allgather(send, recv) }, func() error { return eqB(recv, want) }}, nil
	case "gatherv", "allgatherv":
		send := blk(m, me, 0, salt)
		counts, displs, total := gapped(n, m)
		recv := filled(total)
		want := gatherRef(total, displs, func(i int) []byte { return blk(m, i, 0, salt) })
		if coll == "gatherv" {
			return &point{m, func() error { return c.Gatherv(send, recv, counts, displs, root) }, func() error {
				if me != root {
					return nil
				}
				return eqB(recv, want)
			}}, nil
		}
		return &point{m, func() error { return c.Allgatherv(send, recv, counts, displs) }, func() error { return eqB(recv, want) }}, nil
	case "scatter", "scatterv":
		counts, displs, total := gapped(n, m)
		if coll == "scatter" {
			displs, total = uniformDispls(n, m), n*m
		}
		var send []byte
		if me == root {
			send = gatherRef(total, displs, func(j int) []byte { return blk(m, root, j, salt) })
		}
		recv := filled(m)
		want := blk(m, root, me, salt)
		call := func() error { return c.Scatter(send, recv, root) }
		if coll == "scatterv" {
			call = func() error { return c.Scatterv(send, counts, displs, recv, root) }
		}
		return &point{m, call, func() error { return eqB(recv, want) }}, nil
	case "alltoall":
		send := gatherRef(n*m, uniformDispls(n, m), func(j int) []byte { return blk(m, me, j, salt) })
		recv := filled(n * m)
		want := gatherRef(n*m, uniformDispls(n, m), func(i int) []byte { return blk(m, i, me, salt) })
		return &point{m, func() error { return c.Alltoall(send, recv) }, func() error { return eqB(recv, want) }}, nil
	case "alltoallv":
		counts, displs, total := gapped(n, m)
		send := gatherRef(total, displs, func(j int) []byte { return blk(m, me, j, salt) })
		recv := filled(total)
		want := gatherRef(total, displs, func(i int) []byte { return blk(m, i, me, salt) })
		p := &point{bytes: m, verify: func() error { return eqB(recv, want) }}
		var pattern []cc.Msg
		for i := range n {
			for j := range n {
				pattern = append(pattern, cc.Msg{Src: i, Dst: j, Size: m})
			}
		}
		switch algo {
		case algoL2:
			p.call = func() error { return c.AlltoallvPattern(pattern, send, counts, displs, recv, counts, displs) }
		case algoL3:
			s, err := level3(n, pattern)
			if err != nil {
				return nil, err
			}
			p.call = func() error { return c.AlltoallvSchedule(s, send, counts, displs, recv, counts, displs) }
		default:
			p.call = func() error { return c.Alltoallv(send, counts, displs, recv, counts, displs) }
		}
		return p, nil
	}
	return nil, fmt.Errorf("collbench does not know collective %q", coll)
}

// level3 is the schedule as a Level 3 program gets it: compiled offline
// (here: just before), stored in the file format, and loaded.
func level3(n int, pattern []cc.Msg) (*cc.Schedule, error) {
	s, err := cc.CompileSchedule(n, pattern, cc.SchedAllToAll, mplite.DefaultPhasedThreshold)
	if err != nil {
		return nil, err
	}
	var file bytes.Buffer
	if err := cc.WriteSchedule(&file, s); err != nil {
		return nil, err
	}
	return cc.ReadSchedule(&file)
}

func uniformDispls(n, m int) []int {
	d := make([]int, n)
	for i := range d {
		d[i] = i * m
	}
	return d
}
