package afpacket_test

import (
	"time"

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
func makePair(t testing.TB) nictest.Pair {
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
			d, err = afpacket.Open(afpacket.Config{Config: nic.Config{JobKey: jobKey}, Iface: h.Ifaces[0]})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	return nictest.Pair{A: open(tb.Host(0)), B: open(tb.Host(1)), EtherType: nic.DefaultEtherType, JobKey: jobKey}
}

func TestConformance(t *testing.T) { nictest.Run(t, makePair) }

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

// TestKernelFilterDropsForeign checks that the classic BPF filter, not the
// software check behind it, refuses foreign frames: they never reach the
// socket, so the software counter stays zero.
func TestKernelFilterDropsForeign(t *testing.T) {
	p := makePair(t)
	f := make([]byte, 80)
	nictest.Frame(f, p, p.B, p.A, 1)
	f[nic.OffJobKey] ^= 0x80
	g := make([]byte, 80)
	nictest.Frame(g, p, p.B, p.A, 2)
	g[nic.OffVersion]++
	for i := 0; i < 100; i++ {
		if _, err := p.A.Send([][]byte{f, g}); err != nil {
			t.Fatal(err)
		}
	}
	good := make([]byte, 80)
	nictest.Frame(good, p, p.B, p.A, 3)
	p.A.Send([][]byte{good})
	got := nictest.NewReceiver(p.B).Collect(t, 1, time.Second)
	if len(got) != 1 {
		t.Fatalf("%d frames arrived, want 1", len(got))
	}
	if s := p.B.Stats(); s.RxForeign != 0 || s.RxFrames != 1 {
		t.Fatalf("stats %+v: foreign frames reached the socket", s)
	}
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
