package mplite

// Intrusive lists and fixed rings: the hot path links and unlinks
// preallocated objects and allocates nothing.

// rlist is a FIFO list of requests linked through their prev/next fields;
// a request is on at most one list at a time.
type rlist struct{ head, tail *Request }

func (l *rlist) push(r *Request) {
	r.prev, r.next, r.list = l.tail, nil, l
	if l.tail != nil {
		l.tail.next = r
	} else {
		l.head = r
	}
	l.tail = r
}

func (l *rlist) remove(r *Request) {
	if r.list != l {
		return
	}
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		l.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		l.tail = r.prev
	}
	r.prev, r.next, r.list = nil, nil, nil
}

// umsg is an unexpected message: one that arrived before its receive.
type umsg struct {
	src, tag int
	ctx      uint16
	typ      uint8 // msgEager, msgRTS or msgSelf
	length   int
	data     []byte // eager: the bytes, in tmp or in the held receive slot
	tmp      []byte // a temporary buffer to give back, or nil
	cost     int64  // what it counts against the unexpected bound
	held     bool   // data is in receive slot `slot` of the source's peer
	slot     int
	sendID   uint32
	sreq     *Request // msgSelf: the pending send to self
	prev     *umsg
	next     *umsg
}

// msgSelf marks an unexpected send to self longer than the eager limit:
// the data stays in the sender's buffer until a receive matches it.
const msgSelf = 100

type ulist struct{ head, tail *umsg }

func (l *ulist) push(m *umsg) {
	m.prev, m.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = m
	} else {
		l.head = m
	}
	l.tail = m
}

func (l *ulist) remove(m *umsg) {
	if m.prev != nil {
		m.prev.next = m.next
	} else {
		l.head = m.next
	}
	if m.next != nil {
		m.next.prev = m.prev
	} else {
		l.tail = m.prev
	}
	m.prev, m.next = nil, nil
}

// ring is a FIFO of ints with a fixed capacity.
type ring struct {
	buf     []int
	head, n int
}

func newRing(n int) ring { return ring{buf: make([]int, n)} }

func (r *ring) push(v int) {
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}

func (r *ring) pop() (int, bool) {
	if r.n == 0 {
		return 0, false
	}
	v := r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return v, true
}

// Kinds of posted sends.
const (
	opSlot  = 1 // an eager or control message in send slot idx
	opChunk = 2 // an RDMA write of req from descriptor wd[idx]
)

type sendOp struct {
	kind uint8
	idx  int
	req  *Request
}

// opRing is the FIFO of a connection's posted sends: VI send descriptors
// complete in the order they were posted.
type opRing struct {
	buf     []sendOp
	head, n int
}

func newOpRing(n int) opRing { return opRing{buf: make([]sendOp, n)} }

func (r *opRing) push(o sendOp) {
	r.buf[(r.head+r.n)%len(r.buf)] = o
	r.n++
}

func (r *opRing) pop() (sendOp, bool) {
	if r.n == 0 {
		return sendOp{}, false
	}
	o := r.buf[r.head]
	r.buf[r.head] = sendOp{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return o, true
}
