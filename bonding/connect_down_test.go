package bonding

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/vi"
)

// downOptions keep the tests of connecting with a rail down quick: a rail
// is waited for railWait (= PeerTimeout here) after rail 0, and a rail
// reconnection attempt lasts PeerTimeout, with short pauses between.
func downOptions() Options {
	o := testOptions()
	o.PeerTimeout = 500 * time.Millisecond
	if raceEnabled {
		// A healthy rail of a loaded machine must not time out.
		o.PeerTimeout = 2 * time.Second
	}
	o.ReconnectMin = 5 * time.Millisecond
	o.ReconnectMax = 50 * time.Millisecond
	return o
}

// How a test connects a pair: a requests and b accepts with Accept or
// AcceptPeer, or both connect peer to peer.
const (
	viaAccept     = "request+Accept"
	viaAcceptPeer = "request+AcceptPeer"
	viaPeer       = "ConnectPeer"
)

// connectVia connects va (on a) and vb (on b) as mode says, with ctxA
// bounding a's call, and returns a's and b's errors.
func connectVia(t *testing.T, mode string, a, b *end, va, vb *VI, disc uint64, ctxA context.Context) (errA, errB error) {
	t.Helper()
	ctxB := ctxT(t, 30*time.Second)
	var wg sync.WaitGroup
	wg.Add(1)
	switch mode {
	case viaPeer:
		go func() {
			defer wg.Done()
			errB = vb.ConnectPeer(ctxB, Peer{MACs: a.b.HardwareAddrs(), Discriminator: disc})
		}()
		errA = va.ConnectPeer(ctxA, Peer{MACs: b.b.HardwareAddrs(), Discriminator: disc})
	default:
		go func() {
			defer wg.Done()
			errA = va.ConnectRequest(ctxA, Peer{MACs: b.b.HardwareAddrs(), Discriminator: disc})
		}()
		req := pollRequest(t, b, disc, 10*time.Second)
		if mode == viaAccept {
			errB = req.Accept(vb)
		} else {
			errB = req.AcceptPeer(vb, Peer{MACs: a.b.HardwareAddrs(), Discriminator: disc})
		}
	}
	wg.Wait()
	return errA, errB
}

// bufs are one host's buffers for transfer: a source, a receive target and
// an RDMA target, each of the largest size.
type bufs struct {
	src, dst, wdst descriptors.Segment
	wOff           uint64 // wdst's offset in the host's registered arena
}

const maxXfer = 200 << 10

func newBufs(t *testing.T, e *end) *bufs {
	b := &bufs{src: e.buf(t, maxXfer), dst: e.buf(t, maxXfer)}
	b.wOff = uint64(e.used)
	b.wdst = e.buf(t, maxXfer)
	return b
}

// transfer moves n bytes from vf to vt, as a send or as an RDMA write with
// immediate data into the receiver's arena, and checks every byte and the
// completions.
func transfer(t *testing.T, ctx context.Context, vf, vt *VI, bf, bt *bufs, to *end, n int, write bool, seed uint64) {
	t.Helper()
	what := fmt.Sprintf("%d-byte send", n)
	if write {
		what = fmt.Sprintf("%d-byte RDMA write", n)
	}
	src := bf.src.Buf[:n]
	pattern(seed, src)
	dst := bt.dst.Buf[:n]
	if write {
		dst = bt.wdst.Buf[:n]
	}
	clear(dst)
	rd := &descriptors.Descriptor{}
	if !write {
		rd.Segments = []descriptors.Segment{{Buf: dst, Handle: bt.dst.Handle}}
	}
	mustf(t, vt.PostRecv(rd), "%s: post recv", what)
	sd := &descriptors.Descriptor{Segments: []descriptors.Segment{{Buf: src, Handle: bf.src.Handle}}}
	want := descriptors.StatusDone
	if write {
		sd.Control = descriptors.Control{Op: descriptors.OpRDMAWrite, Immediate: true, ImmData: uint32(seed)}
		sd.Address = descriptors.AddressSegment{Handle: to.h, Offset: bt.wOff}
		want |= descriptors.StatusImmediate | descriptors.StatusRemoteWrite
	}
	mustf(t, vf.PostSend(sd), "%s: post send", what)
	d, err := vf.SendWait(ctx)
	if err != nil {
		dump(t, "sender", vf)
		dump(t, "receiver", vt)
		t.Fatalf("%s: send wait: %v", what, err)
	}
	if d != sd || d.Status != descriptors.StatusDone || d.Length != n {
		t.Fatalf("%s: send status %v length %d (%v)", what, d.Status, d.Length, vf.Err())
	}
	r, err := vt.RecvWait(ctx)
	mustf(t, err, "%s: recv wait", what)
	if r != rd || r.Status != want || r.Length != n || (write && r.ImmData != uint32(seed)) {
		t.Fatalf("%s: receive status %v length %d imm %#x, want %v", what, r.Status, r.Length, r.ImmData, want)
	}
	if k := firstDiff(dst, src); k >= 0 {
		t.Fatalf("%s: first wrong byte at %d", what, k)
	}
}

