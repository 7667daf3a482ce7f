package netpipe

import (
	"fmt"
	"testing"

	"github.com/ethervia/ethervia/nic/memnic"
)

// TestVIBondedLinks runs the vi module over 2 to 4 memnic links (the
// -mem -links K setup): a bonded VI that must bring every message back
// intact through 1% loss and spread the traffic over every link.
func TestVIBondedLinks(t *testing.T) {
	for _, k := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("links=%d", k), func(t *testing.T) {
			tx, rx, ports := memPair(t, k, memnic.PortConfig{Faults: memnic.Faults{Loss: 0.01}})
			tc, rc := connectPair(t, VIModule{}, tx, rx)
			if _, ok := tc.(*bondConn); !ok {
				t.Fatalf("vi over %d links is a %T, want a bonded connection", k, tc)
			}
			pingPongSizes(t, tc, rc, []int{0, 1, 2047, 2048, 5000, 65536, 1 << 20, 1<<20 + 1, 3 << 20, 17})
			for l, p := range ports {
				if s := p[0].Stats(); s.TxFrames < 100 {
					t.Errorf("link %d carried %d frames from the transmitter: not striped", l, s.TxFrames)
				}
			}
		})
	}
}

// TestVIBondedHotPath: a bonded round trip allocates nothing.
func TestVIBondedHotPath(t *testing.T) {
	tx, rx, _ := memPair(t, 2, memnic.PortConfig{})
	tc, rc := connectPair(t, VIModule{}, tx, rx)
	for _, n := range []int{1, 5000} {
		if a := allocsPerRoundTrip(t, tc, rc, n, 1000); a != 0 {
			t.Errorf("bonded vi, %d bytes: %v allocations per round trip", n, a)
		}
	}
}

// TestMPLiteBondedLinks runs the mplite module over 2 and 3 memnic links:
// a bonded two-rank world whose eager and handshake messages must come back
// intact through loss and use every link.
func TestMPLiteBondedLinks(t *testing.T) {
	for _, k := range []int{2, 3} {
		t.Run(fmt.Sprintf("links=%d", k), func(t *testing.T) {
			tx, rx, ports := memPair(t, k, memnic.PortConfig{Faults: memnic.Faults{Loss: 0.01}})
			for _, p := range ports {
				rx.PeerMACs = append(rx.PeerMACs, p[0].HardwareAddr())
			}
			tc, rc := connectPair(t, MPLiteModule{}, tx, rx)
			pingPongSizes(t, tc, rc, []int{0, 1, 2047, 5000, 65536, 65537, 1 << 20, 3 << 20, 17})
			for l, p := range ports {
				if s := p[0].Stats(); s.TxFrames < 100 {
					t.Errorf("link %d carried %d frames from the transmitter: not striped", l, s.TxFrames)
				}
			}
		})
	}
}
