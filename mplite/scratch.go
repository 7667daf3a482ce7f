package mplite

// scratch lends a collective its temporary buffers (a Bruck exchange's n
// blocks, a reduction's partner buffer) out of memory kept across calls.
// Allocating them on every call cost more than the messages where ranks
// share CPUs: fresh memory faults its pages in and feeds the collector (on
// this paravirtualised VM a 1 KiB Bruck alltoall over 8 ranks took 1.2-1.3
// ms against 0.45-0.48 ms with the buffers kept). Only the collective that
// holds the communicator (collState.busy) uses it, and nothing it lends
// outlives the call: every send from it and every receive into it has
// completed when the collective returns.
type scratch struct {
	buf  []byte
	off  int // bytes lent in this call
	need int // bytes asked for in this call
}

// maxScratch bounds the memory a communicator keeps between collectives;
// a call that needs more allocates the rest, as before.
const maxScratch = 64 << 20

// reset starts a call: the memory the last call wanted is kept for this
// one.
func (s *scratch) reset() {
	if s.need > len(s.buf) && s.need <= maxScratch {
		s.buf = make([]byte, s.need)
	}
	s.off, s.need = 0, 0
}

// get lends n bytes until the next reset. They are not zeroed: callers
// write before they read.
func (s *scratch) get(n int) []byte {
	s.need += n
	if s.off+n <= len(s.buf) {
		b := s.buf[s.off : s.off+n : s.off+n]
		s.off += n
		return b
	}
	return make([]byte, n)
}

// clone lends a copy of b.
func (s *scratch) clone(b []byte) []byte {
	out := s.get(len(b))
	copy(out, b)
	return out
}