// exchangeAll moves 1 B, 5000 B and 200 KiB sends and a 200 KiB RDMA write
// with immediate data each way between va (on a) and vb (on b).
func exchangeAll(t *testing.T, a, b *end, va, vb *VI, ba, bb *bufs, seed uint64) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	for i, n := range []int{1, 5000, maxXfer, -maxXfer} {
		write := n < 0
		n = max(n, -n)
		transfer(t, ctx, va, vb, ba, bb, b, n, write, seed*100+uint64(2*i))
		transfer(t, ctx, vb, va, bb, ba, a, n, write, seed*100+uint64(2*i+1))
	}
}

// railLive reports whether rail r of v is live.
func railLive(v *VI, r int) bool { return v.Stats().Rails[r].Live }

// TestConnectRailDown: rail 1's ports on both hosts are down before the
// connection is made. The connection is still made, promptly, on the
// other rails, with rail 1 down on both ends (and counted as a failure);
// data of every kind flows both ways. Once the ports come up, rail 1
// reconnects on both ends and carries data again, except after a plain
// Accept: that end never learnt the requester's rail-1 MAC, so the rail
// stays down there (and on the requester, whose reconnection finds no
// partner) while the connection keeps working on the rest.
func TestConnectRailDown(t *testing.T) {
	const down = 1
	for _, k := range []int{2, 3} {
		for _, mode := range []string{viaAcceptPeer, viaAccept, viaPeer} {
			t.Run(fmt.Sprintf("rails=%d/%s", k, mode), func(t *testing.T) {
				o := downOptions()
				const disc = 0x5d
				a, b := memPair(t, k, 1500, memnic.Faults{}, o, 1<<20)
				va := a.newVI(t, Attributes{EnableRDMAWrite: true})
				vb := b.newVI(t, Attributes{EnableRDMAWrite: true})
				ba, bb := newBufs(t, a), newBufs(t, b)
				a.ports[down].SetUp(false)
				b.ports[down].SetUp(false)
				t0 := time.Now()
				errA, errB := connectVia(t, mode, a, b, va, vb, disc, ctxT(t, 30*time.Second))
				took := time.Since(t0)
				mustf(t, errA, "a")
				mustf(t, errB, "b")
				// The acceptor waits railWait, the requester half as
				// long again; ConnectPeer railWait after rail 0.
				if limit := 2*requestWait(o) + time.Second; took > limit {
					t.Errorf("connecting with rail %d down took %v, want at most %v", down, took, limit)
				}
				t.Logf("connected with rail %d down in %v", down, took)
				for name, v := range map[string]*VI{"a": va, "b": vb} {
					s := v.Stats()
					for r, rs := range s.Rails {
						if live := r != down; rs.Live != live {
							t.Errorf("%s: rail %d live %v, want %v", name, r, rs.Live, live)
						}
					}
					if s.Rails[down].Failures != 1 {
						t.Errorf("%s: rail %d: %d failures, want 1", name, down, s.Rails[down].Failures)
					}
					if v.State() != Connected {
						t.Errorf("%s: state %v", name, v.State())
					}
				}
				if mode == viaAccept {
					if m := vb.Peer().MACs[down]; m != nil {
						t.Errorf("b: peer's rail-%d MAC %v, want none: it never asked", down, m)
					}
				} else if got := vb.Peer(); !sameMACs(got.MACs, a.b.HardwareAddrs()) {
					t.Errorf("b: peer %v, want %v", got.MACs, a.b.HardwareAddrs())
				}
				exchangeAll(t, a, b, va, vb, ba, bb, 1)
				for name, v := range map[string]*VI{"a": va, "b": vb} {
					if s := v.Stats().Rails[down]; s.Live || s.Sent != 0 || s.Received != 0 {
						t.Errorf("%s: rail %d while down: %+v", name, down, s)
					}
				}

				// The ports come back.
				a.ports[down].SetUp(true)
				b.ports[down].SetUp(true)
				if mode == viaAccept {
					// Give the requester's reconnection several attempts:
					// it has no partner, and harms nothing.
					time.Sleep(3 * o.PeerTimeout)
					if railLive(va, down) || railLive(vb, down) {
						t.Fatalf("rail %d came back without b knowing a's MAC on it", down)
					}
					exchangeAll(t, a, b, va, vb, ba, bb, 2)
					return
				}
				waitFor(t, 10*o.PeerTimeout+5*time.Second, fmt.Sprintf("rail %d to come back on both ends", down), func() bool {
					return railLive(va, down) && railLive(vb, down)
				})
				sa0, sb0 := va.Stats().Rails[down], vb.Stats().Rails[down]
				if sa0.Reconnects != 1 || sb0.Reconnects != 1 {
					t.Errorf("reconnects %d and %d, want 1 each", sa0.Reconnects, sb0.Reconnects)
				}
				exchangeAll(t, a, b, va, vb, ba, bb, 3)
				sa1, sb1 := va.Stats().Rails[down], vb.Stats().Rails[down]
				t.Logf("rail %d after it came back: a %+v, b %+v", down, sa1, sb1)
				if sa1.Sent == sa0.Sent || sa1.Received == sa0.Received || sb1.Sent == sb0.Sent || sb1.Received == sb0.Received {
					t.Errorf("rail %d carried nothing after it came back: a %+v, b %+v", down, sa1, sb1)
				}
				if !sa1.Live || !sb1.Live || sa1.Failures != 1 || sb1.Failures != 1 {
					t.Errorf("rail %d failed again: a %+v, b %+v", down, sa1, sb1)
				}
			})
		}
	}
}

