package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdlayher/packet"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/bpf"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/nictest"
)

const testJob = 0x5eed1234

// openPair opens one Device on each end of a fresh veth pair.
func openPair(t testing.TB, mtu int, cfg Config) (*vethNet, *Device, *Device) {
	t.Helper()
	v := newVethNet(t, mtu)
	cfg.JobKey = testJob
	return v, v.a.open(t, cfg), v.b.open(t, cfg)
}

func makePair(t testing.TB) nictest.Pair {
	_, a, b := openPair(t, 0, Config{})
	return nictest.Pair{A: a, B: b, EtherType: nic.DefaultEtherType, JobKey: testJob}
}

// TestConformance runs the suite every nic driver passes.
func TestConformance(t *testing.T) { nictest.Run(t, makePair) }

// frame builds an Ethervia frame of size bytes from src to dst whose payload
// is a pattern derived from seq.
func frame(b []byte, dst, src net.HardwareAddr, et uint16, job, seq uint32) []byte {
	p := nic.Prefix{EtherType: et, Version: nic.Version, JobKey: job}
	copy(p.Dst[:], dst)
	copy(p.Src[:], src)
	nic.PutPrefix(b, &p)
	if len(b) >= nic.PrefixLen+4 {
		binary.BigEndian.PutUint32(b[nic.PrefixLen:], seq)
	}
	for i := nic.PrefixLen + 4; i < len(b); i++ {
		b[i] = byte(uint32(i)*13 + seq)
	}
	return b
}

func testFrame(size int, dst, src *Device, seq uint32) []byte {
	return frame(make([]byte, size), dst.HardwareAddr(), src.HardwareAddr(), nic.DefaultEtherType, testJob, seq)
}

// collect receives until want frames arrived or none came for idle.
func collect(t testing.TB, d *Device, want int, idle time.Duration) [][]byte {
	t.Helper()
	bufs := make([][]byte, 64)
	lens := make([]int, len(bufs))
	for i := range bufs {
		bufs[i] = make([]byte, nic.FrameCap(d.MTU()))
	}
	var got [][]byte
	for len(got) < want {
		n, err := d.Recv(bufs, lens)
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		for i := 0; i < n; i++ {
			got = append(got, append([]byte(nil), bufs[i][:lens[i]]...))
		}
		if n > 0 {
			continue
		}
		if err := d.Wait(time.Now().Add(idle)); errors.Is(err, nic.ErrTimeout) {
			if n, _ := d.Recv(bufs, lens); n == 0 {
				break
			} else {
				for i := 0; i < n; i++ {
					got = append(got, append([]byte(nil), bufs[i][:lens[i]]...))
				}
			}
		} else if err != nil {
			t.Fatalf("wait: %v", err)
		}
	}
	return got
}

func TestBatchesBothWays(t *testing.T) {
	_, a, b := openPair(t, 0, Config{})
	for _, dir := range []struct {
		name     string
		src, dst *Device
	}{{"AtoB", a, b}, {"BtoA", b, a}, {"AtoB again", a, b}} {
		// More frames than the tx chunks, so chunks must be recycled.
		const n = 3000
		before := dir.dst.Stats()
		seq := uint32(0)
		for seq < n {
			batch := make([][]byte, 0, 100)
			for i := 0; i < 100; i++ {
				batch = append(batch, testFrame(60+int(seq)%900, dir.dst, dir.src, seq))
				seq++
			}
			nictest.SendAll(t, dir.src, batch)
			got := collect(t, dir.dst, len(batch), time.Second)
			if len(got) != len(batch) {
				t.Fatalf("%s: %d of %d frames arrived", dir.name, len(got), len(batch))
			}
			for i, f := range got {
				if string(f) != string(batch[i]) {
					t.Fatalf("%s: frame %d of the batch damaged or out of order", dir.name, i)
				}
			}
		}
		st := dir.dst.Stats().Sub(before)
		if st.RxFrames != n || st.RxDropped != 0 || st.RxForeign != 0 {
			t.Fatalf("%s: receiver stats %+v, want %d frames and no drops", dir.name, st, n)
		}
	}
}

