package wake

import "testing"

func TestSignal(t *testing.T) {
	c := make(chan struct{}, 1)
	Signal(c)
	Signal(c) // merges with the pending one, never blocks
	select {
	case <-c:
	default:
		t.Fatal("no signal pending")
	}
	select {
	case <-c:
		t.Fatal("two signals pending")
	default:
	}
	if n := testing.AllocsPerRun(100, func() { Signal(c); <-c }); n != 0 {
		t.Fatalf("%v allocations per Signal", n)
	}
}

func TestTake(t *testing.T) {
	c := make(chan struct{}, 1)
	if Take(c) {
		t.Fatal("took a signal nobody sent")
	}
	Signal(c)
	if !Take(c) || Take(c) {
		t.Fatal("one signal was not taken exactly once")
	}
}
