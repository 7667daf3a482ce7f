package vi

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/internal/pingpong"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/reliability"
)

// pingPonger runs a VI ping-pong of size-byte messages: b echoes every
// message back. It is shared by the allocation test and the benchmark.
type pingPonger struct {
	l      *link
	sd, rd *descriptors.Descriptor
	stop   chan struct{}
	done   chan struct{}
}

func newPingPonger(t testing.TB, level Level, size int) *pingPonger {
	sw := memnic.NewSwitch(1)
	o := Options{PeerTimeout: time.Minute, SpinTime: spinForBench}
	a := newHost(t, sw, 9000, memnic.Faults{}, o, 1<<20)
	b := newHost(t, sw, 9000, memnic.Faults{}, o, 1<<20)
	l := &link{a: a, b: b, va: a.newVI(t, Attributes{Reliability: level}), vb: b.newVI(t, Attributes{Reliability: level})}
	connectCS(t, a, b, l.va, l.vb, 1)
	pp := &pingPonger{l: l, stop: make(chan struct{}), done: make(chan struct{}),
		sd: &descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, size)}},
		rd: &descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, size)}}}
	bs := &descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, size)}}
	br := &descriptors.Descriptor{Segments: []descriptors.Segment{b.buf(t, size)}}
	if err := l.vb.PostRecv(br); err != nil {
		t.Fatal(err)
	}
	if err := l.va.PostRecv(pp.rd); err != nil {
		t.Fatal(err)
	}
	go echo(l.vb, bs, pp.stop, pp.done)
	t.Cleanup(func() {
		close(pp.stop)
		<-pp.done
	})
	return pp
}

// echo is the far side of a ping-pong: it answers every message on v
// with reply until stop closes, then closes done.
func echo(v *VI, reply *descriptors.Descriptor, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	for {
		d, err := v.RecvWait(ctx)
		if err != nil {
			return
		}
		if err := v.PostRecv(d); err != nil {
			return
		}
		if err := v.PostSend(reply); err != nil {
			return
		}
		if _, err := v.SendWait(ctx); err != nil {
			return
		}
	}
}

var spinForBench = time.Duration(0)

// round sends one message and waits for the echo.
func (pp *pingPonger) round(tb testing.TB, ctx context.Context) {
	l := pp.l
	if err := l.va.PostSend(pp.sd); err != nil {
		tb.Fatal(err)
	}
	d, err := l.va.RecvWait(ctx)
	if err != nil || d.Status.Failed() {
		tb.Fatalf("echo: %v %v", err, d)
	}
	if err := l.va.PostRecv(d); err != nil {
		tb.Fatal(err)
	}
	if _, err := l.va.SendWait(ctx); err != nil {
		tb.Fatal(err)
	}
}

// allocsPerRun is testing.AllocsPerRun without its GOMAXPROCS(1): with one
// P the two ends of a ping-pong cannot poll at once, every Wait blocks in
// the driver, and memnic's Wait allocates the error it returns on a
// deadline (nic.ErrTimeout wrapped with fmt.Errorf). The provider's own
// blocking path allocates nothing; TestPollingAllocatesNothing uses
// testing.AllocsPerRun itself.
func allocsPerRun(runs int, f func()) float64 {
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < runs; i++ {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64((after.Mallocs - before.Mallocs) / uint64(runs))
}

// The hot path (post, fragment, receive, complete, wait) allocates
// nothing, at every level.
func TestHotPathAllocatesNothing(t *testing.T) {
	for _, level := range allLevels {
		for _, size := range []int{1, 100000} {
			// A subtest each, so that idle providers of earlier rounds
			// are gone: their blocking waits on memnic allocate.
			t.Run(fmt.Sprintf("%v/%d", level, size), func(t *testing.T) {
				pp := newPingPonger(t, level, size)
				ctx := context.Background()
				for i := 0; i < 300; i++ {
					pp.round(t, ctx)
				}
				if n := allocsPerRun(300, func() { pp.round(t, ctx) }); n != 0 {
					t.Errorf("%v allocations per round trip", n)
				}
			})
		}
	}
}

func TestPollingAllocatesNothing(t *testing.T) {
	l := newLink(t, ReliableReception, memnic.Faults{}, Options{})
	rd := &descriptors.Descriptor{Segments: []descriptors.Segment{l.b.buf(t, 3000)}}
	sd := l.msg(t, 0, 3000)
	round := func() {
		if err := l.vb.PostRecv(rd); err != nil {
			t.Fatal(err)
		}
		if err := l.va.PostSend(sd); err != nil {
			t.Fatal(err)
		}
		// Poll both ends, as a single-threaded consumer would.
		recvd, sent := false, false
		for !recvd || !sent {
			if _, ok := l.vb.RecvDone(); ok {
				recvd = true
			}
			if _, ok := l.va.SendDone(); ok {
				sent = true
			}
		}
	}
	for i := 0; i < 300; i++ {
		round()
	}
	if n := testing.AllocsPerRun(300, round); n != 0 {
		t.Fatalf("%v allocations per polled message", n)
	}
}

// BenchmarkPingPong1 is the VI ping-pong of 1-byte messages over memnic,
// both ends polling; ns/halfrtt is the one-way latency.
func BenchmarkPingPong1(b *testing.B) {
	for _, level := range allLevels {
		b.Run(level.String(), func(b *testing.B) {
			pp := newPingPonger(b, level, 1)
			ctx := context.Background()
			for i := 0; i < 100; i++ {
				pp.round(b, ctx)
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				pp.round(b, ctx)
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N)/2, "ns/halfrtt")
		})
	}
}