// TestEverySize sends one frame of every length from the Ethervia prefix up
// to the largest the device takes (MTU plus Ethernet header and VLAN tag),
// for several veth MTUs and chunk sizes.
func TestEverySize(t *testing.T) {
	for _, c := range []struct {
		vethMTU, chunk, wantMTU int
	}{
		{0, 4096, 1500},
		{3000, 2048, 2048 - 256 - 18}, // the chunk caps the MTU
		{3506, 4096, 3506},            // the largest MTU native XDP on veth allows
	} {
		t.Run(fmt.Sprintf("mtu%d-chunk%d", c.vethMTU, c.chunk), func(t *testing.T) {
			_, a, b := openPair(t, c.vethMTU, Config{ChunkSize: c.chunk})
			if a.MTU() != c.wantMTU || b.MTU() != c.wantMTU {
				t.Fatalf("MTU %d/%d, want %d", a.MTU(), b.MTU(), c.wantMTU)
			}
			hi := nic.FrameCap(a.MTU())
			seq := uint32(0)
			for size := nic.PrefixLen; size <= hi; size += 32 {
				var batch [][]byte
				for s := size; s < size+32 && s <= hi; s++ {
					batch = append(batch, testFrame(s, b, a, seq))
					seq++
				}
				nictest.SendAll(t, a, batch)
				got := collect(t, b, len(batch), time.Second)
				if len(got) != len(batch) {
					t.Fatalf("sizes %d..: %d of %d frames arrived", size, len(got), len(batch))
				}
				for i, f := range got {
					if len(f) != len(batch[i]) || string(f) != string(batch[i]) {
						t.Fatalf("frame of %d bytes arrived as %d bytes or damaged", len(batch[i]), len(f))
					}
				}
			}
			if seq != uint32(hi-nic.PrefixLen+1) {
				t.Fatalf("sent %d sizes", seq)
			}
			big := testFrame(hi+1, b, a, 0)
			if _, err := a.Send([][]byte{big}); !errors.Is(err, nic.ErrFrameSize) {
				t.Fatalf("send of %d bytes: %v, want ErrFrameSize", len(big), err)
			}
			if _, err := a.Send([][]byte{make([]byte, nic.EthHeaderLen-1)}); !errors.Is(err, nic.ErrFrameSize) {
				t.Fatalf("send of a runt: %v, want ErrFrameSize", err)
			}
		})
	}
}

