package mplite

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
)

func TestDriverOrder(t *testing.T) {
	for _, tc := range []struct {
		driver            string
		shares, queueKnow bool
		want              []string
	}{
		{"auto", false, true, []string{"afxdp", "afpacket"}},
		{"auto", true, true, []string{"afpacket"}},
		{"auto", false, false, []string{"afpacket"}},
		{"afxdp", false, false, []string{"afxdp"}},
		{"afpacket", false, true, []string{"afpacket"}},
	} {
		if got := driverOrder(tc.driver, tc.shares, tc.queueKnow); !slices.Equal(got, tc.want) {
			t.Errorf("driverOrder(%q, shares %v, queue known %v) = %v, want %v", tc.driver, tc.shares, tc.queueKnow, got, tc.want)
		}
	}
}

func TestOneRxQueue(t *testing.T) {
	dir := t.TempDir()
	mk := func(iface string, queues ...string) {
		for _, q := range queues {
			if err := os.MkdirAll(filepath.Join(dir, iface, "queues", q), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("veth0", "rx-0", "tx-0")
	mk("veth1", "rx-0", "tx-0")
	mk("mq0", "rx-0", "rx-1", "rx-2", "tx-0")
	for _, tc := range []struct {
		ifaces []string
		want   bool
	}{
		{[]string{"veth0"}, true},
		{[]string{"veth0", "veth1"}, true},
		{[]string{"veth0", "mq0"}, false},
		{[]string{"missing"}, false},
		{nil, false},
	} {
		if got := oneRxQueue(dir, tc.ifaces); got != tc.want {
			t.Errorf("oneRxQueue(%v) = %v, want %v", tc.ifaces, got, tc.want)
		}
	}
}

// TestOpenDevicesFallsBack: a driver that fails on any interface is given
// up for all of them, the devices it opened closed, and the next driver
// opens every interface.
func TestOpenDevicesFallsBack(t *testing.T) {
	sw := memnic.NewSwitch(1)
	var opened []*memnic.Port
	var calls []string
	open := func(driver, iface string) (nic.Device, error) {
		calls = append(calls, driver+":"+iface)
		if driver == "afxdp" && iface == "b" {
			return nil, errors.New("no XDP here")
		}
		p, err := sw.NewPort(memnic.PortConfig{})
		if err != nil {
			return nil, err
		}
		opened = append(opened, p)
		return p, nil
	}
	devs, driver, err := openDevices([]string{"a", "b"}, []string{"afxdp", "afpacket"}, open)
	if err != nil {
		t.Fatal(err)
	}
	if driver != "afpacket" || len(devs) != 2 {
		t.Fatalf("got %d devices on %q, want 2 on afpacket", len(devs), driver)
	}
	if want := []string{"afxdp:a", "afxdp:b", "afpacket:a", "afpacket:b"}; !slices.Equal(calls, want) {
		t.Fatalf("opened %v, want %v", calls, want)
	}
	if _, err := opened[0].Send([][]byte{make([]byte, 64)}); !errors.Is(err, nic.ErrClosed) {
		t.Fatalf("the afxdp device of the given-up driver is still open: send: %v", err)
	}
	for _, d := range devs {
		d.Close()
	}

	_, _, err = openDevices([]string{"a", "b"}, []string{"afxdp"}, open)
	if err == nil || !strings.Contains(err.Error(), "b: afxdp: no XDP here") {
		t.Fatalf("every driver failing: err = %v, want the interface, driver and cause", err)
	}
}
