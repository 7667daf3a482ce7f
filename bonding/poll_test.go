package bonding

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic/memnic"
)

// pingPong sends n one-byte messages from va to vb and back, each end
// waiting in SendWait and RecvWait, vb's side on its own goroutine. With
// locked, both sides run on goroutines locked to their threads.
func pingPong(t *testing.T, a, b *end, va, vb *VI, n int, locked bool) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	sa, ra, sb, rb := a.buf(t, 1), a.buf(t, 1), b.buf(t, 1), b.buf(t, 1)
	errc := make(chan error, 1)
	go func() {
		if locked {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
		}
		errc <- func() error {
			for i := range n {
				if err := vb.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{rb}}); err != nil {
					return err
				}
				if _, err := vb.RecvWait(ctx); err != nil {
					return err
				}
				if rb.Buf[0] != byte(i) {
					t.Errorf("ping %d carried %d", i, rb.Buf[0])
				}
				sb.Buf[0] = ^byte(i)
				if err := vb.PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{sb}}); err != nil {
					return err
				}
				if _, err := vb.SendWait(ctx); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	if locked {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	for i := range n {
		mustf(t, va.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{ra}}), "post recv")
		sa.Buf[0] = byte(i)
		mustf(t, va.PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{sa}}), "post send")
		_, err := va.SendWait(ctx)
		mustf(t, err, "send wait %d", i)
		_, err = va.RecvWait(ctx)
		mustf(t, err, "recv wait %d", i)
		if ra.Buf[0] != ^byte(i) {
			t.Fatalf("pong %d carried %d", i, ra.Buf[0])
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestQuietRailsStillPolled: after a run of small messages, which all go
// on rail 0, the other rails are polled only now and then; a striped
// message must still arrive whole over all of them.
func TestQuietRailsStillPolled(t *testing.T) {
	const k = 3
	a, b := memPair(t, k, 1500, memnic.Faults{}, testOptions(), 4<<20)
	va, vb := a.newVI(t, Attributes{}), b.newVI(t, Attributes{})
	connect(t, a, b, va, vb, 31)
	pingPong(t, a, b, va, vb, 3*hotRounds, false)

	va.mu.Lock()
	quiet := 0
	for _, rl := range va.rails[1:] {
		if rl.n == 0 && va.round-rl.activeRound >= hotRounds {
			quiet++
		}
	}
	va.mu.Unlock()
	if quiet == 0 {
		t.Fatalf("after %d small messages on rail 0, no other rail counts as quiet", 3*hotRounds)
	}

	n := 1 << 20
	src, dst := a.buf(t, n), b.buf(t, n)
	pattern(7, src.Buf)
	before, _ := railSent(va)
	mustf(t, vb.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{dst}}), "post recv")
	mustf(t, va.PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{src}}), "post send")
	ctx := ctxT(t, 30*time.Second)
	_, err := va.SendWait(ctx)
	mustf(t, err, "send wait")
	d, err := vb.RecvWait(ctx)
	mustf(t, err, "recv wait")
	if d.Status != descriptors.StatusDone || d.Length != n {
		t.Fatalf("striped receive: status %v length %d", d.Status, d.Length)
	}
	if i := firstDiff(dst.Buf, src.Buf); i >= 0 {
		t.Fatalf("striped message wrong from byte %d", i)
	}
	after, _ := railSent(va)
	for r := range k {
		if after[r] == before[r] {
			t.Fatalf("rail %d carried no block of the striped message", r)
		}
	}
}

// TestNoYieldOnLockedThreads: waits that never yield still complete a
// ping-pong between two goroutines locked to their threads.
func TestNoYieldOnLockedThreads(t *testing.T) {
	o := testOptions()
	o.Yield = false
	o.SpinTime = 200 * time.Microsecond
	a, b := memPair(t, 2, 1500, memnic.Faults{}, o, 1<<16)
	va, vb := a.newVI(t, Attributes{}), b.newVI(t, Attributes{})
	connect(t, a, b, va, vb, 32)
	if va.b.opts.Yield {
		t.Fatal("Yield set in the bond's options")
	}
	pingPong(t, a, b, va, vb, 2000, true)
}

