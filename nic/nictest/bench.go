package nictest

import (
	"runtime"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
)

// spinRecv busy-polls d until at least one frame arrives.
func spinRecv(d nic.Device, bufs [][]byte, lens []int) int {
	for {
		n, err := d.Recv(bufs, lens)
		if err != nil {
			return -1
		}
		if n > 0 {
			return n
		}
	}
}

// BenchPingPong measures the half round trip of size-byte frames with both
// ends busy-polling, as NetPIPE does. It reports ns/halfrtt.
func BenchPingPong(b *testing.B, p Pair, size int) {
	f := make([]byte, size)
	Frame(f, p, p.B, p.A, 1)
	g := make([]byte, size)
	Frame(g, p, p.A, p.B, 2)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		bufs, lens := [][]byte{make([]byte, nic.RecvBufLen(p.B.MTU()))}, []int{0}
		out := [][]byte{g}
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := p.B.Recv(bufs, lens)
			if err != nil {
				return
			}
			if n > 0 {
				p.B.Send(out)
			}
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	bufs, lens := [][]byte{make([]byte, nic.RecvBufLen(p.A.MTU()))}, []int{0}
	out := [][]byte{f}
	// Warm up and make sure the path works before timing it.
	for i := 0; i < 100; i++ {
		p.A.Send(out)
		if spinRecv(p.A, bufs, lens) < 0 {
			b.Fatal("recv failed")
		}
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		p.A.Send(out)
		if spinRecv(p.A, bufs, lens) < 0 {
			b.Fatal("recv failed")
		}
	}
	el := time.Since(start)
	b.StopTimer()
	close(stop)
	<-done
	b.ReportMetric(float64(el.Nanoseconds())/float64(b.N)/2, "ns/halfrtt")
}

// BenchStream measures one-way frames per second of size-byte frames sent in
// batches, counting what the receiver got. It reports frames/s, Mbps and the
// fraction lost on the way.
func BenchStream(b *testing.B, p Pair, size int) {
	batch := p.A.BatchSize()
	frames := make([][]byte, batch)
	for i := range frames {
		frames[i] = make([]byte, size)
		Frame(frames[i], p, p.B, p.A, uint32(i))
	}
	got := make(chan int, 1)
	stop := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		bufs := make([][]byte, p.B.BatchSize())
		for i := range bufs {
			bufs[i] = make([]byte, nic.RecvBufLen(p.B.MTU()))
		}
		lens := make([]int, len(bufs))
		total := 0
		for {
			n, err := p.B.Recv(bufs, lens)
			if err != nil {
				break
			}
			total += n
			if n == 0 {
				select {
				case <-stop:
					got <- total
					return
				default:
				}
				p.B.Wait(time.Now().Add(time.Millisecond))
			}
		}
		got <- total
	}()
	b.ResetTimer()
	start := time.Now()
	sent := 0
	for sent < b.N {
		n := batch
		if b.N-sent < n {
			n = b.N - sent
		}
		k, err := p.A.Send(frames[:n])
		if err != nil {
			b.Fatal(err)
		}
		sent += k
	}
	// Let the last frames land.
	time.Sleep(20 * time.Millisecond)
	close(stop)
	recv := <-got
	el := time.Since(start) - 20*time.Millisecond
	b.StopTimer()
	b.ReportMetric(float64(recv)/el.Seconds(), "frames/s")
	b.ReportMetric(float64(recv)*float64(size)*8/el.Seconds()/1e6, "Mbps")
	b.ReportMetric(1-float64(recv)/float64(sent), "lost")
}
