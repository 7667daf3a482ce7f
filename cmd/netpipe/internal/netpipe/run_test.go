package netpipe

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic/memnic"
)

// runBoth runs both ends of cfg over the connected pair.
func runBoth(t *testing.T, tc, rc Conn, cfg Config) ([]Point, error, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := Run(ctx, rc, Receiver, cfg)
		if err != nil {
			tc.Close() // let the transmitter see it
		}
		errc <- err
	}()
	pts, err := Run(ctx, tc, Transmitter, cfg)
	if err != nil {
		rc.Close()
	}
	return pts, err, <-errc
}

func checkPoints(t *testing.T, pts []Point, cfg Config) {
	t.Helper()
	want := Schedule(cfg.Start, cfg.End, cfg.Pert)
	var got []int
	for i, p := range pts {
		got = append(got, p.Bytes)
		if p.N != i {
			t.Errorf("point %d numbered %d", i, p.N)
		}
		if p.Seconds <= 0 || math.IsInf(p.Seconds, 0) {
			t.Errorf("point %d: time %v", i, p.Seconds)
		}
		if m := Mbps(p.Bytes, cfg.Bidir, p.Seconds); m != p.Mbps {
			t.Errorf("point %d: %v Mbps, formula gives %v", i, p.Mbps, m)
		}
		if cfg.Repeats > 0 && p.Repeats != cfg.Repeats {
			t.Errorf("point %d: %d repeats, want %d", i, p.Repeats, cfg.Repeats)
		}
		if p.Repeats < 1 {
			t.Errorf("point %d: %d repeats", i, p.Repeats)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("sizes %v, want %v", got, want)
	}
}

func TestRunModesOverEveryModule(t *testing.T) {
	base := Config{Start: 1, End: 5000, Pert: 3, Trials: 2, Repeats: 10}
	modes := map[string]Config{}
	modes["ping-pong"] = base
	s := base
	s.Stream = true
	modes["stream"] = s
	b := base
	b.Bidir = true
	modes["bidir"] = b
	i := base
	i.Integrity = true
	modes["integrity"] = i
	for name, cfg := range modes {
		for _, mod := range []string{"raw", "tcp", "vi", "rdma"} {
			t.Run(mod+"/"+name, func(t *testing.T) {
				var tc, rc Conn
				switch mod {
				case "raw":
					tx, rx, _ := memPair(t, 1, memnic.PortConfig{})
					tc, rc = connectPair(t, RawModule{}, tx, rx)
				case "vi":
					tx, rx, _ := memPair(t, 1, memnic.PortConfig{})
					tc, rc = connectPair(t, VIModule{}, tx, rx)
				case "rdma":
					tx, rx, _ := memPair(t, 1, memnic.PortConfig{})
					tc, rc = connectPair(t, RDMAModule{}, tx, rx)
				default:
					tc, rc = tcpPair(t)
				}
				pts, terr, rerr := runBoth(t, tc, rc, cfg)
				if terr != nil || rerr != nil {
					t.Fatalf("transmitter %v, receiver %v", terr, rerr)
				}
				checkPoints(t, pts, cfg)
			})
		}
	}
}

func TestRunCalibratesAndStops(t *testing.T) {
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{})
	tc, rc := connectPair(t, RawModule{}, tx, rx)
	cfg := Config{Start: 1, End: 300, Pert: 3, Trials: 2, RunTime: 2 * time.Millisecond}
	pts, terr, rerr := runBoth(t, tc, rc, cfg)
	if terr != nil || rerr != nil {
		t.Fatalf("transmitter %v, receiver %v", terr, rerr)
	}
	checkPoints(t, pts, cfg)
	for _, p := range pts {
		if p.Repeats < 2 {
			t.Errorf("%d bytes: %d repeats, below the trial count", p.Bytes, p.Repeats)
		}
	}

	// A stop time every transfer exceeds ends the run after one point, as
	// NetPIPE's tlast < STOPTM test does.
	cfg = Config{Start: 1, End: 300, Pert: 3, Trials: 1, Repeats: 3, StopTime: time.Nanosecond}
	pts, terr, rerr = runBoth(t, tc, rc, cfg)
	if terr != nil || rerr != nil {
		t.Fatalf("transmitter %v, receiver %v", terr, rerr)
	}
	if len(pts) != 0 {
		// The latency estimate itself already exceeds 1 ns: no point at all.
		t.Errorf("%d points with a 1 ns stop time, want 0", len(pts))
	}
}

