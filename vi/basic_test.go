package vi

import (
	"bytes"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic/memnic"
)

func TestSendRecvBasic(t *testing.T) {
	for _, level := range []Level{Unreliable, ReliableDelivery, ReliableReception} {
		t.Run(level.String(), func(t *testing.T) {
			sw := memnic.NewSwitch(1)
			a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<22)
			b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<22)
			va := a.newVI(t, Attributes{Reliability: level})
			vb := b.newVI(t, Attributes{Reliability: level})
			const n = 20
			rds := make([]descriptors.Descriptor, n)
			for i := range rds {
				rds[i].Segments = []descriptors.Segment{b.buf(t, 100000)}
				mustf(t, vb.PostRecv(&rds[i]), "post recv")
			}
			connectCS(t, a, b, va, vb, 7)
			sizes := []int{0, 1, 100, 1458, 1459, 5000, 65536, 99999, 100000, 3}
			sds := make([]descriptors.Descriptor, len(sizes))
			for i, sz := range sizes {
				s := a.buf(t, sz)
				pattern(uint64(i), s.Buf)
				sds[i] = descriptors.Descriptor{Segments: []descriptors.Segment{s},
					Control: descriptors.Control{Immediate: i%2 == 0, ImmData: uint32(i)}}
				mustf(t, va.PostSend(&sds[i]), "post send %d", i)
			}
			for i, sz := range sizes {
				d, err := vb.RecvWait(ctxT(t, 5*time.Second))
				mustf(t, err, "recv %d", i)
				if d != &rds[i] {
					t.Fatalf("receive %d completed out of order", i)
				}
				if d.Status != descriptors.StatusDone|immBit(i%2 == 0) || d.Length != sz {
					t.Fatalf("receive %d: status %v length %d, want %d", i, d.Status, d.Length, sz)
				}
				if i%2 == 0 && d.ImmData != uint32(i) {
					t.Fatalf("immediate %d, want %d", d.ImmData, i)
				}
				want := make([]byte, sz)
				pattern(uint64(i), want)
				if !bytes.Equal(d.Segments[0].Buf[:sz], want) {
					t.Fatalf("message %d damaged", i)
				}
			}
			for i := range sizes {
				d, err := va.SendWait(ctxT(t, 5*time.Second))
				mustf(t, err, "send wait %d", i)
				if d != &sds[i] || d.Status != descriptors.StatusDone || d.Length != sizes[i] {
					t.Fatalf("send %d: %v %d", i, d.Status, d.Length)
				}
			}
		})
	}
}

func immBit(b bool) descriptors.Status {
	if b {
		return descriptors.StatusImmediate
	}
	return 0
}