// BenchmarkRawPingPong1 is the baseline of BenchmarkPingPong1: the same
// ping-pong of bare frames on the same driver, polling.
func BenchmarkRawPingPong1(b *testing.B) {
	sw := memnic.NewSwitch(1)
	cfg := memnic.PortConfig{Config: nic.Config{JobKey: testJob}, MTU: 9000}
	pa, _ := sw.NewPort(cfg)
	pb, _ := sw.NewPort(cfg)
	defer pa.Close()
	defer pb.Close()
	mk := func(dst, src nic.Device) [][]byte {
		f := make([]byte, reliability.HeaderLen+1)
		d, _ := nic.MAC(dst.HardwareAddr())
		s, _ := nic.MAC(src.HardwareAddr())
		nic.PutPrefix(f, &nic.Prefix{Dst: d, Src: s, EtherType: nic.DefaultEtherType, Version: nic.Version, JobKey: testJob})
		return [][]byte{f}
	}
	toB, toA := mk(pb, pa), mk(pa, pb)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		bufs, lens := [][]byte{make([]byte, nic.FrameCap(9000))}, []int{0}
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n, _ := pb.Recv(bufs, lens); n > 0 {
				pb.Send(toA)
			}
		}
	}()
	bufs, lens := [][]byte{make([]byte, nic.FrameCap(9000))}, []int{0}
	round := func() {
		pa.Send(toB)
		for {
			if n, _ := pa.Recv(bufs, lens); n > 0 {
				return
			}
		}
	}
	for i := 0; i < 100; i++ {
		round()
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		round()
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N)/2, "ns/halfrtt")
	b.StopTimer()
	close(stop)
	<-done
}

// streamBench streams messages of one frame's payload from a to b.
func streamBench(b *testing.B, level Level, loss float64) {
	sw := memnic.NewSwitch(1)
	o := Options{PeerTimeout: time.Minute}
	ha := newHost(b, sw, 9000, memnic.Faults{}, o, 1<<24)
	hb := newHost(b, sw, 9000, memnic.Faults{}, o, 1<<24)
	va := ha.newVI(b, Attributes{Reliability: level})
	vb := hb.newVI(b, Attributes{Reliability: level})
	connectCS(b, ha, hb, va, vb, 1)
	hb.port.SetFaults(memnic.Faults{Loss: loss})
	size := ha.p.Attributes().MaxPayload
	const depth = 64
	ctx := context.Background()
	for i := 0; i < depth; i++ {
		if err := vb.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{hb.buf(b, size)}}); err != nil {
			b.Fatal(err)
		}
	}
	done := make(chan struct{})
	n := b.N + 200
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			d, err := vb.RecvWait(ctx)
			if err != nil || d.Status.Failed() {
				b.Errorf("receive %d: %v %v", i, err, d)
				return
			}
			if err := vb.PostRecv(d); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	sds := make([]*descriptors.Descriptor, depth)
	for i := range sds {
		sds[i] = &descriptors.Descriptor{Segments: []descriptors.Segment{ha.buf(b, size)}}
	}
	out := 0
	send := func(i int) {
		if out == depth {
			if _, err := va.SendWait(ctx); err != nil {
				b.Fatal(err)
			}
			out--
		}
		if err := va.PostSend(sds[i%depth]); err != nil {
			b.Fatal(err)
		}
		out++
	}
	for i := 0; i < 200; i++ {
		send(i)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		send(i)
	}
	<-done
}

