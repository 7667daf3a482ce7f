package vi

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
)

// unicast is the address of endpoint 0 at hw.
func unicast(hw net.HardwareAddr) nic.Addr {
	a, _ := nic.MAC(hw)
	return nic.Addr{MAC: a}
}

// recvDatagram waits up to a second for a datagram on d.
func recvDatagram(t *testing.T, d *DatagramPort, buf []byte) (int, nic.Addr) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for {
		if n, src, ok := d.Recv(buf); ok {
			return n, src
		}
		if err := d.Wait(ctx); err != nil {
			t.Fatalf("no datagram: %v", err)
		}
	}
}

func TestDatagramUnicastAndMulticast(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	c := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	const kind = 0x9a
	da, err := a.p.OpenDatagram(kind, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer da.Close()
	db, _ := b.p.OpenDatagram(kind, 8)
	dc, _ := c.p.OpenDatagram(kind, 8)
	defer db.Close()
	defer dc.Close()
	if _, err := a.p.OpenDatagram(kind, 8); !errors.Is(err, ErrDatagramInUse) {
		t.Fatalf("second port of a kind: %v", err)
	}
	if _, err := a.p.OpenDatagram(0x10, 8); !errors.Is(err, ErrDatagramKind) {
		t.Fatalf("kind below the range: %v", err)
	}
	if got, want := da.MaxPayload(), 1500+14-DatagramHeaderLen; got != want {
		t.Fatalf("MaxPayload = %d, want %d", got, want)
	}
	buf := make([]byte, da.MaxPayload())
	for _, size := range []int{0, 1, 7, da.MaxPayload()} {
		pl := make([]byte, size)
		for i := range pl {
			pl[i] = byte(i*31 + size)
		}
		if err := da.SendTo(unicast(b.dev.HardwareAddr()), pl); err != nil {
			t.Fatal(err)
		}
		n, src := recvDatagram(t, db, buf)
		if !bytes.Equal(buf[:n], pl) || src.MAC != a.p.mac {
			t.Fatalf("size %d: got %d bytes from %x", size, n, src)
		}
	}
	if err := da.SendTo(unicast(b.dev.HardwareAddr()), make([]byte, da.MaxPayload()+1)); !errors.Is(err, ErrDatagramSize) {
		t.Fatalf("oversize: %v", err)
	}
	// Multicast reaches the port that joined the group, not the other.
	g := nic.GroupMAC(testJob, 5)
	if err := c.port.JoinMulticast(g[:]); err != nil {
		t.Fatal(err)
	}
	if err := da.SendTo(nic.Addr{MAC: g, EP: nic.EndpointAll}, []byte("group")); err != nil {
		t.Fatal(err)
	}
	n, _ := recvDatagram(t, dc, buf)
	if string(buf[:n]) != "group" {
		t.Fatalf("group datagram: %q", buf[:n])
	}
	time.Sleep(5 * time.Millisecond)
	if _, _, ok := db.Recv(buf); ok {
		t.Fatal("a port that did not join got the group datagram")
	}
	// The ring drops what does not fit, and counts it.
	for i := range 12 {
		if err := da.SendTo(unicast(b.dev.HardwareAddr()), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	for i := range 8 {
		n, _ := recvDatagram(t, db, buf)
		if n != 1 || buf[0] != byte(i) {
			t.Fatalf("datagram %d: got % x", i, buf[:n])
		}
	}
	if _, _, ok := db.Recv(buf); ok {
		t.Fatal("more datagrams than the ring holds")
	}
	if st := db.Stats(); st.Dropped != 4 || st.Received != 4+8 {
		t.Fatalf("receiver stats %+v, want 4 dropped, 12 received", st)
	}
	// A closed port's kind is dropped again and its waiters return.
	db.Close()
	if err := db.Wait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("wait on a closed port: %v", err)
	}
}

func TestDatagramBadFramesCounted(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	db, _ := b.p.OpenDatagram(0x90, 8)
	defer db.Close()
	f := make([]byte, 64)
	g := Datagram{Dst: b.p.mac, Src: a.p.mac, EtherType: nic.DefaultEtherType, Kind: 0x90, JobKey: testJob, Payload: []byte("hello")}
	n, err := PutDatagram(f, &g)
	if err != nil {
		t.Fatal(err)
	}
	good := append([]byte(nil), f[:n]...)
	bad := append([]byte(nil), good...)
	bad[n-1] ^= 1 // CRC no longer matches
	other := append([]byte(nil), good...)
	other[nic.OffKind] = 0x91 // a kind with no port: a bad frame to the provider
	if _, err := a.dev.Send([][]byte{bad, other, good}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	m, _ := recvDatagram(t, db, buf)
	if string(buf[:m]) != "hello" {
		t.Fatalf("got %q", buf[:m])
	}
	if st := db.Stats(); st.Bad != 1 || st.Received != 1 {
		t.Fatalf("stats %+v, want 1 bad, 1 received", st)
	}
	if st := b.p.Stats(); st.BadFrames != 1 {
		t.Fatalf("provider BadFrames = %d, want 1 (the kind without a port)", st.BadFrames)
	}
}

func TestDatagramNoAllocs(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	da, _ := a.p.OpenDatagram(0x90, 8)
	db, _ := b.p.OpenDatagram(0x90, 8)
	defer da.Close()
	defer db.Close()
	dst := unicast(b.dev.HardwareAddr())
	pl := make([]byte, 200)
	buf := make([]byte, 200)
	// Warm up the switch's buffers.
	for range 4 {
		_ = da.SendTo(dst, pl)
		recvDatagram(t, db, buf)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if err := da.SendTo(dst, pl); err != nil {
			t.Fatal(err)
		}
		for {
			if _, _, ok := db.Recv(buf); ok {
				break
			}
			db.WaitUntil(time.Now().Add(time.Millisecond))
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per datagram, want 0", allocs)
	}
}

// FuzzDatagram checks ParseDatagram against PutDatagram: whatever the
// frame, parsing never panics, and a frame that parses re-encodes to the
// same bytes (up to the padding after the payload).
func FuzzDatagram(f *testing.F) {
	b := make([]byte, 128)
	g := Datagram{Dst: [6]byte{3, 1, 2, 3, 4, 5}, Src: [6]byte{2, 0, 0, 0, 0, 1}, EtherType: nic.DefaultEtherType,
		Kind: 0x81, JobKey: 7, Payload: []byte("payload")}
	n, _ := PutDatagram(b, &g)
	f.Add(append([]byte(nil), b[:n]...))
	f.Add(append(append([]byte(nil), b[:n]...), 0, 0, 0, 0)) // padded
	f.Add(b[:DatagramHeaderLen-1])
	f.Fuzz(func(t *testing.T, frame []byte) {
		var d Datagram
		if err := ParseDatagram(frame, &d); err != nil {
			return
		}
		out := make([]byte, DatagramHeaderLen+len(d.Payload))
		m, err := PutDatagram(out, &d)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(out[:m], frame[:m]) {
			t.Fatalf("re-encoded % x, parsed from % x", out[:m], frame[:m])
		}
	})
}

func TestDatagramSendBatch(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	da, _ := a.p.OpenDatagram(0x90, 8)
	db, _ := b.p.OpenDatagram(0x90, 2*DatagramBatch)
	defer da.Close()
	defer db.Close()
	lens := make([]int, DatagramBatch)
	for i := range lens {
		lens[i] = (i * 97) % (da.MaxPayload() + 1)
		pl := da.BatchBuffer(i)
		for j := range lens[i] {
			pl[j] = byte(i + j*3)
		}
	}
	lens[DatagramBatch-1] = da.MaxPayload()
	for j := range lens[DatagramBatch-1] {
		da.BatchBuffer(DatagramBatch - 1)[j] = byte(DatagramBatch - 1 + j*3)
	}
	if err := da.SendBatch(unicast(b.dev.HardwareAddr()), lens); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, da.MaxPayload())
	for i := range lens {
		n, src := recvDatagram(t, db, buf)
		if n != lens[i] || src.MAC != a.p.mac {
			t.Fatalf("datagram %d: %d bytes from %x, want %d", i, n, src, lens[i])
		}
		for j := range n {
			if buf[j] != byte(i+j*3) {
				t.Fatalf("datagram %d byte %d = %d, want %d", i, j, buf[j], byte(i+j*3))
			}
		}
	}
	if st := da.Stats(); st.Sent != DatagramBatch {
		t.Fatalf("sent %d, want %d", st.Sent, DatagramBatch)
	}
	if err := da.SendBatch(unicast(b.dev.HardwareAddr()), []int{da.MaxPayload() + 1}); !errors.Is(err, ErrDatagramSize) {
		t.Fatalf("oversize batch entry: %v", err)
	}
	dst := unicast(b.dev.HardwareAddr())
	allocs := testing.AllocsPerRun(50, func() {
		if err := da.SendBatch(dst, lens[:4]); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 4; {
			if _, _, ok := db.Recv(buf); ok {
				got++
				continue
			}
			db.WaitUntil(time.Now().Add(time.Millisecond))
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch, want 0", allocs)
	}
}
