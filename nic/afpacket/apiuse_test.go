package afpacket_test

import (
	"errors"
	"net"
	"testing"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/afpacket"
)

// TestMaxMulticast checks that MaxMulticast reports the configured limit
// (zero: the default, negative: none) and that joins stop exactly there.
func TestMaxMulticast(t *testing.T) {
	tb := newTestbedPair(t, "afpmx")
	for _, tc := range []struct{ cfg, want int }{{0, nic.DefaultMaxMulticast}, {3, 3}, {-1, 0}} {
		d := openCfg(t, tb.Host(0), afpacket.Config{Config: nic.Config{JobKey: jobKey}, MaxMulticast: tc.cfg})
		if got := d.MaxMulticast(); got != tc.want {
			t.Fatalf("Config.MaxMulticast %d: MaxMulticast = %d, want %d", tc.cfg, got, tc.want)
		}
		for i := range tc.want {
			g := nic.GroupMAC(jobKey, uint32(0x100+i))
			if err := d.JoinMulticast(net.HardwareAddr(g[:])); err != nil {
				t.Fatalf("Config.MaxMulticast %d: join %d: %v", tc.cfg, i, err)
			}
		}
		g := nic.GroupMAC(jobKey, 0x1ff)
		if err := d.JoinMulticast(net.HardwareAddr(g[:])); !errors.Is(err, nic.ErrMulticastLimit) {
			t.Fatalf("Config.MaxMulticast %d: join beyond MaxMulticast: %v, want ErrMulticastLimit", tc.cfg, err)
		}
		d.Close()
	}
}
