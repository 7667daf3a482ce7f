package mplite

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethervia/ethervia/reliability"
	"github.com/ethervia/ethervia/vi"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestReadEnv(t *testing.T) {
	for _, tc := range []struct {
		name       string
		env        map[string]string
		found      bool
		err        bool
		rank, size int
		ifaces     int
		job        uint32
		driver     string
	}{
		{name: "none", env: map[string]string{}},
		{name: "mprun", env: map[string]string{"MPLITE_RANK": "2", "MPLITE_SIZE": "4", "MPLITE_IFACES": "eth0,eth1",
			"MPLITE_JOB": "12345", "MPLITE_DRIVER": "afxdp"}, found: true, rank: 2, size: 4, ifaces: 2, job: 12345, driver: "afxdp"},
		{name: "hydra", env: map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "MPLITE_IFACES": "eth0", "MPLITE_JOB": "0x10"},
			found: true, rank: 1, size: 2, ifaces: 1, job: 16, driver: "auto"},
		{name: "mplite wins over hydra", env: map[string]string{"MPLITE_RANK": "0", "MPLITE_SIZE": "3", "PMI_RANK": "1",
			"PMI_SIZE": "2", "MPLITE_IFACES": "e", "MPLITE_JOB": "1"}, found: true, rank: 0, size: 3, ifaces: 1, job: 1, driver: "auto"},
		{name: "openmpi", env: map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "MPLITE_IFACES": "e",
			"MPLITE_JOB": "7"}, found: true, rank: 3, size: 8, ifaces: 1, job: 7, driver: "auto"},
		{name: "slurm", env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "MPLITE_IFACES": "e",
			"MPLITE_JOB": "7"}, found: true, rank: 0, size: 2, ifaces: 1, job: 7, driver: "auto"},
		{name: "singleton by size", env: map[string]string{"PMI_RANK": "0", "PMI_SIZE": "1"}, found: true, size: 1, driver: "auto"},
		{name: "half set", env: map[string]string{"PMI_RANK": "0"}, found: true, err: true},
		{name: "rank out of range", env: map[string]string{"MPLITE_RANK": "4", "MPLITE_SIZE": "4"}, found: true, err: true},
		{name: "no ifaces", env: map[string]string{"MPLITE_RANK": "0", "MPLITE_SIZE": "2", "MPLITE_JOB": "1"}, found: true, err: true},
		{name: "no job", env: map[string]string{"MPLITE_RANK": "0", "MPLITE_SIZE": "2", "MPLITE_IFACES": "e"}, found: true, err: true},
		{name: "slurm job key", env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "MPLITE_IFACES": "e",
			"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"}, found: true, rank: 1, size: 2, ifaces: 1, job: jobKeyOf("slurm:77.0"), driver: "auto"},
		{name: "open mpi job key", env: map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "MPLITE_IFACES": "e",
			"OMPI_MCA_ess_base_jobid": "1301676033"}, found: true, size: 2, ifaces: 1, job: jobKeyOf("ompi:1301676033"), driver: "auto"},
		{name: "bad job", env: map[string]string{"MPLITE_RANK": "0", "MPLITE_SIZE": "2", "MPLITE_IFACES": "e",
			"MPLITE_JOB": "4294967296"}, found: true, err: true},
		{name: "bad xdp queue", env: map[string]string{"MPLITE_RANK": "0", "MPLITE_SIZE": "2", "MPLITE_IFACES": "e",
			"MPLITE_JOB": "1", "MPLITE_XDP_QUEUE": "-1"}, found: true, err: true},
		{name: "bad flow rule", env: map[string]string{"MPLITE_RANK": "0", "MPLITE_SIZE": "2", "MPLITE_IFACES": "e",
			"MPLITE_JOB": "1", "MPLITE_XDP_FLOWRULE": "yes"}, found: true, err: true},
		{name: "bad afpacket ring", env: map[string]string{"MPLITE_RANK": "0", "MPLITE_SIZE": "2", "MPLITE_IFACES": "e",
			"MPLITE_JOB": "1", "MPLITE_AFPACKET_RING": "off"}, found: true, err: true},
		{name: "bad driver", env: map[string]string{"MPLITE_RANK": "0", "MPLITE_SIZE": "2", "MPLITE_IFACES": "e",
			"MPLITE_JOB": "1", "MPLITE_DRIVER": "dpdk"}, found: true, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			e, found, err := readEnv(context.Background(), envOf(tc.env), &cfg, nil, noNet())
			if found != tc.found || (err != nil) != tc.err {
				t.Fatalf("found %v err %v", found, err)
			}
			if err != nil {
				if !errors.Is(err, ErrEnvironment) {
					t.Errorf("error %v is not ErrEnvironment", err)
				}
				return
			}
			if !found {
				return
			}
			if e.rank != tc.rank || e.size != tc.size || len(e.ifaces) != tc.ifaces || e.job != tc.job || e.driver != tc.driver {
				t.Errorf("got %+v", e)
			}
		})
	}
}

