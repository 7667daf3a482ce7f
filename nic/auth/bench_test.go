package auth_test

import (
	"fmt"
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

// BenchmarkSendRecv is authentication's CPU cost per frame: one frame
// sent by one memnic port and received by the other, with nothing between
// them (plain) and through both wrappers (auth), per frame size.
func BenchmarkSendRecv(b *testing.B) {
	for _, size := range []int{137, 1500} {
		for _, kind := range []string{"plain", "auth"} {
			b.Run(fmt.Sprintf("%s/%d", kind, size), func(b *testing.B) {
				bd := newBed(b, newKey(b), false)
				p := bd.Pair
				if kind == "plain" {
					p.A, p.B = bd.rawA, bd.rawB
				}
				f := make([]byte, min(size, nic.EthHeaderLen+bd.A.MTU()))
				nictest.Frame(f, p, p.B, p.A, 1)
				frames := [][]byte{f}
				bufs, lens := [][]byte{make([]byte, nic.RecvBufLen(p.B.MTU()))}, []int{0}
				b.SetBytes(int64(len(f)))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := p.A.Send(frames); err != nil {
						b.Fatal(err)
					}
					if n, err := p.B.Recv(bufs, lens); n != 1 || err != nil {
						b.Fatalf("recv %d: %v", n, err)
					}
				}
			})
		}
	}
}
