package bootstrap

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
)

const job = 0x10b

func ports(t *testing.T, n int, f memnic.Faults, seed uint64) []*memnic.Port {
	sw := memnic.NewSwitch(seed)
	var ps []*memnic.Port
	for i := 0; i < n; i++ {
		p, err := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: job}, Faults: f})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		ps = append(ps, p)
	}
	return ps
}

type result struct {
	rank int
	macs []string
	err  error
}

func discoverAll(t *testing.T, ps []*memnic.Port, delay func(rank int) time.Duration, timeout time.Duration) []result {
	devs := make([]nic.Device, len(ps))
	for i, p := range ps {
		devs[i] = p
	}
	return discoverOn(devs, delay, timeout)
}

// discoverOn runs one rank's discovery on each device at once.
func discoverOn(ps []nic.Device, delay func(rank int) time.Duration, timeout time.Duration) []result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res := make(chan result, len(ps))
	for r, p := range ps {
		go func() {
			time.Sleep(delay(r))
			macs, err := Discover(ctx, p, Config{Rank: r, Size: len(ps), JobKey: job})
			var s []string
			for _, m := range macs {
				s = append(s, net.HardwareAddr(m.MAC[:]).String())
			}
			res <- result{r, s, err}
		}()
	}
	out := make([]result, len(ps))
	for range ps {
		x := <-res
		out[x.rank] = x
	}
	return out
}

func checkAll(t *testing.T, ps []*memnic.Port, rs []result) {
	t.Helper()
	for _, x := range rs {
		if x.err != nil {
			t.Fatalf("rank %d: %v", x.rank, x.err)
		}
		for r, p := range ps {
			if x.macs[r] != p.HardwareAddr().String() {
				t.Fatalf("rank %d thinks rank %d is %s, it is %s", x.rank, r, x.macs[r], p.HardwareAddr())
			}
		}
	}
}

func TestDiscoverEightRanks(t *testing.T) {
	ps := ports(t, 8, memnic.Faults{}, 1)
	checkAll(t, ps, discoverAll(t, ps, func(int) time.Duration { return 0 }, 10*time.Second))
}

func TestDiscoverUnderLossAndLateStart(t *testing.T) {
	ps := ports(t, 8, memnic.Faults{Loss: 0.2, Duplicate: 0.05, Reorder: 0.05}, 2)
	// Rank 7 starts long after the others could have finished lingering.
	delay := func(r int) time.Duration {
		if r == 7 {
			return 500 * time.Millisecond
		}
		return 0
	}
	checkAll(t, ps, discoverAll(t, ps, delay, 20*time.Second))
}

// Damaged announcements (memnic flips a byte in 10 % of the frames) are
// dropped by their checksum, never believed: every rank still finds every
// other, with no size mismatch or duplicate rank made up by a flipped bit.
func TestDiscoverUnderCorruption(t *testing.T) {
	ps := ports(t, 8, memnic.Faults{Corrupt: 0.1}, 7)
	checkAll(t, ps, discoverAll(t, ps, func(int) time.Duration { return 0 }, 20*time.Second))
}

func TestMissingRankTimesOutNamingIt(t *testing.T) {
	ps := ports(t, 3, memnic.Faults{}, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Discover(ctx, ps[1], Config{Rank: 1, Size: 3, JobKey: job})
		done <- err
	}()
	_, err := Discover(ctx, ps[0], Config{Rank: 0, Size: 3, JobKey: job})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "never heard ranks [2]") {
		t.Fatalf("got %v, want a deadline error naming rank 2", err)
	}
	<-done
}

