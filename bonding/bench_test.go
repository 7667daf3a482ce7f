package bonding

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/internal/pingpong"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
)

// benchStream streams msg-byte eager sends from va to vb, window in
// flight, b.N messages.
func benchStream(b *testing.B, a, e *end, va, vb *VI, msg, window int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src := a.buf(b, msg)
	dsts := make([]descriptors.Descriptor, window)
	for i := range dsts {
		dsts[i].Segments = []descriptors.Segment{e.buf(b, msg)}
	}
	sds := make([]descriptors.Descriptor, window)
	for i := range sds {
		sds[i].Segments = []descriptors.Segment{src}
	}
	b.SetBytes(int64(msg))
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			for i := range min(window, b.N) {
				if err := vb.PostRecv(&dsts[i]); err != nil {
					return err
				}
			}
			for i := range b.N {
				d, err := vb.RecvWait(ctx)
				if err != nil {
					return err
				}
				if d.Status != descriptors.StatusDone || d.Length != msg {
					return fmt.Errorf("receive %d: status %v length %d", i, d.Status, d.Length)
				}
				if i+window < b.N {
					if err := vb.PostRecv(d); err != nil {
						return err
					}
				}
			}
			return nil
		}()
	}()
	out := 0
	for i := range b.N {
		if out == window {
			if _, err := va.SendWait(ctx); err != nil {
				b.Fatal(err)
			}
			out--
		}
		if err := va.PostSend(&sds[i%window]); err != nil {
			b.Fatal(err)
		}
		out++
	}
	for ; out > 0; out-- {
		if _, err := va.SendWait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}

// BenchmarkBondStream: 1 MiB eager sends over K memnic rails.
func BenchmarkBondStream(b *testing.B) {
	for k := 1; k <= 4; k++ {
		b.Run(fmt.Sprintf("rails=%d", k), func(b *testing.B) {
			a, e := memPair(b, k, 9000, memnic.Faults{}, testOptions(), 16<<20)
			va := a.newVI(b, Attributes{})
			vb := e.newVI(b, Attributes{})
			connect(b, a, e, va, vb, 21)
			benchStream(b, a, e, va, vb, 1<<20, 8)
		})
	}
}

// BenchmarkBondLatency: 1-byte ping-pong over K memnic rails; reports half
// the round trip.
func BenchmarkBondLatency(b *testing.B) {
	for k := 1; k <= 4; k++ {
		b.Run(fmt.Sprintf("rails=%d", k), func(b *testing.B) {
			a, e := memPair(b, k, 1500, memnic.Faults{}, testOptions(), 1<<20)
			va := a.newVI(b, Attributes{})
			vb := e.newVI(b, Attributes{})
			connect(b, a, e, va, vb, 22)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			sa, ra, sb, rb := a.buf(b, 1), a.buf(b, 1), e.buf(b, 1), e.buf(b, 1)
			sdA := &descriptors.Descriptor{Segments: []descriptors.Segment{sa}}
			rdA := &descriptors.Descriptor{Segments: []descriptors.Segment{ra}}
			sdB := &descriptors.Descriptor{Segments: []descriptors.Segment{sb}}
			rdB := &descriptors.Descriptor{Segments: []descriptors.Segment{rb}}
			var wg sync.WaitGroup
			wg.Add(1)
			n := b.N
			go func() {
				defer wg.Done()
				for range n {
					if vb.PostRecv(rdB) != nil {
						return
					}
					if _, err := vb.RecvWait(ctx); err != nil {
						return
					}
					if vb.PostSend(sdB) != nil {
						return
					}
					if _, err := vb.SendWait(ctx); err != nil {
						return
					}
				}
			}()
			b.ResetTimer()
			start := time.Now()
			for range n {
				if err := va.PostRecv(rdA); err != nil {
					b.Fatal(err)
				}
				if err := va.PostSend(sdA); err != nil {
					b.Fatal(err)
				}
				if _, err := va.SendWait(ctx); err != nil {
					b.Fatal(err)
				}
				if _, err := va.RecvWait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(n)/2, "latency_us")
			b.StopTimer()
			wg.Wait()
		})
	}
}

// throttled is a memnic port behind a paced queue, as a slower link: a
// frame leaves at rate bytes per second after the frames before it (a
// goroutine delays it), and frames beyond a 4096-frame queue are dropped,
// as a tbf qdisc would. Send never blocks, as a real NIC's does not.
type throttled struct {
	*memnic.Port
	rate float64
	mu   sync.Mutex
	last time.Time
	q    chan paced
	free chan []byte
	stop chan struct{}
	once sync.Once
}

type paced struct {
	at  time.Time
	buf []byte
}

func newThrottled(p *memnic.Port, rate float64) *throttled {
	t := &throttled{Port: p, rate: rate, q: make(chan paced, 4096), free: make(chan []byte, 4096), stop: make(chan struct{})}
	go t.run()
	return t
}

func (t *throttled) Send(frames [][]byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.last.Before(now) {
		t.last = now
	}
	for _, f := range frames {
		t.last = t.last.Add(time.Duration(float64(len(f)) / t.rate * 1e9))
		var b []byte
		select {
		case b = <-t.free:
		default:
			b = make([]byte, 0, nic.FrameCap(t.MTU()))
		}
		select {
		case t.q <- paced{at: t.last, buf: append(b[:0], f...)}:
		default: // queue full: dropped
		}
	}
	return len(frames), nil
}

func (t *throttled) run() {
	one := make([][]byte, 1)
	for {
		select {
		case <-t.stop:
			return
		case p := <-t.q:
			if d := time.Until(p.at); d > 20*time.Microsecond {
				time.Sleep(d)
			}
			one[0] = p.buf
			t.Port.Send(one)
			select {
			case t.free <- p.buf:
			default:
			}
		}
	}
}

