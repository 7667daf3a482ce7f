package vi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/rdma"
)

// rdmaEnv is an initiator VI va on host a connected to a target VI vb on
// host b that allows remote write and read.
type rdmaEnv struct {
	a, b   *host
	va, vb *VI
	level  Level
}

// rdmaOptions let a descriptor move the largest transfer the provider
// accepts (64 MiB), so one descriptor carries every size of the matrix.
var rdmaOptions = Options{MaxTransfer: MaxMaxTransfer, PeerTimeout: 30 * time.Second}

// newRDMAEnv connects two memnic hosts over a clean wire and then applies
// the faults to both ports.
func newRDMAEnv(t testing.TB, level Level, seed uint64, f memnic.Faults, o Options) *rdmaEnv {
	t.Helper()
	sw := memnic.NewSwitch(seed)
	e := &rdmaEnv{a: newHost(t, sw, 1500, memnic.Faults{}, o, 0), b: newHost(t, sw, 1500, memnic.Faults{}, o, 0), level: level}
	e.connect(t)
	mustf(t, e.a.port.SetFaults(f), "faults a")
	mustf(t, e.b.port.SetFaults(f), "faults b")
	return e
}

func (e *rdmaEnv) connect(t testing.TB) {
	t.Helper()
	e.va = e.a.newVI(t, Attributes{Reliability: e.level})
	e.vb = e.b.newVI(t, Attributes{Reliability: e.level, EnableRDMAWrite: true, EnableRDMARead: true})
	connectCS(t, e.a, e.b, e.va, e.vb, 1)
}

type rdmaOp int

const (
	opWrite rdmaOp = iota
	opWriteImm
	opRead
)

func (o rdmaOp) String() string { return [...]string{"write", "write-imm", "read"}[o] }

// rdmaGuard is how many bytes on each side of a transfer's target range
// must stay untouched.
const rdmaGuard = 67

// split cuts b into up to three uneven segments, so transfers also cross
// segment boundaries in the middle of frames. Empty pieces are left out.
func split(b []byte, h descriptors.MemHandle) []descriptors.Segment {
	var segs []descriptors.Segment
	cuts := []int{0, len(b) / 3, len(b)/3 + len(b)/5 + 1, len(b)}
	for i := 0; i+1 < len(cuts); i++ {
		lo, hi := min(cuts[i], len(b)), min(cuts[i+1], len(b))
		if hi > lo {
			segs = append(segs, descriptors.Segment{Buf: b[lo:hi:hi], Handle: h})
		}
	}
	return segs
}

