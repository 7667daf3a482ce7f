package main

// handles maps the handles of one kind of MPI object (error handlers,
// keyvals, datatypes, groups, operations, info objects) to the objects. New
// handles count up from the kind's first one, an MPICH handle prefix that
// no predefined handle uses. Guarded by library.mu.
type handles[T any] struct {
	m    map[int32]T
	next int32
}

// add stores v under a new handle.
func (h *handles[T]) add(first int32, v T) int32 {
	if h.m == nil {
		h.m, h.next = make(map[int32]T), first
	}
	k := h.next
	h.next++
	h.m[k] = v
	return k
}

// at returns the object of handle k (the zero value if none).
func (h *handles[T]) at(k int32) T { return h.m[k] }

// has reports whether k is a handle of the table.
func (h *handles[T]) has(k int32) bool {
	_, ok := h.m[k]
	return ok
}

// del removes handle k and reports whether it was there.
func (h *handles[T]) del(k int32) bool {
	_, ok := h.m[k]
	delete(h.m, k)
	return ok
}
