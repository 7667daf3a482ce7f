package mplite_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/vi"
)

// BenchmarkPingPong reports the half round trip of mplite Send/Recv and,
// in the same run, of a bare VI ping-pong (the VI layer's own latency, the
// baseline mplite's must stay within 1.15x of). Both run over memnic in
// process, both ends polling; ns/op is the half round trip. shm is mplite
// between two ranks of one host, through shared memory; bond is mplite over
// two rails (short messages on the lanes), bondnolane the same with every
// message through the bond.
func BenchmarkPingPong(b *testing.B) {
	for _, size := range []int{1, 1024, mplite.DefaultEagerLimit, mplite.DefaultEagerLimit + 1, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("vi/%d", size), func(b *testing.B) {
			if size > vi.DefaultMaxTransfer {
				b.Skip("one descriptor only")
			}
			benchVI(b, size)
		})
		b.Run(fmt.Sprintf("mplite/%d", size), func(b *testing.B) { benchMPLite(b, size) })
		b.Run(fmt.Sprintf("shm/%d", size), func(b *testing.B) { benchMPLite(b, size, mplite.WithLocalRanksPerHost(2)) })
		b.Run(fmt.Sprintf("bond/%d", size), func(b *testing.B) { benchMPLite(b, size, mplite.WithLocalRails(2)) })
		b.Run(fmt.Sprintf("bondnolane/%d", size), func(b *testing.B) {
			benchMPLite(b, size, mplite.WithLocalRails(2), mplite.WithBondLane(false))
		})
	}
}

func benchMPLite(b *testing.B, size int, opts ...mplite.Option) {
	comms, err := mplite.NewLocalWorld(2, append([]mplite.Option{mplite.WithSpinTime(time.Minute)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	x, y := comms[0], comms[1]
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, size)
		for {
			st, err := y.Recv(buf, 0, mplite.AnyTag)
			if err == nil && st.Tag == 1 {
				done <- y.Finalize()
				return
			}
			if err == nil {
				err = y.Send(buf, 0, 0)
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	out, in := make([]byte, size), make([]byte, size)
	round := func() {
		if err := x.Send(out, 1, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := x.Recv(in, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		round()
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/half-rtt")
	endEcho(b, x, done)
}

// viEnd is one end of the VI baseline: a reliable-delivery VI with a
// registered buffer for a send and one for a receive.
type viEnd struct {
	port   *memnic.Port
	p      *vi.Provider
	v      *vi.VI
	sd, rd descriptors.Descriptor
}

func newVIEnd(b *testing.B, sw *memnic.Switch, size int) *viEnd {
	port, err := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: 9}, MTU: 9000})
	if err != nil {
		b.Fatal(err)
	}
	p, err := vi.Open(port, vi.Options{Config: nic.Config{JobKey: 9}, SpinTime: -1})
	if err != nil {
		b.Fatal(err)
	}
	tag := p.NewPTag()
	v, err := p.NewVI(vi.Attributes{Reliability: vi.ReliableDelivery, PTag: tag})
	if err != nil {
		b.Fatal(err)
	}
	mem := make([]byte, 2*size+2)
	h, err := p.RegisterMemory(mem, tag, 0)
	if err != nil {
		b.Fatal(err)
	}
	e := &viEnd{port: port, p: p, v: v}
	e.sd.Segments = []descriptors.Segment{{Buf: mem[:size], Handle: h}}
	e.rd.Segments = []descriptors.Segment{{Buf: mem[size+1 : 2*size+1], Handle: h}}
	if err := v.PostRecv(&e.rd); err != nil {
		b.Fatal(err)
	}
	return e
}

func (e *viEnd) close() {
	e.p.Close()
	e.port.Close()
}

// recv polls for the next receive and reposts it.
func (e *viEnd) recv(b *testing.B) {
	for {
		if d, ok := e.v.RecvDone(); ok {
			if d.Status.Failed() {
				b.Error(d.Status)
			}
			if err := e.v.PostRecv(d); err != nil {
				b.Error(err)
			}
			return
		}
		runtime.Gosched()
	}
}

func (e *viEnd) send(b *testing.B) {
	if err := e.v.PostSend(&e.sd); err != nil {
		b.Error(err)
		return
	}
	for {
		if _, ok := e.v.SendDone(); ok {
			return
		}
		runtime.Gosched()
	}
}

func benchVI(b *testing.B, size int) {
	sw := memnic.NewSwitch(1)
	x, y := newVIEnd(b, sw, size), newVIEnd(b, sw, size)
	defer x.close()
	defer y.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		req, err := y.p.ConnectWait(ctx, 1)
		if err == nil {
			err = req.Accept(y.v)
		}
		errc <- err
	}()
	if err := x.v.ConnectRequest(ctx, vi.Address{MAC: y.port.HardwareAddr(), Discriminator: 1}); err != nil {
		b.Fatal(err)
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	echoDone := make(chan struct{})
	n := b.N + 100
	go func() {
		defer close(echoDone)
		for i := 0; i < n; i++ {
			y.recv(b)
			y.send(b)
		}
	}()
	round := func() {
		x.send(b)
		x.recv(b)
	}
	for i := 0; i < 100; i++ {
		round()
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/half-rtt")
	close(stop)
	<-echoDone
}

// BenchmarkLocalMessage is the software cost of one eager message between
// two ranks of one host: one goroutine sends it into the shared-memory
// ring and receives it on the other side, so no cache line moves between
// CPUs and nothing spins. ns/op is a send plus its receive.
func BenchmarkLocalMessage(b *testing.B) {
	for _, size := range []int{1, 1024} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			comms, err := mplite.NewLocalWorld(2, mplite.WithLocalRanksPerHost(2))
			if err != nil {
				b.Fatal(err)
			}
			x, y := comms[0], comms[1]
			out, in := make([]byte, size), make([]byte, size)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := x.Send(out, 1, 0); err != nil {
					b.Fatal(err)
				}
				if _, err := y.Recv(in, 0, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			errs := make(chan error, len(comms))
			for _, c := range comms {
				go func() { errs <- c.Finalize() }()
			}
			for range comms {
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