// transfer runs one RDMA operation of n bytes between a local buffer at
// offset loff and the target region at offset roff (both past a guard) and
// checks both buffers byte for byte, including that nothing outside the
// target range changed. Both registrations are removed afterwards, which
// must succeed once the descriptors completed.
func (e *rdmaEnv) transfer(t testing.TB, ctx context.Context, op rdmaOp, n, loff, roff int, seed uint64) {
	t.Helper()
	rbuf := make([]byte, rdmaGuard+roff+n+rdmaGuard)
	lbuf := make([]byte, rdmaGuard+loff+n+rdmaGuard)
	pattern(seed, rbuf)
	pattern(seed+1, lbuf)
	rorig := append([]byte(nil), rbuf...)
	lorig := append([]byte(nil), lbuf...)
	rh, err := e.b.p.RegisterMemory(rbuf, e.b.ptag, AccessRDMAWrite|AccessRDMARead)
	mustf(t, err, "register target")
	lh, err := e.a.p.RegisterMemory(lbuf, e.a.ptag, 0)
	mustf(t, err, "register local")
	lo, ro := rdmaGuard+loff, rdmaGuard+roff
	d := &descriptors.Descriptor{Segments: split(lbuf[lo:lo+n], lh),
		Address: descriptors.AddressSegment{Handle: rh, Offset: uint64(ro)}}
	imm := uint32(seed)
	switch op {
	case opWrite:
		d.Control.Op = descriptors.OpRDMAWrite
	case opWriteImm:
		d.Control = descriptors.Control{Op: descriptors.OpRDMAWrite, Immediate: true, ImmData: imm}
	case opRead:
		d.Control.Op = descriptors.OpRDMARead
	}
	// Writes end with a notification: a write with immediate data
	// consumes a receive, and a plain write is followed by an empty one,
	// which the reliable levels place only after every earlier frame.
	var notify *descriptors.Descriptor
	var marker *descriptors.Descriptor
	if op != opRead {
		notify = &descriptors.Descriptor{}
		mustf(t, e.vb.PostRecv(notify), "post notification receive")
	}
	mustf(t, e.va.PostSend(d), "post %v", op)
	if op == opWrite {
		marker = &descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMAWrite, Immediate: true, ImmData: ^imm},
			Address: descriptors.AddressSegment{Handle: rh}}
		mustf(t, e.va.PostSend(marker), "post marker")
	}
	got, err := e.va.SendWait(ctx)
	mustf(t, err, "%v of %d bytes: send wait", op, n)
	if got != d || got.Status != descriptors.StatusDone || got.Length != n {
		t.Fatalf("%v of %d bytes: completion %v length %d", op, n, got.Status, got.Length)
	}
	if marker != nil {
		got, err := e.va.SendWait(ctx)
		mustf(t, err, "marker: send wait")
		if got != marker || got.Status != descriptors.StatusDone {
			t.Fatalf("marker: completion %v", got.Status)
		}
	}
	if notify != nil {
		r, err := e.vb.RecvWait(ctx)
		mustf(t, err, "%v of %d bytes: notification", op, n)
		wantImm, wantLen := imm, n
		if op == opWrite {
			wantImm, wantLen = ^imm, 0
		}
		if r != notify || r.Status != descriptors.StatusDone|descriptors.StatusImmediate|descriptors.StatusRemoteWrite ||
			r.ImmData != wantImm || r.Length != wantLen {
			t.Fatalf("%v of %d bytes: notification %v imm %#x length %d", op, n, r.Status, r.ImmData, r.Length)
		}
	}
	// The last completion was taken under the providers' lock after the
	// bytes moved, so reading the buffers here is ordered after the copies.
	if op == opRead {
		copy(lorig[lo:lo+n], rorig[ro:ro+n])
		checkBytes(t, fmt.Sprintf("read of %d bytes: local buffer", n), lbuf, lorig, lo, n)
		checkBytes(t, fmt.Sprintf("read of %d bytes: target region", n), rbuf, rorig, ro, 0)
	} else {
		copy(rorig[ro:ro+n], lorig[lo:lo+n])
		checkBytes(t, fmt.Sprintf("%v of %d bytes: target region", op, n), rbuf, rorig, ro, n)
	}
	mustf(t, e.a.p.DeregisterMemory(lh), "deregister local after completion")
	mustf(t, e.b.p.DeregisterMemory(rh), "deregister target")
}

// checkBytes compares got with want and reports where they first differ,
// relative to the target range [off, off+n).
func checkBytes(t testing.TB, what string, got, want []byte, off, n int) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for got[i] == want[i] {
		i++
	}
	where := "inside"
	if i < off || i >= off+n {
		where = "OUTSIDE"
	}
	t.Fatalf("%s: byte %d (%s the target range [%d,%d)) is %#x, want %#x", what, i, where, off, off+n, got[i], want[i])
}

// rdmaSizes are the transfer sizes for a frame payload of p bytes, up to
// max bytes.
func rdmaSizes(p, max int) []int {
	var s []int
	for _, n := range []int{0, 1, p - 1, p, p + 1, 64<<10 + 3, 1 << 20, 16 << 20, 64 << 20} {
		if n <= max {
			s = append(s, n)
		}
	}
	return s
}

// placements are the (local, remote) offsets past the guards: aligned,
// and unaligned so that fragment boundaries fall mid-segment and
// mid-word on both sides.
var placements = [][2]int{{0, 0}, {5, 4093}}