// corrupter flips one byte of the kth message it receives.
type corrupter struct {
	Conn
	k, n int
	off  int
}

func (c *corrupter) Recv(ctx context.Context, msg []byte) error {
	err := c.Conn.Recv(ctx, msg)
	if err == nil && len(msg) > c.off && len(msg) != ctlLen {
		if c.n == c.k {
			msg[c.off] ^= 0x20
		}
		c.n++
	}
	return err
}

func TestIntegrityCatchesOneFlippedByte(t *testing.T) {
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{})
	tc, rc := connectPair(t, RawModule{}, tx, rx)
	bad := &corrupter{Conn: rc, k: 150, off: 17}
	cfg := Config{Start: 20, End: 100, Pert: 0, Repeats: 20, Integrity: true}
	_, terr, rerr := runBoth(t, tc, bad, cfg)
	var ie *IntegrityError
	if !errors.As(rerr, &ie) {
		t.Fatalf("receiver: %v (transmitter %v), want an IntegrityError", rerr, terr)
	}
	if ie.Offset != 17 || ie.Got != ie.Want^0x20 {
		t.Errorf("integrity error %+v: want byte 17 flipped by 0x20", ie)
	}

	// The same corruption without -I goes unnoticed: it is the integrity
	// mode that checks, not luck.
	tx, rx, _ = memPair(t, 1, memnic.PortConfig{})
	tc, rc = connectPair(t, RawModule{}, tx, rx)
	bad = &corrupter{Conn: rc, k: 150, off: 17}
	cfg.Integrity = false
	if _, terr, rerr := runBoth(t, tc, bad, cfg); terr != nil || rerr != nil {
		t.Fatalf("without integrity: transmitter %v, receiver %v", terr, rerr)
	}
}

func TestIntegrityCatchesMemnicCorruption(t *testing.T) {
	// Raw frames carry no checksum: memnic flips a byte somewhere after the
	// Ethernet header, and the integrity mode must report it, whether it
	// hit the payload (a byte mismatch) or our header (a malformed frame).
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{Faults: memnic.Faults{Corrupt: 0.05}})
	tx.Integrity, rx.Integrity = true, true
	tx.Timeout, rx.Timeout = 2*time.Second, 2*time.Second
	tc, rc := connectPair(t, RawModule{}, tx, rx)
	cfg := Config{Start: 4000, End: 9000, Pert: 0, Repeats: 30, Integrity: true}
	_, terr, rerr := runBoth(t, tc, rc, cfg)
	err := errors.Join(terr, rerr)
	if err == nil {
		t.Fatal("corrupted frames went unnoticed")
	}
	if !containsIntegrity(err) {
		t.Fatalf("error %v does not report an integrity failure", err)
	}
}

func containsIntegrity(err error) bool {
	var ie *IntegrityError
	return errors.As(err, &ie) || err != nil && strings.Contains(err.Error(), "integrity check failed")
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Start: 0, End: 10},
		{Start: 10, End: 5},
		{Start: 1, End: 10, Stream: true, Bidir: true},
		{Start: 1, End: maxMessage + 1},
	} {
		if _, err := Run(context.Background(), nil, Transmitter, cfg); err == nil {
			t.Errorf("Run(%+v) accepted", cfg)
		}
	}
}

