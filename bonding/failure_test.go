package bonding

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic/memnic"
)

// streamSizes cycle through the messages of a stream: one below the stripe
// threshold, striped eager sends, and (every fourth) RDMA writes with
// immediate data.
var streamSizes = []int{1000, 100_000, 1 << 20, 300_000, 64 << 10, 700_000, 2048, 1 << 20}

const streamWindow = 16
const streamSlot = 1 << 20

// stream sends messages from va to vb until total bytes went, with
// streamWindow in flight, and checks that each arrives exactly once, in
// order and intact. Message i carries immediate data i. Every fourth
// message is an RDMA write with immediate data into the receiver's slot.
// progress, if set, is called after each received message with the bytes
// received so far. It returns the number of messages.
func stream(t *testing.T, a, b *end, va, vb *VI, total int, progress func(int)) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src := a.buf(t, streamWindow*streamSlot)
	dstOff := uint64(b.used)
	dst := b.buf(t, streamWindow*streamSlot)
	var sizes []int
	for sum, i := 0, 0; sum < total; i++ {
		n := streamSizes[i%len(streamSizes)]
		sizes = append(sizes, n)
		sum += n
	}
	isWrite := func(i int) bool { return i%4 == 3 }
	slot := func(s descriptors.Segment, i, n int) descriptors.Segment {
		o := (i % streamWindow) * streamSlot
		return descriptors.Segment{Buf: s.Buf[o : o+n], Handle: s.Handle}
	}
	recvErr := make(chan error, 1)
	go func() {
		recvErr <- func() error {
			rds := make([]descriptors.Descriptor, streamWindow)
			post := func(i int) error {
				d := &rds[i%streamWindow]
				*d = descriptors.Descriptor{Segments: []descriptors.Segment{slot(dst, i, streamSlot)}}
				return vb.PostRecv(d)
			}
			for i := range min(streamWindow, len(sizes)) {
				if err := post(i); err != nil {
					return err
				}
			}
			got := 0
			want := make([]byte, streamSlot)
			for i, n := range sizes {
				d, err := vb.RecvWait(ctx)
				if err != nil {
					return fmt.Errorf("message %d: %w", i, err)
				}
				st := descriptors.StatusDone | descriptors.StatusImmediate
				if isWrite(i) {
					st |= descriptors.StatusRemoteWrite
				}
				if d != &rds[i%streamWindow] || d.Status != st || d.Length != n || d.ImmData != uint32(i) {
					return fmt.Errorf("message %d: status %v length %d imm %d, want %v %d %d", i, d.Status, d.Length, d.ImmData, st, n, i)
				}
				pattern(uint64(i), want[:n])
				if k := firstDiff(slot(dst, i, n).Buf, want[:n]); k >= 0 {
					return fmt.Errorf("message %d (%d bytes): first wrong byte at %d", i, n, k)
				}
				got += n
				if progress != nil {
					progress(got)
				}
				if i+streamWindow < len(sizes) {
					if err := post(i + streamWindow); err != nil {
						return err
					}
				}
			}
			return nil
		}()
	}()
	sds := make([]descriptors.Descriptor, streamWindow)
	out := 0
	for i, n := range sizes {
		if out == streamWindow {
			d, err := va.SendWait(ctx)
			mustf(t, err, "send wait")
			if d.Status != descriptors.StatusDone {
				t.Fatalf("send: status %v (%v)", d.Status, va.Err())
			}
			out--
		}
		s := slot(src, i, n)
		pattern(uint64(i), s.Buf)
		d := &sds[i%streamWindow]
		*d = descriptors.Descriptor{Control: descriptors.Control{Immediate: true, ImmData: uint32(i)},
			Segments: []descriptors.Segment{s}}
		if isWrite(i) {
			d.Control.Op = descriptors.OpRDMAWrite
			d.Address = descriptors.AddressSegment{Handle: b.h, Offset: dstOff + uint64((i%streamWindow)*streamSlot)}
		}
		mustf(t, va.PostSend(d), "post send %d", i)
		out++
	}
	for ; out > 0; out-- {
		d, err := va.SendWait(ctx)
		mustf(t, err, "send wait")
		if d.Status != descriptors.StatusDone {
			t.Fatalf("send: status %v (%v)", d.Status, va.Err())
		}
	}
	if err := <-recvErr; err != nil {
		dump(t, "va", va)
		dump(t, "vb", vb)
		t.Fatal(err)
	}
	// Give the arenas back for the next stream.
	a.used -= len(src.Buf)
	b.used -= len(dst.Buf)
	return len(sizes)
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func failureOptions() Options {
	o := testOptions()
	o.MaxTransfer = streamSlot
	// A dead rail is found within a second. Not much less: a healthy rail
	// of a loaded machine (or under -race) must not time out, since a
	// stalled frame is repaired only by retransmissions with backoff.
	o.PeerTimeout = time.Second
	if raceEnabled {
		o.PeerTimeout = 3 * time.Second
	}
	return o
}

