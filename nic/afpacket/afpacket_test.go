package afpacket_test

import (
	"time"

	"bytes"
	"github.com/ethervia/ethervia/bpf"
	"os"
	"testing"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/afpacket"
	"github.com/ethervia/ethervia/nic/nictest"
	"github.com/ethervia/ethervia/testbed"
)

const jobKey = 0xe7e7

func needRoot(t testing.TB) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: AF_PACKET tests need root to build network namespaces; run as root (CI does)")
	}
}

// makePair opens one device on each end of a fresh veth pair between two
// namespaces.
func makePair(t testing.TB) nictest.Pair { return makePairWith(t, false) }

// makePairWith opens the pair with the receive ring or, noRing, with
// recvmmsg(2), and fails if the device does not use what was asked for.
func makePairWith(t testing.TB, noRing bool) nictest.Pair {
	needRoot(t)
	tb, err := testbed.New(testbed.Config{Hosts: 2, Topology: testbed.Pair, Name: "afp"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
	})
	open := func(h *testbed.Host) nic.Device {
		var d *afpacket.Device
		err := h.Do(func() error {
			var err error
			d, err = afpacket.Open(afpacket.Config{Config: nic.Config{JobKey: jobKey}, Iface: h.Ifaces[0], NoRing: noRing})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if fb := d.RingFallback(); (fb == nil) == noRing {
			t.Fatalf("NoRing %v, but the device's ring fallback is %v", noRing, fb)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	return nictest.Pair{A: open(tb.Host(0)), B: open(tb.Host(1)), EtherType: nic.DefaultEtherType, JobKey: jobKey}
}

func TestConformance(t *testing.T) { nictest.Run(t, makePair) }

// TestConformanceRecvmmsg runs the suite on the recvmmsg(2) receive path,
// the one a kernel without receive rings gets.
func TestConformanceRecvmmsg(t *testing.T) {
	nictest.Run(t, func(t testing.TB) nictest.Pair { return makePairWith(t, true) })
}

func BenchmarkPingPong64Recvmmsg(b *testing.B) {
	nictest.BenchPingPong(b, makePairWith(b, true), 64)
}

func BenchmarkPingPong64(b *testing.B) { nictest.BenchPingPong(b, makePair(b), 64) }
func BenchmarkStream64(b *testing.B)   { nictest.BenchStream(b, makePair(b), 64) }
func BenchmarkStreamMTU(b *testing.B) {
	p := makePair(b)
	nictest.BenchStream(b, p, p.A.MTU()+nic.EthHeaderLen)
}

// openOn opens a device on rail 0 of host h.
func openOn(t testing.TB, h *testbed.Host) *afpacket.Device {
	var d *afpacket.Device
	if err := h.Do(func() error {
		var err error
		d, err = afpacket.Open(afpacket.Config{Config: nic.Config{JobKey: jobKey}, Iface: h.Ifaces[0]})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// openCfg opens a device with cfg on rail 0 of host h.
func openCfg(t testing.TB, h *testbed.Host, cfg afpacket.Config) *afpacket.Device {
	t.Helper()
	cfg.Iface = h.Ifaces[0]
	var d *afpacket.Device
	if err := h.Do(func() error {
		var err error
		d, err = afpacket.Open(cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// newTestbedPair builds a two-host testbed.Pair and registers its removal.
func newTestbedPair(t testing.TB, name string) *testbed.Testbed {
	t.Helper()
	needRoot(t)
	tb, err := testbed.New(testbed.Config{Hosts: 2, Topology: testbed.Pair, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
	})
	return tb
}

// foreignTraffic sends, in rounds of one sendmmsg each, frames of our
// EtherType that belong to another job (wrong key, wrong version, too short),
// frames of another EtherType, and good frames, and collects the good ones.
// A round's good frames arrive after its foreign frames went through the
// receiver's filter, so the counters are final when it returns. It returns
// how many foreign frames of our EtherType it sent and the good frames that
// arrived.
func foreignTraffic(t *testing.T, p nictest.Pair, rounds int) (foreign, good int, got [][]byte) {
	t.Helper()
	mk := func(n int, seq uint32, mod func([]byte)) []byte {
		f := make([]byte, max(n, nic.PrefixLen))
		nictest.Frame(f, p, p.B, p.A, seq)
		if mod != nil {
			mod(f)
		}
		return f[:n]
	}
	r := nictest.NewReceiver(p.B)
	for i := range rounds {
		seq := uint32(i * 4)
		batch := [][]byte{
			mk(80, seq, func(f []byte) { f[nic.OffJobKey] ^= 0x80 }),
			mk(80, seq, func(f []byte) { f[nic.OffJobKey+3] ^= 1 }),
			mk(80, seq, func(f []byte) { f[nic.OffVersion]++ }),
			mk(nic.PrefixLen-1, seq, nil),                           // our EtherType, too short
			mk(80, seq, func(f []byte) { f[nic.OffEtherType+1]++ }), // other EtherType: never seen
			mk(100, seq+1, nil),
			mk(nic.PrefixLen, seq+2, nil),
		}
		const foreignPerRound, goodPerRound = 4, 2
		foreign += foreignPerRound
		good += goodPerRound
		for b := batch; len(b) > 0; {
			n, err := p.A.Send(b)
			if err != nil {
				t.Fatalf("send: %v", err)
			}
			b = b[n:]
		}
		got = append(got, r.Collect(t, goodPerRound, time.Second)...)
	}
	return foreign, good, got
}

// checkGood checks that the good frames of foreignTraffic arrived whole and
// in order, allowing only losses that RxDropped explains.
func checkGood(t *testing.T, p nictest.Pair, good int, got [][]byte, dropped uint64) {
	t.Helper()
	if uint64(len(got))+dropped != uint64(good) || len(got) == 0 {
		t.Fatalf("%d of %d good frames arrived, %d counted as dropped", len(got), good, dropped)
	}
	if dropped != 0 {
		t.Logf("kernel dropped %d good frames", dropped)
		return
	}
	for i, f := range got {
		seq := uint32(i/2*4 + 1 + i%2)
		if err := nictest.Check(f, p, p.B, p.A, seq); err != nil {
			t.Fatalf("good frame %d: %v", i, err)
		}
	}
}

// TestForeignCounted checks that the counting eBPF filter drops other jobs'
// frames in the kernel and counts every one of them in RxForeign, while this
// job's frames all arrive.
func TestForeignCounted(t *testing.T) {
	tb := newTestbedPair(t, "afpfc")
	cfg := afpacket.Config{Config: nic.Config{JobKey: jobKey}}
	a, b := openCfg(t, tb.Host(0), cfg), openCfg(t, tb.Host(1), cfg)
	if err := b.FilterFallback(); err != nil {
		t.Fatalf("counting eBPF filter not in use as root: %v", err)
	}
	p := nictest.Pair{A: a, B: b, EtherType: nic.DefaultEtherType, JobKey: jobKey}
	before := b.Stats()
	foreign, good, got := foreignTraffic(t, p, 50)
	st := b.Stats().Sub(before)
	if st.RxForeign != uint64(foreign) {
		t.Errorf("RxForeign grew by %d, want %d", st.RxForeign, foreign)
	}
	// The kernel filter, not the software check, refused them.
	if sw := afpacket.SoftwareForeign(b); sw != 0 {
		t.Errorf("%d foreign frames reached the socket", sw)
	}
	if st.RxFrames != uint64(len(got)) {
		t.Errorf("RxFrames grew by %d, %d frames arrived", st.RxFrames, len(got))
	}
	checkGood(t, p, good, got, st.RxDropped)

	// The count survives Close.
	last := b.Stats()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if after := b.Stats(); after.RxForeign != last.RxForeign {
		t.Errorf("RxForeign after Close %d, before %d", after.RxForeign, last.RxForeign)
	}
}

// TestKernelFilterDropsForeignClassic checks the classic fallback: the
// kernel refuses other jobs' frames, so they never reach the socket, and
// nothing counts them.
func TestKernelFilterDropsForeignClassic(t *testing.T) {
	tb := newTestbedPair(t, "afpcl")
	cfg := afpacket.Config{Config: nic.Config{JobKey: jobKey}, ClassicFilter: true}
	a, b := openCfg(t, tb.Host(0), cfg), openCfg(t, tb.Host(1), cfg)
	if b.FilterFallback() == nil {
		t.Fatal("FilterFallback is nil with ClassicFilter set")
	}
	p := nictest.Pair{A: a, B: b, EtherType: nic.DefaultEtherType, JobKey: jobKey}
	_, good, got := foreignTraffic(t, p, 20)
	st := b.Stats()
	if st.RxForeign != 0 || st.RxFrames != uint64(len(got)) {
		t.Fatalf("stats %+v: foreign frames reached the socket", st)
	}
	checkGood(t, p, good, got, st.RxDropped)
}

// TestFaultInjectorDrop drops a fifth of the frames at the switch port and
// checks that about that fraction is lost, and that the counters agree.
func TestFaultInjectorDrop(t *testing.T) {
	needRoot(t)
	tb, err := testbed.New(testbed.Config{Hosts: 2, Topology: testbed.Switch, Name: "afpf"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	a, b := openOn(t, tb.Host(0)), openOn(t, tb.Host(1))
	p := nictest.Pair{A: a, B: b, EtherType: nic.DefaultEtherType, JobKey: jobKey}
	if err := tb.SetFault(1, 0, bpf.FaultConfig{Drop: 0.2}); err != nil {
		t.Fatal(err)
	}
	const n = 5000
	r := nictest.NewReceiver(b)
	f := make([]byte, 200)
	got := 0
	for i := 0; i < n; i += 50 {
		batch := make([][]byte, 50)
		for j := range batch {
			batch[j] = f
		}
		nictest.Frame(f, p, b, a, uint32(i))
		if _, err := a.Send(batch); err != nil {
			t.Fatal(err)
		}
		got += len(r.Collect(t, 50, 20*time.Millisecond))
	}
	got += len(r.Collect(t, n, 100*time.Millisecond))
	lost := float64(n-got) / n
	if lost < 0.15 || lost > 0.25 {
		t.Fatalf("lost %.3f of %d frames with drop 0.2", lost, n)
	}
	c, err := tb.FaultCounters(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Seen != n || int(c.Dropped) != n-got {
		t.Fatalf("counters %+v, but %d of %d arrived", c, got, n)
	}
}

// TestRingSize: the receive ring takes Config.RingSize in whole 64 KiB
// blocks, at least one, and DefaultRingSize without it; a smaller ring
// still carries frames.
func TestRingSize(t *testing.T) {
	tb := newTestbedPair(t, "ringsize")
	b := openOn(t, tb.Host(1))
	for i, c := range []struct{ ask, want int }{
		{0, afpacket.DefaultRingSize}, {1 << 20, 1 << 20}, {100 << 10, 64 << 10}, {1, 64 << 10},
	} {
		a := openCfg(t, tb.Host(0), afpacket.Config{Config: nic.Config{JobKey: jobKey}, RingSize: c.ask})
		if a.RingFallback() != nil {
			t.Skipf("no receive ring here: %v", a.RingFallback())
		}
		if got := a.RingBytes(); got != c.want {
			t.Errorf("RingSize %d: ring of %d bytes, want %d", c.ask, got, c.want)
		}
		marker := byte(i + 1)
		if _, err := b.Send([][]byte{epFrame(a.HardwareAddr(), b.HardwareAddr(), 0, 0, marker)}); err != nil {
			t.Fatal(err)
		}
		if got := drain(t, a, 200*time.Millisecond); !bytes.Equal(got, []byte{marker}) {
			t.Errorf("RingSize %d: received markers %v, want [%d]", c.ask, got, marker)
		}
		a.Close()
	}
}