// rdmaMatrix runs every operation at every size and placement on e.
func rdmaMatrix(t *testing.T, e *rdmaEnv, sizes []int) {
	ctx := ctxT(t, 10*time.Minute)
	seed := uint64(1)
	for _, n := range sizes {
		for _, pl := range placements {
			for _, op := range []rdmaOp{opWrite, opWriteImm, opRead} {
				if n >= 16<<20 && pl[0] == 0 {
					continue // the big ones once, unaligned: they are slow
				}
				seed++
				e.transfer(t, ctx, op, n, pl[0], pl[1], seed)
				if t.Failed() {
					return
				}
			}
		}
	}
	if s := e.b.p.Stats(); s.RDMARefused() != 0 {
		t.Fatalf("target refused %d accesses of a valid matrix", s.RDMARefused())
	}
	if st := e.va.State(); st != Connected {
		t.Fatalf("initiator %v after the matrix: %v", st, e.va.Err())
	}
}

// rdmaFaults are the seeded faults of the memnic matrix.
var rdmaFaults = []struct {
	name string
	f    memnic.Faults
}{
	{"clean", memnic.Faults{}},
	{"faulty", memnic.Faults{Loss: 0.01, Reorder: 0.02, Duplicate: 0.01, Corrupt: 0.005}},
}

// TestRDMAMatrix moves write, write with immediate data and read of sizes
// 0 to 64 MiB (16 MiB with -short) across fragment and segment boundaries
// at aligned and unaligned offsets, on memnic with and without seeded
// loss, reordering, duplication and corruption, at both reliable levels.
func TestRDMAMatrix(t *testing.T) {
	max := 64 << 20
	if testing.Short() {
		max = 16 << 20
	}
	for _, level := range []Level{ReliableDelivery, ReliableReception} {
		for i, fc := range rdmaFaults {
			t.Run(fmt.Sprintf("%v/%s", level, fc.name), func(t *testing.T) {
				e := newRDMAEnv(t, level, uint64(100+i), fc.f, rdmaOptions)
				rdmaMatrix(t, e, rdmaSizes(e.a.p.Attributes().MaxPayload, max))
				if fc.f.Loss > 0 {
					if s := e.va.Stats(); s.Retransmits == 0 {
						t.Errorf("faults injected but nothing retransmitted: %+v", s.Stats)
					}
				}
			})
		}
	}
}

// protCase is one protection violation: the target region it aims at (or
// none), the operation, its offset and length, and the counter it must
// raise.
type protCase struct {
	name   string
	op     rdmaOp
	access Access // the target region's rights
	other  bool   // register the region under another protection tag
	bogus  bool   // aim at a handle that names nothing
	// grantTo, if set, grants the (AccessGrantedWrite) region to a writer
	grantTo func(e *rdmaEnv) rdma.Grantee
	off     uint64
	n       int
	reason  func(rdma.Stats) uint64
}

var protCases = []protCase{
	{name: "wrong-handle-write", op: opWrite, access: AccessRDMAWrite | AccessRDMARead, bogus: true, n: 100,
		reason: func(s rdma.Stats) uint64 { return s.NoRegion }},
	{name: "wrong-handle-read", op: opRead, access: AccessRDMAWrite | AccessRDMARead, bogus: true, n: 100,
		reason: func(s rdma.Stats) uint64 { return s.NoRegion }},
	{name: "wrong-ptag-write", op: opWriteImm, access: AccessRDMAWrite | AccessRDMARead, other: true, n: 100,
		reason: func(s rdma.Stats) uint64 { return s.PTagMismatch }},
	{name: "wrong-ptag-read", op: opRead, access: AccessRDMAWrite | AccessRDMARead, other: true, n: 100,
		reason: func(s rdma.Stats) uint64 { return s.PTagMismatch }},
	{name: "no-write-right", op: opWrite, access: AccessRDMARead, n: 100,
		reason: func(s rdma.Stats) uint64 { return s.AccessDenied }},
	{name: "no-read-right", op: opRead, access: AccessRDMAWrite, n: 100,
		reason: func(s rdma.Stats) uint64 { return s.AccessDenied }},
	{name: "out-of-bounds-write", op: opWrite, access: AccessRDMAWrite, off: 1000 - 50, n: 100,
		reason: func(s rdma.Stats) uint64 { return s.OutOfBounds }},
	{name: "out-of-bounds-read", op: opRead, access: AccessRDMARead, off: 1000 - 50, n: 100,
		reason: func(s rdma.Stats) uint64 { return s.OutOfBounds }},
	{name: "offset-past-end", op: opWriteImm, access: AccessRDMAWrite, off: 1001, n: 0,
		reason: func(s rdma.Stats) uint64 { return s.OutOfBounds }},
	{name: "overflow-write", op: opWrite, access: AccessRDMAWrite, off: math.MaxUint64 - 10, n: 100,
		reason: func(s rdma.Stats) uint64 { return s.OutOfBounds }},
	{name: "overflow-read", op: opRead, access: AccessRDMARead, off: math.MaxUint64 - 10, n: 100,
		reason: func(s rdma.Stats) uint64 { return s.OutOfBounds }},
	{name: "write-not-granted", op: opWrite, access: AccessGrantedWrite, n: 100,
		reason: func(s rdma.Stats) uint64 { return s.AccessDenied }},
	{name: "write-granted-to-another-vi", op: opWriteImm, access: AccessGrantedWrite, n: 100,
		grantTo: func(e *rdmaEnv) rdma.Grantee { return e.vb.Grantee() + 1 },
		reason:  func(s rdma.Stats) uint64 { return s.AccessDenied }},
}