// A rank of another size does not end the discovery at once (a stranger
// could send that), but the timeout names it.
func TestSizeMismatch(t *testing.T) {
	ps := ports(t, 2, memnic.Faults{}, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	go Discover(ctx, ps[1], Config{Rank: 1, Size: 3, JobKey: job})
	_, err := Discover(ctx, ps[0], Config{Rank: 0, Size: 2, JobKey: job})
	if !errors.Is(err, ErrSizeMismatch) {
		t.Fatalf("got %v, want ErrSizeMismatch", err)
	}
}

func TestDuplicateRank(t *testing.T) {
	ps := ports(t, 3, memnic.Faults{}, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	go Discover(ctx, ps[1], Config{Rank: 1, Size: 3, JobKey: job})
	go Discover(ctx, ps[2], Config{Rank: 1, Size: 3, JobKey: job})
	_, err := Discover(ctx, ps[0], Config{Rank: 0, Size: 3, JobKey: job})
	if !errors.Is(err, ErrDuplicateRank) {
		t.Fatalf("got %v, want ErrDuplicateRank", err)
	}
}

// TestStrangerAnnouncements: a host on the switch announces a job of
// another size from the start, and, once the real ranks have heard each
// other, claims their ranks, again and again. The real ranks ignore it
// (an announcement that conflicts used to end every rank's discovery) and
// find each other with the right addresses. A stranger that claims a rank
// before the real one is heard needs the job secret to be told apart
// (TestStormWithoutSecret).
func TestStrangerAnnouncements(t *testing.T) {
	ps := ports(t, 4, memnic.Faults{}, 9)
	stranger, real := ps[3], ps[:3]
	self, _ := nic.MAC(stranger.HardwareAddr())
	start := time.Now()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		out := make([]byte, msgLen)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			size, rank := 99, i%3
			if time.Since(start) > 50*time.Millisecond && i%2 == 0 {
				size = 3 // a claim of a real rank, heard already
			}
			s := &state{cfg: Config{Rank: rank, Size: size, JobKey: job, EtherType: nic.DefaultEtherType},
				addrs: make([]nic.Addr, size), heard: make([]bool, size), done: make([]bool, size)}
			s.announce(out, self)
			stranger.Send([][]byte{out})
			time.Sleep(200 * time.Microsecond)
		}
	}()
	rs := discoverAll(t, real, func(int) time.Duration { return 0 }, 10*time.Second)
	close(stop)
	<-done
	checkAll(t, real, rs)
}

func TestBadConfig(t *testing.T) {
	ps := ports(t, 1, memnic.Faults{}, 6)
	for _, c := range []Config{{Rank: 0, Size: 0}, {Rank: 2, Size: 2}, {Rank: -1, Size: 2}} {
		if _, err := Discover(context.Background(), ps[0], c); err == nil {
			t.Errorf("Discover(%+v) succeeded", c)
		}
	}
	macs, err := Discover(context.Background(), ps[0], Config{Rank: 0, Size: 1})
	if err != nil || len(macs) != 1 {
		t.Fatalf("single rank: %v %v", macs, err)
	}
}

func TestParseRejects(t *testing.T) {
	s := &state{cfg: Config{Rank: 1, Size: 4, Rail: 2, JobKey: job, EtherType: nic.DefaultEtherType, Endpoint: 3}, addrs: make([]nic.Addr, 4), heard: make([]bool, 4), done: make([]bool, 4)}
	out := make([]byte, msgLen)
	s.announce(out, [6]byte{2, 0, 0, 0, 0, 9})
	a, err := Parse(out)
	if err != nil || a.Rank != 1 || a.Size != 4 || a.Rail != 2 || a.Done || a.Src != [6]byte{2, 0, 0, 0, 0, 9} || a.Endpoint != 3 {
		t.Fatalf("round trip: %+v %v", a, err)
	}
	bad := append([]byte(nil), out...)
	bad[offRank+3] = 9 // rank 9 of 4
	if _, err := Parse(bad); !errors.Is(err, ErrBadAnnouncement) {
		t.Fatalf("rank beyond size: %v", err)
	}
	if _, err := Parse(out[:msgLen-1]); !errors.Is(err, ErrBadAnnouncement) {
		t.Fatalf("short: %v", err)
	}
	other := append([]byte(nil), out...)
	other[nic.OffKind] = 1
	if _, err := Parse(other); !errors.Is(err, ErrNotAnnouncement) {
		t.Fatalf("other kind: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	s := &state{cfg: Config{Rank: 1, Size: 4, JobKey: job, EtherType: nic.DefaultEtherType}, addrs: make([]nic.Addr, 4), heard: make([]bool, 4), done: make([]bool, 4)}
	out := make([]byte, msgLen)
	s.announce(out, [6]byte{2, 0, 0, 0, 0, 9})
	f.Add(out)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Parse(b)
		if err == nil && (a.Rank < 0 || a.Rank >= a.Size || a.Size < 1) {
			t.Fatalf("accepted impossible announcement %+v", a)
		}
	})
}

