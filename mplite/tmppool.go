package mplite

import "math/bits"

// tmpPool holds the copies a rank keeps of unexpected eager data and of
// lane envelopes that came before their turn, in buffers sized to them:
// power-of-two classes from minTmp bytes up to the largest copy (an
// envelope and eager data, the receive slot). Each buffer had been a whole
// slot (64 KiB by default): a rank that ran ahead in back-to-back 8-byte
// collectives left its peers 11 000 copies of 64 KiB each, 700 MB of heap
// in 3.5 s, while the unexpected limit counted 72 bytes apiece, and every
// fresh buffer cost 16 page faults.
//
// Freed buffers are kept for reuse up to keep bytes, so that a steady
// stream allocates nothing; what a burst leaves beyond that goes to the
// garbage collector.
type tmpPool struct {
	free [][][]byte // by class: minTmp<<k bytes, the last class max
	max  int        // the largest copy
	kept int64      // bytes in free
	keep int64      // the bound on kept
}

// minTmp is the smallest class: an envelope and a few words of data.
const minTmp = 256

func newTmpPool(max int, keep int64) tmpPool {
	return tmpPool{free: make([][][]byte, powerClass(max)+1), max: max, keep: keep}
}

// powerClass is the power-of-two class of n bytes, minTmp<<k >= n.
func powerClass(n int) int {
	if n <= minTmp {
		return 0
	}
	return bits.Len(uint(n-1)) - bits.Len(minTmp-1)
}

// class is the class of a copy of n bytes (n <= p.max).
func (p *tmpPool) class(n int) int { return min(powerClass(n), len(p.free)-1) }

// classSize is the capacity of class k's buffers.
func (p *tmpPool) classSize(k int) int { return min(minTmp<<k, max(p.max, minTmp)) }

// size is the capacity of the buffer get(n) returns: what a copy of n
// bytes costs against the unexpected limit.
func (p *tmpPool) size(n int) int { return p.classSize(p.class(n)) }

// get returns a buffer of n bytes (n <= p.max) whose capacity is size(n).
func (p *tmpPool) get(n int) []byte {
	k := p.class(n)
	if l := p.free[k]; len(l) > 0 {
		b := l[len(l)-1]
		p.free[k] = l[:len(l)-1]
		p.kept -= int64(cap(b))
		return b[:n]
	}
	return make([]byte, n, p.classSize(k))
}

// put takes back a buffer get returned.
func (p *tmpPool) put(b []byte) {
	c := cap(b)
	if c == 0 || p.kept+int64(c) > p.keep {
		return
	}
	k := p.class(c)
	if p.classSize(k) != c { // not one of ours
		return
	}
	p.free[k] = append(p.free[k], b[:c])
	p.kept += int64(c)
}

// buffers is the number of buffers kept for reuse.
func (p *tmpPool) buffers() int {
	n := 0
	for _, l := range p.free {
		n += len(l)
	}
	return n
}
