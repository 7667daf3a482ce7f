package testbed

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/packet"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/bpf"
	"github.com/ethervia/ethervia/nic"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: testbed tests need root (network namespaces, veth, bridges, tc); run `go test` as root")
	}
}

// build makes a testbed that t.Cleanup closes even if the test fails.
func build(t *testing.T, cfg Config) *Testbed {
	t.Helper()
	tb, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tb
}

// ourNamespaces lists /run/netns entries that start with prefix.
func ourNamespaces(t *testing.T, prefix string) []string {
	t.Helper()
	ents, err := os.ReadDir(NetnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// rootLinks lists the link names of the test's own namespace.
func rootLinks(t *testing.T) []string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	slices.Sort(names)
	return names
}

// checkHost checks, inside the host, that exactly lo and one interface per
// rail exist with the testbed's MTU, MAC and address, up, without IPv6.
func checkHost(t *testing.T, tb *Testbed, h *Host) {
	t.Helper()
	cfg := tb.Config()
	err := h.Do(func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		var names []string
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		want := []string{"lo"}
		for r := 0; r < cfg.Rails; r++ {
			want = append(want, fmt.Sprintf("eth%d", r))
		}
		slices.Sort(names)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			return fmt.Errorf("interfaces %v, want %v", names, want)
		}
		for r := 0; r < cfg.Rails; r++ {
			ifi, err := net.InterfaceByName(h.Ifaces[r])
			if err != nil {
				return err
			}
			if ifi.MTU != cfg.MTU {
				return fmt.Errorf("%s MTU %d, want %d", ifi.Name, ifi.MTU, cfg.MTU)
			}
			if !bytes.Equal(ifi.HardwareAddr, h.MACs[r]) {
				return fmt.Errorf("%s MAC %s, Host says %s", ifi.Name, ifi.HardwareAddr, h.MACs[r])
			}
			if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagRunning == 0 {
				return fmt.Errorf("%s flags %v, want up and running", ifi.Name, ifi.Flags)
			}
			addrs, err := ifi.Addrs()
			if err != nil {
				return err
			}
			var got []string
			for _, a := range addrs {
				got = append(got, a.String())
			}
			wantAddr := []string(nil)
			if !cfg.NoIPv4 {
				wantAddr = []string{fmt.Sprintf("198.18.%d.%d/24", r, h.Index+1)}
				if !h.IPs[r].Equal(net.IPv4(198, 18, byte(r), byte(h.Index+1))) {
					return fmt.Errorf("Host.IPs[%d] = %v", r, h.IPs[r])
				}
			}
			if !slices.Equal(got, wantAddr) {
				return fmt.Errorf("%s addresses %v, want %v (no IPv6)", ifi.Name, got, wantAddr)
			}
			b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + ifi.Name + "/disable_ipv6")
			if err == nil && strings.TrimSpace(string(b)) != "1" {
				return fmt.Errorf("%s: IPv6 not disabled", ifi.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("host %d (%s): %v", h.Index, h.Name, err)
	}
}

// udpRoundTrip sends a datagram from host a to host b on the rail and
// expects it echoed back.
func udpRoundTrip(a, b *Host, rail int) error {
	var srv, cli *net.UDPConn
	if err := b.Do(func() (err error) {
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: b.IPs[rail]})
		return err
	}); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer srv.Close()
	if err := a.Do(func() (err error) {
		cli, err = net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer cli.Close()
	deadline := time.Now().Add(10 * time.Second)
	srv.SetDeadline(deadline)
	cli.SetDeadline(deadline)
	msg := fmt.Sprintf("ping %d->%d rail %d", a.Index, b.Index, rail)
	if _, err := cli.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, 100)
	n, from, err := srv.ReadFromUDP(buf)
	if err != nil {
		return fmt.Errorf("server read: %w", err)
	}
	if string(buf[:n]) != msg || !from.IP.Equal(a.IPs[rail]) {
		return fmt.Errorf("server got %q from %v", buf[:n], from)
	}
	if _, err := srv.WriteToUDP([]byte("pong"), from); err != nil {
		return err
	}
	n, err = cli.Read(buf)
	if err != nil {
		return fmt.Errorf("client read: %w", err)
	}
	if string(buf[:n]) != "pong" {
		return fmt.Errorf("client got %q", buf[:n])
	}
	return nil
}

// listenRaw opens an AF_PACKET socket on the host's rail interface.
func listenRaw(h *Host, rail int, etherType uint16) (*packet.Conn, error) {
	var c *packet.Conn
	err := h.Do(func() error {
		ifi, err := net.InterfaceByName(h.Ifaces[rail])
		if err != nil {
			return err
		}
		c, err = packet.Listen(ifi, packet.Raw, int(etherType), nil)
		return err
	})
	return c, err
}

// rawCross sends one frame of the EtherType from a to b on the rail and
// waits up to wait for it; it returns os.ErrDeadlineExceeded if it did not
// arrive.
func rawCross(a, b *Host, rail int, etherType uint16, wait time.Duration) error {
	tx, err := listenRaw(a, rail, etherType)
	if err != nil {
		return fmt.Errorf("sender socket: %w", err)
	}
	defer tx.Close()
	rx, err := listenRaw(b, rail, etherType)
	if err != nil {
		return fmt.Errorf("receiver socket: %w", err)
	}
	defer rx.Close()
	frame := make([]byte, 14+64)
	copy(frame[0:6], b.MACs[rail])
	copy(frame[6:12], a.MACs[rail])
	binary.BigEndian.PutUint16(frame[12:14], etherType)
	rand.Read(frame[14:])
	if _, err := tx.WriteTo(frame, &packet.Addr{HardwareAddr: b.MACs[rail]}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	rx.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 2048)
	for {
		n, _, err := rx.ReadFrom(buf)
		if err != nil {
			return err
		}
		if bytes.Equal(buf[:n], frame) {
			return nil
		}
	}
}

// tcpTransfer sends n bytes from a to b over TCP on the rail and returns how
// long it took until b had them all.
func tcpTransfer(a, b *Host, rail, n int) (time.Duration, error) {
	var ln *net.TCPListener
	if err := b.Do(func() (err error) {
		ln, err = net.ListenTCP("tcp4", &net.TCPAddr{IP: b.IPs[rail]})
		return err
	}); err != nil {
		return 0, err
	}
	defer ln.Close()
	deadline := time.Now().Add(30 * time.Second)
	ln.SetDeadline(deadline)
	got := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err
			return
		}
		defer c.Close()
		c.SetDeadline(deadline)
		m, err := io.Copy(io.Discard, c)
		if err == nil && m != int64(n) {
			err = fmt.Errorf("received %d bytes, want %d", m, n)
		}
		got <- err
	}()
	start := time.Now()
	var c *net.TCPConn
	if err := a.Do(func() (err error) {
		c, err = net.DialTCP("tcp4", nil, ln.Addr().(*net.TCPAddr))
		return err
	}); err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	if _, err := c.Write(make([]byte, n)); err != nil {
		return 0, err
	}
	if err := c.CloseWrite(); err != nil {
		return 0, err
	}
	if err := <-got; err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// bridgeInfo returns the forward delay and STP state of rail r's bridge.
