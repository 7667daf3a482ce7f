package descriptors_test

import (
	"fmt"

	"github.com/ethervia/ethervia/descriptors"
)

// A provider queues posted descriptors in FIFO order and completes them from
// the head.
func Example() {
	q := descriptors.NewQueue(16)
	buf := make([]byte, 64)
	d := &descriptors.Descriptor{
		Control:  descriptors.Control{Op: descriptors.OpSend, Immediate: true, ImmData: 42},
		Segments: []descriptors.Segment{{Buf: buf[:10]}, {Buf: buf[32:]}},
	}
	pos, _ := q.Push(d)

	// The provider finishes the work and marks the descriptor done.
	q.At(pos).Status = descriptors.StatusDone
	q.At(pos).Length = d.TotalLength()

	done := q.Pop()
	fmt.Println(done.Status, done.Length, done.Status.Err())
	// Output: done 42 <nil>
}
