package bpf

import (
	"errors"
	"testing"

	"github.com/ethervia/ethervia/nic"
)

const tcPass = 0xffffffff // TC_ACT_UNSPEC / TCX_NEXT as the u32 test-run result

func loadTestTCFault(t *testing.T, et uint16) *TCFault {
	t.Helper()
	needRoot(t)
	// Loaded, not attached: ifindex only matters for duplication.
	tf, err := loadTCFault(1, Egress, et)
	if err != nil {
		t.Fatalf("loadTCFault: %v", err)
	}
	t.Cleanup(func() { tf.Close() })
	return tf
}

func tcCounters(t *testing.T, tf *TCFault) FaultCounters {
	t.Helper()
	c, err := tf.Counters()
	if err != nil {
		t.Fatalf("Counters: %v", err)
	}
	return c
}

func runTC(t *testing.T, tf *TCFault, pkt []byte) (uint32, []byte) {
	t.Helper()
	ret, out, err := tf.Program().Test(pkt)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, out
}

func TestTCFaultDropAndPass(t *testing.T) {
	tf := loadTestTCFault(t, testEtherType)
	foreign := frame(64, 0x0800, 0x45, 0)

	// Probabilities start at zero: everything passes.
	for range 10 {
		if ret, out := runTC(t, tf, ours(64)); ret != tcPass || string(out) != string(ours(64)) {
			t.Fatalf("Drop=0: verdict %#x (frame changed: %v), want pass %#x", ret, string(out) != string(ours(64)), uint32(tcPass))
		}
	}
	if err := tf.Set(FaultConfig{Drop: 1}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	for range 20 {
		if ret, _ := runTC(t, tf, ours(64)); ret != tcShot {
			t.Fatalf("Drop=1: verdict %d, want TC_ACT_SHOT", ret)
		}
		// Other EtherTypes pass untouched and are not counted.
		if ret, _ := runTC(t, tf, foreign); ret != tcPass {
			t.Fatalf("Drop=1, foreign EtherType: verdict %#x, want pass", ret)
		}
	}
	want := FaultCounters{Seen: 30, Dropped: 20}
	if c := tcCounters(t, tf); c != want {
		t.Errorf("counters %+v, want %+v", c, want)
	}
}

func TestTCFaultAllEtherTypes(t *testing.T) {
	tf := loadTestTCFault(t, 0)
	if err := tf.Set(FaultConfig{Drop: 1}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	for _, pkt := range [][]byte{ours(64), frame(64, 0x0800, 0x45, 0), ours(nic.PrefixLen)[:nic.EthHeaderLen]} {
		if ret, _ := runTC(t, tf, pkt); ret != tcShot {
			t.Errorf("etherType 0, Drop=1: verdict %d for EtherType %#x, want TC_ACT_SHOT", ret, pkt[12:14])
		}
	}
	if c := tcCounters(t, tf); c.Seen != 3 || c.Dropped != 3 {
		t.Errorf("counters %+v, want Seen=Dropped=3", c)
	}
}

func TestTCFaultDropRate(t *testing.T) {
	tf := loadTestTCFault(t, testEtherType)
	if err := tf.Set(FaultConfig{Drop: 0.3}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	const runs = 10000
	dropped := 0
	for range runs {
		if ret, _ := runTC(t, tf, ours(64)); ret == tcShot {
			dropped++
		}
	}
	c := tcCounters(t, tf)
	if c.Seen != runs || c.Dropped != uint64(dropped) {
		t.Errorf("counters %+v, want Seen=%d Dropped=%d (verdicts)", c, runs, dropped)
	}
	if frac := float64(dropped) / runs; frac < 0.25 || frac > 0.35 {
		t.Errorf("dropped %.3f, want 0.25..0.35", frac)
	}
}

func TestTCFaultCorrupt(t *testing.T) {
	tf := loadTestTCFault(t, testEtherType)
	if err := tf.Set(FaultConfig{Corrupt: 1}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	const runs = 1000
	in := ours(nic.PrefixLen + 2)
	hits := make([]int, len(in))
	for range runs {
		ret, out := runTC(t, tf, in)
		if ret != tcPass {
			t.Fatalf("Corrupt=1: verdict %#x, want pass", ret)
		}
		hits[checkOneByteFlipped(t, in, out)]++
	}
	for off := nic.EthHeaderLen; off < len(in); off++ {
		if hits[off] == 0 {
			t.Errorf("offset %d never corrupted in %d runs", off, runs)
		}
	}
	if c := tcCounters(t, tf); c.Seen != runs || c.Corrupted != runs || c.Dropped != 0 {
		t.Errorf("counters %+v, want Seen=Corrupted=%d", c, runs)
	}
}

func TestTCFaultSetValidates(t *testing.T) {
	tf := loadTestTCFault(t, testEtherType)
	if err := tf.Set(FaultConfig{Duplicate: 1.01}); !errors.Is(err, ErrProbability) {
		t.Errorf("Duplicate=1.01: %v, want ErrProbability", err)
	}
	if err := tf.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := tf.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := tf.Set(FaultConfig{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Set after Close: %v, want ErrClosed", err)
	}
}

func TestThreshold(t *testing.T) {
	for _, c := range []struct {
		p    float64
		want uint32
	}{{0, 0}, {1, 0xffffffff}, {0.5, 1 << 31}, {0.25, 1 << 30}, {1 - 1e-6, 0xffffef39}, {1 - 1e-12, 0xffffffff}} {
		if got := threshold(c.p); got != c.want {
			t.Errorf("threshold(%v) = %#x, want %#x", c.p, got, c.want)
		}
	}
}