func TestHostfile(t *testing.T) {
	good := "# job 7\n1 02:00:00:00:01:00,02:00:00:00:01:01\n\n0 02:00:00:00:00:00,02:00:00:00:00:01\n"
	m, eps, err := ParseHostfile(strings.NewReader(good), 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if m[1][1].String() != "02:00:00:00:01:01" || m[0][0].String() != "02:00:00:00:00:00" || eps[0] != 0 || eps[1] != 0 {
		t.Fatalf("parsed %v %v", m, eps)
	}
	// Two ranks of one host: one MAC, two endpoints.
	m, eps, err = ParseHostfile(strings.NewReader("0 02:00:00:00:00:00 0\n1 02:00:00:00:00:00 1\n"), 2, 1)
	if err != nil || m[0][0].String() != m[1][0].String() || eps[0] != 0 || eps[1] != 1 {
		t.Fatalf("endpoints: %v %v %v", m, eps, err)
	}
	for _, bad := range []string{
		"0 02:00:00:00:00:00\n",                            // rank 1 missing
		"0 02:00:00:00:00:00\n0 02:00:00:00:00:01\n",       // twice
		"0 02:00:00:00:00:00\n2 02:00:00:00:00:01\n",       // out of range
		"0 02:00:00:00:00:00\n1 nonsense\n",                // bad MAC
		"0 02:00:00:00:00:00 x\n1 02:00:00:00:00:01\n",     // bad endpoint
		"0 02:00:00:00:00:00 65535\n1 02:00:00:00:00:01\n", // every endpoint is no endpoint
		"0 02:00:00:00:00:00 1 2\n1 02:00:00:00:00:01\n",   // extra field
		"0 00:00:00:00:00:00:00:00\n1 02:00:00:00:00:01\n",
	} {
		if _, _, err := ParseHostfile(strings.NewReader(bad), 2, 1); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzHostfile(f *testing.F) {
	f.Add("0 02:00:00:00:00:00\n1 02:00:00:00:00:01\n", 2, 1)
	f.Add("# x\n0 02:00:00:00:00:00,02:00:00:00:00:02\n", 1, 2)
	f.Fuzz(func(t *testing.T, s string, size, rails int) {
		if size > 64 || rails > 8 {
			return
		}
		m, eps, err := ParseHostfile(strings.NewReader(s), size, rails)
		if err != nil {
			return
		}
		if len(m) != size || len(eps) != size {
			t.Fatalf("%d ranks, want %d", len(m), size)
		}
		for _, r := range m {
			if len(r) != rails {
				t.Fatalf("%d rails, want %d", len(r), rails)
			}
		}
	})
}

// TestDefaultPeriod: small jobs announce every 5ms; in large ones the
// period grows so that a host hears at most 50 000 announcements a second.
func TestDefaultPeriod(t *testing.T) {
	if got := DefaultPeriod(2); got != 5*time.Millisecond {
		t.Errorf("DefaultPeriod(2) = %v", got)
	}
	for _, n := range []int{2, 64, 250, 251, 1024, 1 << 16} {
		p := DefaultPeriod(n)
		if int64(n)*int64(time.Second) > 50000*int64(p) {
			t.Errorf("%d ranks: period %v, more than 50 000 announcements a second", n, p)
		}
		if p < 5*time.Millisecond {
			t.Errorf("%d ranks: period %v below 5ms", n, p)
		}
	}
}
