package descriptors

import "testing"

// TestQueueContains checks Contains against Push and Pop: exactly the
// positions in [Front, Back) are queued, also after the ring wraps.
func TestQueueContains(t *testing.T) {
	q := NewQueue(3)
	if q.Contains(0) {
		t.Fatal("empty queue contains position 0")
	}
	var d Descriptor
	for i := range 7 {
		if _, err := q.Push(&d); err != nil {
			t.Fatal(err)
		}
		if q.Len() == q.Cap() || i == 6 {
			q.Pop()
		}
		for pos := uint64(0); pos < q.Back()+3; pos++ {
			want := pos >= q.Front() && pos < q.Back()
			if got := q.Contains(pos); got != want {
				t.Fatalf("after push %d (front %d, back %d): Contains(%d) = %v", i, q.Front(), q.Back(), pos, got)
			}
			if got := q.At(pos) != nil; got != want {
				t.Fatalf("Contains and At disagree on %d", pos)
			}
		}
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{OpSend: "send", OpRDMAWrite: "rdma-write", OpRDMARead: "rdma-read", 9: "op(9)"} {
		if got := op.String(); got != want {
			t.Errorf("Op(%d).String = %q, want %q", uint8(op), got, want)
		}
	}
}
