package netpipe

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
)

// memPair builds links memnic links and a raw Endpoint for each end.
func memPair(t *testing.T, links int, port memnic.PortConfig) (tx, rx Endpoint, ports [][2]*memnic.Port) {
	t.Helper()
	port.Config = nic.Config{JobKey: 77}
	tx = Endpoint{Role: Transmitter, Filter: nic.Filter{EtherType: nic.DefaultEtherType, JobKey: 77}, Timeout: 2 * time.Second}
	rx = tx
	rx.Role = Receiver
	for l := range links {
		sw := memnic.NewSwitch(uint64(100 + l))
		a, err := sw.NewPort(port)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sw.NewPort(port)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close(); b.Close() })
		tx.Devices = append(tx.Devices, a)
		rx.Devices = append(rx.Devices, b)
		tx.PeerMACs = append(tx.PeerMACs, b.HardwareAddr())
		ports = append(ports, [2]*memnic.Port{a, b})
	}
	return tx, rx, ports
}

// connectPair connects both ends of mod concurrently.
func connectPair(t *testing.T, mod Module, tx, rx Endpoint) (Conn, Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var rc Conn
	var rerr error
	done := make(chan struct{})
	go func() { rc, rerr = mod.Connect(ctx, rx); close(done) }()
	tc, terr := mod.Connect(ctx, tx)
	<-done
	if terr != nil || rerr != nil {
		t.Fatalf("connect: transmitter %v, receiver %v", terr, rerr)
	}
	t.Cleanup(func() { tc.Close(); rc.Close() })
	return tc, rc
}

// echo runs the receiver side of ping-pongs: receive a message of each size
// and send it back.
func echo(ctx context.Context, c Conn, sizes []int) <-chan error {
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, 0, 1<<22)
		for _, n := range sizes {
			b := buf[:n]
			if err := c.Recv(ctx, b); err != nil {
				errc <- err
				return
			}
			if err := c.Send(ctx, b); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	return errc
}

func fillMsg(b []byte, k int) {
	for i := range b {
		b[i] = byte(i*7 + k*13 + i>>9)
	}
}

func pingPongSizes(t *testing.T, tc, rc Conn, sizes []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := echo(ctx, rc, sizes)
	for k, n := range sizes {
		out, in := make([]byte, n), make([]byte, n)
		fillMsg(out, k)
		if err := tc.Send(ctx, out); err != nil {
			t.Fatalf("send %d bytes: %v", n, err)
		}
		if err := tc.Recv(ctx, in); err != nil {
			t.Fatalf("receive %d bytes: %v", n, err)
		}
		if !bytes.Equal(in, out) {
			t.Fatalf("message %d (%d bytes) came back different", k, n)
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("echo: %v", err)
	}
}

var testSizes = []int{0, 1, 2, 100, 1471, 1472, 1473, 2944, 2945, 10000, 65536, 1 << 20, 3}

func TestRawPingPong(t *testing.T) {
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{})
	tc, rc := connectPair(t, RawModule{}, tx, rx)
	pingPongSizes(t, tc, rc, testSizes)
}

func TestRawMultiLinkStripes(t *testing.T) {
	tx, rx, ports := memPair(t, 3, memnic.PortConfig{MTU: 9000})
	rx.PeerMACs = nil // the receiver learns them from the hellos
	tc, rc := connectPair(t, RawModule{}, tx, rx)
	pingPongSizes(t, tc, rc, testSizes)
	var total uint64
	for _, p := range ports {
		total += p[0].Stats().TxFrames
	}
	for l, p := range ports {
		if s := p[0].Stats(); s.TxFrames < total/4 {
			t.Errorf("link %d carried only %d of %d frames: not striped", l, s.TxFrames, total)
		}
	}
}

func TestRawSurvivesReorderAndDuplicates(t *testing.T) {
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{Faults: memnic.Faults{Reorder: 0.2, Duplicate: 0.1}})
	tc, rc := connectPair(t, RawModule{}, tx, rx)
	pingPongSizes(t, tc, rc, []int{5000, 100000, 1, 30000, 7})
}

func TestRawCreditsPreventOverrun(t *testing.T) {
	// A 64-frame receive queue and 1 MiB messages (713 frames): without
	// flow control the train would overflow the queue at once.
	tx, rx, ports := memPair(t, 1, memnic.PortConfig{QueueLen: 64})
	tx.Window, rx.Window = 48, 48
	tc, rc := connectPair(t, RawModule{}, tx, rx)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const msgs = 8
	errc := make(chan error, 1)
	go func() {
		in := make([]byte, 1<<20)
		for range msgs {
			if err := rc.Recv(ctx, in); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	out := make([]byte, 1<<20)
	for range msgs {
		if err := tc.Send(ctx, out); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if d := ports[0][1].Stats().RxDropped; d != 0 {
		t.Errorf("receiver dropped %d frames despite credits", d)
	}
}

func TestRawLossFailsLoudly(t *testing.T) {
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{})
	tx.Timeout, rx.Timeout = 300*time.Millisecond, 300*time.Millisecond
	tc, rc := connectPair(t, RawModule{}, tx, rx)
	// Only now start losing frames, so the handshake went through.
	for _, d := range rx.Devices {
		d.(*memnic.Port).SetFaults(memnic.Faults{Loss: 0.5})
	}
	ctx := context.Background()
	go tc.Send(ctx, make([]byte, 100000))
	err := rc.Recv(ctx, make([]byte, 100000))
	if err == nil || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("receive under 50%% loss: %v, want an error about lost frames", err)
	}
}

func TestRawExchange(t *testing.T) {
	tx, rx, _ := memPair(t, 2, memnic.PortConfig{})
	tc, rc := connectPair(t, RawModule{}, tx, rx)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range []int{1, 3000, 1 << 20} {
		a, b := make([]byte, n), make([]byte, n)
		fillMsg(a, 1)
		fillMsg(b, 2)
		ga, gb := make([]byte, n), make([]byte, n)
		errc := make(chan error, 1)
		go func() { errc <- rc.Exchange(ctx, b, gb) }()
		if err := tc.Exchange(ctx, a, ga); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ga, b) || !bytes.Equal(gb, a) {
			t.Fatalf("%d bytes: exchange delivered wrong data", n)
		}
	}
}

