package bpf

import (
	"errors"
	"testing"

	"github.com/ethervia/ethervia/nic"
)

func newTestCountingFilter(t testing.TB, f nic.Filter) *SocketFilterProg {
	t.Helper()
	needRoot(t)
	p, err := NewCountingSocketFilter(f)
	if err != nil {
		t.Fatalf("NewCountingSocketFilter: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// runSocketFilter test-runs the filter on frame and returns how many bytes
// it keeps. The kernel's test run for socket filters strips an Ethernet
// header (eth_type_trans) before the program runs, whereas an AF_PACKET
// socket runs it from the MAC header; so the frame goes behind 14 bytes of
// padding and the program sees it exactly as a socket would.
func runSocketFilter(t testing.TB, p *SocketFilterProg, frame []byte) uint32 {
	t.Helper()
	in := make([]byte, nic.EthHeaderLen+len(frame))
	in[12], in[13] = 0x88, 0xB5 // an EtherType, so eth_type_trans reads no further
	copy(in[nic.EthHeaderLen:], frame)
	ret, _, err := p.Program().Test(in)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret
}

func sfCounters(t testing.TB, p *SocketFilterProg) SocketFilterCounters {
	t.Helper()
	c, err := p.Counters()
	if err != nil {
		t.Fatalf("Counters: %v", err)
	}
	return c
}

// refSocketCount is the Go reference of what the counting filter counts.
func refSocketCount(f nic.Filter, b []byte) SocketFilterCounters {
	switch err := f.Check(b); {
	case len(b) < nic.OffEtherType+2:
		// Without an EtherType it is nobody's frame.
	case errors.Is(err, nic.ErrShortFrame):
		if b[nic.OffEtherType] == byte(f.EtherType>>8) && b[nic.OffEtherType+1] == byte(f.EtherType) {
			return SocketFilterCounters{Short: 1}
		}
	case errors.Is(err, nic.ErrVersion):
		return SocketFilterCounters{Version: 1}
	case errors.Is(err, nic.ErrJobKey):
		return SocketFilterCounters{JobKey: 1}
	}
	return SocketFilterCounters{}
}

func addCounters(a, b SocketFilterCounters) SocketFilterCounters {
	return SocketFilterCounters{Short: a.Short + b.Short, Version: a.Version + b.Version, JobKey: a.JobKey + b.JobKey}
}

func TestCountingSocketFilter(t *testing.T) {
	p := newTestCountingFilter(t, testFilter)
	cases := []struct {
		name   string
		frame  []byte
		accept bool
		count  SocketFilterCounters
	}{
		{"ours minimal", ours(nic.PrefixLen), true, SocketFilterCounters{}},
		{"ours full", ours(1514), true, SocketFilterCounters{}},
		{"ours 3000", ours(3000), true, SocketFilterCounters{}},
		{"every endpoint", toEndpoint(ours(64), nic.EndpointAll), true, SocketFilterCounters{}},
		{"another endpoint (not foreign)", toEndpoint(ours(64), 1), false, SocketFilterCounters{}},
		{"wrong ethertype", frame(64, testEtherType+1, nic.Version, testJobKey), false, SocketFilterCounters{}},
		{"ipv4", frame(64, 0x0800, 0x45, 0), false, SocketFilterCounters{}},
		{"wrong version", frame(64, testEtherType, nic.Version+1, testJobKey), false, SocketFilterCounters{Version: 1}},
		{"version zero", frame(64, testEtherType, 0, testJobKey), false, SocketFilterCounters{Version: 1}},
		{"wrong version and key", frame(64, testEtherType, 0, testJobKey^1), false, SocketFilterCounters{Version: 1}},
		{"wrong key low bit", frame(64, testEtherType, nic.Version, testJobKey^1), false, SocketFilterCounters{JobKey: 1}},
		{"wrong key high bit", frame(64, testEtherType, nic.Version, testJobKey^0x80000000), false, SocketFilterCounters{JobKey: 1}},
		{"short by one", ours(nic.PrefixLen)[:nic.PrefixLen-1], false, SocketFilterCounters{Short: 1}},
		{"ethernet header only", ours(nic.PrefixLen)[:nic.EthHeaderLen], false, SocketFilterCounters{Short: 1}},
		{"no ethertype", ours(nic.PrefixLen)[:nic.OffEtherType+1], false, SocketFilterCounters{}},
		{"empty", nil, false, SocketFilterCounters{}},
		{"short other ethertype", frame(64, 0x0806, 1, 0)[:20], false, SocketFilterCounters{}},
	}
	var want SocketFilterCounters
	for _, c := range cases {
		before := sfCounters(t, p)
		n := runSocketFilter(t, p, c.frame)
		if c.accept && n != uint32(len(c.frame)) {
			t.Errorf("%s: kept %d of %d bytes, want the whole frame", c.name, n, len(c.frame))
		}
		if !c.accept && n != 0 {
			t.Errorf("%s: accepted (%d bytes), want rejected", c.name, n)
		}
		after := sfCounters(t, p)
		got := SocketFilterCounters{Short: after.Short - before.Short, Version: after.Version - before.Version, JobKey: after.JobKey - before.JobKey}
		if got != c.count {
			t.Errorf("%s: counted %+v, want %+v", c.name, got, c.count)
		}
		if ref := refSocketCount(testFilter, c.frame); ref != c.count {
			t.Errorf("%s: reference counts %+v, table says %+v", c.name, ref, c.count)
		}
		want = addCounters(want, c.count)
	}
	if c := sfCounters(t, p); c != want || c.Foreign() != 7 {
		t.Errorf("final counters %+v (foreign %d), want %+v (foreign 7)", c, c.Foreign(), want)
	}
}

func TestCountingSocketFilterOtherKeys(t *testing.T) {
	// The constants really come from the filter: another job's filter
	// counts our frames as foreign and accepts its own.
	other := nic.Filter{EtherType: 0x88B6, JobKey: 7}
	p := newTestCountingFilter(t, other)
	if n := runSocketFilter(t, p, frame(64, 0x88B6, nic.Version, testJobKey)); n != 0 {
		t.Errorf("other job's filter accepted our key")
	}
	if n := runSocketFilter(t, p, ours(64)); n != 0 {
		t.Errorf("other job's filter accepted our EtherType")
	}
	if n := runSocketFilter(t, p, frame(64, 0x88B6, nic.Version, 7)); n != 64 {
		t.Errorf("other job's filter rejected its own frame (kept %d)", n)
	}
	if c := sfCounters(t, p); c != (SocketFilterCounters{JobKey: 1}) {
		t.Errorf("counters %+v, want JobKey=1 only", c)
	}
}

func TestCountingSocketFilterClose(t *testing.T) {
	p := newTestCountingFilter(t, testFilter)
	if p.FD() < 0 {
		t.Fatalf("FD %d before Close", p.FD())
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if fd := p.FD(); fd != -1 {
		t.Errorf("FD after Close = %d, want -1", fd)
	}
	if _, err := p.Counters(); !errors.Is(err, ErrClosed) {
		t.Errorf("Counters after Close: %v, want ErrClosed", err)
	}
}

func TestNewCountingSocketFilterRejectsZeroEtherType(t *testing.T) {
	needRoot(t)
	if _, err := NewCountingSocketFilter(nic.Filter{JobKey: 1}); err == nil {
		t.Error("NewCountingSocketFilter with EtherType 0 succeeded")
	}
}

// FuzzCountingSocketFilter checks the eBPF socket filter's verdict against
// nic.Filter.Check and its counters against refSocketCount on arbitrary
// frames.
func FuzzCountingSocketFilter(f *testing.F) {
	f.Add(ours(nic.PrefixLen))
	f.Add(ours(100)[:nic.PrefixLen-1])
	f.Add(frame(64, testEtherType, nic.Version, testJobKey^1))
	f.Add(frame(64, testEtherType, nic.Version+1, testJobKey))
	f.Add(frame(60, 0x0800, 0x45, 0))
	f.Add([]byte{})
	p := newTestCountingFilter(f, testFilter)
	f.Fuzz(func(t *testing.T, b []byte) {
		// The kernel's test run takes at most about a page.
		if len(b) > 3000 {
			return
		}
		before := sfCounters(t, p)
		n := runSocketFilter(t, p, b)
		want := testFilter.Check(b) == nil
		if got := n > 0; got != want {
			t.Fatalf("filter accepted=%v, Check accepted=%v for % x", got, want, b)
		}
		if want && n != uint32(len(b)) {
			t.Fatalf("kept %d of %d bytes", n, len(b))
		}
		after := sfCounters(t, p)
		got := SocketFilterCounters{Short: after.Short - before.Short, Version: after.Version - before.Version, JobKey: after.JobKey - before.JobKey}
		if ref := refSocketCount(testFilter, b); got != ref {
			t.Fatalf("counted %+v, want %+v for % x", got, ref, b)
		}
	})
}
