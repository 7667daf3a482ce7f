package test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/afpacket"
	"github.com/ethervia/ethervia/reliability"
	"github.com/ethervia/ethervia/testbed"
	"github.com/ethervia/ethervia/vi"
)

// The hosts of the rogue testbed.
const (
	target = 0 // runs the job's receiving end and exports memory
	peer   = 1 // the job's legitimate sender
	rogue  = 2 // the attacker on the same bridge
)

const (
	legitDisc = 1 // the job's connection
	rogueDisc = 2 // the connection the target grants the rogue (another protection tag)
)

// rogueBed is three hosts on one bridge: the target and its peer run a job,
// the rogue sends whatever it likes from its own namespace.
type rogueBed struct {
	tb     *testbed.Testbed
	job    uint32
	devs   [3]nic.Device
	provs  [3]*vi.Provider // target, peer and the rogue's own
	rawDev nic.Device      // the rogue's raw socket
	macs   [3][6]byte
}

func newRogueBed(t *testing.T) *rogueBed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb, err := testbed.NewContext(ctx, testbed.Config{Hosts: 3, Rails: 1, Topology: testbed.Switch, MTU: 1500, Name: "rogue"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	b := &rogueBed{tb: tb}
	var key [4]byte
	rand.Read(key[:])
	b.job = binary.BigEndian.Uint32(key[:]) | 1
	cfg := nic.Config{JobKey: b.job}
	t.Cleanup(func() {
		for _, p := range b.provs {
			if p != nil {
				p.Close()
			}
		}
		for _, d := range append(b.devs[:], b.rawDev) {
			if d != nil {
				d.Close()
			}
		}
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
	})
	for i := range b.devs {
		h := tb.Host(i)
		b.macs[i], _ = nic.MAC(h.MACs[0])
		err := h.Do(func() (err error) {
			b.devs[i], err = afpacket.Open(afpacket.Config{Config: cfg, Iface: h.Ifaces[0]})
			if err == nil && i == rogue {
				b.rawDev, err = afpacket.Open(afpacket.Config{Config: cfg, Iface: h.Ifaces[0]})
			}
			return err
		})
		if err != nil {
			t.Fatalf("host %d: open afpacket: %v", i, err)
		}
	}
	for i := range b.provs {
		if b.provs[i], err = vi.Open(b.devs[i], vi.Options{Config: cfg, PeerTimeout: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// counted is everything the target counts as refused or dropped.
type counted struct {
	nic nic.Stats
	vi  vi.Stats
	rel reliability.Stats
}

func (b *rogueBed) counters(v *vi.VI) counted {
	return counted{nic: b.devs[target].Stats(), vi: b.provs[target].Stats(), rel: v.Stats().Stats}
}

// legitStream is the job's own traffic: the peer sends n messages of
// known content to the target over a reliable-reception VI, and the target
// checks every byte and the order.
type legitStream struct {
	tv, pv *vi.VI
	n      int
	done   chan error
}

func startLegit(t *testing.T, b *rogueBed, n int) *legitStream {
	t.Helper()
	tp, pp := b.provs[target], b.provs[peer]
	ls := &legitStream{n: n, done: make(chan error, 2)}
	var err error
	if ls.tv, err = tp.NewVI(vi.Attributes{Reliability: vi.ReliableReception, PTag: tp.NewPTag()}); err != nil {
		t.Fatal(err)
	}
	if ls.pv, err = pp.NewVI(vi.Attributes{Reliability: vi.ReliableReception, PTag: pp.NewPTag()}); err != nil {
		t.Fatal(err)
	}
	const depth, size = 32, 3000
	rbuf := make([]byte, depth*size)
	rh, err := tp.RegisterMemory(rbuf, ls.tv.Attributes().PTag, 0)
	if err != nil {
		t.Fatal(err)
	}
	rds := make([]descriptors.Descriptor, depth)
	for i := range rds {
		rds[i].Segments = []descriptors.Segment{{Buf: rbuf[i*size : (i+1)*size], Handle: rh}}
		if err := ls.tv.PostRecv(&rds[i]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	accepted := make(chan error, 1)
	go func() {
		req, err := tp.ConnectWait(ctx, legitDisc)
		if err == nil {
			err = req.Accept(ls.tv)
		}
		accepted <- err
	}()
	if err := ls.pv.ConnectRequest(ctx, vi.Address{MAC: b.tb.Host(target).MACs[0], Discriminator: legitDisc}); err != nil {
		t.Fatalf("legit connect: %v", err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("legit accept: %v", err)
	}
	// Receiver: every message is message i, in order, intact.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		want := make([]byte, size)
		for i := 0; i < n; i++ {
			d, err := ls.tv.RecvWait(ctx)
			if err != nil {
				ls.done <- fmt.Errorf("target: message %d: %w", i, err)
				return
			}
			if d.Status.Failed() {
				ls.done <- fmt.Errorf("target: message %d: %v", i, d.Status.Err())
				return
			}
			fillMsg(want[:msgLen(i)], i)
			if d.Length != msgLen(i) || !bytes.Equal(d.Segments[0].Buf[:d.Length], want[:msgLen(i)]) {
				ls.done <- fmt.Errorf("target: message %d: %d bytes, wrong or corrupt (want %d)", i, d.Length, msgLen(i))
				return
			}
			d.Reset()
			if err := ls.tv.PostRecv(d); err != nil {
				ls.done <- fmt.Errorf("target: repost: %w", err)
				return
			}
		}
		ls.done <- nil
	}()
	// Sender: paced a little, so the stream overlaps every attack.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sbuf := make([]byte, depth*size)
		sh, err := pp.RegisterMemory(sbuf, ls.pv.Attributes().PTag, 0)
		if err != nil {
			ls.done <- err
			return
		}
		sds := make([]descriptors.Descriptor, depth)
		inFlight := 0
		for i := 0; i < n; i++ {
			if inFlight == depth {
				d, err := ls.pv.SendWait(ctx)
				if err == nil && d.Status.Failed() {
					err = d.Status.Err()
				}
				if err != nil {
					ls.done <- fmt.Errorf("peer: send: %w", err)
					return
				}
				inFlight--
			}
			s := i % depth
			buf := sbuf[s*size : s*size+msgLen(i)]
			fillMsg(buf, i)
			sds[s] = descriptors.Descriptor{Segments: []descriptors.Segment{{Buf: buf, Handle: sh}}}
			if err := ls.pv.PostSend(&sds[s]); err != nil {
				ls.done <- fmt.Errorf("peer: post: %w", err)
				return
			}
			inFlight++
			if i%64 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		for ; inFlight > 0; inFlight-- {
			d, err := ls.pv.SendWait(ctx)
			if err == nil && d.Status.Failed() {
				err = d.Status.Err()
			}
			if err != nil {
				ls.done <- fmt.Errorf("peer: send: %w", err)
				return
			}
		}
		ls.done <- nil
	}()
	return ls
}

func (ls *legitStream) wait(t *testing.T) {
	t.Helper()
	for range 2 {
		select {
		case err := <-ls.done:
			if err != nil {
				t.Errorf("the job's own traffic: %v", err)
			}
		case <-time.After(3 * time.Minute):
			t.Fatal("the job's own traffic did not finish")
		}
	}
}

func msgLen(i int) int { return 1 + (i*977)%2999 }

func fillMsg(b []byte, i int) {
	for k := range b {
		b[k] = byte(i*31 + k*7)
	}
}

// forge builds a sealed frame from the rogue with the given header fields.
func forge(b *rogueBed, h reliability.Header, payload int, rng *mrand.Rand) []byte {
	f := make([]byte, reliability.HeaderLen+payload)
	for i := reliability.HeaderLen; i < len(f); i++ {
		f[i] = byte(rng.Uint32())
	}
	h.Dst = b.macs[target]
	if h.Src == ([6]byte{}) {
		h.Src = b.macs[rogue]
	}
	h.EtherType = nic.DefaultEtherType
	if h.JobKey == 0 {
		h.JobKey = b.job
	}
	h.Length = payload
	reliability.Put(f, &h)
	return f
}

// send pushes frames out of the rogue's raw socket.
func (b *rogueBed) send(t *testing.T, frames [][]byte) {
	t.Helper()
	for len(frames) > 0 {
		n, err := b.rawDev.Send(frames)
		if err != nil && !errors.Is(err, nic.ErrFrameSize) {
			t.Fatalf("rogue: send: %v", err)
		}
		if n == 0 && err != nil {
			n = 1 // skip the frame the device refused
		}
		frames = frames[n:]
	}
}

// settle waits until the target has taken what the wire holds.
func settle() { time.Sleep(300 * time.Millisecond) }

// TestRogueHost: an attacker on the job's bridge sends frames of another
// job, frames with the peer's source MAC, frames with bad CRCs, truncated
// frames, frames whose length lies, random bytes, replays of the job's own
// frames and a flood, while the job streams messages. No forged frame
// completes a descriptor or disturbs the job, every one is counted, and
// memory stays bounded.
func TestRogueHost(t *testing.T) {
	needRoot(t)
	b := newRogueBed(t)
	rng := mrand.New(mrand.NewPCG(1, 2))

	// Capture the frames the target receives, for replays later.
	var capMu sync.Mutex
	var captured [][]byte
	capDev, err := func() (d nic.Device, err error) {
		h := b.tb.Host(target)
		err = h.Do(func() error {
			d, err = afpacket.Open(afpacket.Config{Config: nic.Config{JobKey: b.job}, Iface: h.Ifaces[0]})
			return err
		})
		return d, err
	}()
	if err != nil {
		t.Fatal(err)
	}
	capStop := make(chan struct{})
	capDone := make(chan struct{})
	go func() {
		defer close(capDone)
		bufs := make([][]byte, 32)
		lens := make([]int, 32)
		for i := range bufs {
			bufs[i] = make([]byte, 2048)
		}
		for {
			select {
			case <-capStop:
				return
			default:
			}
			n, _ := capDev.Recv(bufs, lens)
			capMu.Lock()
			for i := 0; i < n && len(captured) < 4000; i++ {
				captured = append(captured, append([]byte(nil), bufs[i][:lens[i]]...))
			}
			capMu.Unlock()
			if n == 0 {
				capDev.Wait(time.Now().Add(5 * time.Millisecond))
			}
		}
	}()

	ls := startLegit(t, b, 20000)
	time.Sleep(200 * time.Millisecond) // let the capture see the stream start
	close(capStop)
	<-capDone
	capDev.Close()

	type phase struct {
		name   string
		frames func() [][]byte
		// refused returns how many of the phase's frames the target's
		// counters account for.
		refused func(before, after counted) uint64
	}
	badFrames := func(x, y counted) uint64 { return y.vi.BadFrames - x.vi.BadFrames }
	strays := func(x, y counted) uint64 { return y.vi.Strays - x.vi.Strays }
	phases := []phase{
		{"other job key", func() [][]byte {
			var fs [][]byte
			for range 5000 {
				fs = append(fs, forge(b, reliability.Header{Kind: reliability.KindData, JobKey: b.job ^ 0x5a5a0000, DstVI: 1, Seq: 1}, 100, rng))
			}
			return fs
		}, func(x, y counted) uint64 { return y.nic.RxForeign - x.nic.RxForeign }},
		{"spoofed source MAC", func() [][]byte {
			var fs [][]byte
			for range 5000 {
				h := reliability.Header{Kind: reliability.KindData, Src: b.macs[peer], DstVI: uint16(rng.IntN(4)),
					SrcVI: uint16(rng.IntN(4)), ConnID: rng.Uint32(), Seq: reliability.Seq(rng.Uint32()), Flags: reliability.FlagFirst | reliability.FlagLast}
				fs = append(fs, forge(b, h, 200, rng))
			}
			return fs
		}, strays},
		{"bad CRC", func() [][]byte {
			var fs [][]byte
			for range 5000 {
				f := forge(b, reliability.Header{Kind: reliability.KindData, Src: b.macs[peer], DstVI: 1}, 300, rng)
				f[reliability.HeaderLen+rng.IntN(300)] ^= 0x40
				fs = append(fs, f)
			}
			return fs
		}, badFrames},
		{"truncated", func() [][]byte {
			var fs [][]byte
			for range 5000 {
				f := forge(b, reliability.Header{Kind: reliability.KindData, DstVI: 1}, 0, rng)
				fs = append(fs, f[:nic.PrefixLen+rng.IntN(reliability.HeaderLen-nic.PrefixLen)])
			}
			return fs
		}, badFrames},
		{"length lies", func() [][]byte {
			var fs [][]byte
			for range 5000 {
				f := forge(b, reliability.Header{Kind: reliability.KindData, DstVI: 1}, 100, rng)
				binary.BigEndian.PutUint16(f[reliability.OffLength:], uint16(101+rng.IntN(2000)))
				fs = append(fs, f)
			}
			return fs
		}, badFrames},
		{"random bytes", func() [][]byte {
			var fs [][]byte
			for range 5000 {
				f := forge(b, reliability.Header{}, 0, rng)[:nic.PrefixLen]
				junk := make([]byte, 1+rng.IntN(1400))
				for i := range junk {
					junk[i] = byte(rng.Uint32())
				}
				fs = append(fs, append(f, junk...))
			}
			return fs
		}, badFrames},
		{"replays", func() [][]byte {
			capMu.Lock()
			defer capMu.Unlock()
			kinds := map[uint8]int{}
			for _, f := range captured {
				kinds[f[15]]++
			}
			t.Logf("replaying %d captured frames, by kind: %v", len(captured), kinds)
			return captured
		}, func(x, y counted) uint64 {
			return y.rel.Duplicates - x.rel.Duplicates + y.rel.StaleAcks - x.rel.StaleAcks + y.rel.Idle - x.rel.Idle +
				y.vi.Strays - x.vi.Strays + y.vi.BadFrames - x.vi.BadFrames + y.vi.RepeatedRequests - x.vi.RepeatedRequests
		}},
	}
	for _, ph := range phases {
		frames := ph.frames()
		if len(frames) == 0 {
			t.Errorf("%s: no frames to send", ph.name)
			continue
		}
		before := b.counters(ls.tv)
		b.send(t, frames)
		settle()
		after := b.counters(ls.tv)
		got := ph.refused(before, after)
		lost := after.nic.RxDropped - before.nic.RxDropped
		t.Logf("%s: sent %d, counted %d, kernel drops %d", ph.name, len(frames), got, lost)
		if got+lost < uint64(len(frames)) {
			t.Errorf("%s: sent %d frames, the target counted %d and dropped %d in the kernel: some were neither", ph.name, len(frames), got, lost)
		}
	}

	// A flood at line rate while the job keeps going: memory stays bounded.
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapAlloc
	junk := make([][]byte, 64)
	for i := range junk {
		junk[i] = forge(b, reliability.Header{Kind: reliability.KindData, Src: b.macs[peer], DstVI: 1, ConnID: rng.Uint32()}, 1400, rng)
	}
	floodEnd := time.Now().Add(2 * time.Second)
	sent := 0
	for time.Now().Before(floodEnd) {
		b.send(t, junk)
		sent += len(junk)
	}
	runtime.ReadMemStats(&ms)
	t.Logf("flood: %d frames in 2s; heap %d -> %d bytes", sent, heapBefore, ms.HeapAlloc)
	if ms.HeapAlloc > heapBefore+64<<20 {
		t.Errorf("heap grew from %d to %d bytes during the flood", heapBefore, ms.HeapAlloc)
	}

	ls.wait(t)
	if st := ls.tv.State(); st != vi.Connected {
		t.Errorf("the job's connection is %v after the attacks, want connected", st)
	}
}

// TestRogueRDMA: a host the target accepts a connection from (under
// another protection tag) forges a million RDMA writes with guessed handles
// (some the real one) and offsets, and RDMA reads that break its own
// connection each time. The target's region, which sits between guard
// bytes, never changes; every attempt is refused and counted; the job's own
// traffic keeps going.
func TestRogueRDMA(t *testing.T) {
	needRoot(t)
	b := newRogueBed(t)
	tp, rp := b.provs[target], b.provs[rogue]
	ls := startLegit(t, b, 5000)
	ptag := ls.tv.Attributes().PTag

	const guard, size = 64 << 10, 64 << 10
	mem := make([]byte, 2*guard+size)
	for i := range mem {
		mem[i] = byte(i * 13)
	}
	orig := append([]byte(nil), mem...)
	region := mem[guard : guard+size]
	realH, err := tp.RegisterMemory(region, ptag, vi.AccessRDMAWrite|vi.AccessRDMARead)
	if err != nil {
		t.Fatal(err)
	}

	// The target accepts whatever asks on rogueDisc, under its own tag.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rogueTag := tp.NewPTag()
	go func() {
		for {
			req, err := tp.ConnectWait(ctx, rogueDisc)
			if err != nil {
				return
			}
			v, err := tp.NewVI(vi.Attributes{Reliability: req.RemoteAttributes().Reliability, PTag: rogueTag,
				EnableRDMAWrite: true, EnableRDMARead: true})
			if err != nil {
				req.Reject()
				continue
			}
			req.Accept(v)
		}
	}()
	connect := func(level vi.Level) *vi.VI {
		t.Helper()
		v, err := rp.NewVI(vi.Attributes{Reliability: level, PTag: rp.NewPTag()})
		if err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		defer ccancel()
		if err := v.ConnectRequest(cctx, vi.Address{MAC: b.tb.Host(target).MACs[0], Discriminator: rogueDisc}); err != nil {
			t.Fatalf("rogue connect: %v", err)
		}
		return v
	}

	rng := mrand.New(mrand.NewPCG(3, 4))
	guess := func() descriptors.AddressSegment {
		h := descriptors.MemHandle(rng.Uint32())
		if rng.IntN(10) == 0 {
			h = realH
		}
		return descriptors.AddressSegment{Handle: h, Offset: uint64(rng.IntN(2 * size))}
	}

	// A million forged writes over an unreliable VI, which survives each
	// refusal.
	attempts := 1_000_000
	if testing.Short() {
		attempts = 100_000
	}
	w := connect(vi.Unreliable)
	src := make([]byte, 4096)
	for i := range src {
		src[i] = 0xEE
	}
	sh, err := rp.RegisterMemory(src, w.Attributes().PTag, 0)
	if err != nil {
		t.Fatal(err)
	}
	before, nicBefore := tp.Stats(), b.devs[target].Stats()
	depth := rp.Attributes().QueueDepth
	ds := make([]descriptors.Descriptor, depth)
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer wcancel()
	posted, inFlight := 0, 0
	for posted < attempts || inFlight > 0 {
		for posted < attempts && inFlight < depth {
			d := &ds[posted%depth]
			n := 1 + rng.IntN(64)
			*d = descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMAWrite},
				Segments: []descriptors.Segment{{Buf: src[:n], Handle: sh}}, Address: guess()}
			if err := w.PostSend(d); err != nil {
				t.Fatalf("rogue write %d: %v", posted, err)
			}
			posted++
			inFlight++
		}
		if _, err := w.SendWait(wctx); err != nil {
			t.Fatalf("rogue write completion: %v", err)
		}
		inFlight--
	}
	settle()
	after, nicAfter := tp.Stats(), b.devs[target].Stats()
	refused := after.RDMARefused() - before.RDMARefused()
	dropped := nicAfter.RxDropped - nicBefore.RxDropped
	t.Logf("forged writes: %d sent, %d refused (%+v), %d dropped in the kernel", attempts, refused, after.Memory, dropped)
	if refused+dropped < uint64(attempts) {
		t.Errorf("%d forged writes, %d refused and %d dropped in the kernel: some were neither", attempts, refused, dropped)
	}
	if refused > uint64(attempts) {
		t.Errorf("%d refusals for %d forged writes", refused, attempts)
	}
	if after.Memory.PTagMismatch == before.Memory.PTagMismatch {
		t.Error("no write with the real handle was refused for its protection tag")
	}

	// Forged reads: each breaks the rogue's reliable connection, and is
	// refused and counted.
	const reads = 20
	dst := make([]byte, 4096)
	before = tp.Stats()
	for i := range reads {
		r := connect(vi.ReliableDelivery)
		dh, err := rp.RegisterMemory(dst, r.Attributes().PTag, 0)
		if err != nil {
			t.Fatal(err)
		}
		a := guess()
		if i%2 == 0 {
			a.Handle = realH
		}
		d := &descriptors.Descriptor{Control: descriptors.Control{Op: descriptors.OpRDMARead},
			Segments: []descriptors.Segment{{Buf: dst[:1+rng.IntN(len(dst))], Handle: dh}}, Address: a}
		if err := r.PostSend(d); err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		got, err := r.SendWait(rctx)
		rcancel()
		if err != nil {
			t.Fatalf("forged read %d: %v", i, err)
		}
		if !errors.Is(got.Status.Err(), descriptors.ErrRDMAProtection) {
			t.Errorf("forged read %d completed with %v, want an RDMA protection error", i, got.Status)
		}
		r.Close()
		if err := rp.DeregisterMemory(dh); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range dst {
		if c != 0 {
			t.Fatal("a forged read brought bytes back")
		}
	}
	if got := tp.Stats().RDMARefused() - before.RDMARefused(); got != reads {
		t.Errorf("%d forged reads, %d refusals counted", reads, got)
	}

	if !bytes.Equal(mem, orig) {
		n := 0
		for i := range mem {
			if mem[i] != orig[i] {
				n++
			}
		}
		t.Errorf("%d bytes of the target's memory (region or guards) changed", n)
	}
	ls.wait(t)
}