// TestRailDownMemnic takes one rail's port down in the middle of a 64 MiB
// stream of messages: every message must still arrive exactly once and
// intact, and once the port is up again the rail must carry traffic again.
func TestRailDownMemnic(t *testing.T) {
	for _, k := range []int{2, 3} {
		t.Run(fmt.Sprintf("rails=%d", k), func(t *testing.T) {
			const down = 1
			a, b := memPair(t, k, 9000, memnic.Faults{Loss: 0.001}, failureOptions(), 2*streamWindow*streamSlot)
			va := a.newVI(t, Attributes{})
			vb := b.newVI(t, Attributes{EnableRDMAWrite: true})
			connect(t, a, b, va, vb, 11)
			var tookDown atomic.Bool
			n := stream(t, a, b, va, vb, 64<<20, func(got int) {
				if got >= 16<<20 && !tookDown.Load() {
					tookDown.Store(true)
					b.ports[down].SetUp(false)
				}
			})
			if !tookDown.Load() {
				t.Fatal("the stream ended before the rail went down")
			}
			sa, sb := va.Stats(), vb.Stats()
			t.Logf("%d messages; sender %+v", n, sa)
			if sa.Rails[down].Failures == 0 {
				t.Fatalf("the sender never saw rail %d fail", down)
			}
			if sb.MessagesReceived != uint64(n) || sa.MessagesSent != uint64(n) {
				t.Fatalf("%d sent, %d received, want %d", sa.MessagesSent, sb.MessagesReceived, n)
			}
			// Bring the rail back: it reconnects and carries traffic again.
			b.ports[down].SetUp(true)
			waitFor(t, 20*time.Second, "the rail to reconnect", func() bool {
				return va.Stats().Rails[down].Reconnects > 0 && va.Stats().Rails[down].Live && vb.Stats().Rails[down].Live
			})
			before := va.Stats().Rails[down].SentBytes
			m := stream(t, a, b, va, vb, 16<<20, nil)
			after := va.Stats().Rails[down]
			t.Logf("after the rail came back: %d messages, rail %d %+v", m, down, after)
			if after.SentBytes == before {
				t.Fatalf("rail %d carried nothing after it came back", down)
			}
			if vb.Stats().MessagesReceived != uint64(n+m) {
				t.Fatalf("%d received, want %d", vb.Stats().MessagesReceived, n+m)
			}
		})
	}
}

// TestAllRailsDown: only when every rail is dead does a descriptor fail.
func TestAllRailsDown(t *testing.T) {
	a, b := memPair(t, 2, 1500, memnic.Faults{}, failureOptions(), 1<<20)
	va := a.newVI(t, Attributes{})
	vb := b.newVI(t, Attributes{})
	connect(t, a, b, va, vb, 12)
	b.ports[0].SetUp(false)
	// One rail left: a message still goes through.
	src, dst := a.buf(t, 100_000), b.buf(t, 100_000)
	pattern(5, src.Buf)
	rd := &descriptors.Descriptor{Segments: []descriptors.Segment{dst}}
	mustf(t, vb.PostRecv(rd), "post recv")
	sd := &descriptors.Descriptor{Segments: []descriptors.Segment{src}}
	mustf(t, va.PostSend(sd), "post send")
	ctx := ctxT(t, 20*time.Second)
	d, err := va.SendWait(ctx)
	if err != nil {
		dump(t, "va", va)
		dump(t, "vb", vb)
		t.Fatal(err)
	}
	if d.Status != descriptors.StatusDone {
		t.Fatalf("with one rail left: status %v", d.Status)
	}
	r, err := vb.RecvWait(ctx)
	mustf(t, err, "recv wait")
	if r.Status != descriptors.StatusDone || firstDiff(dst.Buf, src.Buf) >= 0 {
		t.Fatalf("with one rail left: receive status %v or wrong data", r.Status)
	}
	waitFor(t, 10*time.Second, "rail 0 to fail", func() bool { return va.Stats().Rails[0].Failures > 0 })
	// The last rail dies: the pending send fails.
	b.ports[1].SetUp(false)
	sd2 := &descriptors.Descriptor{Segments: []descriptors.Segment{src}}
	mustf(t, va.PostSend(sd2), "post send")
	d, err = va.SendWait(ctx)
	mustf(t, err, "send wait")
	if d != sd2 || !d.Status.Failed() {
		t.Fatalf("with every rail dead: status %v, want a failure", d.Status)
	}
	if va.State() != Error {
		t.Fatalf("state %v, want error", va.State())
	}
	if err := va.Err(); err == nil || !errorsIs(err, ErrAllRails) {
		t.Fatalf("error %v, want ErrAllRails", err)
	}
}