// TestRDMAProtection aims each kind of violation at a target: the
// initiator's descriptor completes with the RDMA protection error (at
// reliable delivery a refused write has already completed, so the next
// pending descriptor reports it), later descriptors are flushed, both VIs
// end in the Error state, the target counts the refusal by reason, and no
// byte of the target's memory changes.
func TestRDMAProtection(t *testing.T) {
	for _, level := range []Level{ReliableDelivery, ReliableReception} {
		for _, c := range protCases {
			t.Run(fmt.Sprintf("%v/%s", level, c.name), func(t *testing.T) {
				e := newRDMAEnv(t, level, 7, memnic.Faults{}, Options{})
				runProtCase(t, e, c)
			})
		}
	}
}

func runProtCase(t *testing.T, e *rdmaEnv, c protCase) {
	ctx := ctxT(t, 20*time.Second)
	tag := e.b.ptag
	if c.other {
		tag = e.b.p.NewPTag()
	}
	region := make([]byte, 1000)
	pattern(11, region)
	orig := append([]byte(nil), region...)
	rh, err := e.b.p.RegisterMemory(region, tag, c.access)
	mustf(t, err, "register target")
	if c.grantTo != nil {
		r, err := e.b.p.QueryMemory(rh)
		mustf(t, err, "query target")
		r.Grant(c.grantTo(e))
	}
	// A valid region the follow-up reads use: they must be flushed.
	good := make([]byte, 100)
	gh, err := e.b.p.RegisterMemory(good, e.b.ptag, AccessRDMARead)
	mustf(t, err, "register good region")
	target := rh
	if c.bogus {
		target = rh ^ 0x5a5a5a5a
		if _, err := e.b.p.QueryMemory(target); err == nil {
			target ^= 1
		}
	}
	lbuf := make([]byte, 2*100+c.n)
	pattern(12, lbuf)
	lh, err := e.a.p.RegisterMemory(lbuf, e.a.ptag, 0)
	mustf(t, err, "register local")
	if c.op == opWriteImm {
		mustf(t, e.vb.PostRecv(&descriptors.Descriptor{}), "post receive")
	}
	before := e.b.p.Stats()
	bad := &descriptors.Descriptor{Segments: split(lbuf[200:], lh), Address: descriptors.AddressSegment{Handle: target, Offset: c.off}}
	switch c.op {
	case opWrite:
		bad.Control.Op = descriptors.OpRDMAWrite
	case opWriteImm:
		bad.Control = descriptors.Control{Op: descriptors.OpRDMAWrite, Immediate: true, ImmData: 9}
	case opRead:
		bad.Control.Op = descriptors.OpRDMARead
	}
	follow := func(i int) *descriptors.Descriptor {
		return &descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMARead},
			Segments: []descriptors.Segment{{Buf: lbuf[i*100 : i*100+100], Handle: lh}}, Address: descriptors.AddressSegment{Handle: gh}}
	}
	f1, f2 := follow(0), follow(1)
	// The target takes no frame until all three are posted, so the
	// refusal cannot come back before the follow-ups are queued.
	e.b.p.mu.Lock()
	for _, d := range []*descriptors.Descriptor{bad, f1, f2} {
		if err := e.va.PostSend(d); err != nil {
			e.b.p.mu.Unlock()
			t.Fatalf("post: %v", err)
		}
	}
	e.b.p.mu.Unlock()
	var got []*descriptors.Descriptor
	for range 3 {
		d, err := e.va.SendWait(ctx)
		mustf(t, err, "send wait after %d completions", len(got))
		got = append(got, d)
	}
	if got[0] != bad || got[1] != f1 || got[2] != f2 {
		t.Fatal("completions out of order")
	}
	want := []descriptors.Status{descriptors.StatusRDMAProtection, descriptors.StatusFlushed, descriptors.StatusFlushed}
	if e.level == ReliableDelivery && c.op != opRead {
		// The write completed when its frames were handed over.
		want = []descriptors.Status{0, descriptors.StatusRDMAProtection, descriptors.StatusFlushed}
	}
	for i, d := range got {
		if d.Status != descriptors.StatusDone|want[i] {
			t.Errorf("descriptor %d: %v, want done|%v", i, d.Status, want[i])
		}
	}
	waitState(t, e.va, Error)
	waitState(t, e.vb, Error)
	if err := e.va.Err(); !errors.Is(err, descriptors.ErrRDMAProtection) {
		t.Errorf("initiator error %v does not match ErrRDMAProtection", err)
	}
	after := e.b.p.Stats()
	if d := c.reason(after.Memory) - c.reason(before.Memory); d != 1 {
		t.Errorf("reason counter rose by %d, want 1 (stats %+v)", d, after.Memory)
	}
	if d := after.RDMARefused() - before.RDMARefused(); d != 1 {
		t.Errorf("refusals rose by %d, want 1", d)
	}
	if n := e.vb.Stats().RDMARefused; n != 1 {
		t.Errorf("target VI counted %d refusals, want 1", n)
	}
	if !bytes.Equal(region, orig) {
		t.Error("a refused access changed the target region")
	}
	if !bytes.Equal(good, make([]byte, 100)) {
		t.Error("a refused access changed another region")
	}
	// Flushed reads wrote nothing locally either.
	lwant := make([]byte, len(lbuf))
	pattern(12, lwant)
	if !bytes.Equal(lbuf, lwant) {
		t.Error("a failed or flushed read wrote into local memory")
	}
	// Everything completed: every registration can go.
	mustf(t, e.a.p.DeregisterMemory(lh), "deregister local")
	mustf(t, e.b.p.DeregisterMemory(rh), "deregister target")
	mustf(t, e.b.p.DeregisterMemory(gh), "deregister good")
}

