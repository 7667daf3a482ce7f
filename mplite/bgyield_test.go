package mplite

import (
	"testing"
	"time"
)

// TestCallTakesFabricFromProgressGoroutine: a rank idle long enough for
// its progress goroutine to sleep in the fabric, then a call that waits
// for a message. The goroutine must give the fabric up to the call: while
// it slept there it took the completions the call waited for without
// waking it (a 512 KiB exchange both ways took 2-3x as long).
func TestCallTakesFabricFromProgressGoroutine(t *testing.T) {
	comms, err := NewLocalWorld(2)
	if err != nil {
		t.Fatal(err)
	}
	a, b := comms[0], comms[1]
	sent := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond) // b idles meanwhile
		sent <- a.Send([]byte("late"), 1, 0)
	}()
	time.Sleep(20 * time.Millisecond) // past the progress goroutine's grace
	if !b.bgWaiting.Load() {
		t.Log("the progress goroutine was not in the fabric yet")
	}
	buf := make([]byte, 4)
	if st, err := b.Recv(buf, 0, 0); err != nil || st.Count != 4 || string(buf) != "late" {
		t.Fatalf("%+v %v %q", st, err, buf)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if b.bgYields.Load() == 0 {
		t.Error("the progress goroutine kept the fabric while the call waited")
	}
	errs := make(chan error, 2)
	for _, c := range comms {
		go func() { errs <- c.Finalize() }()
	}
	for range comms {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