// A process started without a launcher is a world of one, with no
// network: sends to itself work.
func TestInitSingleton(t *testing.T) {
	for _, k := range []string{"MPLITE_RANK", "MPLITE_SIZE", "PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK",
		"OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"} {
		t.Setenv(k, "")
	}
	c, err := Init()
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank() != 0 || c.Size() != 1 {
		t.Fatalf("rank %d of %d", c.Rank(), c.Size())
	}
	r, err := c.Irecv(make([]byte, 3), AnySource, AnyTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send([]byte("abc"), 0, 5); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Wait(); err != nil || st != (Status{Source: 0, Tag: 5, Count: 3}) {
		t.Fatalf("%+v %v", st, err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
}

// TestSyncFlag: only an RTS may carry the synchronous flag, and with it an
// RTS may be as short as an eager message.
func TestSyncFlag(t *testing.T) {
	b := make([]byte, envLen)
	putEnvelope(b, &envelope{typ: msgRTS, length: 1, sendID: 3, sync: true})
	var e envelope
	if err := parseEnvelope(b, 100, &e); err != nil || !e.sync || e.length != 1 {
		t.Fatalf("synchronous RTS of 1 byte: %+v, %v", e, err)
	}
	putEnvelope(b, &envelope{typ: msgRTS, length: 1, sendID: 3})
	if err := parseEnvelope(b, 100, &e); !errors.Is(err, errEnvelope) {
		t.Fatalf("plain RTS of 1 byte under a 100-byte eager limit: %v", err)
	}
	putEnvelope(b, &envelope{typ: msgCTS, sendID: 3, recvID: 4})
	b[1] = flagSync
	if err := parseEnvelope(b, 100, &e); !errors.Is(err, errEnvelope) {
		t.Fatalf("CTS with the synchronous flag: %v", err)
	}
}

func FuzzEnvelope(f *testing.F) {
	add := func(e envelope, data int) {
		b := make([]byte, envelopeLen(e.typ)+data)
		putEnvelope(b, &e)
		f.Add(b, 12<<10)
	}
	add(envelope{typ: msgEager, tag: 3, length: 5}, 5)
	add(envelope{typ: msgEager}, 0)
	add(envelope{typ: msgRTS, tag: 1, length: 1 << 20, sendID: 9}, 0)
	add(envelope{typ: msgRTS, tag: 1, length: 1, sendID: 9, sync: true}, 0)
	add(envelope{typ: msgCTS, sendID: 9, recvID: 4, length: 1 << 20, rkey: 0xdeadbeef, raddr: 64}, 0)
	runs := make([]byte, envLen+2*runLen)
	putEnvelope(runs, &envelope{typ: msgCTS, sendID: 9, recvID: 4, length: 5000, rkey: 7})
	putRuns(runs, []Run{{Off: 0, Len: 4096}, {Off: 8192, Len: 4096}}, 5000)
	f.Add(runs, 12<<10)
	add(envelope{typ: msgDone, sendID: 9, recvID: 4}, 0)
	add(envelope{typ: msgFin}, 0)
	add(envelope{typ: msgFinAck}, 0)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, msg []byte, eager int) {
		if eager < 0 || eager > MaxEagerLimit {
			return
		}
		var e envelope
		if err := parseEnvelope(msg, eager, &e); err != nil {
			if !errors.Is(err, errEnvelope) {
				t.Fatalf("error %v is not errEnvelope", err)
			}
			return
		}
		// What parses is consistent, and encodes back to the same bytes.
		if e.tag < 0 || e.tag > MaxTag || e.length < 0 {
			t.Fatalf("parsed %+v", e)
		}
		switch e.typ {
		case msgEager:
			if len(msg) != eagerLen+e.length || e.length > eager {
				t.Fatalf("eager %+v in %d bytes", e, len(msg))
			}
		case msgRTS:
			if (e.length <= eager && !e.sync) || e.sendID == 0 {
				t.Fatalf("RTS %+v", e)
			}
		}
		if e.sync && e.typ != msgRTS {
			t.Fatalf("synchronous %+v", e)
		}
		b := make([]byte, envelopeLen(e.typ)+e.nruns*runLen)
		if n := putEnvelope(b, &e); n != envelopeLen(e.typ) {
			t.Fatalf("%+v: an envelope of %d bytes", e, n)
		}
		if e.nruns > 0 {
			var runs []Run
			total := 0
			for i := range e.nruns {
				run := e.runAt(i)
				if run.Len <= 0 || run.Off < 0 {
					t.Fatalf("CTS run %+v", run)
				}
				total += run.Len
				runs = append(runs, run)
			}
			if e.typ != msgCTS || total != e.length || len(msg) != len(b) {
				t.Fatalf("%+v with runs of %d bytes in %d bytes", e, total, len(msg))
			}
			putRuns(b, runs, e.length)
		}
		if string(b) != string(msg[:len(b)]) {
			t.Fatalf("%x encodes back to %x", msg[:len(b)], b)
		}
	})
}

// TestCTSRuns: a CTS carries the runs holding the granted bytes, the last
// one cut short, and a receiver refuses runs that do not add up to the
// grant, empty runs, and runs on other message types.
func TestCTSRuns(t *testing.T) {
	runs := []Run{{Off: 100, Len: 4000}, {Off: 5000, Len: 4000}, {Off: 10000, Len: 4000}}
	b := make([]byte, envLen+3*runLen)
	putEnvelope(b, &envelope{typ: msgCTS, sendID: 1, recvID: 2, length: 6000})
	n := putRuns(b, runs, 6000)
	var e envelope
	if err := parseEnvelope(b[:envLen+n], 0, &e); err != nil {
		t.Fatal(err)
	}
	if e.nruns != 2 || e.runAt(0) != (Run{100, 4000}) || e.runAt(1) != (Run{5000, 2000}) {
		t.Fatalf("runs %d: %+v %+v", e.nruns, e.runAt(0), e.runAt(1))
	}
	bad := func(name string, edit func(m []byte)) {
		m := append([]byte(nil), b[:envLen+n]...)
		edit(m)
		if err := parseEnvelope(m, 0, &e); !errors.Is(err, errEnvelope) {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad("short of the grant", func(m []byte) { m[envLen+runLen+15]-- })
	bad("beyond the grant", func(m []byte) { m[envLen+runLen+15]++ })
	bad("empty run", func(m []byte) { copy(m[envLen+8:envLen+16], make([]byte, 8)) })
	bad("count beyond the message", func(m []byte) { m[31] = 3 })
	bad("runs on an RTS", func(m []byte) { m[0] = msgRTS })
}

// The window at a known line rate keeps about lineWindowTime of the line
// in flight: 32 frames at 100 Mbit/s and MTU 1500, the default on fast
// lines, never fewer than 16.
func TestLineWindow(t *testing.T) {
	for _, tc := range []struct {
		rate uint64
		mtu  int
		want int
	}{{100e6, 1500, 32}, {1e9, 1500, 256}, {10e9, 9000, 256}, {1e6, 1500, 16}, {100e6, 9000, 16}} {
		if got := lineWindow(tc.rate, tc.mtu); got != tc.want {
			t.Errorf("lineWindow(%d, %d) = %d, want %d", tc.rate, tc.mtu, got, tc.want)
		}
	}
}

// At a known line rate an acknowledgement may wait lineAckFrames frames'
// time, about a millisecond at 100 Mbit/s, and no retransmission comes
// before twice that; on lines where that is shorter than reliability's
// default the defaults stay (zero).
func TestLineAckTiming(t *testing.T) {
	for _, tc := range []struct {
		rate       uint64
		mtu        int
		delay, rto time.Duration
	}{
		{100e6, 1500, 971520 * time.Nanosecond, 1943040 * time.Nanosecond},
		{250e6, 1500, 388608 * time.Nanosecond, reliability.DefaultRTOMin},
		{1e9, 1500, 0, 0},
		{10e9, 9000, 0, 0},
		{1e6, 1500, 97152 * time.Microsecond, 194304 * time.Microsecond},
	} {
		d, r := lineAckTiming(tc.rate, tc.mtu)
		if d != tc.delay || r != tc.rto {
			t.Errorf("lineAckTiming(%d, %d) = %v, %v; want %v, %v", tc.rate, tc.mtu, d, r, tc.delay, tc.rto)
		}
	}
}

// TestLineOptions: a known rate sets the window on any fabric, and the
// acknowledgement timing on one NIC's provider or on a bond's lanes (whose
// requested acknowledgements wait as long), never on a bond's rails; an
// unknown one leaves vi's defaults.
func TestLineOptions(t *testing.T) {
	for _, tc := range []struct {
		rate          uint64
		rails, window int
		ack, lane     bool
	}{
		{0, 1, 0, false, false},
		{0, 2, 0, false, false},
		{100e6, 1, 32, true, false},
		{100e6, 2, 32, false, true},
		{1e9, 1, 256, false, false},
		{1e9, 2, 256, false, false},
	} {
		var o vi.Options
		l := lineOptions(&o, tc.rate, 1500, tc.rails)
		if o.Window != tc.window || (o.AckDelay != 0) != tc.ack || (o.RTOMin != 0) != tc.ack || o.AckReqDelay != 0 {
			t.Errorf("rate %d, %d rails: window %d, ack delay %v, RTO floor %v, requested-ack delay %v; want window %d, ack timing set %v",
				tc.rate, tc.rails, o.Window, o.AckDelay, o.RTOMin, o.AckReqDelay, tc.window, tc.ack)
		}
		if (l.AckDelay != 0) != tc.lane || l.AckReqDelay != l.AckDelay || (l.RTOMin != 0) != tc.lane {
			t.Errorf("rate %d, %d rails: lanes' ack delay %v, requested-ack delay %v, RTO floor %v; want set %v, both delays equal",
				tc.rate, tc.rails, l.AckDelay, l.AckReqDelay, l.RTOMin, tc.lane)
		}
	}
}

// TestScaledRecvDepth: small jobs keep the depth; large ones shrink it so
// that buffers for every peer stay within the budget, down to a floor.
func TestScaledRecvDepth(t *testing.T) {
	slot := envLen + DefaultEagerLimit
	for _, tc := range []struct{ size, want int }{
		{1, DefaultRecvDepth}, {2, DefaultRecvDepth}, {64, DefaultRecvDepth}, {128, 16}, {256, 8}, {1024, minScaledDepth},
	} {
		got := scaledRecvDepth(DefaultRecvDepth, tc.size, slot)
		if got != tc.want {
			t.Errorf("size %d: depth %d, want %d", tc.size, got, tc.want)
		}
		if tc.size > 1 && got > minScaledDepth && 2*got*slot*(tc.size-1) > peerBufferBudget {
			t.Errorf("size %d: depth %d exceeds the budget", tc.size, got)
		}
	}
	if got := scaledRecvDepth(4, 1024, slot); got != 4 {
		t.Errorf("a depth below the floor changed: %d", got)
	}
}

// lineBinds tells a line from the CPUs by the t_c the ping-pongs measured.
func TestLineBinds(t *testing.T) {
	for _, tc := range []struct {
		rate, tc float64 // bytes/s, s/byte
		want     bool
	}{
		{11.5e6, 4.5e-8, true}, // 100 Mbit/s, 64 KiB ping-pongs partly line-bound
		{117e6, 2.8e-9, true},  // 1 Gbit/s
		{500e6, 2.5e-9, false}, // unlimited veth: the CPUs
		{0, 2.5e-9, false},     // nothing measured
		{117e6, 0, false},      // no t_c
	} {
		if got := lineBinds(tc.rate, tc.tc); got != tc.want {
			t.Errorf("lineBinds(%g B/s, t_c %g) = %v, want %v", tc.rate, tc.tc, got, tc.want)
		}
	}
}

// lineClocked tells a line's steady arrivals from the CPUs' bursts, with
// quartiles measured on this testbed (microseconds).
func TestLineClocked(t *testing.T) {
	us := func(v ...int) []time.Duration {
		var g []time.Duration
		for _, x := range v {
			g = append(g, time.Duration(x)*time.Microsecond)
		}
		return g
	}
	for _, tc := range []struct {
		name string
		gaps []time.Duration
		want bool
	}{
		{"100 Mbit/s", us(2783, 2830, 2854, 2873, 2941, 2830, 2850, 2860), true},
		{"1 Gbit/s", us(16, 266, 287, 308, 620, 270, 290, 300), true},
		{"unlimited veth", us(32, 58, 73, 85, 199, 60, 75, 84), false},
		{"stalled veth", us(11, 19, 43, 86, 4708, 20, 40, 90), false},
		{"a burst", us(0, 0, 0, 0, 0, 0, 0, 900), false},
		{"too few", us(100, 100, 100), false},
	} {
		if got := lineClocked(tc.gaps); got != tc.want {
			t.Errorf("%s: lineClocked = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEndpointFromEnv: the endpoint and the number of ranks sharing the
// host's NICs, from each launcher's variables.
func TestEndpointFromEnv(t *testing.T) {
	for _, c := range []struct {
		env   map[string]string
		ep    uint16
		local int
		bad   bool
	}{
		{env: nil, ep: 0, local: 1},
		{env: map[string]string{"MPLITE_ENDPOINT": "3", "MPLITE_LOCAL_SIZE": "16"}, ep: 3, local: 16},
		{env: map[string]string{"MPLITE_ENDPOINT": "0", "MPLITE_LOCAL_SIZE": "1"}, ep: 0, local: 1},
		{env: map[string]string{"MPLITE_ENDPOINT": "2"}, ep: 2, local: 3}, // no size: at least the endpoint's
		{env: map[string]string{"MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4"}, ep: 1, local: 4},
		{env: map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}, ep: 0, local: 8},
		{env: map[string]string{"SLURM_LOCALID": "1", "SLURM_STEP_TASKS_PER_NODE": "2(x3),4"}, ep: 1, local: 4},
		{env: map[string]string{"MPLITE_ENDPOINT": "x"}, bad: true},
		{env: map[string]string{"MPLITE_ENDPOINT": "1", "MPLITE_LOCAL_SIZE": "-2"}, bad: true},
	} {
		ep, local, err := endpointFromEnv(envOf(c.env))
		if c.bad {
			if err == nil {
				t.Errorf("%v: accepted", c.env)
			}
			continue
		}
		if err != nil || ep != c.ep || local != c.local {
			t.Errorf("%v: endpoint %d, %d local ranks, %v; want %d, %d", c.env, ep, local, err, c.ep, c.local)
		}
	}
}

// TestRingSizeShared: ranks that share a NIC divide the default receive
// ring among them, down to minRing each.
func TestRingSizeShared(t *testing.T) {
	for _, c := range []struct{ local, want int }{
		{0, 8 << 20}, {1, 8 << 20}, {2, 4 << 20}, {4, 2 << 20}, {8, 1 << 20}, {16, minRing}, {128, minRing},
	} {
		if got := ringSize(c.local); got != c.want {
			t.Errorf("ringSize(%d) = %d, want %d", c.local, got, c.want)
		}
	}
}

func TestRanksPerCPU(t *testing.T) {
	for _, c := range []struct{ size, cpus, want int }{{8, 0, 1}, {2, 2, 1}, {8, 2, 4}, {9, 2, 5}, {128, 2, 64}} {
		if got := ranksPerCPU(c.size, c.cpus); got != c.want {
			t.Errorf("ranksPerCPU(%d, %d) = %d, want %d", c.size, c.cpus, got, c.want)
		}
	}
}

// connectingPeer gives rank 1 of a bonded two-rank world, with its peer 0
// set up and counted as connecting, and eager envelopes of tag 77 to feed
// it. The world closes with the test.
func connectingPeer(t *testing.T) (*Comm, *peer, func(payload string) []byte) {
	t.Helper()
	comms, err := NewLocalWorld(2, WithLocalRails(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	c := comms[1]
	c.mu.Lock()
	p := c.peers[0]
	c.setupPeer(p)
	p.state = stConnecting
	c.mu.Unlock()
	return c, p, func(payload string) []byte {
		b := make([]byte, eagerLen+len(payload))
		putEnvelope(b, &envelope{typ: msgEager, ctx: c.pctx, tag: 77, length: len(payload)})
		copy(b[eagerLen:], payload)
		return b
	}
}

// TestHeldReleasedWhileConnecting: numbered envelopes that come out of
// order while our side still counts the connection as being set up (a
// bond's accept delivers before our state changes) are all handled once
// the missing one comes, in order. Held ones had stayed held for good,
// and a chaos run with a rail lost hung on them.
func TestHeldReleasedWhileConnecting(t *testing.T) {
	c, p, eager := connectingPeer(t)
	c.mu.Lock()
	base := p.recvSeq
	c.inSequence(p, base+1, eager("second"), -1)
	c.inSequence(p, base, eager("first"), -1)
	handled, held := p.recvSeq-base, len(p.held)
	p.state = stNone
	c.mu.Unlock()
	if handled != 2 || held != 0 {
		t.Fatalf("after envelopes %d and %d while connecting: %d handled, %d still held", base+1, base, handled, held)
	}
	for _, want := range []string{"first", "second"} {
		buf := make([]byte, 16)
		st, err := c.Recv(buf, 0, 77)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(buf[:st.Count]); got != want {
			t.Fatalf("received %q, want %q", got, want)
		}
	}
}

// TestHeldFreedWhenPeerFails: envelopes held for a turn that never comes go
// back to the buffer pool when their peer fails.
func TestHeldFreedWhenPeerFails(t *testing.T) {
	c, p, eager := connectingPeer(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inSequence(p, p.recvSeq+2, eager("x"), -1)
	c.inSequence(p, p.recvSeq+1, eager("y"), -1)
	free := c.tmp.buffers()
	if len(p.held) != 2 {
		t.Fatalf("%d envelopes held, want 2", len(p.held))
	}
	c.peerFailed(p, errors.New("test: peer gone"), true)
	if len(p.held) != 0 || c.tmp.buffers() != free+2 {
		t.Fatalf("after the peer failed: %d still held, %d buffers back in the pool, want 0 and 2", len(p.held), c.tmp.buffers()-free)
	}
}