// TestRDMADeregisteredMidTransfer removes the target region while a large
// write to it is in flight: the fragments before the deregistration
// landed, those after are refused, the write fails with the protection
// error (the rest flushed) and no byte lands after the refusal.
func TestRDMADeregisteredMidTransfer(t *testing.T) {
	for _, level := range []Level{ReliableDelivery, ReliableReception} {
		t.Run(level.String(), func(t *testing.T) {
			// A small window and a slow wire stretch the write over a
			// second, so the deregistration falls in its middle.
			o := Options{Window: 8, MaxTransfer: 4 << 20}
			e := newRDMAEnv(t, level, 3, memnic.Faults{Delay: time.Millisecond}, o)
			const n = 4 << 20
			region := make([]byte, n+100)
			pattern(21, region)
			orig := append([]byte(nil), region...)
			rh, err := e.b.p.RegisterMemory(region, e.b.ptag, AccessRDMAWrite)
			mustf(t, err, "register target")
			src := make([]byte, n)
			pattern(22, src)
			sh, err := e.a.p.RegisterMemory(src, e.a.ptag, 0)
			mustf(t, err, "register source")
			w := &descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMAWrite},
				Segments: split(src, sh), Address: descriptors.AddressSegment{Handle: rh, Offset: 50}}
			f := &descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMAWrite},
				Segments: []descriptors.Segment{{Buf: src[:10], Handle: sh}}, Address: descriptors.AddressSegment{Handle: rh}}
			mustf(t, e.va.PostSend(w), "post write")
			mustf(t, e.va.PostSend(f), "post follow-up")
			before := e.b.p.Stats()
			deadline := time.Now().Add(10 * time.Second)
			for e.b.p.Stats().FramesIn < before.FramesIn+40 {
				if time.Now().After(deadline) {
					t.Fatal("the write does not arrive")
				}
				time.Sleep(100 * time.Microsecond)
			}
			mustf(t, e.b.p.DeregisterMemory(rh), "deregister mid-transfer")
			ctx := ctxT(t, 20*time.Second)
			d1, err := e.va.SendWait(ctx)
			mustf(t, err, "wait write")
			d2, err := e.va.SendWait(ctx)
			mustf(t, err, "wait follow-up")
			if d1 != w || d1.Status != descriptors.StatusDone|descriptors.StatusRDMAProtection {
				t.Errorf("write: %v, want the RDMA protection error", d1.Status)
			}
			if d2 != f || d2.Status != descriptors.StatusDone|descriptors.StatusFlushed {
				t.Errorf("follow-up: %v, want flushed", d2.Status)
			}
			waitState(t, e.vb, Error)
			after := e.b.p.Stats()
			if d := after.Memory.NoRegion - before.Memory.NoRegion; d != 1 {
				t.Errorf("no-region refusals rose by %d, want 1", d)
			}
			// memnic with a fixed delay keeps order: the region holds a
			// prefix of the write and its old bytes after that.
			k := 0
			for k < n && region[50+k] == src[k] {
				k++
			}
			if k == n {
				t.Fatal("the whole write landed: the deregistration was not mid-transfer")
			}
			if k == 0 {
				t.Log("no fragment landed before the deregistration")
			}
			want := append([]byte(nil), orig...)
			copy(want[50:50+k], src[:k])
			checkBytes(t, "region after the refused write", region, want, 50, k)
			t.Logf("%d of %d bytes landed before the deregistration", k, n)
		})
	}
}

