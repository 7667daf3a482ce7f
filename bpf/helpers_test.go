package bpf

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/ethervia/ethervia/nic"
)

const (
	testEtherType = nic.DefaultEtherType
	testJobKey    = 0xC0FFEE42 // high bit set: exercises 32-bit compares
)

var testFilter = nic.Filter{EtherType: testEtherType, JobKey: testJobKey}

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: this test loads eBPF programs and needs root (CAP_BPF, CAP_NET_ADMIN)")
	}
}

// frame returns an Ethervia frame of n bytes (n >= nic.PrefixLen) with the
// given EtherType, version and key, and a recognisable payload.
func frame(n int, et uint16, version uint8, key uint32) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	nic.PutPrefix(b, &nic.Prefix{
		Dst:       [6]byte{0x02, 0, 0, 0, 0, 2},
		Src:       [6]byte{0x02, 0, 0, 0, 0, 1},
		EtherType: et,
		Version:   version,
		Kind:      5,
		Flags:     0x0102,
		JobKey:    key,
	})
	return b
}

func ours(n int) []byte { return frame(n, testEtherType, nic.Version, testJobKey) }

// toEndpoint returns f with its destination endpoint set to ep.
func toEndpoint(f []byte, ep uint16) []byte {
	binary.BigEndian.PutUint16(f[nic.OffDstEP:], ep)
	return f
}

// tagged inserts an 802.1Q tag (VLAN 7) after the MAC addresses.
func tagged(f []byte) []byte {
	out := make([]byte, 0, len(f)+4)
	out = append(out, f[:12]...)
	out = binary.BigEndian.AppendUint16(out, 0x8100)
	out = binary.BigEndian.AppendUint16(out, 7)
	return append(out, f[12:]...)
}

// refSteer is the Go reference of the steering program's match.
func refSteer(f nic.Filter, b []byte) bool {
	if f.Check(b) == nil {
		return true
	}
	if len(b) >= nic.PrefixLen+4 && binary.BigEndian.Uint16(b[12:]) == 0x8100 {
		untagged := append(append([]byte{}, b[:12]...), b[16:]...)
		return f.Check(untagged) == nil
	}
	return false
}
