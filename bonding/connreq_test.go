package bonding

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/vi"
)

// memHosts builds n bonded hosts over k rails, each rail an in-process
// switch of its own that every host has a port on.
func memHosts(t testing.TB, n, k int, o Options, arena int) []*end {
	t.Helper()
	ends, _ := memHostsSw(t, n, k, o, arena)
	return ends
}

// memHostsSw is memHosts that also returns the rails' switches.
func memHostsSw(t testing.TB, n, k int, o Options, arena int) ([]*end, []*memnic.Switch) {
	t.Helper()
	ends := make([]*end, n)
	for i := range ends {
		ends[i] = &end{}
	}
	var sws []*memnic.Switch
	for r := range k {
		sw := memnic.NewSwitch(uint64(200 + r))
		sws = append(sws, sw)
		for _, e := range ends {
			p, err := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: testJob}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			e.ports = append(e.ports, p)
			e.devs = append(e.devs, p)
		}
	}
	for _, e := range ends {
		e.open(t, o, arena)
	}
	return ends, sws
}

// exchange sends a few messages each way between va (on a) and vb (on b),
// small ones on one rail and longer ones striped over every rail, and
// checks every byte.
func exchange(t *testing.T, a, b *end, va, vb *VI, seed uint64) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	for i, n := range []int{1, 3000, 70_000} {
		for dir := range 2 {
			from, to, vf, vt := a, b, va, vb
			if dir == 1 {
				from, to, vf, vt = b, a, vb, va
			}
			src, dst := from.buf(t, n), to.buf(t, n)
			pattern(seed*1000+uint64(2*i+dir), src.Buf)
			rd := &descriptors.Descriptor{Segments: []descriptors.Segment{dst}}
			mustf(t, vt.PostRecv(rd), "post recv")
			sd := &descriptors.Descriptor{Segments: []descriptors.Segment{src}}
			mustf(t, vf.PostSend(sd), "post send")
			d, err := vf.SendWait(ctx)
			mustf(t, err, "send wait %d bytes, direction %d", n, dir)
			if d != sd || d.Status != descriptors.StatusDone {
				t.Fatalf("send %d bytes, direction %d: status %v", n, dir, d.Status)
			}
			r, err := vt.RecvWait(ctx)
			mustf(t, err, "recv wait %d bytes, direction %d", n, dir)
			if r != rd || r.Status != descriptors.StatusDone || r.Length != n {
				t.Fatalf("recv %d bytes, direction %d: status %v length %d", n, dir, r.Status, r.Length)
			}
			if k := firstDiff(dst.Buf, src.Buf); k >= 0 {
				t.Fatalf("recv %d bytes, direction %d: first wrong byte at %d", n, dir, k)
			}
		}
	}
}

// expiredCtx is a context that has already ended, for non-blocking polls.
func expiredCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// pollRequest polls e for a request to disc with PollConnect, as mplite
// does, until one comes or d passes.
func pollRequest(t *testing.T, e *end, disc uint64, d time.Duration) *ConnRequest {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if req, ok := e.b.PollConnect(disc); ok {
			return req
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection request after %v", d)
		}
		time.Sleep(500 * time.Microsecond)
	}
}