// TestRDMADeregisterInUse: a region that a posted descriptor holds cannot
// be deregistered (rdma.ErrInUse); once the descriptor completes it can.
func TestRDMADeregisterInUse(t *testing.T) {
	for _, level := range allLevels {
		t.Run(level.String(), func(t *testing.T) {
			e := newRDMAEnv(t, level, 5, memnic.Faults{}, Options{})
			buf := make([]byte, 64)
			h, err := e.b.p.RegisterMemory(buf, e.b.ptag, 0)
			mustf(t, err, "register")
			r := &descriptors.Descriptor{Segments: split(buf, h)}
			mustf(t, e.vb.PostRecv(r), "post receive")
			if err := e.b.p.DeregisterMemory(h); !errors.Is(err, rdma.ErrInUse) {
				t.Fatalf("deregister while posted: %v, want ErrInUse", err)
			}
			if q, err := e.b.p.QueryMemory(h); err != nil || q.InUse() != int64(len(r.Segments)) {
				t.Fatalf("query while posted: %v, in use %d", err, q.InUse())
			}
			src := make([]byte, 64)
			pattern(31, src)
			sh, err := e.a.p.RegisterMemory(src, e.a.ptag, 0)
			mustf(t, err, "register source")
			mustf(t, e.va.PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{{Buf: src, Handle: sh}}}), "send")
			ctx := ctxT(t, 10*time.Second)
			d, err := e.vb.RecvWait(ctx)
			mustf(t, err, "receive")
			if d != r || d.Status != descriptors.StatusDone || !bytes.Equal(buf, src) {
				t.Fatalf("receive %v, data equal %v", d.Status, bytes.Equal(buf, src))
			}
			_, err = e.va.SendWait(ctx)
			mustf(t, err, "send wait")
			mustf(t, e.b.p.DeregisterMemory(h), "deregister after completion")
			mustf(t, e.a.p.DeregisterMemory(sh), "deregister source after completion")
			if _, err := e.b.p.QueryMemory(h); !errors.Is(err, ErrMemory) {
				t.Fatalf("query after deregistration: %v", err)
			}
		})
	}
}