func (t *throttled) Close() error {
	t.once.Do(func() { close(t.stop) })
	return t.Port.Close()
}

// throttledPair is memPair with rail r paced to rates[r] bytes per second
// in both directions.
func throttledPair(b *testing.B, rates []float64, arena int) (*end, *end) {
	ends := [2]*end{{}, {}}
	for r, rate := range rates {
		sw := memnic.NewSwitch(uint64(300 + r))
		for _, e := range ends {
			p, err := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: testJob}, MTU: 9000})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { p.Close() })
			e.ports = append(e.ports, p)
			tp := newThrottled(p, rate)
			b.Cleanup(func() { tp.Close() })
			e.devs = append(e.devs, tp)
		}
	}
	o := testOptions()
	o.MaxTransfer = 16 << 20
	for _, e := range ends {
		e.open(b, o, arena)
	}
	return ends[0], ends[1]
}

// BenchmarkUnequalRails: a 1gbit and a 2gbit rail (paced memnic ports):
// the fast rail alone against both bonded, with eager streams and with
// RDMA writes (split by measured rail rate). Compare the MB/s.
func BenchmarkUnequalRails(b *testing.B) {
	const gbit = 1e9 / 8
	cases := []struct {
		name  string
		rates []float64
	}{
		{"fast-alone", []float64{2 * gbit}},
		{"bonded-1g+2g", []float64{1 * gbit, 2 * gbit}},
	}
	for _, c := range cases {
		b.Run(c.name+"/send", func(b *testing.B) {
			a, e := throttledPair(b, c.rates, 16<<20)
			va := a.newVI(b, Attributes{})
			vb := e.newVI(b, Attributes{})
			connect(b, a, e, va, vb, 23)
			benchStream(b, a, e, va, vb, 1<<20, 8)
		})
		b.Run(c.name+"/write", func(b *testing.B) {
			a, e := throttledPair(b, c.rates, 16<<20)
			va := a.newVI(b, Attributes{})
			vb := e.newVI(b, Attributes{EnableRDMAWrite: true})
			connect(b, a, e, va, vb, 24)
			benchWrite(b, a, e, va, vb, 4<<20, 4)
		})
	}
}

// benchWrite streams msg-byte RDMA writes with immediate data from va into
// vb's arena, window in flight, b.N writes.
func benchWrite(b *testing.B, a, e *end, va, vb *VI, msg, window int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src := a.buf(b, msg)
	off := uint64(e.used)
	e.buf(b, msg)
	rds := make([]descriptors.Descriptor, window)
	sds := make([]descriptors.Descriptor, window)
	for i := range sds {
		sds[i] = descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMAWrite, Immediate: true},
			Segments: []descriptors.Segment{src}, Address: descriptors.AddressSegment{Handle: e.h, Offset: off}}
	}
	b.SetBytes(int64(msg))
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			for i := range min(window, b.N) {
				if err := vb.PostRecv(&rds[i]); err != nil {
					return err
				}
			}
			for i := range b.N {
				d, err := vb.RecvWait(ctx)
				if err != nil {
					return err
				}
				if d.Length != msg || d.Status&descriptors.StatusRemoteWrite == 0 {
					return fmt.Errorf("write %d: status %v length %d", i, d.Status, d.Length)
				}
				if i+window < b.N {
					if err := vb.PostRecv(d); err != nil {
						return err
					}
				}
			}
			return nil
		}()
	}()
	out := 0
	for i := range b.N {
		if out == window {
			if _, err := va.SendWait(ctx); err != nil {
				b.Fatal(err)
			}
			out--
		}
		if err := va.PostSend(&sds[i%window]); err != nil {
			b.Fatal(err)
		}
		out++
	}
	for ; out > 0; out-- {
		if _, err := va.SendWait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	for r, s := range va.Stats().Rails {
		b.ReportMetric(s.Rate/1e6, fmt.Sprintf("rail%d_MB/s", r))
	}
}

// BenchmarkIdlePoll: one empty progress round of a connected VI, by rail
// count. A spinning waiter repeats it until a frame arrives, so its cost
// is the delay a frame can wait before the waiter sees it.
func BenchmarkIdlePoll(b *testing.B) {
	for k := 1; k <= 4; k++ {
		b.Run(fmt.Sprintf("rails=%d", k), func(b *testing.B) {
			a, e := memPair(b, k, 1500, memnic.Faults{}, testOptions(), 1<<20)
			va := a.newVI(b, Attributes{})
			vb := e.newVI(b, Attributes{})
			connect(b, a, e, va, vb, 23)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, ok := va.RecvDone(); ok {
					b.Fatal("a completion on an idle VI")
				}
			}
		})
	}
}

// BenchmarkPolledPingPong is vi's BenchmarkPolledPingPong over a bond of
// K memnic rails: a 1-byte ping-pong driven by one goroutine that polls
// both ends, so ns/op is the CPU cost of a round trip through the bond
// and its rails. Set against vi's, it is what the bond adds.
func BenchmarkPolledPingPong(b *testing.B) {
	for k := 1; k <= 4; k++ {
		b.Run(fmt.Sprintf("rails=%d", k), func(b *testing.B) {
			a, e := memPair(b, k, 1500, memnic.Faults{}, testOptions(), 1<<20)
			va := a.newVI(b, Attributes{})
			vb := e.newVI(b, Attributes{})
			connect(b, a, e, va, vb, 24)
			pingpong.Polled(b, va, vb, a.buf(b, 1), a.buf(b, 1), e.buf(b, 1), e.buf(b, 1))
		})
	}
}