// TestConnectRail0Down: with rail 0's link down, a connection cannot be
// made (rail 0 names it): ConnectRequest and ConnectPeer fail when their
// context ends, naming rail 0 and the peer, the VI is Idle, and once the
// link is back the same VIs connect.
func TestConnectRail0Down(t *testing.T) {
	for _, mode := range []string{viaAcceptPeer, viaPeer} {
		t.Run(mode, func(t *testing.T) {
			const disc = 0x5e
			a, b := memPair(t, 2, 1500, memnic.Faults{}, downOptions(), 1<<20)
			va := a.newVI(t, Attributes{EnableRDMAWrite: true})
			vb := b.newVI(t, Attributes{EnableRDMAWrite: true})
			a.ports[0].SetUp(false)
			const bound = 500 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			// ended is when the context's end could be seen: a busy
			// machine that runs us late delays that as much as the
			// calls' return, so their lateness after it is their own.
			ended := make(chan time.Time, 1)
			go func() { <-ctx.Done(); ended <- time.Now() }()
			t0 := time.Now()
			var err error
			if mode == viaPeer {
				errB := make(chan error, 1)
				go func() { errB <- vb.ConnectPeer(ctx, Peer{MACs: a.b.HardwareAddrs(), Discriminator: disc}) }()
				err = va.ConnectPeer(ctx, Peer{MACs: b.b.HardwareAddrs(), Discriminator: disc})
				if errb := <-errB; errb == nil {
					t.Errorf("b's ConnectPeer succeeded without rail 0")
				}
			} else {
				err = va.ConnectRequest(ctx, Peer{MACs: b.b.HardwareAddrs(), Discriminator: disc})
				if req, perr := b.b.ConnectWait(expiredCtx(), disc); perr == nil {
					t.Errorf("b got a request from %v over a dead rail 0", req.Remote())
				}
			}
			returned := time.Now()
			took := returned.Sub(t0)
			if err == nil {
				t.Fatal("connected without rail 0")
			}
			t.Logf("%v after %v", err, took)
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "rail 0") ||
				!strings.Contains(err.Error(), b.b.HardwareAddrs()[0].String()) {
				t.Errorf("error %q: want rail 0, the peer's MAC and the deadline", err)
			}
			// The calls must give up when their context ends, not after
			// a rail wait or a peer timeout.
			if late := returned.Sub(<-ended); late > time.Second {
				t.Errorf("failing took %v with a %v context: %v after it ended", took, bound, late)
			}
			for name, v := range map[string]*VI{"a": va, "b": vb} {
				if s := v.State(); s != Idle {
					t.Errorf("%s: state %v after the failure", name, s)
				}
				for r := range 2 {
					if s := v.RailVI(r).State(); s != vi.Idle {
						t.Errorf("%s: rail %d state %v after the failure", name, r, s)
					}
				}
			}
			a.ports[0].SetUp(true)
			errA, errB := connectVia(t, mode, a, b, va, vb, disc, ctxT(t, 30*time.Second))
			mustf(t, errA, "a, rail 0 up")
			mustf(t, errB, "b, rail 0 up")
			exchangeAll(t, a, b, va, vb, newBufs(t, a), newBufs(t, b), 4)
		})
	}
}

