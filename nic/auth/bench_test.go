package auth_test

import (
	"testing"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/nictest"
)

// BenchmarkPingPong sets the authenticated memnic pair beside the plain
// one: the difference is what sealing and opening cost per frame.
func BenchmarkPingPong(b *testing.B) {
	for _, size := range []int{64, 1500} {
		b.Run(sizeName("plain", size), func(b *testing.B) {
			bd := newBed(b, newKey(b), false)
			nictest.BenchPingPong(b, nictest.Pair{A: bd.rawA, B: bd.rawB, EtherType: nic.DefaultEtherType, JobKey: jobKey}, min(size, nic.EthHeaderLen+bd.A.MTU()))
		})
		b.Run(sizeName("auth", size), func(b *testing.B) {
			bd := newBed(b, newKey(b), false)
			nictest.BenchPingPong(b, bd.Pair, min(size, nic.EthHeaderLen+bd.A.MTU()))
		})
	}
}

func sizeName(kind string, size int) string {
	if size >= 1000 {
		return kind + "/1500"
	}
	return kind + "/64"
}