func sameMACs(a, b []net.HardwareAddr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestConcurrentRequesters: several bonds ask one acceptor bond at once on
// one discriminator; the acceptor polls with an expired context and
// accepts each request on a fresh VI (alternately with Accept and
// AcceptPeer). Every requester connects, every accepted VI knows all of
// its requester's rail MACs, and data flows both ways on every pair. The
// old rail-by-rail pairing fails this: a poll rejected rail-0 requests
// whose other rails had not arrived, and paired rails of different
// requesters.
func TestConcurrentRequesters(t *testing.T) {
	for _, k := range []int{2, 3} {
		t.Run(fmt.Sprintf("rails=%d", k), func(t *testing.T) {
			const nreq, disc = 3, 0x6d706c69
			hosts := memHosts(t, nreq+1, k, testOptions(), 1<<20)
			acc, reqs := hosts[0], hosts[1:]
			// Requests reach the acceptor late and out of order, the
			// later rails later still, so that polls find rail-0 requests
			// whose other rails have not arrived and requesters' rails
			// arrive in different orders.
			for r, p := range acc.ports {
				mustf(t, p.SetFaults(memnic.Faults{Delay: time.Duration(r) * time.Millisecond, Jitter: 3 * time.Millisecond}), "faults")
			}
			rvs := make([]*VI, nreq)
			for i, e := range reqs {
				rvs[i] = e.newVI(t, Attributes{})
			}
			ctx := ctxT(t, 30*time.Second)
			errs := make([]error, nreq)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range reqs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs[i] = rvs[i].ConnectRequest(ctx, Peer{MACs: acc.b.HardwareAddrs(), Discriminator: disc})
				}()
			}
			close(start)
			avs := make([]*VI, nreq) // by requester
			for n := range nreq {
				req := pollRequest(t, acc, disc, 20*time.Second)
				rem := req.Remote()
				if rem.Discriminator != disc || len(rem.MACs) != 1 {
					t.Fatalf("request %d: Remote %v", n, rem)
				}
				who := -1
				for i, e := range reqs {
					if bytes.Equal(rem.MACs[0], e.b.HardwareAddrs()[0]) {
						who = i
					}
				}
				if who < 0 || avs[who] != nil {
					t.Fatalf("request %d from %v: unknown or repeated requester", n, rem.MACs[0])
				}
				v := acc.newVI(t, Attributes{})
				var err error
				if n%2 == 0 {
					err = req.Accept(v)
				} else {
					err = req.AcceptPeer(v, Peer{MACs: reqs[who].b.HardwareAddrs(), Discriminator: disc})
				}
				mustf(t, err, "accept request %d from requester %d", n, who)
				avs[who] = v
			}
			wg.Wait()
			for i, err := range errs {
				mustf(t, err, "requester %d", i)
			}
			for _, p := range acc.ports {
				mustf(t, p.SetFaults(memnic.Faults{}), "faults")
			}
			for i, e := range reqs {
				if got := avs[i].Peer(); !sameMACs(got.MACs, e.b.HardwareAddrs()) || got.Discriminator != disc {
					t.Errorf("acceptor's VI for requester %d: peer %v, want %v", i, got.MACs, e.b.HardwareAddrs())
				}
				if got := rvs[i].Peer(); !sameMACs(got.MACs, acc.b.HardwareAddrs()) {
					t.Errorf("requester %d: peer %v", i, got.MACs)
				}
			}
			for i, e := range reqs {
				exchange(t, e, acc, rvs[i], avs[i], uint64(i+1))
			}
			// Every pair used every rail, each with its own peer.
			for i := range reqs {
				for r, rs := range avs[i].Stats().Rails {
					if !rs.Live || rs.Received == 0 {
						t.Errorf("acceptor's VI for requester %d, rail %d: %+v", i, r, rs)
					}
				}
			}
		})
	}
}

// crossing starts ConnectRequests of va (on a) to b and of vb (on b) to a
// at once, and returns their results. b's result is sent under mu, as
// mplite does, so that a Disconnect made under mu that waited for it
// would deadlock.
func crossing(ctx context.Context, a, b *end, va, vb *VI, disc uint64, mu *sync.Mutex) (errA, errB chan error) {
	errA, errB = make(chan error, 1), make(chan error, 1)
	go func() { errA <- va.ConnectRequest(ctx, Peer{MACs: b.b.HardwareAddrs(), Discriminator: disc}) }()
	go func() {
		err := vb.ConnectRequest(ctx, Peer{MACs: a.b.HardwareAddrs(), Discriminator: disc})
		mu.Lock()
		errB <- err
		mu.Unlock()
	}()
	return errA, errB
}