// TestConnectRailDisagree: the two ends disagree about rail 1 of a new
// connection. a's rail-1 port delays what it receives by 500 ms, and a's
// context ends once a's rail 0 and b's rail 1 are connected: b takes rail 1
// for live at once (it heard a's rail-1 request, or peer request, without
// delay), while a gives up on it before b's answer arrives. The rail must
// heal by itself: b's
// rail breaks (a answers b's Accept of the request it gave up on with a
// Disconnect; for ConnectPeer, b hears nothing from a's rail for
// PeerTimeout), what b striped onto it goes over rail 0, and the rail
// reconnects on both ends.
func TestConnectRailDisagree(t *testing.T) {
	const down, disc = 1, 0x5f
	for _, mode := range []string{viaAcceptPeer, viaPeer} {
		t.Run(mode, func(t *testing.T) {
			o := testOptions()
			// railWait: 1 s. Rail 0 must outlive a busy machine's stalls
			// (its peer timeout fails the VI once rail 1 has failed too);
			// rail 1 on b fails after as long (ConnectPeer).
			o.PeerTimeout = 2 * time.Second
			if raceEnabled {
				o.PeerTimeout = 3 * time.Second
			}
			o.ReconnectMin, o.ReconnectMax = 5*time.Millisecond, 50*time.Millisecond
			a, b := memPair(t, 2, 1500, memnic.Faults{}, o, 1<<20)
			va := a.newVI(t, Attributes{EnableRDMAWrite: true})
			vb := b.newVI(t, Attributes{EnableRDMAWrite: true})
			ba, bb := newBufs(t, a), newBufs(t, b)
			mustf(t, a.ports[down].SetFaults(memnic.Faults{Delay: 500 * time.Millisecond}), "faults")
			// a gives up on rail 1 as soon as the disagreement is made:
			// its rail 0 is connected (so its call succeeds) and b has
			// taken rail 1, whose answer a hears only 500 ms later. A
			// fixed context made that depend on the machine's speed.
			ctxA, cancel := context.WithCancel(ctxT(t, 30*time.Second))
			defer cancel()
			go func() {
				defer cancel()
				for ctxA.Err() == nil && (va.RailVI(0).State() != vi.Connected || vb.RailVI(down).State() != vi.Connected) {
					time.Sleep(100 * time.Microsecond)
				}
			}()
			ctxB := ctxT(t, 30*time.Second)
			errA := make(chan error, 1)
			var errB error
			if mode == viaPeer {
				go func() { errA <- va.ConnectPeer(ctxA, Peer{MACs: b.b.HardwareAddrs(), Discriminator: disc}) }()
				errB = vb.ConnectPeer(ctxB, Peer{MACs: a.b.HardwareAddrs(), Discriminator: disc})
			} else {
				go func() { errA <- va.ConnectRequest(ctxA, Peer{MACs: b.b.HardwareAddrs(), Discriminator: disc}) }()
				errB = pollRequest(t, b, disc, 10*time.Second).AcceptPeer(vb, Peer{MACs: a.b.HardwareAddrs(), Discriminator: disc})
			}
			mustf(t, errB, "b")
			bLive := railLive(vb, down)
			mustf(t, <-errA, "a (its context ended after rail 0 connected)")
			if railLive(va, down) {
				t.Fatalf("a: rail %d live, though a gave up on it", down)
			}
			if !bLive {
				t.Fatalf("b did not take rail %d for live: the test made no disagreement", down)
			}
			// b stripes onto the rail a does not have; everything must
			// arrive all the same.
			ctx := ctxT(t, 30*time.Second)
			t0 := time.Now()
			transfer(t, ctx, vb, va, bb, ba, a, maxXfer, false, 7)
			transfer(t, ctx, vb, va, bb, ba, a, maxXfer, true, 8)
			t.Logf("b's transfers over the half-open rail took %v; b's rail %d: %+v", time.Since(t0), down, vb.Stats().Rails[down])
			waitFor(t, 10*time.Second, "b's rail to fail", func() bool { return vb.Stats().Rails[down].Failures > 0 })
			mustf(t, a.ports[down].SetFaults(memnic.Faults{}), "faults")
			waitFor(t, 15*time.Second, fmt.Sprintf("rail %d to come back on both ends", down), func() bool {
				return railLive(va, down) && railLive(vb, down)
			})
			sa0, sb0 := va.Stats().Rails[down], vb.Stats().Rails[down]
			exchangeAll(t, a, b, va, vb, ba, bb, 9)
			sa1, sb1 := va.Stats().Rails[down], vb.Stats().Rails[down]
			t.Logf("rail %d: a %+v, b %+v", down, sa1, sb1)
			if sa1.Sent == sa0.Sent || sb1.Sent == sb0.Sent {
				t.Errorf("rail %d carried nothing after it healed", down)
			}
			for name, v := range map[string]*VI{"a": va, "b": vb} {
				if s := v.Stats(); s.Refused != 0 {
					t.Errorf("%s refused %d messages", name, s.Refused)
				}
			}
		})
	}
}

