package descriptors

import "errors"

// ErrQueueFull is returned by Queue.Push when the queue holds Cap descriptors.
var ErrQueueFull = errors.New("work queue full")

// Queue is a bounded FIFO work queue of descriptors.
//
// Every descriptor pushed gets an absolute position: the first push is
// position 0 and positions grow by one per push, never wrapping in practice
// (64 bits). Front is the position of the oldest descriptor still queued and
// Back the position the next push will take, so a provider can keep cursors
// (next to start, next to complete) as positions between the two and keep
// per-descriptor state in arrays indexed by Slot.
//
// A Queue is not safe for concurrent use; the VI that owns it serialises
// access. Push, Pop, At and Head do not allocate.
type Queue struct {
	ring        []*Descriptor
	front, back uint64
}

// NewQueue returns an empty queue that holds up to depth descriptors.
// depth must be positive.
func NewQueue(depth int) *Queue {
	if depth < 1 {
		depth = 1
	}
	return &Queue{ring: make([]*Descriptor, depth)}
}

// Cap is the most descriptors the queue holds.
func (q *Queue) Cap() int { return len(q.ring) }

// Len is the number of queued descriptors.
func (q *Queue) Len() int { return int(q.back - q.front) }

// Front is the position of the oldest queued descriptor (equal to Back when
// the queue is empty).
func (q *Queue) Front() uint64 { return q.front }

// Back is the position the next Push takes.
func (q *Queue) Back() uint64 { return q.back }

// Slot maps a position to an index in [0, Cap), for per-descriptor side
// arrays of length Cap.
func (q *Queue) Slot(pos uint64) int { return int(pos % uint64(len(q.ring))) }

// Push appends d and returns its position.
func (q *Queue) Push(d *Descriptor) (uint64, error) {
	if q.Len() >= len(q.ring) {
		return 0, ErrQueueFull
	}
	pos := q.back
	q.ring[q.Slot(pos)] = d
	q.back++
	return pos, nil
}

// Head returns the oldest descriptor, or nil when the queue is empty.
func (q *Queue) Head() *Descriptor {
	if q.front == q.back {
		return nil
	}
	return q.ring[q.Slot(q.front)]
}

// Pop removes and returns the oldest descriptor, or nil when the queue is
// empty.
func (q *Queue) Pop() *Descriptor {
	if q.front == q.back {
		return nil
	}
	i := q.Slot(q.front)
	d := q.ring[i]
	q.ring[i] = nil
	q.front++
	return d
}

// At returns the descriptor at position pos, or nil when pos is not queued.
func (q *Queue) At(pos uint64) *Descriptor {
	if pos < q.front || pos >= q.back {
		return nil
	}
	return q.ring[q.Slot(pos)]
}

// Contains reports whether pos is a queued position.
func (q *Queue) Contains(pos uint64) bool { return pos >= q.front && pos < q.back }
