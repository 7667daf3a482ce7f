package bonding

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
)

const testJob = 0xb0d

// end is one bonded host: its rail devices, bond, a protection tag and a
// registered arena to carve buffers from.
type end struct {
	devs  []nic.Device
	ports []*memnic.Port // nil on a kernel driver
	b     *Bond
	ptag  PTag
	arena []byte
	h     descriptors.MemHandle
	used  int
}

// memPair builds two bonded hosts over k rails, each rail an in-process
// switch of its own with the given faults.
func memPair(t testing.TB, k int, mtu int, f memnic.Faults, o Options, arena int) (*end, *end) {
	t.Helper()
	var ends [2]*end
	for i := range ends {
		ends[i] = &end{}
	}
	for r := range k {
		sw := memnic.NewSwitch(uint64(100 + r))
		for i := range ends {
			p, err := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: testJob}, MTU: mtu, Faults: f})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			ends[i].ports = append(ends[i].ports, p)
			ends[i].devs = append(ends[i].devs, p)
		}
	}
	for _, e := range ends {
		e.open(t, o, arena)
	}
	return ends[0], ends[1]
}

func (e *end) open(t testing.TB, o Options, arena int) {
	t.Helper()
	o.JobKey = testJob
	b, err := Open(e.devs, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	e.b = b
	e.ptag = b.NewPTag()
	if arena > 0 {
		e.arena = make([]byte, arena)
		e.h, err = b.RegisterMemory(e.arena, e.ptag, AccessRDMAWrite)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// buf carves n bytes from the arena.
func (e *end) buf(t testing.TB, n int) descriptors.Segment {
	t.Helper()
	if e.used+n > len(e.arena) {
		t.Fatalf("arena of %d bytes exhausted", len(e.arena))
	}
	b := e.arena[e.used : e.used+n : e.used+n]
	e.used += n
	return descriptors.Segment{Buf: b, Handle: e.h}
}

func (e *end) newVI(t testing.TB, a Attributes) *VI {
	t.Helper()
	if a.PTag == 0 {
		a.PTag = e.ptag
	}
	v, err := e.b.NewVI(a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// connect connects va (on a) and vb (on b) peer to peer.
func connect(t testing.TB, a, b *end, va, vb *VI, disc uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- vb.ConnectPeer(ctx, Peer{MACs: a.b.HardwareAddrs(), Discriminator: disc}) }()
	if err := va.ConnectPeer(ctx, Peer{MACs: b.b.HardwareAddrs(), Discriminator: disc}); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func pattern(seed uint64, b []byte) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

func mustf(t testing.TB, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// dump logs v's internal state, to explain a failure.
func dump(t testing.TB, name string, v *VI) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	t.Logf("%s: state %v sq [%d %d) start %d reap %d rq [%d %d) rqNext %d sndMsn %d peerLimit %d rcvMsn %d announced %d hiSeen %d ctl %d cur %v",
		name, v.state, v.sq.Front(), v.sq.Back(), v.sqStart, v.sqReap, v.rq.Front(), v.rq.Back(), v.rqNext, v.sndMsn, v.peerLimit, v.rcvMsn, v.announced, v.hiSeen, v.ctl.n, v.cur[:len(v.rails)])
	for pos := v.sqReap; pos < v.sq.Back() && pos < v.sqReap+4; pos++ {
		t.Logf("  send %d: %+v", pos, v.ss[v.sq.Slot(pos)])
	}
	for pos := v.rqNext; pos < v.rq.Back() && pos < v.rqNext+3; pos++ {
		t.Logf("  recv %d: %+v", pos, v.rs[v.rq.Slot(pos)])
	}
	for _, rl := range v.rails {
		t.Logf("  rail %d: live %v failed %v connecting %v n %d parked %d state %v stats %+v", rl.idx, rl.live, rl.failed, rl.connecting, rl.n, len(rl.parked), rl.v.State(), rl.stats)
	}
}

// railSent returns each rail's count of completed rail sends and bytes.
func railSent(v *VI) (n, bytes []uint64) {
	for _, r := range v.Stats().Rails {
		n = append(n, r.Sent)
		bytes = append(bytes, r.SentBytes)
	}
	return n, bytes
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