// TestAcceptPeerWrongMAC: a rail's request from a MAC AcceptPeer was not
// told of is a misconfiguration, not a rail down: it fails the connection
// on both ends (the requester's rail is rejected), and both VIs are Idle.
func TestAcceptPeerWrongMAC(t *testing.T) {
	const disc = 0x60
	a, b := memPair(t, 2, 1500, memnic.Faults{}, downOptions(), 0)
	va, vb := a.newVI(t, Attributes{}), b.newVI(t, Attributes{})
	ctx := ctxT(t, 30*time.Second)
	errA := make(chan error, 1)
	go func() { errA <- va.ConnectRequest(ctx, Peer{MACs: b.b.HardwareAddrs(), Discriminator: disc}) }()
	wrong := a.b.HardwareAddrs()
	wrong[1] = b.b.HardwareAddrs()[1]
	err := pollRequest(t, b, disc, 10*time.Second).AcceptPeer(vb, Peer{MACs: wrong, Discriminator: disc})
	if !errors.Is(err, ErrState) {
		t.Errorf("AcceptPeer with a wrong rail-1 MAC: %v, want ErrState", err)
	}
	if err := <-errA; !errors.Is(err, vi.ErrRejected) || !strings.Contains(err.Error(), "rail 1") {
		t.Errorf("ConnectRequest: %v, want rail 1 rejected", err)
	}
	for name, v := range map[string]*VI{"a": va, "b": vb} {
		if s := v.State(); s != Idle {
			t.Errorf("%s: state %v", name, s)
		}
	}
}
