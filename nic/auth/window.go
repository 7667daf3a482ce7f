package auth

// windowBits is how far below the highest counter seen a frame may arrive
// late and still be taken: frames of one device leave in counter order, so
// only a switch that reorders needs any of it.
const windowBits = 256

// window is one sender's replay state: the highest counter taken and a bit
// per counter below it (bit i: top-i was taken).
type window struct {
	top  uint64
	bits [windowBits / 64]uint64
}

// seen reports whether counter c must be refused: taken before, or too old
// to tell.
func (w *window) seen(c uint64) bool {
	if c > w.top {
		return false
	}
	d := w.top - c
	if d >= windowBits {
		return true
	}
	return w.bits[d/64]&(1<<(d%64)) != 0
}

// mark records counter c as taken; seen(c) must be false.
func (w *window) mark(c uint64) {
	if c > w.top {
		w.shift(c - w.top)
		w.top = c
	}
	d := w.top - c
	w.bits[d/64] |= 1 << (d % 64)
}

// shift moves the bits n places up (older), dropping what falls out.
func (w *window) shift(n uint64) {
	if n >= windowBits {
		w.bits = [windowBits / 64]uint64{}
		return
	}
	words, rest := int(n/64), n%64
	for i := len(w.bits) - 1; i >= 0; i-- {
		var v uint64
		if j := i - words; j >= 0 {
			v = w.bits[j] << rest
			if rest != 0 && j > 0 {
				v |= w.bits[j-1] >> (64 - rest)
			}
		}
		w.bits[i] = v
	}
}