// TestCrossingRequests: a and b ask each other at once. a (the lower rank)
// rejects b's request, so b's ConnectRequest fails with vi.ErrRejected;
// b then disconnects its VI and accepts a's request on it, and the
// connection works both ways.
func TestCrossingRequests(t *testing.T) {
	for _, k := range []int{2, 3} {
		t.Run(fmt.Sprintf("rails=%d", k), func(t *testing.T) {
			const disc = 21
			a, b := memPair(t, k, 1500, memnic.Faults{}, testOptions(), 1<<20)
			va, vb := a.newVI(t, Attributes{}), b.newVI(t, Attributes{})
			ctx := ctxT(t, 30*time.Second)
			var mu sync.Mutex
			errA, errB := crossing(ctx, a, b, va, vb, disc, &mu)
			mustf(t, pollRequest(t, a, disc, 10*time.Second).Reject(), "a rejects b")
			if err := <-errB; !errors.Is(err, vi.ErrRejected) {
				t.Fatalf("b's request: %v, want vi.ErrRejected", err)
			}
			if s := vb.State(); s != Idle {
				t.Fatalf("b after rejection: %v", s)
			}
			req := pollRequest(t, b, disc, 10*time.Second)
			mu.Lock()
			mustf(t, vb.Disconnect(), "b disconnects")
			mustf(t, req.Accept(vb), "b accepts a")
			mu.Unlock()
			mustf(t, <-errA, "a's request")
			exchange(t, a, b, va, vb, 7)
		})
	}
}

// TestDisconnectAbortsRequest: as TestCrossingRequests, but b abandons its
// request while it is still pending, before a answers it: Disconnect
// (made under a lock that b's connecting goroutine takes once its
// ConnectRequest returns) returns at once with the request failed and the
// VI Idle, and b accepts a's request on the same VI. When a later rejects
// b's stale request, b's connection is unharmed.
func TestDisconnectAbortsRequest(t *testing.T) {
	for _, k := range []int{2, 3} {
		t.Run(fmt.Sprintf("rails=%d", k), func(t *testing.T) {
			const disc = 22
			a, b := memPair(t, k, 1500, memnic.Faults{}, testOptions(), 1<<20)
			va, vb := a.newVI(t, Attributes{}), b.newVI(t, Attributes{})
			ctx := ctxT(t, 30*time.Second)
			var mu sync.Mutex
			errA, errB := crossing(ctx, a, b, va, vb, disc, &mu)
			req := pollRequest(t, b, disc, 10*time.Second)
			for vb.RailVI(0).State() != vi.Pending {
				time.Sleep(100 * time.Microsecond)
			}
			mu.Lock()
			t0 := time.Now()
			mustf(t, vb.Disconnect(), "b disconnects")
			if d := time.Since(t0); d > 2*time.Second {
				t.Errorf("Disconnect of a pending request took %v", d)
			}
			if s := vb.State(); s != Idle {
				t.Fatalf("b after Disconnect: %v", s)
			}
			for r := range k {
				if s := vb.RailVI(r).State(); s != vi.Idle {
					t.Fatalf("b's rail %d after Disconnect: %v", r, s)
				}
			}
			mustf(t, req.Accept(vb), "b accepts a")
			mu.Unlock()
			if err := <-errB; err == nil {
				t.Fatal("b's abandoned request succeeded")
			}
			mustf(t, <-errA, "a's request")
			// a now finds b's abandoned request and, being connected to b
			// already, rejects it.
			mustf(t, pollRequest(t, a, disc, 10*time.Second).Reject(), "a rejects b's stale request")
			exchange(t, a, b, va, vb, 8)
			if s := vb.State(); s != Connected {
				t.Fatalf("b after a rejected the stale request: %v", s)
			}
		})
	}
}

