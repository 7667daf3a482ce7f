package wakefd

import (
	"testing"

	"golang.org/x/sys/unix"
)

func readable(t *testing.T, w *FD) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: w.Fd(), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestSignalDrain: Signals make the descriptor readable, one Drain clears
// them all, Signal allocates nothing, and Close is safe on a zero FD and
// twice.
func TestSignalDrain(t *testing.T) {
	var zero FD
	if err := zero.Close(); err != nil {
		t.Fatalf("Close of an unopened FD: %v", err)
	}
	var w FD
	if err := w.Open(); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if readable(t, &w) {
		t.Fatal("a new eventfd is readable")
	}
	w.Signal()
	w.Signal()
	if !readable(t, &w) {
		t.Fatal("not readable after Signal")
	}
	w.Drain()
	if readable(t, &w) {
		t.Fatal("still readable after Drain")
	}
	if n := testing.AllocsPerRun(100, w.Signal); n != 0 {
		t.Fatalf("Signal allocates %v times", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
