package afxdp

import (
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/nictest"
	"github.com/ethervia/ethervia/testbed"
)

// openTestbedPair opens a Device with cfg on rail 0 of each host of a fresh
// testbed.Pair.
func openTestbedPair(t *testing.T, name string, cfg Config) (a, b *Device) {
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
	open := func(h *testbed.Host) *Device {
		c := cfg
		c.Iface = h.Ifaces[0]
		var d *Device
		if err := h.Do(func() error {
			var err error
			d, err = Open(c)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// Registered after the testbed's cleanup, so it runs first.
		t.Cleanup(func() {
			if err := d.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
		return d
	}
	return open(tb.Host(0)), open(tb.Host(1))
}

// TestForeignCountedTestbed sends, from one AF_XDP device to another over a
// testbed.Pair, frames of our EtherType that belong to another job (wrong
// key, wrong version, too short) mixed with frames of another EtherType and
// good frames. The steering program must count exactly the other jobs'
// frames, the receiver's RxForeign must report them, and every good frame
// must arrive intact.
func TestForeignCountedTestbed(t *testing.T) {
	a, b := openTestbedPair(t, "xdpfc", Config{Config: nic.Config{JobKey: testJob}})
	p := nictest.Pair{A: a, B: b, EtherType: nic.DefaultEtherType, JobKey: testJob}
	mk := func(n int, seq uint32, mod func([]byte)) []byte {
		f := make([]byte, max(n, nic.PrefixLen))
		nictest.Frame(f, p, p.B, p.A, seq)
		if mod != nil {
			mod(f)
		}
		return f[:n]
	}
	const rounds, foreignPerRound, goodPerRound = 50, 4, 2
	before := b.Stats()
	r := nictest.NewReceiver(b)
	var got [][]byte
	for i := range rounds {
		seq := uint32(i * 4)
		batch := [][]byte{
			mk(80, seq, func(f []byte) { f[nic.OffJobKey] ^= 0x80 }),
			mk(80, seq, func(f []byte) { f[nic.OffJobKey+3] ^= 1 }),
			mk(80, seq, func(f []byte) { f[nic.OffVersion]++ }),
			mk(nic.PrefixLen-1, seq, nil),                           // our EtherType, too short
			mk(80, seq, func(f []byte) { f[nic.OffEtherType+1]++ }), // other EtherType: not counted
			mk(100, seq+1, nil),
			mk(nic.PrefixLen, seq+2, nil),
		}
		nictest.SendAll(t, a, batch)
		got = append(got, r.Collect(t, goodPerRound, time.Second)...)
	}
	st := b.Stats().Sub(before)
	const foreign, good = rounds * foreignPerRound, rounds * goodPerRound
	if st.RxForeign != foreign {
		t.Errorf("RxForeign grew by %d, want %d", st.RxForeign, foreign)
	}
	if sw := b.rxForeign.Load(); sw != 0 {
		t.Errorf("%d foreign frames reached the socket", sw)
	}
	c, err := b.Steering().Counters()
	if err != nil {
		t.Fatal(err)
	}
	// The program also passes the kernel's own traffic (IPv6 neighbour
	// discovery), so Passed is a lower bound.
	if c.Foreign != foreign || c.Passed < rounds*(foreignPerRound+1) {
		t.Errorf("steering counters %+v: want Foreign=%d, Passed>=%d", c, foreign, rounds*(foreignPerRound+1))
	}
	if uint64(len(got))+st.RxDropped != good || len(got) == 0 {
		t.Fatalf("%d of %d good frames arrived, %d counted as dropped", len(got), good, st.RxDropped)
	}
	if st.RxFrames != uint64(len(got)) {
		t.Errorf("RxFrames grew by %d, %d frames arrived", st.RxFrames, len(got))
	}
	if st.RxDropped == 0 {
		for i, f := range got {
			if err := nictest.Check(f, p, p.B, p.A, uint32(i/2*4+1+i%2)); err != nil {
				t.Fatalf("good frame %d: %v", i, err)
			}
		}
	}

	// The count survives Close, which frees the steering program.
	last := b.Stats()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if after := b.Stats(); after.RxForeign != last.RxForeign || after.RxForeign < foreign {
		t.Errorf("RxForeign after Close %d, before %d", after.RxForeign, last.RxForeign)
	}
}