// TestRDMAUnreliableRefusedWrite: at the unreliable level a refused write
// with immediate data completes the receive it would have consumed with
// the protection error, writes nothing, is counted, and the connection
// stays up for the next (valid) write.
func TestRDMAUnreliableRefusedWrite(t *testing.T) {
	e := newRDMAEnv(t, Unreliable, 9, memnic.Faults{}, Options{})
	region := make([]byte, 100)
	pattern(41, region)
	orig := append([]byte(nil), region...)
	rh, err := e.b.p.RegisterMemory(region, e.b.ptag, AccessRDMAWrite)
	mustf(t, err, "register target")
	src := make([]byte, 50)
	pattern(42, src)
	sh, err := e.a.p.RegisterMemory(src, e.a.ptag, 0)
	mustf(t, err, "register source")
	r1, r2 := &descriptors.Descriptor{}, &descriptors.Descriptor{}
	mustf(t, e.vb.PostRecv(r1), "post")
	mustf(t, e.vb.PostRecv(r2), "post")
	ctx := ctxT(t, 10*time.Second)
	write := func(off uint64, imm uint32) {
		mustf(t, e.va.PostSend(&descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMAWrite, Immediate: true, ImmData: imm},
			Segments: []descriptors.Segment{{Buf: src, Handle: sh}}, Address: descriptors.AddressSegment{Handle: rh, Offset: off}}), "write")
		_, err := e.va.SendWait(ctx)
		mustf(t, err, "send wait")
	}
	write(80, 1) // 80+50 > 100
	d, err := e.vb.RecvWait(ctx)
	mustf(t, err, "receive of the refused write")
	if d != r1 || d.Status != descriptors.StatusDone|descriptors.StatusRDMAProtection {
		t.Fatalf("refused write's receive: %v", d.Status)
	}
	if !bytes.Equal(region, orig) {
		t.Fatal("a refused write landed")
	}
	if s := e.b.p.Stats(); s.Memory.OutOfBounds != 1 {
		t.Fatalf("out-of-bounds refusals %d, want 1", s.Memory.OutOfBounds)
	}
	write(10, 2)
	d, err = e.vb.RecvWait(ctx)
	mustf(t, err, "receive of the valid write")
	if d != r2 || d.Status != descriptors.StatusDone|descriptors.StatusImmediate|descriptors.StatusRemoteWrite || d.ImmData != 2 {
		t.Fatalf("valid write's receive: %v imm %d", d.Status, d.ImmData)
	}
	copy(orig[10:], src)
	checkBytes(t, "region", region, orig, 10, len(src))
	if st := e.va.State(); st != Connected {
		t.Fatalf("unreliable initiator %v after a refusal", st)
	}
}

// TestRDMAGrantedWrite: a write into a region open only to granted writers
// lands when the region is granted to the VI the write arrives on.
func TestRDMAGrantedWrite(t *testing.T) {
	e := newRDMAEnv(t, ReliableReception, 7, memnic.Faults{}, Options{})
	ctx := ctxT(t, 20*time.Second)
	region := make([]byte, 5000)
	rh, err := e.b.p.RegisterMemory(region, e.b.ptag, AccessGrantedWrite)
	mustf(t, err, "register target")
	r, err := e.b.p.QueryMemory(rh)
	mustf(t, err, "query target")
	r.Grant(e.vb.Grantee())
	data := make([]byte, 4000)
	pattern(5, data)
	lh, err := e.a.p.RegisterMemory(data, e.a.ptag, 0)
	mustf(t, err, "register local")
	d := &descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMAWrite}, Segments: split(data, lh),
		Address: descriptors.AddressSegment{Handle: rh, Offset: 500}}
	mustf(t, e.va.PostSend(d), "post")
	got, err := e.va.SendWait(ctx)
	mustf(t, err, "send wait")
	if got.Status != descriptors.StatusDone {
		t.Fatalf("status %v", got.Status)
	}
	if !bytes.Equal(region[500:4500], data) {
		t.Fatal("the granted write did not land")
	}
}