// BenchmarkStream streams MTU-sized messages (one full frame each).
func BenchmarkStream(b *testing.B) {
	for _, level := range allLevels {
		b.Run(level.String(), func(b *testing.B) { streamBench(b, level, 0) })
	}
}

// BenchmarkStreamLoss1 is BenchmarkStream with 1% of frames lost.
func BenchmarkStreamLoss1(b *testing.B) {
	for _, level := range []Level{ReliableDelivery, ReliableReception} {
		b.Run(level.String(), func(b *testing.B) { streamBench(b, level, 0.01) })
	}
}

// BenchmarkRawStream is the baseline of BenchmarkStream: bare MTU-sized
// frames sent in batches and received by a polling reader.
func BenchmarkRawStream(b *testing.B) {
	sw := memnic.NewSwitch(1)
	cfg := memnic.PortConfig{Config: nic.Config{JobKey: testJob}, MTU: 9000}
	pa, _ := sw.NewPort(cfg)
	pb, _ := sw.NewPort(cfg)
	defer pa.Close()
	defer pb.Close()
	size := 9000 + nic.EthHeaderLen
	f := make([]byte, size)
	d, _ := nic.MAC(pb.HardwareAddr())
	s, _ := nic.MAC(pa.HardwareAddr())
	nic.PutPrefix(f, &nic.Prefix{Dst: d, Src: s, EtherType: nic.DefaultEtherType, Version: nic.Version, JobKey: testJob})
	batch := make([][]byte, 32)
	for i := range batch {
		batch[i] = f
	}
	got := make(chan int)
	stop := make(chan struct{})
	go func() {
		bufs, lens := make([][]byte, 64), make([]int, 64)
		for i := range bufs {
			bufs[i] = make([]byte, nic.FrameCap(9000))
		}
		n := 0
		for {
			select {
			case <-stop:
				got <- n
				return
			default:
			}
			k, _ := pb.Recv(bufs, lens)
			n += k
		}
	}()
	b.SetBytes(int64(9000 + nic.EthHeaderLen - reliability.HeaderLen))
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for sent < b.N {
		k := min(len(batch), b.N-sent)
		pa.Send(batch[:k])
		sent += k
		// Do not outrun the reader by more than its queue holds.
		for pb.Stats().RxFrames+pb.Stats().RxDropped+4000 < uint64(sent) {
		}
	}
	for pb.Stats().RxFrames+pb.Stats().RxDropped < uint64(sent) {
	}
	b.StopTimer()
	close(stop)
	b.ReportMetric(float64(<-got)/float64(b.N), "delivered/op")
}

// BenchmarkPolledPingPong is a 1-byte ping-pong driven by one goroutine
// that polls both ends in turn over memnic, which delivers as it sends:
// no waits, no wake-ups, so ns/op is the CPU cost of a round trip through
// the layers, steady from run to run where the spinning benchmarks are
// not. bonding's BenchmarkPolledPingPong is the same over a bond.
func BenchmarkPolledPingPong(b *testing.B) {
	sw := memnic.NewSwitch(1)
	o := Options{PeerTimeout: time.Minute}
	ha := newHost(b, sw, 1500, memnic.Faults{}, o, 1<<20)
	hb := newHost(b, sw, 1500, memnic.Faults{}, o, 1<<20)
	va, vb := ha.newVI(b, Attributes{}), hb.newVI(b, Attributes{})
	connectCS(b, ha, hb, va, vb, 1)
	pingpong.Polled(b, va, vb, ha.buf(b, 1), ha.buf(b, 1), hb.buf(b, 1), hb.buf(b, 1))
}