func TestRawLossRerunsPoints(t *testing.T) {
	// Lost frames make a point stall; both ends resynchronize and the
	// point runs again, and the integrity check proves that no frame of an
	// abandoned message lands in a later one.
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{})
	tx.Timeout, rx.Timeout = 100*time.Millisecond, 100*time.Millisecond
	tx.Integrity, rx.Integrity = true, true
	tc, rc := connectPair(t, RawModule{}, tx, rx)
	for _, d := range append(tx.Devices, rx.Devices...) {
		d.(*memnic.Port).SetFaults(memnic.Faults{Loss: 0.002})
	}
	retries := 0
	cfg := Config{Start: 1, End: 20000, Pert: 3, Repeats: 10, Integrity: true, Retries: 20,
		OnRetry: func(n, bytes int, err error) {
			retries++
			if !errors.Is(err, ErrLost) {
				t.Errorf("retry of point %d (%d bytes) for %v, want ErrLost", n, bytes, err)
			}
		}}
	pts, terr, rerr := runBoth(t, tc, rc, cfg)
	if terr != nil || rerr != nil {
		t.Fatalf("transmitter: %v; receiver: %v", terr, rerr)
	}
	checkPoints(t, pts, cfg)
	if retries == 0 {
		t.Fatal("0.2% loss never made a point re-run")
	}
	t.Logf("%d re-runs", retries)
}

func TestRawLossFailsWithoutRetries(t *testing.T) {
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{})
	tx.Timeout, rx.Timeout = 100*time.Millisecond, 100*time.Millisecond
	tc, rc := connectPair(t, RawModule{}, tx, rx)
	for _, d := range rx.Devices {
		d.(*memnic.Port).SetFaults(memnic.Faults{Loss: 0.2})
	}
	_, terr, rerr := runBoth(t, tc, rc, Config{Start: 20000, End: 20000, Repeats: 20, Retries: -1})
	if err := errors.Join(terr, rerr); !errors.Is(err, ErrLost) {
		t.Fatalf("20%% loss without retries: %v, want ErrLost", err)
	}
}

// slowSender takes a millisecond for every data message it sends and
// counts them.
type slowSender struct {
	Conn
	sent int
}

func (c *slowSender) Send(ctx context.Context, msg []byte) error {
	if len(msg) != ctlLen {
		c.sent++
		time.Sleep(time.Millisecond)
	}
	return c.Conn.Send(ctx, msg)
}

// TestLatencyEstimateFitsRunTime: where one round trip of the first size is
// slow, the latency estimate makes as many as fit in the run time, not
// LatencyRepeats (100 round trips of 8 MiB at 250 Mbit/s took 30 s).
func TestLatencyEstimateFitsRunTime(t *testing.T) {
	tx, rx, _ := memPair(t, 1, memnic.PortConfig{})
	tc, rc := connectPair(t, RawModule{}, tx, rx)
	slow := &slowSender{Conn: tc}
	cfg := Config{Start: 4000, End: 4000, Trials: 1, Repeats: 1, RunTime: 10 * time.Millisecond}
	pts, terr, rerr := runBoth(t, slow, rc, cfg)
	if terr != nil || rerr != nil {
		t.Fatalf("transmitter %v, receiver %v", terr, rerr)
	}
	if len(pts) != 1 {
		t.Fatalf("%d points, want 1", len(pts))
	}
	// One probe, about 10 ms of 1 ms round trips, one timed repeat.
	if slow.sent > 20 {
		t.Errorf("%d data messages sent for a 10 ms run time of 1 ms round trips; want at most 20", slow.sent)
	}
}

// TestOneBufferPerEnd: as in NetPIPE's default mode, an end receives into
// the buffer it sends from, unless both directions are in flight at once.
func TestOneBufferPerEnd(t *testing.T) {
	for _, bidir := range []bool{false, true} {
		r := &runner{cfg: Config{Bidir: bidir}}
		r.size(100)
		r.size(1000)
		if len(r.sbuf) != 1000 || len(r.rbuf) != 1000 {
			t.Fatalf("bidir %v: buffers of %d and %d bytes", bidir, len(r.sbuf), len(r.rbuf))
		}
		if same := &r.sbuf[0] == &r.rbuf[0]; same == bidir {
			t.Errorf("bidir %v: one buffer %v", bidir, same)
		}
	}
}