// TestAcceptSupersedesRequest: as TestDisconnectAbortsRequest, but b
// accepts a's request on its VI without disconnecting it first (the
// goroutine making b's request may start it only after b's Disconnect):
// Accept aborts b's pending request and wins.
func TestAcceptSupersedesRequest(t *testing.T) {
	const disc = 26
	a, b := memPair(t, 2, 1500, memnic.Faults{}, testOptions(), 1<<20)
	va, vb := a.newVI(t, Attributes{}), b.newVI(t, Attributes{})
	ctx := ctxT(t, 30*time.Second)
	var mu sync.Mutex
	errA, errB := crossing(ctx, a, b, va, vb, disc, &mu)
	req := pollRequest(t, b, disc, 10*time.Second)
	for vb.RailVI(0).State() != vi.Pending {
		time.Sleep(100 * time.Microsecond)
	}
	mu.Lock()
	mustf(t, req.Accept(vb), "b accepts a over its own request")
	mu.Unlock()
	if err := <-errB; err == nil {
		t.Fatal("b's superseded request succeeded")
	}
	mustf(t, <-errA, "a's request")
	exchange(t, a, b, va, vb, 9)
}

// TestPollNoRequest: a poll (PollConnect, or ConnectWait with an expired
// context) with nothing queued fails at once and rejects nothing; a request arriving afterwards, and
// one already on its way while the acceptor polls, are accepted.
func TestPollNoRequest(t *testing.T) {
	const disc = 23
	a, b := memPair(t, 2, 1500, memnic.Faults{}, testOptions(), 1<<20)
	expired := expiredCtx()
	t0 := time.Now()
	for range 100 {
		req, err := b.b.ConnectWait(expired, disc)
		if err == nil {
			t.Fatalf("poll found a request from %v", req.Remote())
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("poll: %v, want context.Canceled", err)
		}
	}
	for range 100 {
		if req, ok := b.b.PollConnect(disc); ok {
			t.Fatalf("PollConnect found a request from %v", req.Remote())
		}
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("200 polls took %v", d)
	}
	if req, ok := b.b.PollConnect(RailBit | disc); ok {
		t.Fatalf("PollConnect of an invalid discriminator returned %v", req.Remote())
	}
	ctx := ctxT(t, 30*time.Second)
	for i := range 2 {
		va, vb := a.newVI(t, Attributes{}), b.newVI(t, Attributes{})
		errA := make(chan error, 1)
		go func() { errA <- va.ConnectRequest(ctx, Peer{MACs: b.b.HardwareAddrs(), Discriminator: disc}) }()
		// Poll while the request is on its way: nothing may be rejected.
		req := pollRequest(t, b, disc, 10*time.Second)
		mustf(t, req.Accept(vb), "accept %d", i)
		mustf(t, <-errA, "request %d", i)
		exchange(t, a, b, va, vb, uint64(10+i))
	}
	if n := b.b.Provider(0).Stats().RefusedRequests; n != 0 {
		t.Errorf("%d requests refused", n)
	}
}

