package main

// reqTable maps MPI_Request handles to requests: a slot per handle, a list
// of free slots and a pool of request structures, so that starting and
// completing nonblocking operations allocates nothing once the table has
// grown to the most requests the program keeps in flight. Handles are
// MPICH's indirect request handles, requestFirst plus the slot; a freed
// handle may be given out again (MPI allows it). Guarded by library.mu.
type reqTable struct {
	slots []*request
	free  []int32
	pool  []*request
}

// maxRequests bounds the slots: the index bits of MPICH's handles.
const maxRequests = 0x3ffffff

func (t *reqTable) get(h int32) *request {
	i := h - requestFirst
	if i < 0 || int(i) >= len(t.slots) {
		return nil
	}
	return t.slots[i]
}

// add gives q a handle; ok is false when every handle is taken.
func (t *reqTable) add(q *request) (h int32, ok bool) {
	var i int32
	switch n := len(t.free); {
	case n > 0:
		i = t.free[n-1]
		t.free = t.free[:n-1]
	case len(t.slots) < maxRequests:
		i = int32(len(t.slots))
		t.slots = append(t.slots, nil)
	default:
		return 0, false
	}
	t.slots[i] = q
	return requestFirst + i, true
}

// del frees handle h (which get found).
func (t *reqTable) del(h int32) {
	i := h - requestFirst
	t.slots[i] = nil
	t.free = append(t.free, i)
}

// newRequest returns a zeroed request, recycled if one is free.
func (t *reqTable) newRequest() *request {
	if n := len(t.pool); n > 0 {
		q := t.pool[n-1]
		t.pool = t.pool[:n-1]
		return q
	}
	return &request{}
}

// recycle takes back a request no handle names any more.
func (t *reqTable) recycle(q *request) {
	if len(t.pool) < 1024 {
		*q = request{}
		t.pool = append(t.pool, q)
	}
}
