package mplite

import "testing"

// TestSpinWindowRenewsWhileFramesArrive: the window counts from the last
// frame received, so a transfer that keeps delivering frames is polled to
// its end, and a wait that sees none blocks after one spin time.
func TestSpinWindowRenewsWhileFramesArrive(t *testing.T) {
	const limit = 100
	w := spinWindow{limit: limit}
	w.restart(0, 7)
	if !w.more(limit, 7) {
		t.Fatal("stopped polling inside the first window")
	}
	if w.more(limit+1, 7) {
		t.Fatal("went on polling past the window with no frame")
	}
	// Frames keep arriving every 90 ns for ten windows: never block.
	w.restart(0, 7)
	rx := uint64(7)
	for now := int64(90); now < 10*limit; now += 90 {
		rx++
		if !w.more(now, rx) {
			t.Fatalf("blocked at %d ns although a frame arrived", now)
		}
	}
	last := int64(90 * ((10*limit - 1) / 90))
	if !w.more(last+limit, rx) {
		t.Fatal("window not counted from the last frame")
	}
	if w.more(last+limit+1, rx) {
		t.Fatal("went on polling a full window after the last frame")
	}
}
