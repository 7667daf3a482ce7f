package afpacket_test

import (
	"bytes"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/afpacket"
)

// epFrame is a frame of this job from src (MAC, endpoint) to dst, with a
// marker byte after the prefix.
func epFrame(dst, src net.HardwareAddr, dstEP, srcEP uint16, marker byte) []byte {
	b := make([]byte, 64)
	p := nic.Prefix{EtherType: nic.DefaultEtherType, Version: nic.Version, Kind: 1, JobKey: jobKey, DstEP: dstEP, SrcEP: srcEP}
	copy(p.Dst[:], dst)
	copy(p.Src[:], src)
	nic.PutPrefix(b, &p)
	b[nic.PrefixLen] = marker
	return b
}

// drain collects the markers of the frames d receives within idle.
func drain(t *testing.T, d nic.Device, idle time.Duration) []byte {
	t.Helper()
	var got []byte
	buf := [][]byte{make([]byte, nic.FrameCap(d.MTU()))}
	lens := []int{0}
	for {
		n, err := d.Recv(buf, lens)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			got = append(got, buf[0][nic.PrefixLen])
			continue
		}
		if err := d.Wait(time.Now().Add(idle)); err != nil {
			return got
		}
	}
}

// TestSharedEndpoints: two endpoints share host 0's interface (Shared),
// host 1 has one. Every frame reaches exactly the endpoint it is for, from
// the wire or from the neighbour on the same interface, and a frame for
// every endpoint reaches every endpoint but its sender.
func TestSharedEndpoints(t *testing.T) {
	tb := newTestbedPair(t, "shared")
	h0, h1 := tb.Host(0), tb.Host(1)
	cfg := func(ep uint16, shared bool) afpacket.Config {
		return afpacket.Config{Config: nic.Config{JobKey: jobKey, Endpoint: ep}, Shared: shared}
	}
	a0 := openCfg(t, h0, cfg(0, true))
	a1 := openCfg(t, h0, cfg(1, true))
	b0 := openCfg(t, h1, cfg(0, false))
	m0, m1 := h0.MACs[0], h1.MACs[0]
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	send := func(d nic.Device, f []byte) {
		t.Helper()
		if _, err := d.Send([][]byte{f}); err != nil {
			t.Fatal(err)
		}
	}
	send(a0, epFrame(m0, m0, 1, 0, 'a')) // to the neighbour
	send(a1, epFrame(m1, m0, 0, 1, 'b')) // to the other host
	send(b0, epFrame(m0, m1, 1, 0, 'c')) // from the other host to endpoint 1
	send(b0, epFrame(m0, m1, 0, 0, 'd')) // ... and to endpoint 0
	send(a0, epFrame(bcast, m0, nic.EndpointAll, 0, 'e'))
	send(a0, epFrame(m0, m0, 7, 0, 'f')) // to an endpoint nobody has
	idle := 200 * time.Millisecond
	for _, c := range []struct {
		name string
		d    nic.Device
		want string
	}{
		{"host 0 endpoint 0", a0, "d"},
		{"host 0 endpoint 1", a1, "ace"},
		{"host 1 endpoint 0", b0, "be"},
	} {
		got := drain(t, c.d, idle)
		slices.Sort(got)
		if !bytes.Equal(got, []byte(c.want)) {
			t.Errorf("%s received %q, want %q", c.name, got, c.want)
		}
	}
}