func bridgeInfo(t *testing.T, tb *Testbed, r int) (fwdDelay, stp uint32) {
	t.Helper()
	sw := tb.switches[r]
	br, err := sw.nl.LinkByName(bridgeName)
	if err != nil {
		t.Fatal(err)
	}
	err = sw.run(func() error {
		req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_ACK)
		msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
		msg.Index = int32(br.Attrs().Index)
		req.AddData(msg)
		msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
		if err != nil {
			return err
		}
		fwdDelay, stp = 99, 99
		for _, m := range msgs {
			attrs, err := nl.ParseRouteAttr(m[nl.DeserializeIfInfomsg(m).Len():])
			if err != nil {
				return err
			}
			for _, a := range attrs {
				if a.Attr.Type&^unix.NLA_F_NESTED != unix.IFLA_LINKINFO {
					continue
				}
				infos, _ := nl.ParseRouteAttr(a.Value)
				for _, in := range infos {
					if in.Attr.Type&^unix.NLA_F_NESTED != nl.IFLA_INFO_DATA {
						continue
					}
					data, _ := nl.ParseRouteAttr(in.Value)
					for _, d := range data {
						switch d.Attr.Type {
						case nl.IFLA_BR_FORWARD_DELAY:
							fwdDelay = binary.NativeEndian.Uint32(d.Value)
						case nl.IFLA_BR_STP_STATE:
							stp = binary.NativeEndian.Uint32(d.Value)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fwdDelay, stp
}

func TestPair(t *testing.T) {
	needRoot(t)
	tb := build(t, Config{Hosts: 2, Rails: 2, Topology: Pair, MTU: 9000})
	if len(tb.Hosts()) != 2 || tb.SwitchNamespace(0) != "" {
		t.Fatalf("hosts %d, switch ns %q", len(tb.Hosts()), tb.SwitchNamespace(0))
	}
	for _, h := range tb.Hosts() {
		checkHost(t, tb, h)
	}
	for r := 0; r < 2; r++ {
		if err := udpRoundTrip(tb.Host(0), tb.Host(1), r); err != nil {
			t.Errorf("UDP 0->1 rail %d: %v", r, err)
		}
		if err := udpRoundTrip(tb.Host(1), tb.Host(0), r); err != nil {
			t.Errorf("UDP 1->0 rail %d: %v", r, err)
		}
		if err := rawCross(tb.Host(0), tb.Host(1), r, nic.DefaultEtherType, 10*time.Second); err != nil {
			t.Errorf("raw frame 0->1 rail %d: %v", r, err)
		}
	}
}

func TestSwitch(t *testing.T) {
	needRoot(t)
	tb := build(t, Config{Hosts: 3, Rails: 2, Topology: Switch})
	cfg := tb.Config()
	if cfg.MTU != 1500 || cfg.Rails != 2 || cfg.Name != "tb" || cfg.FaultEtherType != nic.DefaultEtherType {
		t.Errorf("Config() = %+v, want defaults filled in", cfg)
	}
	if got := len(tb.Namespaces()); got != 5 {
		t.Errorf("%d namespaces, want 3 hosts + 2 rails", got)
	}
	for _, h := range tb.Hosts() {
		checkHost(t, tb, h)
	}
	for r := 0; r < 2; r++ {
		sw := tb.switches[r]
		if sw.name != tb.SwitchNamespace(r) || !strings.HasSuffix(sw.name, fmt.Sprintf("-sw%d", r)) {
			t.Errorf("switch namespace %q", sw.name)
		}
		br, err := sw.nl.LinkByName(bridgeName)
		if err != nil {
			t.Fatal(err)
		}
		if br.Type() != "bridge" || br.Attrs().MTU != 1500 {
			t.Errorf("rail %d: %s is %s MTU %d", r, bridgeName, br.Type(), br.Attrs().MTU)
		}
		for i := 0; i < 3; i++ {
			p, err := sw.nl.LinkByName(portIface(i))
			if err != nil {
				t.Fatalf("rail %d port %d: %v", r, i, err)
			}
			if p.Attrs().MasterIndex != br.Attrs().Index || p.Attrs().MTU != 1500 || p.Attrs().OperState != netlink.OperUp {
				t.Errorf("rail %d port %s: master %d (bridge %d) MTU %d state %v", r, p.Attrs().Name, p.Attrs().MasterIndex, br.Attrs().Index, p.Attrs().MTU, p.Attrs().OperState)
			}
		}
		if fd, stp := bridgeInfo(t, tb, r); fd != 0 || stp != 0 {
			t.Errorf("rail %d bridge: forward delay %d, stp %d; want 0, 0", r, fd, stp)
		}
	}
	for r := 0; r < 2; r++ {
		for a := 0; a < 3; a++ {
			for b := 0; b < 3; b++ {
				if a == b {
					continue
				}
				if err := udpRoundTrip(tb.Host(a), tb.Host(b), r); err != nil {
					t.Errorf("UDP %d->%d rail %d: %v", a, b, r, err)
				}
			}
		}
		if err := rawCross(tb.Host(2), tb.Host(0), r, nic.DefaultEtherType, 10*time.Second); err != nil {
			t.Errorf("raw frame 2->0 rail %d: %v", r, err)
		}
	}
}

func TestNoIPv4(t *testing.T) {
	needRoot(t)
	tb := build(t, Config{Hosts: 2, NoIPv4: true, Name: "noip"})
	if tb.Host(0).IPs != nil {
		t.Errorf("IPs = %v, want nil", tb.Host(0).IPs)
	}
	checkHost(t, tb, tb.Host(1))
	if err := rawCross(tb.Host(1), tb.Host(0), 0, 0x88B6, 10*time.Second); err != nil {
		t.Errorf("raw frame without IPv4: %v", err)
	}
}

// The rate tests move n bytes through a port limited to rate: 2 MB at 50
// mbit/s needs 0.34 s; the bucket lets 5 ms of it through at once, so
// anything under floor means the limit did not act.
const (
	rateTestBytes = 2 << 20
	rateTestRate  = 50_000_000
	rateTestFloor = 200 * time.Millisecond
)

func TestSetRate(t *testing.T) {
	needRoot(t)
	const n, rate, floor = rateTestBytes, rateTestRate, rateTestFloor
	for _, topo := range []Topology{Pair, Switch} {
		t.Run(topo.String(), func(t *testing.T) {
			tb := build(t, Config{Hosts: 2, Topology: topo})
			if err := tb.SetRate(1, 0, rate); err != nil {
				t.Fatal(err)
			}
			if got, err := tb.Rate(1, 0); err != nil || got != rate {
				t.Fatalf("Rate(1, 0) = %d, %v; want %d", got, err, rate)
			}
			if got, err := tb.Rate(0, 0); err != nil || got != 0 {
				t.Fatalf("Rate(0, 0) = %d, %v; want 0", got, err)
			}
			d, err := tcpTransfer(tb.Host(0), tb.Host(1), 0, n)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: 2 MB at 50mbit took %v (%.1f Mbit/s)", topo, d, float64(n)*8/d.Seconds()/1e6)
			if d < floor {
				t.Errorf("2 MB at 50mbit took %v, want at least %v", d, floor)
			}
			if err := tb.SetRate(1, 0, 0); err != nil {
				t.Fatal(err)
			}
			if got, err := tb.Rate(1, 0); err != nil || got != 0 {
				t.Fatalf("after removal Rate(1, 0) = %d, %v; want 0", got, err)
			}
			if err := tb.SetRate(1, 0, 0); err != nil {
				t.Errorf("removing an absent rate: %v", err)
			}
			if _, err := tcpTransfer(tb.Host(0), tb.Host(1), 0, n); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestConfigRate(t *testing.T) {
	needRoot(t)
	tb := build(t, Config{Hosts: 3, Rails: 2, Topology: Switch, Rate: 1_000_000_000})
	for h := 0; h < 3; h++ {
		for r := 0; r < 2; r++ {
			if got, err := tb.Rate(h, r); err != nil || got != 1_000_000_000 {
				t.Errorf("Rate(%d, %d) = %d, %v; want 1gbit", h, r, got, err)
			}
		}
	}
	if err := udpRoundTrip(tb.Host(0), tb.Host(2), 1); err != nil {
		t.Errorf("UDP through rate-limited ports: %v", err)
	}
	if err := tb.SetRate(3, 0, 1); err == nil {
		t.Error("SetRate on host 3 of 3 succeeded")
	}
	if err := tb.SetRate(0, 2, 1e6); err == nil {
		t.Error("SetRate on rail 2 of 2 succeeded")
	}
	if err := tb.SetRate(0, 0, 7); err == nil {
		t.Error("SetRate of 7 bit/s succeeded")
	}
}

func TestConfigRailRates(t *testing.T) {
	needRoot(t)
	rates := []uint64{250_000_000, 0, 500_000_000}
	tb := build(t, Config{Hosts: 2, Rails: 3, Topology: Switch, Rate: 1e9, RailRates: rates})
	for h := 0; h < 2; h++ {
		for r, want := range rates {
			if got, err := tb.Rate(h, r); err != nil || got != want {
				t.Errorf("Rate(%d, %d) = %d, %v; want %d", h, r, got, err, want)
			}
		}
	}
}

func TestParseRates(t *testing.T) {
	got, err := ParseRates("250mbit, 500mbit,0")
	if err != nil || len(got) != 3 || got[0] != 250e6 || got[1] != 500e6 || got[2] != 0 {
		t.Errorf("ParseRates = %v, %v", got, err)
	}
	if got, err := ParseRates("1gbit"); err != nil || len(got) != 1 || got[0] != 1e9 {
		t.Errorf("ParseRates(1gbit) = %v, %v", got, err)
	}
	c := Config{Rails: 2}
	if err := c.SetRates([]uint64{1, 2}); err != nil || c.Rate != 0 || len(c.RailRates) != 2 {
		t.Errorf("SetRates(2 of 2) = %v, %+v", err, c)
	}
	if err := c.SetRates([]uint64{5}); err != nil || c.Rate != 5 || c.RailRates != nil {
		t.Errorf("SetRates(1 of 2) = %v, %+v", err, c)
	}
	if err := c.SetRates([]uint64{1, 2, 3}); !errors.Is(err, ErrRate) {
		t.Errorf("SetRates(3 of 2) = %v; want ErrRate", err)
	}
	for _, bad := range []string{"", "1gbit,", ",1gbit", "1gbit,x"} {
		if _, err := ParseRates(bad); !errors.Is(err, ErrRate) {
			t.Errorf("ParseRates(%q) = %v; want ErrRate", bad, err)
		}
	}
}

func TestSetPortUp(t *testing.T) {
	needRoot(t)
	// Long enough that a frame the bridge forwards would have arrived.
	const silence = 300 * time.Millisecond
	for _, topo := range []Topology{Pair, Switch} {
		t.Run(topo.String(), func(t *testing.T) {
			tb := build(t, Config{Hosts: 2, Rails: 2, Topology: topo})
			a, b := tb.Host(0), tb.Host(1)
			if err := rawCross(a, b, 1, nic.DefaultEtherType, 10*time.Second); err != nil {
				t.Fatalf("before flap: %v", err)
			}
			if err := tb.SetPortUp(1, 1, false); err != nil {
				t.Fatal(err)
			}
			// Pair: the sender's own end is down, so it cannot even send.
			if err := rawCross(a, b, 1, nic.DefaultEtherType, silence); !errors.Is(err, os.ErrDeadlineExceeded) &&
				!(topo == Pair && errors.Is(err, unix.ENETDOWN)) {
				t.Errorf("port down: frame 0->1 rail 1: %v, want it lost", err)
			}
			// The other rail is unaffected.
			if err := rawCross(a, b, 0, nic.DefaultEtherType, 10*time.Second); err != nil {
				t.Errorf("port down on rail 1: rail 0: %v", err)
			}
			if topo == Switch {
				// The host's interface stays up but loses carrier.
				err := b.Do(func() error {
					ifi, err := net.InterfaceByName(b.Ifaces[1])
					if err != nil {
						return err
					}
					if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagRunning != 0 {
						return fmt.Errorf("flags %v, want up, not running", ifi.Flags)
					}
					return nil
				})
				if err != nil {
					t.Errorf("host 1 eth1 with port down: %v", err)
				}
			}
			if err := tb.SetPortUp(1, 1, true); err != nil {
				t.Fatal(err)
			}
			if err := rawCross(a, b, 1, nic.DefaultEtherType, 10*time.Second); err != nil {
				t.Errorf("port up again: %v", err)
			}
			if err := udpRoundTrip(a, b, 1); err != nil {
				t.Errorf("port up again, UDP: %v", err)
			}
		})
	}
}

// TestPortBytes: a frame a host sends on a rail shows in that port's byte
// count, and in no other host's.
func TestPortBytes(t *testing.T) {
	needRoot(t)
	for _, topo := range []Topology{Pair, Switch} {
		t.Run(topo.String(), func(t *testing.T) {
			tb := build(t, Config{Hosts: 2, Rails: 2, Topology: topo})
			mine, err := tb.PortBytes(0, 1)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := tb.PortBytes(1, 1)
			if err != nil {
				t.Fatal(err)
			}
			// rawCross sends one 78-byte frame from host 0 to host 1.
			if err := rawCross(tb.Host(0), tb.Host(1), 1, nic.DefaultEtherType, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			after, err := tb.PortBytes(0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if after-mine < 78 {
				t.Errorf("port of host 0 rail 1 counted %d bytes for a 78-byte frame", after-mine)
			}
			if got, _ := tb.PortBytes(1, 1); got-theirs >= 78 {
				t.Errorf("port of host 1 rail 1 counted %d bytes it did not send", got-theirs)
			}
			if _, err := tb.PortBytes(2, 0); err == nil {
				t.Error("PortBytes(2, 0) on two hosts: no error")
			}
		})
	}
}

func TestStart(t *testing.T) {
	needRoot(t)
	tb := build(t, Config{Hosts: 2, Name: "start"})
	h := tb.Host(1)
	var inode string
	if err := h.Do(func() (err error) {
		inode, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if inode == own {
		t.Fatalf("Do ran in the caller's namespace %s", own)
	}
	var out bytes.Buffer
	cmd := exec.Command("/bin/sh", "-c", "readlink /proc/self/ns/net; cat /proc/net/dev")
	cmd.Stdout = &out
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(out.String(), "\n")
	if first != inode {
		t.Errorf("child's namespace %s, host's %s", first, inode)
	}
	if !strings.Contains(rest, "eth0:") {
		t.Errorf("child's /proc/net/dev has no eth0:\n%s", rest)
	}
	// The caller's own thread is still where it was.
	if now, _ := os.Readlink("/proc/thread-self/ns/net"); now != own {
		t.Errorf("caller's thread moved to %s", now)
	}

	// StartOnCPU binds the child, and only the child, to one CPU.
	cpu := runtime.NumCPU() - 1
	out.Reset()
	cmd = exec.Command("/bin/sh", "-c", "readlink /proc/self/ns/net; grep Cpus_allowed_list /proc/self/status")
	cmd.Stdout = &out
	if err := h.StartOnCPU(cmd, cpu); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%s\nCpus_allowed_list:\t%d\n", inode, cpu); out.String() != want {
		t.Errorf("StartOnCPU(%d): child printed %q, want %q", cpu, out.String(), want)
	}
	if err := h.StartOnCPU(exec.Command("/bin/true"), -1); err == nil {
		t.Error("StartOnCPU(-1) started a child")
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() != runtime.NumCPU() {
		t.Errorf("the caller's affinity changed: %d CPUs, %v", set.Count(), err)
	}

	// Run with a context that ends kills the child.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Run(ctx, exec.Command("/bin/sleep", "60")); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a canceled context: %v", err)
	}

	// Close kills a child that still runs.
	sleeper := exec.Command("/bin/sleep", "60")
	if err := h.Start(sleeper); err != nil {
		t.Fatal(err)
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	err = sleeper.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != unix.SIGKILL {
		t.Errorf("child after Close: %v, want killed", err)
	}
	if err := h.Start(exec.Command("/bin/true")); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
}

// A child started with Pdeathsig survives the testbed's other namespace
// work: Do discards the threads it locks, and the child's parent thread must
// never be one of them.
func TestStartSurvivesNamespaceWork(t *testing.T) {
	needRoot(t)
	tb := build(t, Config{Hosts: 2, Topology: Switch, Name: "pdeath"})
	var kids []*exec.Cmd
	for i := range 4 {
		cmd := exec.Command("/bin/sleep", "30")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := tb.Host(i % 2).Start(cmd); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, cmd)
	}
	// Many at once, so the runtime reaches for idle threads, the
	// children's parents among them.
	for round := range 20 {
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := tb.Host(i % 2).Do(func() error { time.Sleep(time.Millisecond); return nil }); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if err := tb.SetPortUp(0, 0, round%2 == 1); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	for i, k := range kids {
		if err := k.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("child %d died while the testbed worked: %v", i, err)
		}
	}
}

func TestGo(t *testing.T) {
	needRoot(t)
	tb := build(t, Config{Hosts: 2, Name: "go"})
	started := make(chan struct{})
	release := make(chan struct{})
	errc := tb.Host(0).Go(func() error {
		close(started)
		<-release
		_, err := net.InterfaceByName("eth0")
		return err
	})
	<-started
	select {
	case err := <-errc:
		t.Fatalf("Go waited for nothing: %v", err)
	default:
	}
	close(release)
	if err := <-errc; err != nil {
		t.Errorf("Go: %v", err)
	}
	want := errors.New("from fn")
	if err := tb.Host(1).Do(func() error { return want }); err != want {
		t.Errorf("Do returned %v, want fn's error", err)
	}
}

func TestClose(t *testing.T) {
	needRoot(t)
	prefix := fmt.Sprintf("%sclose-%d-", Prefix(), os.Getpid())
	links := rootLinks(t)
	for _, topo := range []Topology{Pair, Switch} {
		tb, err := New(Config{Hosts: 2, Rails: 3, Topology: topo, Name: "close"})
		if err != nil {
			t.Fatal(err)
		}
		got := ourNamespaces(t, prefix)
		want := tb.Namespaces()
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%v: namespaces %v, want %v", topo, got, want)
		}
		if l := rootLinks(t); !slices.Equal(l, links) {
			t.Errorf("%v: testbed changed the caller's links: %v -> %v", topo, links, l)
		}
		// Probes: veths from here into each namespace. Deleting a
		// namespace destroys its veths, peers included, so a probe
		// vanishes exactly when its namespace is really gone.
		var probes []string
		for i, n := range want {
			probes = append(probes, probe(t, n, i))
		}
		var inodes []string
		for _, n := range want {
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(NetnsDir, n), &st); err != nil {
				t.Fatal(err)
			}
			inodes = append(inodes, fmt.Sprintf("net:[%d]", st.Ino))
		}
		if err := tb.Close(); err != nil {
			t.Fatal(err)
		}
		// Nothing in this process may still hold a namespace (which would
		// keep it and its links alive): no fd, no thread.
		if held := heldNamespaces(t, inodes); len(held) != 0 {
			t.Errorf("%v: after Close this process still holds %v", topo, held)
		}
		if left := ourNamespaces(t, prefix); len(left) != 0 {
			t.Errorf("%v: after Close: %v", topo, left)
		}
		// The kernel destroys namespaces in the background; a generous
		// bound, not a timing assertion.
		for _, p := range probes {
			deadline := time.Now().Add(20 * time.Second)
			for {
				_, err := netlink.LinkByName(p)
				if err != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%v: a namespace outlived Close: its probe %s is still here", topo, p)
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		if l := rootLinks(t); !slices.Equal(l, links) {
			t.Errorf("%v: after Close the caller's links: %v -> %v", topo, links, l)
		}
		if err := tb.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := tb.Host(0).Do(func() error { return nil }); !errors.Is(err, ErrClosed) {
			t.Errorf("Do after Close: %v", err)
		}
		if err := tb.SetRate(0, 0, 1e6); !errors.Is(err, ErrClosed) {
			t.Errorf("SetRate after Close: %v", err)
		}
		if err := tb.SetPortUp(0, 0, false); !errors.Is(err, ErrClosed) {
			t.Errorf("SetPortUp after Close: %v", err)
		}
	}
}

// probe makes a veth in this namespace whose peer is in the named one and
// returns the local end's name; t.Cleanup removes it if it is still there.
func probe(t *testing.T, ns string, i int) string {
	t.Helper()
	name := fmt.Sprintf("%sp%s%d", strings.TrimSuffix(Prefix(), "-"), strconv.FormatInt(int64(os.Getpid()), 36), i)
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "probe", PeerNamespace: netlink.NsFd(int(h))}
	if err := netlink.LinkAdd(v); err != nil {
		t.Fatalf("probe into %s: %v", ns, err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(name); err == nil {
			netlink.LinkDel(l)
		}
	})
	return name
}

// heldNamespaces returns the fds and threads of this process that refer to
// any of the namespaces (as "net:[inode]").
func heldNamespaces(t *testing.T, inodes []string) []string {
	t.Helper()
	var held []string
	fds, _ := filepath.Glob("/proc/self/fd/*")
	threads, _ := filepath.Glob("/proc/self/task/*/ns/net")
	for _, p := range append(fds, threads...) {
		if l, err := os.Readlink(p); err == nil && slices.Contains(inodes, l) {
			held = append(held, p)
		}
	}
	return held
}

func TestNewFailsCleanly(t *testing.T) {
	needRoot(t)
	prefix := fmt.Sprintf("%sfail-%d-", Prefix(), os.Getpid())
	links := rootLinks(t)
	for _, topo := range []Topology{Pair, Switch} {
		cfg := Config{Hosts: 2, Rails: 2, Topology: topo, MTU: 70000, Name: "fail"}
		tb, err := New(cfg)
		if err == nil {
			tb.Close()
			t.Fatalf("%v: New with MTU 70000 succeeded", topo)
		}
		t.Logf("%v: %v", topo, err)
		if left := ourNamespaces(t, prefix); len(left) != 0 {
			t.Errorf("%v: failed New left %v", topo, left)
			for _, n := range left {
				deleteNamed(n)
			}
		}
		if l := rootLinks(t); !slices.Equal(l, links) {
			t.Errorf("%v: failed New changed the caller's links: %v -> %v", topo, links, l)
		}
	}
}

func TestNewCanceledCleansUp(t *testing.T) {
	needRoot(t)
	// A canceled context fails New at its last step, after every
	// namespace, veth and bridge exists.
	prefix := fmt.Sprintf("%scancel-%d-", Prefix(), os.Getpid())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tb, err := NewContext(ctx, Config{Hosts: 3, Rails: 2, Topology: Switch, Name: "cancel"})
	if !errors.Is(err, context.Canceled) {
		if tb != nil {
			tb.Close()
		}
		t.Fatalf("NewContext with a canceled context: %v", err)
	}
	if left := ourNamespaces(t, prefix); len(left) != 0 {
		t.Errorf("canceled New left %v", left)
		for _, n := range left {
			deleteNamed(n)
		}
	}
}

func TestNameTaken(t *testing.T) {
	needRoot(t)
	tb := build(t, Config{Hosts: 2, Name: "taken"})
	sp, err := makeSpace(tb.Host(0).Name)
	if sp != nil || !errors.Is(err, os.ErrExist) {
		t.Fatalf("makeSpace of an existing name: %v, %v; want ErrExist", sp, err)
	}
	// The existing namespace is untouched.
	if err := udpRoundTrip(tb.Host(0), tb.Host(1), 0); err != nil {
		t.Errorf("after a clashing makeSpace: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{
		{Hosts: 3},
		{Hosts: 1, Topology: Switch},
		{Hosts: MaxHosts + 1, Topology: Switch},
		{Hosts: 2, Rails: 9},
		{Hosts: 2, Rails: -1},
		{Hosts: 2, MTU: 67},
		{Hosts: 2, Name: "a-b"},
		{Hosts: 2, Name: "waytoolongtagforanamespace"},
		{Hosts: 2, IPv4: true, NoIPv4: true},
		{Hosts: 2, Topology: 7},
		{Hosts: 2, Rate: 4},
		{Hosts: 2, Rate: 100, MTU: 65535}, // bucket of two frames would take minutes
		{Hosts: 2, Rails: 2, RailRates: []uint64{1e9}},
		{Hosts: 2, Rails: 2, RailRates: []uint64{1e9, 4}},
	} {
		if tb, err := New(c); err == nil {
			tb.Close()
			t.Errorf("New(%+v) succeeded", c)
		}
	}
}

func TestSweep(t *testing.T) {
	needRoot(t)
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	pidMax, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	dead := pidMax + 1 // no process can have it
	base, err := baseName("sweep", dead)
	if err != nil {
		t.Fatal(err)
	}
	// A leftover of a dead process: two namespaces with a veth between.
	h0, err := makeSpace(hostNS(base, 0))
	if h0 != nil {
		t.Cleanup(func() { h0.release(); deleteNamed(h0.name) })
	}
	if err != nil {
		t.Fatal(err)
	}
	sw0, err := makeSpace(switchNS(base, 0))
	if sw0 != nil {
		t.Cleanup(func() { sw0.release(); deleteNamed(sw0.name) })
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := addVeth(h0, sw0, "eth0", "h0", hostMAC(0, 0), switchMAC(0, 0), 1500); err != nil {
		t.Fatal(err)
	}
	h0.release()
	sw0.release()
	// A namespace of this (live) process that no testbed owns, and a live
	// testbed: both must stay.
	liveBase, err := baseName("sweep", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	live, err := makeSpace(hostNS(liveBase, 0))
	if live != nil {
		t.Cleanup(func() { live.release(); deleteNamed(live.name) })
	}
	if err != nil {
		t.Fatal(err)
	}
	tb := build(t, Config{Hosts: 2, Name: "sweep"})

	removed, err := Sweep()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{h0.name, sw0.name} {
		if !slices.Contains(removed, n) {
			t.Errorf("Sweep did not report %s among the removed %q", n, removed)
		}
		if _, err := os.Stat(filepath.Join(NetnsDir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Sweep left %s of dead pid %d: %v", n, dead, err)
		}
	}
	for _, n := range append(tb.Namespaces(), live.name) {
		if _, err := os.Stat(filepath.Join(NetnsDir, n)); err != nil {
			t.Errorf("Sweep removed %s of a live process: %v", n, err)
		}
	}
	if err := udpRoundTrip(tb.Host(0), tb.Host(1), 0); err != nil {
		t.Errorf("live testbed after Sweep: %v", err)
	}
}

func TestParseName(t *testing.T) {
	for _, c := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{"ev-tb-1234-0a9z-h0", 1234, true},
		{"ev-tb-1234-0a9z-h12", 1234, true},
		{"ev-netpipe-77-zzzz-sw7", 77, true},
		{"ev-A1-4194305-0000-sw0", 4194305, true},
		{"ev-tb-1234-0a9z", 0, false},
		{"ev-tb-1234-0a9z-x0", 0, false},
		{"ev-tb-1234-0a9z-h", 0, false},
		{"ev-tb-1234-0a9z-h01", 0, false},
		{"ev-tb-1234-0A9Z-h0", 0, false},
		{"ev-tb-1234-0a9-h0", 0, false},
		{"ev-tb-01234-0a9z-h0", 0, false},
		{"ev-tb--1-0a9z-h0", 0, false},
		{"ev-tb-+1-0a9z-h0", 0, false},
		{"ev-tb-99999999999-0a9z-h0", 0, false},
		{"ev--1234-0a9z-h0", 0, false},
		{"ev-t_b-1234-0a9z-h0", 0, false},
		{"xx-tb-1234-0a9z-h0", 0, false},
		{"ev-tb-1234-0a9z-h0-extra", 0, false},
		{"evci7k-tb-1234-0a9z-h0", 1234, true},
		{"evci7k2x9-tb-1234-0a9z-h0", 0, false},
		{"evCI-tb-1234-0a9z-h0", 0, false},
		{"docker-netns", 0, false},
	} {
		pid, ok := parseName(c.name)
		if pid != c.pid || ok != c.ok {
			t.Errorf("parseName(%q) = %d, %v; want %d, %v", c.name, pid, ok, c.pid, c.ok)
		}
	}
	for i := 0; i < 100; i++ {
		base, err := baseName("x", 4194304)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{hostNS(base, MaxHosts-1), switchNS(base, MaxRails-1)} {
			if pid, ok := parseName(n); !ok || pid != 4194304 {
				t.Fatalf("parseName(%q) = %d, %v", n, pid, ok)
			}
		}
	}
}

func FuzzParseName(f *testing.F) {
	f.Add("ev-tb-1234-0a9z-h0")
	f.Add("ev-netpipe-77-zzzz-sw7")
	f.Add("ev-tb-01234-0a9z-h0")
	f.Fuzz(func(t *testing.T, name string) {
		pid, ok := parseName(name)
		if !ok {
			return
		}
		if pid <= 0 || !strings.HasPrefix(name, NamePrefix) {
			t.Fatalf("parseName(%q) = %d, true", name, pid)
		}
		// A name that parses is one New could have made.
		i := strings.LastIndexByte(name, '-')
		base := name[:i]
		tag := strings.Split(base, "-")[1]
		if run := strings.Split(base, "-")[0][len(NamePrefix):]; !validRun(run) {
			t.Fatalf("parseName(%q) accepted run label %q", name, run)
		}
		if !validTag(tag) || !strings.Contains(base, "-"+strconv.Itoa(pid)+"-") {
			t.Fatalf("parseName(%q) accepted tag %q pid %d", name, tag, pid)
		}
	})
}

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{
		{"1gbit", 1_000_000_000},
		{"1GBit", 1_000_000_000},
		{"500mbit", 500_000_000},
		{"10kbit", 10_000},
		{"100000bit", 100_000},
		{"100000", 100_000},
		{"0", 0},
		{"1.5gbit", 1_500_000_000},
		{"1e9bit", 1_000_000_000},
		{"2.5E3kbit", 2_500_000},
		{"1tbit", 1_000_000_000_000},
		{"1kibit", 1024},
		{"1mibit", 1 << 20},
		{"1gibit", 1 << 30},
		{"1tibit", 1 << 40},
		{"1bps", 8},
		{"1kbps", 8000},
		{"1KBps", 8000},
		{"1mbps", 8_000_000},
		{"1gbps", 8_000_000_000},
		{"1tbps", 8_000_000_000_000},
		{"1kibps", 8192},
		{"1mibps", 8 << 20},
		{"1gibps", 8 << 30},
		{"1tibps", 8 << 40},
		{" 10 mbit ", 10_000_000},
		{"0.4bit", 0},
		{"0.5bit", 1},
	} {
		got, err := ParseRate(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		"", " ", "gbit", "-1gbit", "1 gigabit", "1gb", "1x", "1.2.3mbit", "10%",
		"NaN", "inf", "1e30tbit", "0x10bit", "1e", "--1", "1mbit/s",
	} {
		if got, err := ParseRate(in); err == nil || !errors.Is(err, ErrRate) {
			t.Errorf("ParseRate(%q) = %d, %v; want an ErrRate error", in, got, err)
		}
	}
}

func TestFormatRate(t *testing.T) {
	for _, c := range []struct {
		in   uint64
		want string
	}{
		{1_000_000_000, "1gbit"}, {1_500_000, "1500kbit"}, {50_000_000, "50mbit"},
		{123, "123bit"}, {0, "0bit"}, {2_000_000_000_000, "2tbit"}, {1001, "1001bit"},
	} {
		if got := FormatRate(c.in); got != c.want {
			t.Errorf("FormatRate(%d) = %q, want %q", c.in, got, c.want)
		}
		if back, err := ParseRate(FormatRate(c.in)); err != nil || back != c.in {
			t.Errorf("ParseRate(FormatRate(%d)) = %d, %v", c.in, back, err)
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"1gbit", "500mbit", "10kbit", "100000bit", "1.5e3KiBps", "-1", "10%", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRate(s)
		if err != nil {
			if !errors.Is(err, ErrRate) {
				t.Fatalf("ParseRate(%q): error %v does not wrap ErrRate", s, err)
			}
			return
		}
		back, err := ParseRate(FormatRate(v))
		if err != nil || back != v {
			t.Fatalf("ParseRate(%q) = %d; FormatRate gives %q which parses to %d, %v", s, v, FormatRate(v), back, err)
		}
	})
}

func TestTbfParams(t *testing.T) {
	for _, c := range []struct {
		rate uint64
		mtu  int
	}{{50e6, 1500}, {1e9, 9000}, {100e9, 65535}, {1e12, 1500}, {64e3, 1500}} {
		q, err := tbfParams(c.rate, c.mtu)
		if err != nil {
			t.Errorf("tbfParams(%d, %d): %v", c.rate, c.mtu, err)
			continue
		}
		burst := netlink.Xmitsize(q.Rate, q.Buffer)
		// The bucket holds at least two frames, else big frames never pass.
		if q.Rate != c.rate/8 || uint64(burst) < uint64(2*nic.FrameCap(c.mtu))*99/100 || q.Limit < burst {
			t.Errorf("tbfParams(%d, %d) = rate %d B/s, burst %d, limit %d", c.rate, c.mtu, q.Rate, burst, q.Limit)
		}
	}
}

// rawFrames sends one frame of the EtherType from a to b on the rail and
// reads frames from a at b until want have come or wait passes. It counts
// exact copies and frames of the same length that differ (corrupted).
func rawFrames(a, b *Host, rail int, etherType uint16, want int, wait time.Duration) (exact, corrupt int, err error) {
	tx, err := listenRaw(a, rail, etherType)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Close()
	rx, err := listenRaw(b, rail, etherType)
	if err != nil {
		return 0, 0, err
	}
	defer rx.Close()
	frame := make([]byte, 14+64)
	copy(frame[0:6], b.MACs[rail])
	copy(frame[6:12], a.MACs[rail])
	binary.BigEndian.PutUint16(frame[12:14], etherType)
	rand.Read(frame[14:])
	if _, err := tx.WriteTo(frame, &packet.Addr{HardwareAddr: b.MACs[rail]}); err != nil {
		return 0, 0, err
	}
	rx.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 2048)
	for exact+corrupt < want {
		n, _, err := rx.ReadFrom(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return exact, corrupt, nil
		}
		if err != nil {
			return exact, corrupt, err
		}
		switch {
		case bytes.Equal(buf[:n], frame):
			exact++
		case n == len(frame) && bytes.Equal(buf[6:12], frame[6:12]):
			corrupt++
		}
	}
	return exact, corrupt, nil
}

func TestFault(t *testing.T) {
	needRoot(t)
	const other = 0x88B6 // not the default fault EtherType
	const silence = 300 * time.Millisecond
	for _, topo := range []Topology{Pair, Switch} {
		t.Run(topo.String(), func(t *testing.T) {
			hosts := 2
			if topo == Switch {
				hosts = 3
			}
			tb := build(t, Config{Hosts: hosts, Rails: 2, Topology: topo})
			a, b := tb.Host(0), tb.Host(1)
			if c, err := tb.FaultCounters(1, 1); err != nil || c != (bpf.FaultCounters{}) {
				t.Errorf("counters before SetFault: %+v, %v", c, err)
			}
			if err := tb.SetFault(1, 1, bpf.FaultConfig{Drop: 1}); err != nil {
				t.Fatal(err)
			}
			if ex, co, err := rawFrames(a, b, 1, nic.DefaultEtherType, 1, silence); err != nil || ex+co != 0 {
				t.Errorf("drop 1: got %d+%d frames, %v; want none", ex, co, err)
			}
			c, err := tb.FaultCounters(1, 1)
			if err != nil || c.Dropped < 1 || c.Seen < c.Dropped {
				t.Errorf("after a dropped frame: counters %+v, %v", c, err)
			}
			// Other EtherTypes, the other direction (Pair) or hosts
			// (Switch), and the other rail are not faulted.
			if ex, _, err := rawFrames(a, b, 1, other, 1, 10*time.Second); err != nil || ex != 1 {
				t.Errorf("EtherType %#x through a dropping port: %d, %v", other, ex, err)
			}
			if err := udpRoundTrip(a, b, 1); err != nil {
				t.Errorf("UDP through a port dropping %#x: %v", nic.DefaultEtherType, err)
			}
			if ex, _, err := rawFrames(a, b, 0, nic.DefaultEtherType, 1, 10*time.Second); err != nil || ex != 1 {
				t.Errorf("rail 0 while rail 1 drops: %d, %v", ex, err)
			}
			if topo == Switch {
				if ex, _, err := rawFrames(a, tb.Host(2), 1, nic.DefaultEtherType, 1, 10*time.Second); err != nil || ex != 1 {
					t.Errorf("host 2 while host 1's port drops: %d, %v", ex, err)
				}
			} else {
				if ex, _, err := rawFrames(b, a, 1, nic.DefaultEtherType, 1, 10*time.Second); err != nil || ex != 1 {
					t.Errorf("1->0 while host 1's port drops: %d, %v", ex, err)
				}
			}
			if err := tb.SetFault(1, 1, bpf.FaultConfig{Duplicate: 1}); err != nil {
				t.Fatal(err)
			}
			if ex, co, err := rawFrames(a, b, 1, nic.DefaultEtherType, 2, 10*time.Second); err != nil || ex != 2 || co != 0 {
				t.Errorf("duplicate 1: %d exact + %d other, %v; want 2 exact", ex, co, err)
			}
			if err := tb.SetFault(1, 1, bpf.FaultConfig{Corrupt: 1}); err != nil {
				t.Fatal(err)
			}
			if ex, co, err := rawFrames(a, b, 1, nic.DefaultEtherType, 1, 10*time.Second); err != nil || ex != 0 || co != 1 {
				t.Errorf("corrupt 1: %d exact + %d corrupted, %v; want 1 corrupted", ex, co, err)
			}
			if err := tb.SetFault(1, 1, bpf.FaultConfig{}); err != nil {
				t.Fatal(err)
			}
			if ex, _, err := rawFrames(a, b, 1, nic.DefaultEtherType, 1, 10*time.Second); err != nil || ex != 1 {
				t.Errorf("after clearing faults: %d, %v", ex, err)
			}
			c, err = tb.FaultCounters(1, 1)
			if err != nil || c.Dropped < 1 || c.Duplicated < 1 || c.Corrupted < 1 {
				t.Errorf("final counters %+v, %v", c, err)
			}
			if err := tb.SetFault(2, 0, bpf.FaultConfig{Drop: 1}); err == nil && topo == Pair {
				t.Error("SetFault on host 2 of a pair succeeded")
			}
			if err := tb.SetFault(0, 0, bpf.FaultConfig{Drop: 2}); err == nil {
				t.Error("SetFault with drop 2 succeeded")
			}
		})
	}
}

func TestFaultAllEtherTypes(t *testing.T) {
	needRoot(t)
	tb := build(t, Config{Hosts: 2, Topology: Switch, FaultEtherType: AllEtherTypes, Name: "faultall"})
	if err := tb.SetFault(1, 0, bpf.FaultConfig{Drop: 1}); err != nil {
		t.Fatal(err)
	}
	if ex, co, err := rawFrames(tb.Host(0), tb.Host(1), 0, 0x88B6, 1, 300*time.Millisecond); err != nil || ex+co != 0 {
		t.Errorf("EtherType 0x88B6 with AllEtherTypes dropping: %d+%d, %v", ex, co, err)
	}
	c, err := tb.FaultCounters(1, 0)
	if err != nil || c.Dropped < 1 {
		t.Errorf("counters %+v, %v", c, err)
	}
}

// TestPrefixRunLabel: ETHERVIA_RUN labels this run's names, an invalid
// label is ignored, and Sweep's parser accepts names of every run.
func TestPrefixRunLabel(t *testing.T) {
	for _, c := range []struct{ run, want string }{
		{"", "ev-"},
		{"ci7k", "evci7k-"},
		{"CI7K", "ev-"},
		{"toolong1", "ev-"},
		{"a-b", "ev-"},
	} {
		t.Setenv(RunEnv, c.run)
		if got := Prefix(); got != c.want {
			t.Errorf("%s=%q: Prefix() = %q, want %q", RunEnv, c.run, got, c.want)
		}
		base, err := baseName("tb", 1234)
		if err != nil {
			t.Fatal(err)
		}
		if pid, ok := parseName(hostNS(base, 0)); !ok || pid != 1234 || !strings.HasPrefix(base, c.want) {
			t.Errorf("%s=%q: name %q parses as (%d, %v)", RunEnv, c.run, hostNS(base, 0), pid, ok)
		}
	}
}

// TestNetnsDirSurvivesIPNetnsAdd: after a testbed is built, NetnsDir is a
// mount point, so iproute2's `ip netns add` (which bind-mounts the
// directory over itself when it is not one) hides nothing: the testbed's
// namespaces stay visible and removable.
func TestNetnsDirSurvivesIPNetnsAdd(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("SKIPPED: no ip(8)")
	}
	tb := build(t, Config{Hosts: 2, Name: "ipadd"})
	name := fmt.Sprintf("%sipadd-%d-x", Prefix(), os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	for _, h := range []int{0, 1} {
		if _, err := os.Stat(filepath.Join(NetnsDir, hostNS(tb.base, h))); err != nil {
			t.Errorf("host %d's namespace is gone from %s after ip netns add: %v", h, NetnsDir, err)
		}
	}
	if err := tb.Close(); err != nil {
		t.Errorf("close after ip netns add: %v", err)
	}
}

// TestDuplexRate: a rate on host 0's port limits what host 0 sends only
// with Config.Duplex; removing the rate removes both directions' shaping.
func TestDuplexRate(t *testing.T) {
	needRoot(t)
	const n, rate, floor = rateTestBytes, rateTestRate, rateTestFloor
	for _, topo := range []Topology{Pair, Switch} {
		for _, duplex := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/duplex=%v", topo, duplex), func(t *testing.T) {
				tb := build(t, Config{Hosts: 2, Topology: topo, Duplex: duplex})
				if err := tb.SetRate(0, 0, rate); err != nil {
					t.Fatal(err)
				}
				d, err := tcpTransfer(tb.Host(0), tb.Host(1), 0, n) // host 0 sends
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("host 0 sent 2 MB through its 50mbit port in %v", d)
				if duplex && d < floor {
					t.Errorf("duplex: 2 MB sent through a 50mbit port took %v, want at least %v", d, floor)
				}
				if !duplex && d >= floor {
					t.Errorf("one-way shaping: host 0's sending took %v, as if shaped", d)
				}
				if err := tb.SetRate(0, 0, 0); err != nil {
					t.Fatal(err)
				}
				if d, err = tcpTransfer(tb.Host(0), tb.Host(1), 0, n); err != nil {
					t.Fatal(err)
				}
				if d >= floor {
					t.Errorf("rate removed: 2 MB took %v, as if still shaped", d)
				}
			})
		}
	}
}
