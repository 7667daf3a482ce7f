package auth

import (
	"math/rand/v2"
	"testing"
)

// TestWindowAgainstModel drives the window with random counters near the
// top and compares every answer with a set of everything taken.
func TestWindowAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const start = 1 << 40
	w := window{top: start}
	w.mark(start)
	taken := map[uint64]bool{start: true}
	top := uint64(start)
	for i := range 200000 {
		var c uint64
		switch rng.IntN(4) {
		case 0: // ahead, by a little or a lot
			c = top + 1 + uint64(rng.IntN(3*windowBits))
		default: // near the top, before or at it
			c = top - uint64(rng.IntN(windowBits+8))
		}
		want := taken[c] || c+windowBits <= top
		if got := w.seen(c); got != want {
			t.Fatalf("step %d: seen(top-%d) = %v, want %v", i, int64(top)-int64(c), got, want)
		}
		if !want {
			w.mark(c)
			taken[c] = true
			top = max(top, c)
		}
	}
}

func TestWindowShiftAcrossWords(t *testing.T) {
	w := window{top: 1000}
	w.mark(1000)
	w.mark(990)
	w.mark(1000 + 70) // moves 1000 to bit 70 and 990 to bit 80
	for _, c := range []uint64{1070, 1000, 990} {
		if !w.seen(c) {
			t.Errorf("%d forgotten after a shift of 70", c)
		}
	}
	if w.seen(995) || w.seen(1069) {
		t.Error("a counter never taken is seen")
	}
	w.mark(1070 + windowBits) // everything before falls out of the window
	if !w.seen(1070) || w.seen(1070+windowBits-1) {
		t.Error("after a full shift, old counters must be refused and recent untaken ones taken")
	}
}
