package main

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPinThread: end i's thread is bound to the i-th usable CPU, modulo
// their number, and to that CPU only.
func TestPinThread(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	if all.Count() < 2 {
		t.Skip("one usable CPU: pinThread leaves the thread alone")
	}
	var cpus []int
	for c := range 1024 {
		if all.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	for _, i := range []int{0, 1, len(cpus)} {
		errc := make(chan error, 1)
		var got unix.CPUSet
		go func() {
			// Locked and never unlocked: the pinned thread ends with
			// the goroutine and never runs other tests' code.
			runtime.LockOSThread()
			if err := pinThread(i); err != nil {
				errc <- err
				return
			}
			errc <- unix.SchedGetaffinity(0, &got)
		}()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		want := cpus[i%len(cpus)]
		if got.Count() != 1 || !got.IsSet(want) {
			t.Errorf("end %d: affinity has %d CPUs (CPU %d set: %v), want CPU %d alone", i, got.Count(), want, got.IsSet(want), want)
		}
	}
}
