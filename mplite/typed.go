package mplite

import (
	"unsafe"
)

// Number is the element types of the typed collectives.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64
}

// Op is a reduction operator on T: associative, and commutative if it
// says so (others are combined in rank order).
type Op[T Number] struct {
	f           func(a, b T) T
	commutative bool
}

// Sum adds.
func Sum[T Number]() Op[T] { return Op[T]{func(a, b T) T { return a + b }, true} }

// Prod multiplies.
func Prod[T Number]() Op[T] { return Op[T]{func(a, b T) T { return a * b }, true} }

// Min keeps the least.
func Min[T Number]() Op[T] { return Op[T]{func(a, b T) T { return min(a, b) }, true} }

// Max keeps the greatest.
func Max[T Number]() Op[T] { return Op[T]{func(a, b T) T { return max(a, b) }, true} }

// NewOp makes an operator from f, which must be associative; a is the
// contribution of lower ranks than b. A non-commutative operator is
// combined in rank order: x0 ⊕ x1 ⊕ … ⊕ x(n-1).
func NewOp[T Number](f func(a, b T) T, commutative bool) Op[T] { return Op[T]{f, commutative} }

// Reducer is the byte-level form of the operator.
func (op Op[T]) Reducer() Reducer {
	var zero T
	es := int(unsafe.Sizeof(zero))
	f := op.f
	return Reducer{Elem: es, Commutative: op.commutative, Fn: func(dst, a, b []byte) {
		d, x, y := asT[T](dst), asT[T](a), asT[T](b)
		for i := range d {
			d[i] = f(x[i], y[i])
		}
	}}
}

// asBytes views a slice of numbers as its bytes.
func asBytes[T Number](s []T) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// asT views bytes (whole elements, aligned: they come from asBytes or from
// make) as numbers.
func asT[T Number](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(zero)))
}

// bytesOf scales element counts and displacements to bytes.
func bytesOf[T Number](v []int) []int {
	if v == nil {
		return nil
	}
	var zero T
	es := int(unsafe.Sizeof(zero))
	out := make([]int, len(v))
	for i, k := range v {
		out[i] = k * es
	}
	return out
}

// Allreduce combines every member's send with op into every member's recv
// (same length; recv may be send).
func Allreduce[T Number](c *Comm, send, recv []T, op Op[T]) error {
	return c.Allreduce(asBytes(send), asBytes(recv), op.Reducer())
}

// Reduce combines every member's send with op into root's recv (used at
// root only).
func Reduce[T Number](c *Comm, send, recv []T, op Op[T], root int) error {
	return c.Reduce(asBytes(send), asBytes(recv), op.Reducer(), root)
}

// Scan sets recv to the combination of members 0..rank's sends.
func Scan[T Number](c *Comm, send, recv []T, op Op[T]) error {
	return c.Scan(asBytes(send), asBytes(recv), op.Reducer())
}

// Exscan sets recv to the combination of members 0..rank-1's sends (rank 0's
// recv is unchanged).
func Exscan[T Number](c *Comm, send, recv []T, op Op[T]) error {
	return c.Exscan(asBytes(send), asBytes(recv), op.Reducer())
}

// Bcast copies root's buf to every member's buf.
func Bcast[T Number](c *Comm, buf []T, root int) error {
	return c.Bcast(asBytes(buf), root)
}

// Gather collects every member's send into root's recv, rank i's at
// recv[i*len(send):].
func Gather[T Number](c *Comm, send, recv []T, root int) error {
	return c.Gather(asBytes(send), asBytes(recv), root)
}

// Gatherv collects member i's send (counts[i] elements) into root's recv
// at displs[i] (in elements).
func Gatherv[T Number](c *Comm, send, recv []T, counts, displs []int, root int) error {
	return c.Gatherv(asBytes(send), asBytes(recv), bytesOf[T](counts), bytesOf[T](displs), root)
}

// Scatter sends block i of root's send to member i's recv.
func Scatter[T Number](c *Comm, send, recv []T, root int) error {
	return c.Scatter(asBytes(send), asBytes(recv), root)
}

// Scatterv sends root's send[displs[i]:][:counts[i]] (in elements) to
// member i's recv.
func Scatterv[T Number](c *Comm, send []T, counts, displs []int, recv []T, root int) error {
	return c.Scatterv(asBytes(send), bytesOf[T](counts), bytesOf[T](displs), asBytes(recv), root)
}

// Allgather collects every member's send into every member's recv.
func Allgather[T Number](c *Comm, send, recv []T) error {
	return c.Allgather(asBytes(send), asBytes(recv))
}

// Allgatherv collects member i's send (counts[i] elements) into every
// member's recv at displs[i].
func Allgatherv[T Number](c *Comm, send, recv []T, counts, displs []int) error {
	return c.Allgatherv(asBytes(send), asBytes(recv), bytesOf[T](counts), bytesOf[T](displs))
}

// Alltoall sends block j of send to member j; block i of recv comes from
// member i.
func Alltoall[T Number](c *Comm, send, recv []T) error {
	return c.Alltoall(asBytes(send), asBytes(recv))
}

// Alltoallv is Alltoallv with counts and displacements in elements.
func Alltoallv[T Number](c *Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) error {
	return c.Alltoallv(asBytes(send), bytesOf[T](scounts), bytesOf[T](sdispls), asBytes(recv),
		bytesOf[T](rcounts), bytesOf[T](rdispls))
}
