package afxdp

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
)

// Each benchmark builds its namespace pair once: b.Loop runs the body a
// single time.

// BenchmarkPingPong64 measures the half round trip of 64-byte frames with
// both ends busy-polling Recv, the echoing end on its own locked OS thread.
func BenchmarkPingPong64(b *testing.B) {
	_, x, y := openPair(b, 0, Config{})
	ping := [][]byte{testFrame(64, y, x, 1)}
	pong := [][]byte{testFrame(64, x, y, 2)}
	var stop atomic.Bool
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		bufs, lens := [][]byte{make([]byte, nic.FrameCap(y.MTU()))}, []int{0}
		for !stop.Load() {
			n, err := y.Recv(bufs, lens)
			if err != nil {
				done <- err
				return
			}
			if n > 0 {
				if _, err := y.Send(pong); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	bufs, lens := [][]byte{make([]byte, nic.FrameCap(x.MTU()))}, []int{0}
	roundTrip := func() {
		if _, err := x.Send(ping); err != nil {
			b.Fatal(err)
		}
		for {
			n, err := x.Recv(bufs, lens)
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				return
			}
		}
	}
	for i := 0; i < 100; i++ { // warm up, and prove the path works
		roundTrip()
	}
	n := 0
	for b.Loop() {
		roundTrip()
		n++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/2, "ns/halfrtt")
	stop.Store(true)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStream64 measures one-way throughput of 64-byte frames.
func BenchmarkStream64(b *testing.B) { benchStream(b, func(*Device) int { return 64 }) }

// BenchmarkStreamMTU measures one-way throughput of frames as long as the
// MTU allows.
func BenchmarkStreamMTU(b *testing.B) {
	benchStream(b, func(d *Device) int { return d.MTU() + nic.EthHeaderLen })
}

// benchStream sends batches from one end while a locked goroutine drains the
// other with spin-then-block, and reports the frames per second that arrived
// (up to the last arrival), the bit rate and the fraction lost.
func benchStream(b *testing.B, size func(*Device) int) {
	_, x, y := openPair(b, 0, Config{})
	n := size(x)
	batch := make([][]byte, x.BatchSize())
	for i := range batch {
		batch[i] = testFrame(n, y, x, uint32(i))
	}
	var received, lastNs atomic.Int64
	var stop atomic.Bool
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		runtime.LockOSThread()
		bufs := make([][]byte, y.BatchSize())
		for i := range bufs {
			bufs[i] = make([]byte, nic.FrameCap(y.MTU()))
		}
		lens := make([]int, len(bufs))
		for spins := 0; ; {
			k, err := y.Recv(bufs, lens)
			if err != nil {
				done <- err
				return
			}
			if k > 0 {
				received.Add(int64(k))
				lastNs.Store(int64(time.Since(start)))
				spins = 0
				continue
			}
			if stop.Load() {
				done <- nil
				return
			}
			if spins++; spins > 1000 {
				y.Wait(time.Now().Add(time.Millisecond))
			}
		}
	}()
	sent := 0
	for b.Loop() {
		k, err := x.Send(batch)
		if err != nil {
			b.Fatal(err)
		}
		sent += k
	}
	// Let the last frames land before stopping the receiver.
	for last := int64(-1); received.Load() != last; {
		last = received.Load()
		time.Sleep(20 * time.Millisecond)
	}
	stop.Store(true)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	got, el := received.Load(), time.Duration(lastNs.Load()).Seconds()
	if got == 0 || el == 0 {
		b.Fatal("nothing arrived")
	}
	b.ReportMetric(float64(got)/el, "frames/s")
	b.ReportMetric(float64(got)*float64(n)*8/el/1e6, "Mbps")
	b.ReportMetric(1-float64(got)/float64(sent), "lost")
	b.Logf("receiver kernel stats %+v", y.KernelStats())
}
