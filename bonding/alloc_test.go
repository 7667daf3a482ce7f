package bonding

import (
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic/memnic"
)

// TestHotPathAllocs: a small-message round trip (post a receive, post a
// send, wait for both, each way) allocates nothing, on one rail and on
// several.
func TestHotPathAllocs(t *testing.T) {
	for _, k := range []int{1, 3} {
		for _, n := range []int{1, 1000, 5000} {
			a, b := memPair(t, k, 1500, memnic.Faults{}, testOptions(), 1<<20)
			va := a.newVI(t, Attributes{})
			vb := b.newVI(t, Attributes{})
			connect(t, a, b, va, vb, 3)
			got := allocsPerRoundTrip(t, a, b, va, vb, n)
			if got != 0 {
				t.Errorf("rails=%d, %d bytes: %v allocations per round trip", k, n, got)
			}
		}
	}
}

func allocsPerRoundTrip(t *testing.T, a, b *end, va, vb *VI, n int) float64 {
	ctx := ctxT(t, 30*time.Second)
	sa, ra := a.buf(t, n), a.buf(t, n)
	sb, rb := b.buf(t, n), b.buf(t, n)
	sdA := &descriptors.Descriptor{Segments: []descriptors.Segment{sa}}
	rdA := &descriptors.Descriptor{Segments: []descriptors.Segment{ra}}
	sdB := &descriptors.Descriptor{Segments: []descriptors.Segment{sb}}
	rdB := &descriptors.Descriptor{Segments: []descriptors.Segment{rb}}
	pattern(1, sa.Buf)
	done := make(chan struct{})
	const warm, rounds = 500, 200
	go func() {
		defer close(done)
		for range warm + rounds + 1 {
			if vb.PostRecv(rdB) != nil {
				return
			}
			if _, err := vb.RecvWait(ctx); err != nil {
				return
			}
			copy(sb.Buf, rb.Buf)
			if vb.PostSend(sdB) != nil {
				return
			}
			if _, err := vb.SendWait(ctx); err != nil {
				return
			}
		}
	}()
	round := func() {
		mustf(t, va.PostRecv(rdA), "post recv")
		mustf(t, va.PostSend(sdA), "post send")
		if _, err := va.SendWait(ctx); err != nil {
			t.Fatal(err)
		}
		d, err := va.RecvWait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Length != n || firstDiff(ra.Buf, sa.Buf) >= 0 {
			t.Fatalf("round trip of %d bytes: came back wrong (length %d)", n, d.Length)
		}
	}
	for range warm {
		round()
	}
	allocs := testing.AllocsPerRun(rounds, round)
	<-done
	return allocs
}