// TestCloseAbortsRequest: Close of a VI whose ConnectRequest is pending
// ends the request with ErrClosed at once.
func TestCloseAbortsRequest(t *testing.T) {
	a, b := memPair(t, 2, 1500, memnic.Faults{}, testOptions(), 0)
	va := a.newVI(t, Attributes{})
	errA := make(chan error, 1)
	go func() {
		errA <- va.ConnectRequest(ctxT(t, 30*time.Second), Peer{MACs: b.b.HardwareAddrs(), Discriminator: 24})
	}()
	for va.RailVI(0).State() != vi.Pending {
		time.Sleep(100 * time.Microsecond)
	}
	t0 := time.Now()
	mustf(t, va.Close(), "close")
	if err := <-errA; !errors.Is(err, ErrClosed) {
		t.Fatalf("request after Close: %v, want ErrClosed", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("Close of a pending request took %v", d)
	}
}

// TestDisconnectAbortsAccept: Disconnect of a VI whose Accept waits for
// the requester's other rails (here the requester is a plain VI on rail 0
// that never sends them) ends the Accept at once and leaves the VI Idle.
func TestDisconnectAbortsAccept(t *testing.T) {
	const disc = 25
	hosts, sws := memHostsSw(t, 1, 2, testOptions(), 0)
	b := hosts[0]
	port, err := sws[0].NewPort(memnic.PortConfig{Config: nic.Config{JobKey: testJob}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { port.Close() })
	p, err := vi.Open(port, vi.Options{Config: nic.Config{JobKey: testJob}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	pv, err := p.NewVI(vi.Attributes{Reliability: vi.ReliableReception, PTag: p.NewPTag()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	go pv.ConnectRequest(ctx, vi.Address{MAC: b.b.HardwareAddrs()[0], Discriminator: disc})
	req := pollRequest(t, b, disc, 10*time.Second)
	vb := b.newVI(t, Attributes{})
	errB := make(chan error, 1)
	go func() { errB <- req.Accept(vb) }()
	for vb.RailVI(0).State() != vi.Connected {
		time.Sleep(100 * time.Microsecond)
	}
	// A request does not supersede an accept under way.
	if err := vb.ConnectRequest(ctx, Peer{MACs: b.b.HardwareAddrs(), Discriminator: disc}); !errors.Is(err, ErrState) {
		t.Fatalf("ConnectRequest during Accept: %v, want ErrState", err)
	}
	t0 := time.Now()
	mustf(t, vb.Disconnect(), "disconnect")
	if err := <-errB; err == nil {
		t.Fatal("Accept succeeded without the requester's rail 1")
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("Disconnect of a pending accept took %v", d)
	}
	if s := vb.State(); s != Idle {
		t.Fatalf("after Disconnect: %v", s)
	}
	for r := range 2 {
		if s := vb.RailVI(r).State(); s != vi.Idle {
			t.Fatalf("rail %d after Disconnect: %v", r, s)
		}
	}
}

// TestReservedDiscriminator: discriminators with RailBit or ReconnectBit
// set are refused, as derived rail discriminators would meet them.
func TestReservedDiscriminator(t *testing.T) {
	a, b := memPair(t, 2, 1500, memnic.Faults{}, testOptions(), 0)
	va := a.newVI(t, Attributes{})
	ctx := ctxT(t, 5*time.Second)
	for _, d := range []uint64{RailBit | 1, ReconnectBit | 1} {
		if err := va.ConnectRequest(ctx, Peer{MACs: b.b.HardwareAddrs(), Discriminator: d}); !errors.Is(err, ErrDiscriminator) {
			t.Errorf("ConnectRequest %#x: %v", d, err)
		}
		if err := va.ConnectPeer(ctx, Peer{MACs: b.b.HardwareAddrs(), Discriminator: d}); !errors.Is(err, ErrDiscriminator) {
			t.Errorf("ConnectPeer %#x: %v", d, err)
		}
		if _, err := b.b.ConnectWait(expiredCtx(), d); !errors.Is(err, ErrDiscriminator) {
			t.Errorf("ConnectWait %#x: %v", d, err)
		}
	}
	if s := va.State(); s != Idle {
		t.Errorf("after refusals: %v", s)
	}
}

// TestRailDisc: on each rail, derived discriminators differ between
// requesters and discriminators, and never meet user discriminators or
// reconnections.
func TestRailDisc(t *testing.T) {
	macs := []uint64{0x020000000001, 0x020000000002, 0xfeffffffffff}
	type key struct {
		r int
		x uint64
	}
	seen := map[key]bool{}
	for _, d := range []uint64{0, 1, 0x6d706c69, 1<<62 - 1} {
		for _, m := range macs {
			for r := 1; r < maxRails; r++ {
				x := railDisc(d, m, r)
				if x&RailBit == 0 || x&ReconnectBit != 0 {
					t.Errorf("railDisc(%#x, %#x, %d) = %#x: not in the rail class", d, m, r, x)
				}
				if seen[key{r, x}] {
					t.Errorf("railDisc(%#x, %#x, %d) = %#x: seen before", d, m, r, x)
				}
				seen[key{r, x}] = true
			}
		}
	}
}