// TestWaitsSleepInRailDevice: waits that block at once (SpinTime < 0) sleep
// in the first rail's device, where the peer's frames wake them, and a
// ping-pong over two rails completes intact. A CQ wait does the same.
func TestWaitsSleepInRailDevice(t *testing.T) {
	o := testOptions()
	o.SpinTime = -1
	a, b := memPair(t, 2, 1500, memnic.Faults{}, o, 1<<16)
	va, vb := a.newVI(t, Attributes{}), b.newVI(t, Attributes{})
	connect(t, a, b, va, vb, 33)
	pingPong(t, a, b, va, vb, 300, false)
	for name, v := range map[string]*VI{"a": va, "b": vb} {
		s := v.Stats()
		if s.DeviceSleeps == 0 || s.DeviceSleeps > s.Sleeps {
			t.Errorf("%s: %d sleeps, %d of them in a rail device: want some, and no more than all", name, s.Sleeps, s.DeviceSleeps)
		}
	}

	// Another VI's rail goroutine would hold the device (see sleeper).
	mustf(t, va.Close(), "close")
	mustf(t, vb.Close(), "close")
	cq, err := b.b.NewCQ(1 << 12)
	if err != nil {
		t.Fatal(err)
	}
	vc := b.newVI(t, Attributes{RecvCQ: cq})
	vd := a.newVI(t, Attributes{})
	connect(t, b, a, vc, vd, 34)
	ctx := ctxT(t, 30*time.Second)
	src, dst := a.buf(t, 1), b.buf(t, 1)
	for i := range 50 {
		mustf(t, vc.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{dst}}), "post recv")
		errc := make(chan error, 1)
		go func() {
			c, err := cq.Wait(ctx)
			if err == nil && (!c.Recv || c.VI != vc) {
				err = fmt.Errorf("completion %+v, want vc's receive", c)
			}
			errc <- err
		}()
		src.Buf[0] = byte(i)
		mustf(t, vd.PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{src}}), "post send")
		mustf(t, <-errc, "cq wait %d", i)
		d, ok := vc.RecvDone()
		if !ok || d.Length != 1 || dst.Buf[0] != byte(i) {
			t.Fatalf("message %d: %v %v, byte %d", i, d, ok, dst.Buf[0])
		}
		if _, err := vd.SendWait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := vc.Stats(); s.DeviceSleeps == 0 {
		t.Errorf("CQ waits: %d sleeps, none in a rail device", s.Sleeps)
	}
}

// TestRailMaxBlock: the rails' providers get the bond's longer MaxBlock
// unless the caller chose one (see DefaultMaxBlock).
func TestRailMaxBlock(t *testing.T) {
	for _, c := range []struct{ set, want time.Duration }{
		{0, DefaultMaxBlock},
		{3 * time.Millisecond, 3 * time.Millisecond},
	} {
		o := Options{}
		o.MaxBlock = c.set
		got, err := o.withDefaults(2)
		if err != nil {
			t.Fatal(err)
		}
		if got.MaxBlock != c.want {
			t.Errorf("MaxBlock %v: rails get %v, want %v", c.set, got.MaxBlock, c.want)
		}
	}
}

// TestCQRoundPollsEachRailOnce: a CQ with several VIs polls each rail's
// device once per round, not once per VI (each poll is a system call on a
// kernel driver, and a rank has a VI per peer).
func TestCQRoundPollsEachRailOnce(t *testing.T) {
	const vis, rounds = 4, 2000
	a, b := memPair(t, 2, 1500, memnic.Faults{}, testOptions(), 1<<20)
	cq, err := a.b.NewCQ(vis * a.b.Options().QueueDepth)
	mustf(t, err, "new cq")
	for i := range vis {
		va := a.newVI(t, Attributes{RecvCQ: cq})
		vb := b.newVI(t, Attributes{})
		connect(t, a, b, va, vb, uint64(40+i))
	}
	before := a.ports[0].RecvCalls()
	for range rounds {
		if _, ok := cq.Done(); ok {
			t.Fatal("a completion on an idle CQ")
		}
	}
	calls := a.ports[0].RecvCalls() - before
	t.Logf("%d rounds over %d VIs: %d polls of rail 0", rounds, vis, calls)
	// The rail goroutines may poll too, but far from once per VI.
	if calls >= 2*rounds {
		t.Errorf("%d rounds over %d VIs polled rail 0 %d times: want about one per round", rounds, vis, calls)
	}
}