func TestRawContextCancel(t *testing.T) {
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{})
	tx.Timeout = time.Minute
	tc, _ := connectPair(t, RawModule{}, tx, rx)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := tc.Recv(ctx, make([]byte, 10)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Recv with nothing coming: %v, want deadline exceeded", err)
	}
}

func tcpPair(t *testing.T) (Conn, Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	tx := Endpoint{Role: Transmitter, Addr: ln.Addr().String(), Timeout: 5 * time.Second}
	rx := Endpoint{Role: Receiver, Listener: ln, Timeout: 5 * time.Second}
	return connectPair(t, TCPModule{}, tx, rx)
}

func TestTCPPingPongAndExchange(t *testing.T) {
	tc, rc := tcpPair(t)
	pingPongSizes(t, tc, rc, testSizes)
	// 4 MiB both ways at once exceeds the socket buffers: Exchange must
	// not deadlock.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 4 << 20
	a, b, ga, gb := make([]byte, n), make([]byte, n), make([]byte, n), make([]byte, n)
	fillMsg(a, 3)
	fillMsg(b, 4)
	errc := make(chan error, 1)
	go func() { errc <- rc.Exchange(ctx, b, gb) }()
	if err := tc.Exchange(ctx, a, ga); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ga, b) || !bytes.Equal(gb, a) {
		t.Fatal("exchange delivered wrong data")
	}
}

// allocsPerRoundTrip measures allocations of one ping-pong on each end.
func allocsPerRoundTrip(t *testing.T, tc, rc Conn, n, warm int) float64 {
	t.Helper()
	if raceEnabled {
		t.Skip("SKIPPED: allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	ctx := context.Background()
	out, in := make([]byte, n), make([]byte, n)
	rin := make([]byte, n)
	var wg sync.WaitGroup
	rounds := 200
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range rounds + 1 + warm {
			if rc.Recv(ctx, rin) != nil || rc.Send(ctx, rin) != nil {
				return
			}
		}
	}()
	for range warm { // warm up buffers, stash and lazily grown pools
		tc.Send(ctx, out)
		tc.Recv(ctx, in)
	}
	a := testing.AllocsPerRun(rounds, func() {
		if err := tc.Send(ctx, out); err != nil {
			t.Error(err)
		}
		if err := tc.Recv(ctx, in); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	return a
}

func TestRawHotPathDoesNotAllocate(t *testing.T) {
	for _, n := range []int{1, 5000} {
		tx, rx, _ := memPair(t, 2, memnic.PortConfig{})
		tc, rc := connectPair(t, RawModule{}, tx, rx)
		if a := allocsPerRoundTrip(t, tc, rc, n, 5); a != 0 {
			t.Errorf("raw %d bytes: %v allocations per round trip", n, a)
		}
	}
}

func TestVIPingPongAndHotPath(t *testing.T) {
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{Faults: memnic.Faults{Loss: 0.01}})
	tc, rc := connectPair(t, VIModule{}, tx, rx)
	// Messages larger than one descriptor span several; VI's reliability
	// repairs memnic's 1% loss.
	pingPongSizes(t, tc, rc, []int{0, 1, 1500, 1 << 20, 1<<20 + 1, 3 << 20, 17})
	tx, rx, _ = memPair(t, 1, memnic.PortConfig{})
	tc, rc = connectPair(t, VIModule{}, tx, rx)
	// The reliability layer grows its frame pool up to the window lazily:
	// warm up past that.
	if a := allocsPerRoundTrip(t, tc, rc, 5000, 1000); a != 0 {
		t.Errorf("vi: %v allocations per round trip", a)
	}
}

func TestTCPHotPathDoesNotAllocate(t *testing.T) {
	tc, rc := tcpPair(t)
	if a := allocsPerRoundTrip(t, tc, rc, 1000, 5); a != 0 {
		t.Errorf("tcp: %v allocations per round trip", a)
	}
}

func TestModulesLookup(t *testing.T) {
	m := DefaultModules()
	if _, err := m.Lookup("raw"); err != nil {
		t.Error(err)
	}
	if _, err := m.Lookup("vi"); err != nil {
		t.Error(err)
	}
	if _, err := m.Lookup("rdma"); err != nil {
		t.Error(err)
	}
	_, err := Modules{"later": nil}.Lookup("later")
	if !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "module later is not built yet") {
		t.Errorf("a nil module: %v", err)
	}
	if _, err := m.Lookup("nope"); err == nil || errors.Is(err, ErrNotBuilt) {
		t.Errorf("unknown module: %v", err)
	}
}
