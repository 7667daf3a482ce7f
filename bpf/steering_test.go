package bpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/ethervia/ethervia/nic"
)

func newTestSteering(t *testing.T) *Steering {
	t.Helper()
	needRoot(t)
	s, err := NewSteering(testFilter, SteeringOptions{Queues: 4})
	if err != nil {
		t.Fatalf("NewSteering: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runXDP test-runs prog once on pkt and returns the verdict and the output.
func runXDP(t *testing.T, prog *ebpf.Program, pkt []byte) (uint32, []byte) {
	t.Helper()
	ret, out, err := prog.Test(pkt)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, out
}

func steeringCounters(t *testing.T, s *Steering) SteeringCounters {
	t.Helper()
	c, err := s.Counters()
	if err != nil {
		t.Fatalf("Counters: %v", err)
	}
	return c
}

// foreignFrames are frames the steering program must pass untouched.
func foreignFrames() map[string][]byte {
	arp := make([]byte, 42)
	copy(arp, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06})
	ipv4 := frame(64, 0x0800, 0x45, 0)
	return map[string][]byte{
		"arp":             arp,
		"ipv4":            ipv4,
		"wrong ethertype": frame(64, testEtherType+1, nic.Version, testJobKey),
		"wrong version":   frame(64, testEtherType, nic.Version+1, testJobKey),
		"wrong key":       frame(64, testEtherType, nic.Version, testJobKey^1),
		"wrong key high":  frame(64, testEtherType, nic.Version, testJobKey^0x80000000),
		"short":           ours(nic.PrefixLen)[:nic.PrefixLen-1],
		"ethernet only":   ours(nic.PrefixLen)[:nic.EthHeaderLen],
		"tagged foreign":  tagged(frame(64, testEtherType, nic.Version, testJobKey^2)),
		"tagged short":    tagged(ours(nic.PrefixLen))[:nic.PrefixLen+3],
		"tagged ipv4":     tagged(ipv4),
	}
}

func TestSteeringPassesForeignFrames(t *testing.T) {
	s := newTestSteering(t)
	ff := foreignFrames()
	for name, pkt := range ff {
		ret, out := runXDP(t, s.Program(), pkt)
		if ret != xdpPass {
			t.Errorf("%s: verdict %d, want XDP_PASS (%d)", name, ret, xdpPass)
		}
		if string(out) != string(pkt) {
			t.Errorf("%s: frame changed", name)
		}
	}
	c := steeringCounters(t, s)
	// Frames with our EtherType (wrong version or key, short, tagged or
	// not) are also counted as Foreign.
	const foreign = 7
	if c.Passed != uint64(len(ff)) || c.Foreign != foreign || c.Fault.Seen != 0 || c.Redirected != 0 || c.Unclaimed != 0 {
		t.Errorf("counters %+v, want Passed=%d, Foreign=%d and nothing else", c, len(ff), foreign)
	}
	n := 0
	for _, pkt := range ff {
		if refSteerForeign(testFilter, pkt) {
			n++
		}
	}
	if n != foreign {
		t.Errorf("reference calls %d frames foreign, want %d", n, foreign)
	}
}

// refSteerForeign is the Go reference of the steering program's Foreign
// counter: our EtherType, directly or behind one 802.1Q tag, but not our
// frame.
func refSteerForeign(f nic.Filter, b []byte) bool {
	if refSteer(f, b) || len(b) < nic.EthHeaderLen {
		return false
	}
	et := binary.BigEndian.Uint16(b[nic.OffEtherType:])
	if et == 0x8100 && len(b) >= nic.EthHeaderLen+4 && binary.BigEndian.Uint16(b[nic.OffEtherType+4:]) == f.EtherType {
		b = append(append([]byte{}, b[:12]...), b[16:]...) // untag
	} else if et != f.EtherType {
		return false
	}
	// Our EtherType, refused: foreign unless it is only for another
	// endpoint of this NIC.
	return !errors.Is(f.Check(b), nic.ErrEndpoint)
}

func TestSteeringOursWithoutSocketPasses(t *testing.T) {
	s := newTestSteering(t)
	for name, pkt := range map[string][]byte{
		"minimal": ours(nic.PrefixLen),
		"full":    ours(1500),
		"tagged":  tagged(ours(100)),
	} {
		ret, out := runXDP(t, s.Program(), pkt)
		if ret != xdpPass {
			t.Errorf("%s: verdict %d, want XDP_PASS", name, ret)
		}
		if string(out) != string(pkt) {
			t.Errorf("%s: frame changed", name)
		}
	}
	c := steeringCounters(t, s)
	want := SteeringCounters{Unclaimed: 3, Fault: FaultCounters{Seen: 3}}
	if c != want {
		t.Errorf("counters %+v, want %+v", c, want)
	}
}

func TestSteeringDropAll(t *testing.T) {
	s := newTestSteering(t)
	if err := s.SetFault(FaultConfig{Drop: 1}); err != nil {
		t.Fatalf("SetFault: %v", err)
	}
	const runs = 200
	for range runs {
		for _, pkt := range [][]byte{ours(64), tagged(ours(64))} {
			if ret, _ := runXDP(t, s.Program(), pkt); ret != xdpDrop {
				t.Fatalf("our frame: verdict %d, want XDP_DROP", ret)
			}
		}
		for name, pkt := range foreignFrames() {
			if ret, _ := runXDP(t, s.Program(), pkt); ret != xdpPass {
				t.Fatalf("%s with Drop=1: verdict %d, want XDP_PASS", name, ret)
			}
		}
	}
	c := steeringCounters(t, s)
	if c.Fault.Seen != 2*runs || c.Fault.Dropped != 2*runs || c.Unclaimed != 0 {
		t.Errorf("counters %+v, want Seen=Dropped=%d", c, 2*runs)
	}

	// Back to zero: nothing is dropped any more.
	if err := s.SetFault(FaultConfig{}); err != nil {
		t.Fatalf("SetFault: %v", err)
	}
	if ret, _ := runXDP(t, s.Program(), ours(64)); ret != xdpPass {
		t.Errorf("after Drop=0: verdict %d, want XDP_PASS", ret)
	}
}

func TestSteeringDropRate(t *testing.T) {
	s := newTestSteering(t)
	if err := s.SetFault(FaultConfig{Drop: 0.3}); err != nil {
		t.Fatalf("SetFault: %v", err)
	}
	const runs = 10000
	if _, err := s.Program().Run(&ebpf.RunOptions{Data: ours(128), Repeat: runs}); err != nil {
		t.Fatalf("run: %v", err)
	}
	c := steeringCounters(t, s)
	// EINTR restarts may run a few extra times; use the counters' ratio.
	if c.Fault.Seen < runs {
		t.Fatalf("Seen = %d, want >= %d", c.Fault.Seen, runs)
	}
	frac := float64(c.Fault.Dropped) / float64(c.Fault.Seen)
	if frac < 0.25 || frac > 0.35 {
		t.Errorf("dropped %d of %d (%.3f), want 0.25..0.35", c.Fault.Dropped, c.Fault.Seen, frac)
	}
	if c.Unclaimed+c.Fault.Dropped != c.Fault.Seen {
		t.Errorf("counters %+v: kept + dropped != seen", c)
	}
}

// checkOneByteFlipped reports the offset of the single differing byte.
func checkOneByteFlipped(t *testing.T, in, out []byte) int {
	t.Helper()
	if len(out) != len(in) {
		t.Fatalf("output length %d, want %d", len(out), len(in))
	}
	at := -1
	for i := range in {
		if in[i] != out[i] {
			if at >= 0 {
				t.Fatalf("bytes %d and %d both changed", at, i)
			}
			at = i
		}
	}
	if at < 0 {
		t.Fatalf("no byte changed")
	}
	if at < nic.EthHeaderLen {
		t.Fatalf("byte %d changed, want offset >= %d", at, nic.EthHeaderLen)
	}
	return at
}

func TestSteeringCorrupt(t *testing.T) {
	s := newTestSteering(t)
	if err := s.SetFault(FaultConfig{Corrupt: 1}); err != nil {
		t.Fatalf("SetFault: %v", err)
	}
	const runs = 2000
	for _, n := range []int{nic.PrefixLen, 30, 1500} {
		in := ours(n)
		hits := make([]int, n)
		for range runs {
			ret, out := runXDP(t, s.Program(), in)
			if ret != xdpPass {
				t.Fatalf("len %d: verdict %d, want XDP_PASS", n, ret)
			}
			hits[checkOneByteFlipped(t, in, out)]++
		}
		// Uniform over [14, n): for short frames every offset, including
		// the first and the last, must show up in 2000 runs.
		if n <= 30 {
			for off := nic.EthHeaderLen; off < n; off++ {
				if hits[off] == 0 {
					t.Errorf("len %d: offset %d never corrupted in %d runs", n, off, runs)
				}
			}
		}
	}
	c := steeringCounters(t, s)
	if c.Fault.Corrupted != 3*runs || c.Fault.Seen != 3*runs {
		t.Errorf("counters %+v, want Seen=Corrupted=%d", c, 3*runs)
	}

	// Foreign frames are never corrupted.
	for name, pkt := range foreignFrames() {
		if _, out := runXDP(t, s.Program(), pkt); string(out) != string(pkt) {
			t.Errorf("%s: corrupted although foreign", name)
		}
	}
}

func TestSteeringSetFaultRejects(t *testing.T) {
	s := newTestSteering(t)
	if err := s.SetFault(FaultConfig{Duplicate: 0.1}); !errors.Is(err, ErrXDPDuplicate) {
		t.Errorf("Duplicate=0.1: err %v, want ErrXDPDuplicate", err)
	}
	for _, c := range []FaultConfig{{Drop: -0.1}, {Corrupt: 1.5}, {Drop: math.NaN()}, {Duplicate: math.Inf(1)}} {
		if err := s.SetFault(c); !errors.Is(err, ErrProbability) {
			t.Errorf("%+v: err %v, want ErrProbability", c, err)
		}
	}
}

func TestSteeringRegisterErrors(t *testing.T) {
	s := newTestSteering(t)
	if err := s.Register(4, 0); err == nil {
		t.Error("Register(queue 4 of 4) succeeded")
	}
	if err := s.Register(-1, 0); err == nil {
		t.Error("Register(-1) succeeded")
	}
	// A socket that is not AF_XDP is refused by the kernel.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := s.Register(0, fd); err == nil {
		t.Error("Register(UDP socket) succeeded")
	}
	if err := s.Unregister(0); err != nil {
		t.Errorf("Unregister(empty slot): %v", err)
	}
	if err := s.Unregister(9); err == nil {
		t.Error("Unregister(9 of 4) succeeded")
	}
}

func TestSteeringClose(t *testing.T) {
	s := newTestSteering(t)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Counters(); !errors.Is(err, ErrClosed) {
		t.Errorf("Counters after Close: %v, want ErrClosed", err)
	}
	if err := s.Attach(1, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Attach after Close: %v, want ErrClosed", err)
	}
}

func TestNewSteeringRejectsZeroEtherType(t *testing.T) {
	needRoot(t)
	if _, err := NewSteering(nic.Filter{JobKey: 1}, SteeringOptions{}); err == nil {
		t.Error("NewSteering with EtherType 0 succeeded")
	}
}

// FuzzSteering checks the XDP program's match against the Go reference
// (nic.Filter.Check, also behind one 802.1Q tag) on arbitrary frames. With
// Drop=1 the verdict tells which way the program decided.
func FuzzSteering(f *testing.F) {
	f.Add(ours(nic.PrefixLen))
	f.Add(tagged(ours(64)))
	f.Add(frame(64, testEtherType, nic.Version, testJobKey^1))
	f.Add(tagged(ours(nic.PrefixLen))[:nic.PrefixLen+3])
	f.Add(toEndpoint(ours(64), 1))
	f.Add(tagged(toEndpoint(ours(64), nic.EndpointAll)))
	needRoot(f)
	s, err := NewSteering(testFilter, SteeringOptions{Queues: 1})
	if err != nil {
		f.Fatalf("NewSteering: %v", err)
	}
	defer s.Close()
	if err := s.SetFault(FaultConfig{Drop: 1}); err != nil {
		f.Fatalf("SetFault: %v", err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// The kernel's test run wants an Ethernet header and one page.
		if len(b) < nic.EthHeaderLen || len(b) > 3000 {
			return
		}
		before, err := s.Counters()
		if err != nil {
			t.Fatalf("Counters: %v", err)
		}
		ret, out, err := s.Program().Test(b)
		if err != nil {
			t.Fatalf("test run: %v", err)
		}
		want := uint32(xdpPass)
		if refSteer(testFilter, b) {
			want = xdpDrop
		}
		if ret != want {
			t.Fatalf("verdict %d, want %d for % x", ret, want, b)
		}
		after, err := s.Counters()
		if err != nil {
			t.Fatalf("Counters: %v", err)
		}
		wantForeign := uint64(0)
		if refSteerForeign(testFilter, b) {
			wantForeign = 1
		}
		if got := after.Foreign - before.Foreign; got != wantForeign {
			t.Fatalf("Foreign grew by %d, want %d for % x", got, wantForeign, b)
		}
		if ret == xdpPass && !bytes.Equal(out, b) {
			t.Fatalf("passed frame changed")
		}
	})
}