// TestQuietVIsSkipped: a CQ round skips the VIs that wait only for their
// rails (but every quietProgressEvery-th round), and a message to one of them,
// short or striped, still arrives through the CQ.
func TestQuietVIsSkipped(t *testing.T) {
	const vis, rounds = 4, 2000
	a, b := memPair(t, 2, 1500, memnic.Faults{}, testOptions(), 4<<20)
	cq, err := a.b.NewCQ(2 * vis * a.b.Options().QueueDepth)
	mustf(t, err, "new cq")
	var va, vb [vis]*VI
	for i := range vis {
		va[i] = a.newVI(t, Attributes{SendCQ: cq, RecvCQ: cq})
		vb[i] = b.newVI(t, Attributes{})
		connect(t, a, b, va[i], vb[i], uint64(60+i))
	}
	roundsOf := func(v *VI) uint32 {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.round
	}
	var start [vis]uint32
	for i, v := range va {
		start[i] = roundsOf(v)
	}
	rail1 := a.ports[1].RecvCalls()
	for range rounds {
		if _, ok := cq.Done(); ok {
			t.Fatal("a completion on an idle CQ")
		}
	}
	for i, v := range va {
		if n := roundsOf(v) - start[i]; n > rounds/quietProgressEvery+hotRounds+quietProgressEvery {
			t.Errorf("idle VI %d made %d progress rounds in %d CQ rounds", i, n, rounds)
		}
	}
	// Every VI of the bond is quiet: the rounds were the bond's alone.
	if n := a.b.loud.Load(); n != 0 {
		t.Errorf("%d loud VIs on a bond whose VIs all idle", n)
	}
	// Rails other than the first are still polled every quietPollEvery-th
	// round: a quiet receiver's rails may be taking in an RDMA write.
	if n := a.ports[1].RecvCalls() - rail1; n < rounds/quietPollEvery {
		t.Errorf("rail 1 polled %d times in %d CQ rounds over quiet VIs, want at least %d", n, rounds, rounds/quietPollEvery)
	}

	ctx := ctxT(t, 30*time.Second)
	for _, n := range []int{1, 1 << 20} {
		src, dst := b.buf(t, n), a.buf(t, n)
		pattern(uint64(n), src.Buf)
		mustf(t, va[2].PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{dst}}), "post recv")
		for range rounds { // quiet again before the message comes
			cq.Done()
		}
		mustf(t, vb[2].PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{src}}), "post send")
		c, err := cq.Wait(ctx)
		mustf(t, err, "%d bytes: cq wait", n)
		if c.VI != va[2] || !c.Recv {
			t.Fatalf("%d bytes: completion %+v, want the receive of VI 2", n, c)
		}
		d, ok := va[2].RecvDone()
		if !ok || d.Status != descriptors.StatusDone || d.Length != n {
			t.Fatalf("%d bytes: receive %v, status %v, length %d", n, ok, d.Status, d.Length)
		}
		if i := firstDiff(dst.Buf, src.Buf); i >= 0 {
			t.Fatalf("%d bytes: wrong from byte %d", n, i)
		}
		_, err = vb[2].SendWait(ctx)
		mustf(t, err, "%d bytes: send wait", n)
	}
	// The loud count follows the VIs to their end.
	for _, v := range va {
		v.Close()
	}
	if n := a.b.loud.Load(); n != 0 {
		t.Errorf("%d loud VIs counted after every VI closed", n)
	}
}

// TestQuietRoundFollowsBusyRails: a quiet CQ round polls a rail other than
// the first only every quietPollEvery-th round, unless a poll of that
// rail found frames in the last hotRounds rounds (railHot): the rail may
// be taking in an RDMA write, which completes nothing until its notice.
func TestQuietRoundFollowsBusyRails(t *testing.T) {
	a, b := memPair(t, 2, 1500, memnic.Faults{}, testOptions(), 4<<20)
	cq, err := a.b.NewCQ(2 * a.b.Options().QueueDepth)
	mustf(t, err, "new cq")
	va := a.newVI(t, Attributes{SendCQ: cq, RecvCQ: cq})
	vb := b.newVI(t, Attributes{})
	connect(t, a, b, va, vb, 70)
	for range 2000 {
		cq.Done()
	}
	if n := a.b.loud.Load(); n != 0 {
		t.Fatalf("%d loud VIs after 2000 idle rounds", n)
	}
	const base = uint64(1) << 40 // a multiple of every period, beyond the CQ's rounds
	rail1 := func() uint64 { return a.ports[1].RecvCalls() }

	a.b.railBusy[1].Store(0)
	before := rail1()
	if !a.b.quietRound(base + 1) {
		t.Fatal("an idle quiet round found work")
	}
	if n := rail1() - before; n != 0 {
		t.Errorf("a quiet round polled an idle second rail %d times, want 0", n)
	}
	a.b.railBusy[1].Store(base + 1)
	before = rail1()
	a.b.quietRound(base + 3)
	if n := rail1() - before; n == 0 {
		t.Error("a quiet round skipped a second rail that found frames two rounds before")
	}
	before = rail1()
	a.b.quietRound(base + 1 + hotRounds + 2)
	if n := rail1() - before; n != 0 {
		t.Errorf("a quiet round polled a second rail idle for %d rounds %d times", hotRounds+1, n)
	}

	// A striped message puts frames on rail 1: the poll that takes them
	// in marks the rail busy.
	dst, src := a.buf(t, 1<<20), b.buf(t, 1<<20)
	mustf(t, va.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{dst}}), "post recv")
	mustf(t, vb.PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{src}}), "post send")
	round := base + 1000
	for deadline := time.Now().Add(10 * time.Second); a.b.railBusy[1].Load() < base+1000; round++ {
		if time.Now().After(deadline) {
			t.Fatal("no poll of rail 1 found the striped message's frames")
		}
		vb.SendDone() // the sender makes progress
		a.b.pollRail(1, round)
	}
}
