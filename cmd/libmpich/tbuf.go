package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"math"
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// tbuf is count elements of a datatype at a C address, seen as the packed
// bytes a message carries: the memory itself when the layout is
// contiguous (every predefined type, and derived types without gaps), else
// a staging copy that pack fills before sending and unpack empties after
// receiving.
type tbuf struct {
	b     []byte
	l     *layout // nil: b is the caller's memory
	p     unsafe.Pointer
	count int
	lay   *cLayout // instead of b and l: mplite gathers and scatters (layoutBuf)
}

// typedBuf views count elements of dt at p. Predefined types take no
// allocation.
func typedBuf(p unsafe.Pointer, count C.int, dt C.MPI_Datatype) (tbuf, error) {
	t, n, err := typedView(p, count, dt)
	if err != nil || t.l == nil {
		return t, err
	}
	t.b = lib.stageBuf(n)
	return t, nil
}

// typedView is typedBuf without the staging copy: for a layout with gaps it
// returns the layout (t.l) and the message length n, and no t.b.
func typedView(p unsafe.Pointer, count C.int, dt C.MPI_Datatype) (t tbuf, n int, err error) {
	if isBuiltin(dt) {
		n, err := bufLen(count, dt)
		return tbuf{b: goBytes(p, n)}, n, err
	}
	l, err := commLayout(dt)
	if err != nil {
		return tbuf{}, 0, err
	}
	if count < 0 {
		return tbuf{}, 0, errorf(errCount, "negative count %d", int(count))
	}
	n64 := int64(count) * l.size
	if l.contiguous() {
		return tbuf{b: goBytes(p, int(n64))}, int(n64), nil
	}
	if n64 > 0 && p == nil && l.tlb == 0 {
		return tbuf{}, 0, errorf(errBuffer, "NULL buffer")
	}
	return tbuf{l: l, p: p, count: int(count)}, int(n64), nil
}

// maxStages bounds the staging copies kept for reuse.
const maxStages = 16

// stageBuf returns a staging copy of n bytes, reused if one is free: a
// derived-datatype message then allocates nothing in steady state.
func (l *library) stageBuf(n int) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, b := range l.stages {
		if cap(b) >= n {
			l.stages = append(l.stages[:i], l.stages[i+1:]...)
			return b[:n]
		}
	}
	return make([]byte, n)
}

// layoutBuf is typedBuf for the point-to-point calls that hand mplite a
// layout: a datatype with gaps is gathered by mplite straight into its send
// buffers and scattered out of its receive buffers, without the staging
// copy typedBuf makes.
func layoutBuf(p unsafe.Pointer, count C.int, dt C.MPI_Datatype) (tbuf, error) {
	t, n, err := typedView(p, count, dt)
	if err != nil || t.l == nil {
		return t, err
	}
	lib.mu.Lock()
	var cl *cLayout
	if n := len(lib.layouts); n > 0 {
		cl = lib.layouts[n-1]
		lib.layouts = lib.layouts[:n-1]
	} else {
		cl = new(cLayout)
	}
	lib.mu.Unlock()
	*cl = cLayout{l: t.l, p: t.p, count: t.count, n: n, runs: cl.runs[:0]}
	return tbuf{lay: cl}, nil
}

// cLayout is count elements of a datatype with gaps at a C address, as the
// mplite.RunLayout of a message: a long message with few long runs moves
// by RDMA straight from and into the caller's memory.
type cLayout struct {
	l     *layout
	p     unsafe.Pointer
	count int
	n     int
	runs  []mplite.Run // Runs' answer, memory kept across reuse
}

func (c *cLayout) Len() int           { return c.n }
func (c *cLayout) Gather(dst []byte)  { c.l.pack(dst, c.p, c.count) }
func (c *cLayout) Scatter(src []byte) { c.l.unpack(c.p, src, c.count) }
func (c *cLayout) NumRuns() int       { return c.count * len(c.l.runs) }

// Runs flattens the count elements into runs (adjacent ones merged) and
// returns them with the memory from the first byte they touch to the
// last.
func (c *cLayout) Runs() ([]byte, []mplite.Run) {
	c.runs = c.runs[:0]
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for e := range int64(c.count) {
		base := e * c.l.extent()
		for _, r := range c.l.runs {
			off := base + r.off
			if k := len(c.runs); k > 0 && int64(c.runs[k-1].Off+c.runs[k-1].Len) == off {
				c.runs[k-1].Len += int(r.n)
			} else {
				c.runs = append(c.runs, mplite.Run{Off: int(off), Len: int(r.n)})
			}
			lo, hi = min(lo, off), max(hi, off+r.n)
		}
	}
	if len(c.runs) == 0 {
		return nil, nil
	}
	for i := range c.runs {
		c.runs[i].Off -= int(lo)
	}
	return unsafe.Slice((*byte)(unsafe.Add(c.p, lo)), hi-lo), c.runs
}

// isend starts sending t.
func (t tbuf) isend(c *mplite.Comm, dest, tag int) (*mplite.Request, error) {
	if t.lay != nil {
		return c.IsendLayout(t.lay, dest, tag)
	}
	return c.Isend(t.b, dest, tag)
}

// irecv starts receiving into t.
func (t tbuf) irecv(c *mplite.Comm, src, tag int) (*mplite.Request, error) {
	if t.lay != nil {
		return c.IrecvLayout(t.lay, src, tag)
	}
	return c.Irecv(t.b, src, tag)
}

// release gives a staging copy or layout view back once no operation uses
// it.
func (t tbuf) release() {
	if t.lay != nil {
		*t.lay = cLayout{runs: t.lay.runs[:0]} // keeps the runs' memory
		lib.mu.Lock()
		if len(lib.layouts) < maxStages {
			lib.layouts = append(lib.layouts, t.lay)
		}
		lib.mu.Unlock()
		return
	}
	if t.l == nil || t.b == nil {
		return
	}
	lib.mu.Lock()
	if len(lib.stages) < maxStages {
		lib.stages = append(lib.stages, t.b)
	}
	lib.mu.Unlock()
}

// pack fills the staging copy from the caller's memory.
func (t tbuf) pack() {
	if t.l != nil {
		t.l.pack(t.b, t.p, t.count)
	}
}

// unpack copies the first n received bytes of the staging copy out to
// the caller's memory.
func (t tbuf) unpack(n int) {
	if t.l != nil {
		t.l.unpack(t.p, t.b[:min(n, len(t.b))], t.count)
	}
}