// TestForeignFramesStayInKernel sends frames with another EtherType, job key
// or version, and runts, from an AF_PACKET socket on A. None may reach B's
// AF_XDP socket; all must reach B's kernel stack (seen by an AF_PACKET socket
// on B). Good frames sent the same way must take the opposite paths.
func TestForeignFramesStayInKernel(t *testing.T) {
	v, a, b := openPair(t, 0, Config{})
	var tx, sniff *packet.Conn
	if err := inNS(v.a.ns, func() error {
		ifi, err := net.InterfaceByName(v.a.link)
		if err != nil {
			return err
		}
		tx, err = packet.Listen(ifi, packet.Raw, 0, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := inNS(v.b.ns, func() error {
		ifi, err := net.InterfaceByName(v.b.link)
		if err != nil {
			return err
		}
		sniff, err = packet.Listen(ifi, packet.Raw, unix.ETH_P_ALL, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sniff.Close()

	dst, src := b.HardwareAddr(), a.HardwareAddr()
	mk := func(size int, et uint16, job, seq uint32, mod func([]byte)) []byte {
		f := frame(make([]byte, size), dst, src, et, job, seq)
		if mod != nil {
			mod(f)
		}
		return f
	}
	foreign := [][]byte{
		mk(100, nic.DefaultEtherType+1, testJob, 1, nil),
		mk(100, nic.DefaultEtherType, testJob^1, 2, nil),
		mk(100, nic.DefaultEtherType, testJob, 3, func(f []byte) { f[nic.OffVersion] = nic.Version + 1 }),
		mk(100, nic.DefaultEtherType, testJob, 4, nil)[:nic.PrefixLen-1],
		mk(300, 0x0800, testJob, 5, nil),
	}
	good := [][]byte{mk(100, nic.DefaultEtherType, testJob, 6, nil), mk(1514, nic.DefaultEtherType, testJob, 7, nil)}
	addr := &packet.Addr{HardwareAddr: dst}
	const rounds = 20
	for r := 0; r < rounds; r++ {
		for _, f := range append(append([][]byte(nil), foreign...), good...) {
			if _, err := tx.WriteTo(f, addr); err != nil {
				t.Fatalf("AF_PACKET send: %v", err)
			}
		}
	}
	got := collect(t, b, 2*rounds+1, 300*time.Millisecond)
	if len(got) != 2*rounds {
		t.Fatalf("AF_XDP socket got %d frames, want the %d good ones", len(got), 2*rounds)
	}
	for i, f := range got {
		if string(f) != string(good[i%2]) {
			t.Fatalf("frame %d is not the good frame it should be", i)
		}
	}
	// Three of the five foreign frames carry our EtherType (wrong key,
	// wrong version, short): the steering program counts them as Foreign,
	// and the driver reports that count, having seen none itself.
	const ours = 3
	if st := b.Stats(); st.RxForeign != ours*rounds {
		t.Fatalf("RxForeign %d, want the steering program's %d", st.RxForeign, ours*rounds)
	}
	if b.rxForeign.Load() != 0 {
		t.Fatalf("driver saw %d foreign frames; the XDP program should have passed them to the kernel", b.rxForeign.Load())
	}
	// Passed also counts the kernel's own traffic (IPv6 neighbour
	// discovery), so it is a lower bound.
	if c, err := b.Steering().Counters(); err != nil {
		t.Fatal(err)
	} else if c.Redirected != 2*rounds || c.Passed < uint64(len(foreign)*rounds) || c.Foreign != ours*rounds {
		t.Fatalf("steering counters %+v: want %d redirected, %d foreign and at least %d passed", c, 2*rounds, ours*rounds, len(foreign)*rounds)
	}
	// The kernel's stack saw exactly the foreign frames.
	seen := map[string]int{}
	buf := make([]byte, 2048)
	for {
		if err := sniff.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, _, err := sniff.ReadFrom(buf)
		if err != nil {
			break
		}
		seen[string(buf[:n])]++
	}
	for i, f := range foreign {
		if seen[string(f)] != rounds {
			t.Errorf("foreign frame %d reached the kernel stack %d times, want %d", i, seen[string(f)], rounds)
		}
	}
	for i, f := range good {
		if seen[string(f)] != 0 {
			t.Errorf("good frame %d also reached the kernel stack %d times", i, seen[string(f)])
		}
	}
}

// TestIPTrafficStillWorks sends UDP both ways between the namespaces' IP
// addresses (ARP included) while both AF_XDP sockets are bound and carrying
// frames.
func TestIPTrafficStillWorks(t *testing.T) {
	v, a, b := openPair(t, 0, Config{})
	var ca, cb *net.UDPConn
	if err := inNS(v.b.ns, func() error {
		var err error
		cb, err = net.ListenUDP("udp4", &net.UDPAddr{IP: v.b.ip, Port: 7001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if err := inNS(v.a.ns, func() error {
		var err error
		ca, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: v.b.ip, Port: 7001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	for i := 0; i < 5; i++ {
		// Ethervia frames in flight at the same time.
		nictest.SendAll(t, a, [][]byte{testFrame(200, b, a, uint32(i))})
		msg := fmt.Sprintf("hello %d", i)
		if _, err := ca.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		cb.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := cb.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("UDP datagram %d did not arrive: %v", i, err)
		}
		if string(buf[:n]) != msg {
			t.Fatalf("got %q, want %q", buf[:n], msg)
		}
		if _, err := cb.WriteToUDP([]byte(strings.ToUpper(msg)), from); err != nil {
			t.Fatal(err)
		}
		ca.SetReadDeadline(time.Now().Add(2 * time.Second))
		if n, err = ca.Read(buf); err != nil || string(buf[:n]) != strings.ToUpper(msg) {
			t.Fatalf("reply %d: %q, %v", i, buf[:n], err)
		}
		if got := collect(t, b, 1, time.Second); len(got) != 1 {
			t.Fatalf("Ethervia frame %d did not arrive beside the UDP traffic", i)
		}
	}
}

func TestCloseUnblocksWait(t *testing.T) {
	_, _, b := openPair(t, 0, Config{})
	done := make(chan error, 1)
	go func() { done <- b.Wait(time.Time{}) }()
	// Give Wait time to block; the test passes either way it is scheduled.
	time.Sleep(20 * time.Millisecond)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, nic.ErrClosed) {
			t.Fatalf("Wait returned %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Wait")
	}
	if _, err := b.Recv(make([][]byte, 1), make([]int, 1)); !errors.Is(err, nic.ErrClosed) {
		t.Fatalf("Recv after Close: %v", err)
	}
	if _, err := b.Send([][]byte{make([]byte, 64)}); !errors.Is(err, nic.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestFaultDrop turns on the steering program's fault stage on B and checks
// that a fifth of 5000 frames is lost there, and nowhere else.
func TestFaultDrop(t *testing.T) {
	_, a, b := openPair(t, 0, Config{})
	if err := b.Steering().SetFault(bpf.FaultConfig{Drop: 0.2}); err != nil {
		t.Fatal(err)
	}
	const n = 5000
	bufs := make([][]byte, 64)
	lens := make([]int, 64)
	for i := range bufs {
		bufs[i] = make([]byte, nic.FrameCap(b.MTU()))
	}
	seen := make([]bool, n)
	got := 0
	take := func(k int) {
		for i := 0; i < k; i++ {
			f := bufs[i][:lens[i]]
			seq := binary.BigEndian.Uint32(f[nic.PrefixLen:])
			if seq >= n || seen[seq] || string(f) != string(testFrame(len(f), b, a, seq)) {
				t.Fatalf("unexpected frame (seq %d)", seq)
			}
			seen[seq] = true
			got++
		}
	}
	for seq := uint32(0); seq < n; {
		batch := make([][]byte, 0, 50)
		for i := 0; i < 50 && seq < n; i++ {
			batch = append(batch, testFrame(128, b, a, seq))
			seq++
		}
		nictest.SendAll(t, a, batch)
		for {
			k, err := b.Recv(bufs, lens)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				break
			}
			take(k)
		}
	}
	for {
		if err := b.Wait(time.Now().Add(300 * time.Millisecond)); err != nil {
			break
		}
		k, err := b.Recv(bufs, lens)
		if err != nil {
			t.Fatal(err)
		}
		take(k)
	}
	lost := float64(n-got) / n
	t.Logf("fault stage dropped %d of %d frames (%.1f%%)", n-got, n, 100*lost)
	if lost < 0.15 || lost > 0.25 {
		t.Fatalf("lost %.1f%% of frames, want 15%%..25%%", 100*lost)
	}
	if st := b.Stats(); st.RxDropped != 0 {
		t.Fatalf("the socket dropped %d frames; only the fault stage should", st.RxDropped)
	}
	c, err := b.Steering().Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.Fault.Dropped != uint64(n-got) || c.Redirected != uint64(got) {
		t.Fatalf("steering counted %d dropped and %d redirected; the socket got %d of %d", c.Fault.Dropped, c.Redirected, got, n)
	}
	// Off again: nothing is lost.
	if err := b.Steering().SetFault(bpf.FaultConfig{}); err != nil {
		t.Fatal(err)
	}
	var batch [][]byte
	for i := 0; i < 200; i++ {
		batch = append(batch, testFrame(128, b, a, uint32(i)))
	}
	nictest.SendAll(t, a, batch)
	if got := collect(t, b, 200, time.Second); len(got) != 200 {
		t.Fatalf("with the fault stage off, %d of 200 frames arrived", len(got))
	}
}

// TestNoAllocations checks that a batch Send and the Recv that takes it
// allocate nothing.
func TestNoAllocations(t *testing.T) {
	_, a, b := openPair(t, 0, Config{})
	out := make([][]byte, 16)
	for i := range out {
		out[i] = testFrame(64+i*50, b, a, uint32(i))
	}
	bufs := make([][]byte, 16)
	lens := make([]int, 16)
	for i := range bufs {
		bufs[i] = make([]byte, nic.FrameCap(b.MTU()))
	}
	failed := false
	roundTrip := func() {
		if failed {
			return
		}
		if n, err := a.Send(out); err != nil || n != len(out) {
			failed = true
			return
		}
		for got := 0; got < len(out); {
			n, err := b.Recv(bufs, lens)
			if err != nil {
				failed = true
				return
			}
			got += n
			if n == 0 {
				if err := b.Wait(time.Now().Add(time.Second)); err != nil {
					failed = true
					return
				}
			}
		}
	}
	roundTrip()
	allocs := testing.AllocsPerRun(300, roundTrip)
	if failed {
		t.Fatal("send or receive failed")
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per Send+Recv of %d frames", allocs, len(out))
	}
	// An idle spin-then-block loop times out in Wait over and over.
	var werr error
	allocs = testing.AllocsPerRun(20, func() { werr = b.Wait(time.Now().Add(time.Millisecond)) })
	if !errors.Is(werr, nic.ErrTimeout) {
		t.Fatalf("Wait on an idle device: %v", werr)
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per Wait that times out", allocs)
	}
}

// TestChunkOwnership checks, after traffic in both directions, that every
// chunk is in exactly one place: the rx chunks all back on the fill ring,
// the tx chunks all back on the free list, no chunk in both.
func TestChunkOwnership(t *testing.T) {
	_, a, b := openPair(t, 0, Config{Frames: 512, RingSize: 256})
	for round := 0; round < 4; round++ {
		var ab, ba [][]byte
		for i := 0; i < 200; i++ {
			ab = append(ab, testFrame(100+i, b, a, uint32(i)))
			ba = append(ba, testFrame(100+i, a, b, uint32(i)))
		}
		nictest.SendAll(t, a, ab)
		nictest.SendAll(t, b, ba)
		if got := collect(t, b, len(ab), time.Second); len(got) != len(ab) {
			t.Fatalf("round %d: %d of %d frames to B", round, len(got), len(ab))
		}
		if got := collect(t, a, len(ba), time.Second); len(got) != len(ba) {
			t.Fatalf("round %d: %d of %d frames to A", round, len(got), len(ba))
		}
	}
	for _, d := range []*Device{a, b} {
		// Completions come back asynchronously; wait for them.
		deadline := time.Now().Add(2 * time.Second)
		for {
			d.reap()
			d.pmu.Lock()
			n := d.free.len()
			d.pmu.Unlock()
			if n == int(d.layout.count)-int(d.rxChunks) || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		d.rmu.Lock()
		d.smu.Lock()
		d.pmu.Lock()
		owner := make(map[uint64]string)
		claim := func(addr uint64, where string) {
			if addr%d.layout.chunk != 0 || addr >= d.layout.size() {
				t.Fatalf("%s holds bad chunk address %#x", where, addr)
			}
			if o, dup := owner[addr]; dup {
				t.Fatalf("chunk %#x is in the %s and the %s", addr, o, where)
			}
			owner[addr] = where
		}
		for i := 0; i < d.free.len(); i++ {
			claim(d.free.addrs[i], "free list")
		}
		fp := d.fill.prod.Load()
		for i := d.fill.cons.Load(); i != fp; i++ {
			claim(*d.fill.at(i), "fill ring")
		}
		rp := d.rx.prod.Load()
		for i := d.rx.cachedCons; i != rp; i++ {
			claim(d.layout.base(d.rx.at(i).Addr), "rx ring")
		}
		d.pmu.Unlock()
		d.smu.Unlock()
		d.rmu.Unlock()
		if len(owner) != int(d.layout.count) {
			t.Fatalf("%d of %d chunks accounted for", len(owner), d.layout.count)
		}
		for addr, where := range owner {
			rxSide := addr < uint64(d.rxChunks)*d.layout.chunk
			if rxSide != (where != "free list") {
				t.Fatalf("chunk %#x crossed sides: it is in the %s", addr, where)
			}
		}
	}
}

func TestZeroCopyOnVethRefused(t *testing.T) {
	v := newVethNet(t, 0)
	d, err := v.a.tryOpen(Config{Config: nic.Config{JobKey: testJob}, ZeroCopy: true})
	if err == nil {
		zc := d.ZeroCopy()
		d.Close()
		if !zc {
			t.Fatal("ZeroCopy requested, Open succeeded, but the socket is not zero-copy")
		}
		t.Log("this kernel's veth supports AF_XDP zero-copy; the package doc is out of date")
		return
	}
	t.Logf("as expected on veth: %v", err)
	// The failed attempt must leave nothing behind: a copy-mode socket and
	// a fresh program can take the queue.
	d = v.a.open(t, Config{Config: nic.Config{JobKey: testJob}})
	if d.ZeroCopy() {
		t.Fatal("copy mode socket reports zero-copy")
	}
}

func TestOpenErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Iface: "lo", ChunkSize: 1000},
		{Iface: "lo", RingSize: 1000},
		{Iface: "lo", Frames: 1},
		{Iface: "lo", Queue: -1},
		{Iface: "no-such-iface-x"},
	} {
		if d, err := Open(cfg); err == nil {
			d.Close()
			t.Errorf("Open(%+v) succeeded", cfg)
		} else if !strings.Contains(err.Error(), "afxdp "+cfg.Iface) {
			t.Errorf("error %q lacks context", err)
		}
	}
}

// TestSharedSteeringTwoQueues opens one Device per queue on two-queue veths,
// all sharing one steering program per side. A copy-mode AF_XDP socket
// transmits on its own queue id and veth delivers to the same queue of the
// peer, so each queue's frames reach only the peer socket of that queue.
func TestSharedSteeringTwoQueues(t *testing.T) {
	v := newVethNetQ(t, 0, 2)
	shared := func(h host) *bpf.Steering {
		var s *bpf.Steering
		err := inNS(h.ns, func() error {
			ifi, err := net.InterfaceByName(h.link)
			if err != nil {
				return err
			}
			s, err = bpf.NewSteering(nic.Filter{EtherType: nic.DefaultEtherType, JobKey: testJob}, bpf.SteeringOptions{Queues: 2})
			if err != nil {
				return err
			}
			if err := s.Attach(ifi.Index, 0); err != nil {
				s.Close()
				return err
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("close steering: %v", err)
			}
		})
		return s
	}
	sa, sb := shared(v.a), shared(v.b)
	var as, bs [2]*Device
	for q := 0; q < 2; q++ {
		as[q] = v.a.open(t, Config{Config: nic.Config{JobKey: testJob}, Queue: q, Steering: sa})
		bs[q] = v.b.open(t, Config{Config: nic.Config{JobKey: testJob}, Queue: q, Steering: sb})
		if as[q].Steering() != sa || bs[q].Steering() != sb {
			t.Fatal("Steering() does not return the shared program")
		}
	}
	for q := 0; q < 2; q++ {
		var batch [][]byte
		for i := 0; i < 100; i++ {
			batch = append(batch, testFrame(100+q, bs[q], as[q], uint32(i)))
		}
		nictest.SendAll(t, as[q], batch)
		got := collect(t, bs[q], len(batch), time.Second)
		if len(got) != len(batch) {
			t.Fatalf("queue %d: %d of %d frames arrived", q, len(got), len(batch))
		}
		for i, f := range got {
			if string(f) != string(batch[i]) {
				t.Fatalf("queue %d: frame %d damaged", q, i)
			}
		}
		if other := collect(t, bs[1-q], 1, 50*time.Millisecond); len(other) != 0 {
			t.Fatalf("queue %d's frames also reached queue %d", q, 1-q)
		}
	}
	// Another job's frame is counted by the shared program, but belongs to
	// no single Device, so their RxForeign leaves it out.
	other := testFrame(100, bs[1], as[1], 9)
	other[nic.OffJobKey] ^= 0x40
	nictest.SendAll(t, as[1], [][]byte{other})
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		c, err := sb.Counters()
		if err != nil {
			t.Fatal(err)
		}
		if c.Foreign == 1 {
			break
		}
		if c.Foreign > 1 || time.Now().After(deadline) {
			t.Fatalf("shared steering counters %+v, want Foreign=1", c)
		}
	}
	for q, d := range bs {
		if st := d.Stats(); st.RxForeign != 0 {
			t.Errorf("queue %d: RxForeign %d with a shared steering program, want 0", q, st.RxForeign)
		}
	}
	// Closing one queue's Device unregisters only that queue.
	if err := bs[0].Close(); err != nil {
		t.Fatal(err)
	}
	nictest.SendAll(t, as[1], [][]byte{testFrame(100, bs[1], as[1], 7)})
	if got := collect(t, bs[1], 1, time.Second); len(got) != 1 {
		t.Fatal("queue 1 stopped receiving when queue 0's Device closed")
	}
	before, err := sb.Counters()
	if err != nil {
		t.Fatal(err)
	}
	nictest.SendAll(t, as[0], [][]byte{testFrame(100, bs[0], as[0], 8)})
	deadline := time.Now().Add(2 * time.Second)
	for {
		c, err := sb.Counters()
		if err != nil {
			t.Fatal(err)
		}
		if c.Unclaimed == before.Unclaimed+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a frame for the closed queue 0 was not counted unclaimed: %+v", c)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLinkDownAndGone checks what a sender sees when its link goes down
// (an error wrapping ENETDOWN; the frame stays on the tx ring and leaves when
// the link is up again) and when the interface disappears under an open
// Device (errors and timeouts, no hang, and a clean Close).
func TestLinkDownAndGone(t *testing.T) {
	v, a, b := openPair(t, 0, Config{})
	h, err := netlink.NewHandleAt(v.a.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(v.a.link)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetDown(l); err != nil {
		t.Fatal(err)
	}
	f1, f2 := testFrame(100, b, a, 1), testFrame(100, b, a, 2)
	if n, err := a.Send([][]byte{f1}); n != 1 || !errors.Is(err, unix.ENETDOWN) {
		t.Fatalf("send on a down link: %d, %v; want 1 queued and ENETDOWN", n, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	nictest.SendAll(t, a, [][]byte{f2})
	got := collect(t, b, 2, time.Second)
	if len(got) != 2 || string(got[0]) != string(f1) || string(got[1]) != string(f2) {
		t.Fatalf("after the link came back %d frames arrived, want the queued one and the new one", len(got))
	}

	if err := h.LinkDel(l); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send([][]byte{f1}); err == nil {
		t.Fatal("send on a deleted interface succeeded")
	}
	if n, err := a.Recv(make([][]byte, 1), make([]int, 1)); n != 0 || err != nil {
		t.Fatalf("recv on a deleted interface: %d, %v", n, err)
	}
	if err := a.Wait(time.Now().Add(50 * time.Millisecond)); !errors.Is(err, nic.ErrTimeout) {
		t.Fatalf("wait on a deleted interface: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close after the interface went away: %v", err)
	}
}

// TestFullDuplex runs a sender and a receiver goroutine on each end at
// once, so both sides of each Device (and the completion ring they share)
// are busy together. A window keeps the senders from outrunning the
// receivers, so every frame must arrive, in order. The window plus one batch
// stays below veth's 256-frame NAPI ring, which drops when full (as it can
// when the receiving veth's softirq is pushed to a busy CPU).
func TestFullDuplex(t *testing.T) {
	_, a, b := openPair(t, 0, Config{})
	const n, window = 20000, 192
	var recvd [2]atomic.Int64
	errc := make(chan error, 4)
	for side, e := range [2]struct{ src, dst *Device }{{a, b}, {b, a}} {
		go func() { // sender
			batch := make([][]byte, 32)
			for i := range batch {
				batch[i] = make([]byte, 200)
			}
			for seq := 0; seq < n; {
				for int64(seq)-recvd[side].Load() > window {
					time.Sleep(50 * time.Microsecond)
				}
				k := min(len(batch), n-seq)
				for i := 0; i < k; i++ {
					batch[i] = frame(batch[i][:60+(seq+i)%140], e.dst.HardwareAddr(), e.src.HardwareAddr(), nic.DefaultEtherType, testJob, uint32(seq+i))
				}
				for sent := 0; sent < k; {
					m, err := e.src.Send(batch[sent:k])
					if err != nil {
						errc <- err
						return
					}
					sent += m
				}
				seq += k
			}
			errc <- nil
		}()
		go func() { // receiver
			bufs := make([][]byte, 64)
			lens := make([]int, 64)
			for i := range bufs {
				bufs[i] = make([]byte, nic.FrameCap(e.dst.MTU()))
			}
			deadline := time.Now().Add(30 * time.Second)
			for next := 0; next < n; {
				k, err := e.dst.Recv(bufs, lens)
				if err != nil {
					errc <- err
					return
				}
				for i := 0; i < k; i++ {
					f := bufs[i][:lens[i]]
					want := frame(make([]byte, 60+next%140), e.dst.HardwareAddr(), e.src.HardwareAddr(), nic.DefaultEtherType, testJob, uint32(next))
					if string(f) != string(want) {
						seq := -1
						if len(f) >= nic.PrefixLen+4 {
							seq = int(binary.BigEndian.Uint32(f[nic.PrefixLen:]))
						}
						errc <- fmt.Errorf("side %d: want frame %d (%d bytes), got seq %d (%d bytes); receiver stats %+v, kernel %+v",
							side, next, len(want), seq, len(f), e.dst.Stats(), e.dst.KernelStats())
						return
					}
					next++
					recvd[side].Store(int64(next))
				}
				if k == 0 {
					if time.Now().After(deadline) {
						errc <- fmt.Errorf("side %d: only %d of %d frames arrived", side, next, n)
						return
					}
					if err := e.dst.Wait(time.Now().Add(10 * time.Millisecond)); err != nil && !errors.Is(err, nic.ErrTimeout) {
						errc <- err
						return
					}
				}
			}
			errc <- nil
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []*Device{a, b} {
		if st := d.Stats(); st.RxFrames != n || st.TxFrames != n || st.RxDropped != 0 {
			t.Fatalf("stats %+v, want %d frames each way and no drops", st, n)
		}
	}
}

// TestWaitWakesOnFrame blocks in Wait without a deadline, checks that Recv
// from another goroutine is not held up meanwhile, and that a frame arriving
// wakes the Wait.
func TestWaitWakesOnFrame(t *testing.T) {
	_, a, b := openPair(t, 0, Config{})
	woke := make(chan error, 1)
	go func() { woke <- b.Wait(time.Time{}) }()
	time.Sleep(20 * time.Millisecond)
	recvd := make(chan error, 1)
	go func() {
		_, err := b.Recv(make([][]byte, 1), make([]int, 1))
		recvd <- err
	}()
	select {
	case err := <-recvd:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Recv blocked behind a waiting Wait")
	}
	select {
	case err := <-woke:
		t.Fatalf("Wait returned %v with nothing sent", err)
	default:
	}
	nictest.SendAll(t, a, [][]byte{testFrame(80, b, a, 1)})
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a frame did not wake Wait")
	}
	if got := collect(t, b, 1, time.Second); len(got) != 1 {
		t.Fatal("the frame that woke Wait was not received")
	}
}

// TestJumboMTURefusedClearly: XDP cannot attach to a veth whose MTU does not
// fit a page; the error says so and names the MTU, not only the kernel's
// "numerical result out of range".
func TestJumboMTURefusedClearly(t *testing.T) {
	v := newVethNet(t, 9000)
	d, err := v.a.tryOpen(Config{Config: nic.Config{JobKey: testJob}})
	if err == nil {
		d.Close()
		t.Skip("this kernel attaches XDP to a veth with MTU 9000 (multi-buffer XDP): nothing to refuse")
	}
	if !strings.Contains(err.Error(), "MTU 9000 is too large for XDP") {
		t.Fatalf("error %q does not name the MTU limit", err)
	}
}

// veth has no ntuple rules: a FlowRule request leaves the device working
// and says why no rule is in place.
func TestFlowRuleOnVeth(t *testing.T) {
	v := newVethNet(t, 0)
	err := inNS(v.a.ns, func() error {
		_, err := AddFlowRule(v.a.link, nic.DefaultEtherType, 0)
		return err
	})
	if !errors.Is(err, ErrNoFlowRules) {
		t.Fatalf("AddFlowRule on veth: %v, want ErrNoFlowRules", err)
	}
	d := v.a.open(t, Config{Config: nic.Config{JobKey: testJob}, FlowRule: true})
	if !errors.Is(d.FlowRuleErr(), ErrNoFlowRules) {
		t.Fatalf("FlowRuleErr %v, want ErrNoFlowRules", d.FlowRuleErr())
	}
	b := v.b.open(t, Config{Config: nic.Config{JobKey: testJob}})
	nictest.SendAll(t, b, [][]byte{testFrame(100, d, b, 1)})
	if got := collect(t, d, 1, time.Second); len(got) != 1 {
		t.Fatalf("received %d frames", len(got))
	}
}

func TestFlowRuleEncoding(t *testing.T) {
	b := flowRuleInsert(0x88b5, 3)
	if binary.NativeEndian.Uint32(b[0:]) != ethtoolSRXCLSRLINS || binary.NativeEndian.Uint32(b[offFsFlowType:]) != etherFlow ||
		b[offFsHProto] != 0x88 || b[offFsHProto+1] != 0xb5 || b[offFsMProto] != 0xff ||
		binary.NativeEndian.Uint64(b[offFsRingCookie:]) != 3 || binary.NativeEndian.Uint32(b[offFsLocation:]) != rxClsLocAny {
		t.Fatalf("%x", b)
	}
}

// A second job's device on the same interface finds the first one's XDP
// program and says so.
func TestXDPAlreadyAttached(t *testing.T) {
	v := newVethNetQ(t, 0, 2)
	v.a.open(t, Config{Config: nic.Config{JobKey: testJob}})
	_, err := v.a.tryOpen(Config{Config: nic.Config{JobKey: testJob + 1}, Queue: 1})
	if err == nil || !strings.Contains(err.Error(), "already attached") {
		t.Fatalf("second program: %v", err)
	}
}

// A queue the interface does not have is refused by name, before any
// socket is made.
func TestQueueBeyondInterface(t *testing.T) {
	v := newVethNetQ(t, 0, 2)
	_, err := v.a.tryOpen(Config{Config: nic.Config{JobKey: testJob}, Queue: 5})
	if err == nil || !strings.Contains(err.Error(), "has 2 receive queue(s)") {
		t.Fatalf("queue 5 of 2: %v", err)
	}
	d := v.a.open(t, Config{Config: nic.Config{JobKey: testJob}, Queue: 1})
	if d == nil {
		t.Fatal("queue 1 of 2 refused")
	}
}
