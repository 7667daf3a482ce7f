package bonding

// maxControlQueue bounds the control work a peer's requests may queue
// (replies to its handle queries). A well-behaved peer has at most a query
// per message in flight, far fewer.
const maxControlQueue = 4096

// deque is a growable ring of work items.
type deque struct {
	buf     []work
	head, n int
}

func (q *deque) init(c int) { q.buf = make([]work, max(c, 8)) }

func (q *deque) grow() {
	nb := make([]work, 2*len(q.buf))
	for i := 0; i < q.n; i++ {
		nb[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf, q.head = nb, 0
}

func (q *deque) pushBack(w work) {
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)%len(q.buf)] = w
	q.n++
}

func (q *deque) pushFront(w work) {
	if q.n == len(q.buf) {
		q.grow()
	}
	q.head = (q.head + len(q.buf) - 1) % len(q.buf)
	q.buf[q.head] = w
	q.n++
}

func (q *deque) front() *work { return &q.buf[q.head] }

func (q *deque) popFront() work {
	w := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return w
}

func (q *deque) reset() { q.head, q.n = 0, 0 }
