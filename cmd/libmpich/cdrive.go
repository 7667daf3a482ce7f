package main

/*
#include <stdlib.h>
#include "ethervia_mpi_types.h"

// The exports of this package (cgo's export header cannot be included in
// a preamble).
extern int MPI_Send(void *, int, MPI_Datatype, int, int, MPI_Comm);
extern int MPI_Recv(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
extern int MPI_Isend(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
extern int MPI_Irecv(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
extern int MPI_Waitall(int, MPI_Request *, MPI_Status *);
extern int MPI_Type_vector(int, int, int, MPI_Datatype, MPI_Datatype *);
extern int MPI_Type_commit(MPI_Datatype *);
extern int MPI_Type_free(MPI_Datatype *);

// ev_pingpong is rank 0 of iters round trips of count elements of dt
// through the exported MPI_Send and MPI_Recv, called from C as an
// MPICH-linked program calls them.
static int ev_pingpong(void *buf, int count, MPI_Datatype dt, int iters) {
	for (int i = 0; i < iters; i++) {
		int rc = MPI_Send(buf, count, dt, 1, 0, 0x44000000);
		if (rc != 0)
			return rc;
		rc = MPI_Recv(buf, count, dt, 1, 0, 0x44000000, (MPI_Status *)1);
		if (rc != 0)
			return rc;
	}
	return 0;
}

// ev_isend_wait is ev_pingpong with MPI_Irecv, MPI_Isend and MPI_Waitall.
static int ev_isend_wait(void *sbuf, void *rbuf, int count, MPI_Datatype dt, int iters) {
	MPI_Request reqs[2];
	for (int i = 0; i < iters; i++) {
		int rc = MPI_Irecv(rbuf, count, dt, 1, 0, 0x44000000, &reqs[0]);
		if (rc == 0)
			rc = MPI_Isend(sbuf, count, dt, 1, 0, 0x44000000, &reqs[1]);
		if (rc == 0)
			rc = MPI_Waitall(2, reqs, (MPI_Status *)1);
		if (rc != 0)
			return rc;
	}
	return 0;
}

// ev_recv_status receives count elements of dt from src with tag into buf
// with a status, and writes the status's source, tag and byte count and the
// return code to out.
static void ev_recv_status(void *buf, int count, MPI_Datatype dt, int src, int tag, int *out) {
	MPI_Status st;
	out[3] = MPI_Recv(buf, count, dt, src, tag, 0x44000000, &st);
	out[0] = st.MPI_SOURCE;
	out[1] = st.MPI_TAG;
	out[2] = st.count_lo;
}

// ev_column is a committed MPI_Type_vector of count doubles, every other
// one: a column of a two-column matrix, the halo of a stencil code.
static int ev_column(int count, MPI_Datatype *t) {
	int rc = MPI_Type_vector(count, 1, 2, 0x4c00080b, t);
	return rc ? rc : MPI_Type_commit(t);
}

// ev_blocks is a committed MPI_Type_vector of count blocks of blocklen
// doubles, stride doubles apart.
static int ev_blocks(int count, int blocklen, int stride, MPI_Datatype *t) {
	int rc = MPI_Type_vector(count, blocklen, stride, 0x4c00080b, t);
	return rc ? rc : MPI_Type_commit(t);
}
*/
import "C"

import "unsafe"

// mpiByte is MPICH's MPI_BYTE.
const mpiByte C.MPI_Datatype = 0x4c00010d

// cMalloc returns n bytes of C memory (free it with cFree): buffers that
// never move, as a C program's are.
func cMalloc(n int) unsafe.Pointer { return C.malloc(C.size_t(max(n, 1))) }

func cFree(p unsafe.Pointer) { C.free(p) }

// cPingPong runs iters round trips as rank 0 from C, through cgo, with
// MPI_Send and MPI_Recv of count bytes at buf (C memory); it returns the
// first MPI error code, or 0. For the tests and benchmarks of the C
// boundary: a Go test file cannot call C itself.
func cPingPong(buf unsafe.Pointer, count, iters int) int {
	return int(C.ev_pingpong(buf, C.int(count), mpiByte, C.int(iters)))
}

// cColumn returns a committed datatype of count doubles, every other one
// (free it with cTypeFree).
func cColumn(count int) (C.MPI_Datatype, int) {
	var t C.MPI_Datatype
	rc := C.ev_column(C.int(count), &t)
	return t, int(rc)
}

// cBlocks returns a committed datatype of count blocks of blocklen doubles,
// stride doubles apart (free it with cTypeFree).
func cBlocks(count, blocklen, stride int) (C.MPI_Datatype, int) {
	var t C.MPI_Datatype
	rc := C.ev_blocks(C.int(count), C.int(blocklen), C.int(stride), &t)
	return t, int(rc)
}

func cTypeFree(t C.MPI_Datatype) { C.MPI_Type_free(&t) }

// cTypedPingPong is cPingPong of one element of datatype t.
func cTypedPingPong(buf unsafe.Pointer, t C.MPI_Datatype, iters int) int {
	return int(C.ev_pingpong(buf, 1, t, C.int(iters)))
}

// cTypedExchange is cExchange of one element of datatype t.
func cTypedExchange(sbuf, rbuf unsafe.Pointer, t C.MPI_Datatype, iters int) int {
	return int(C.ev_isend_wait(sbuf, rbuf, 1, t, C.int(iters)))
}

// cExchange is cPingPong with MPI_Irecv, MPI_Isend and MPI_Waitall.
func cExchange(sbuf, rbuf unsafe.Pointer, count, iters int) int {
	return int(C.ev_isend_wait(sbuf, rbuf, C.int(count), mpiByte, C.int(iters)))
}

// cRecvStatus calls MPI_Recv from C with a status, on MPI_COMM_WORLD, of
// count elements of t from src with tag, and returns the status's source,
// tag and byte count and the return code.
func cRecvStatus(buf unsafe.Pointer, count int, t C.MPI_Datatype, src, tag int) (source, gotTag, bytes, rc int) {
	var out [4]C.int
	C.ev_recv_status(buf, C.int(count), t, C.int(src), C.int(tag), &out[0])
	return int(out[0]), int(out[1]), int(out[2]), int(out[3])
}
