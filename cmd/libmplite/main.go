// Command libmplite is MP_Lite's C API (mplite.h in this directory) as a
// shared library over package mplite.
//
// Build (from the module root):
//
//	go build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libmplite.so \
//	    -o libmplite.so ./cmd/libmplite
//
// and compile programs with -I cmd/libmplite -L DIR -lmplite. It bootstraps
// like mplite.Init (mprun, or PMI_RANK/PMI_SIZE under Hydra). MP_Lite's
// functions return nothing: an error prints "libmplite(ethervia): ..." on
// stderr, closes the rank (its peers see it leave) and exits with status 1.
// MP_Send is a blocking send in MPI's sense (MP_Lite's MP_ASend + MP_Wait);
// messages are matched by source and tag in order, without MP_Lite's
// "one receive absorbs several sends": a longer message is an error.
package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

func main() {} // required by -buildmode=c-shared

// state is the library's per-process state: a C API without handles has
// process-wide state by nature, so this is the one package-level variable.
type state struct {
	mu    sync.Mutex
	world *mplite.Comm
	ids   map[C.int]pending
	next  C.int
	last  mplite.Status
}

// pending is an MP_ASend or MP_ARecv not yet waited for.
type pending struct {
	r    *mplite.Request
	recv bool
}

var st = &state{ids: make(map[C.int]pending), next: 1}

// fail ends the process on an error, as MP_Lite does.
func fail(fn string, err error) {
	fmt.Fprintf(os.Stderr, "libmplite(ethervia): %s: %v\n", fn, err)
	st.mu.Lock()
	w := st.world
	st.mu.Unlock()
	if w != nil {
		w.Close()
	}
	os.Exit(1)
}

func world(fn string) *mplite.Comm {
	st.mu.Lock()
	w := st.world
	st.mu.Unlock()
	if w == nil {
		fail(fn, fmt.Errorf("MP_Init was not called (or MP_Finalize was)"))
	}
	return w
}

func bytesAt(p unsafe.Pointer, n C.int, fn string) []byte {
	if n < 0 {
		fail(fn, fmt.Errorf("negative length %d", int(n)))
	}
	if n == 0 || p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), int(n))
}

func peer(src C.int) int {
	if src == -1 {
		return mplite.AnySource
	}
	return int(src)
}

//export MP_Init
func MP_Init(argc *C.int, argv unsafe.Pointer) {
	st.mu.Lock()
	done := st.world != nil
	st.mu.Unlock()
	if done {
		fail("MP_Init", fmt.Errorf("called twice"))
	}
	w, err := mplite.Init()
	if err != nil {
		fail("MP_Init", err)
	}
	st.mu.Lock()
	st.world = w
	st.mu.Unlock()
}

//export MP_Finalize
func MP_Finalize() {
	w := world("MP_Finalize")
	if err := w.Finalize(); err != nil {
		fail("MP_Finalize", err)
	}
	st.mu.Lock()
	st.world = nil
	st.mu.Unlock()
}

//export MP_Nprocs
func MP_Nprocs(n *C.int) { *n = C.int(world("MP_Nprocs").Size()) }

//export MP_Myproc
func MP_Myproc(r *C.int) { *r = C.int(world("MP_Myproc").Rank()) }

//export MP_Send
func MP_Send(buf unsafe.Pointer, nbytes, dest, tag C.int) {
	if err := world("MP_Send").Send(bytesAt(buf, nbytes, "MP_Send"), int(dest), int(tag)); err != nil {
		fail("MP_Send", err)
	}
}

//export MP_Recv
func MP_Recv(buf unsafe.Pointer, nbytes, src, tag C.int) {
	s, err := world("MP_Recv").Recv(bytesAt(buf, nbytes, "MP_Recv"), peer(src), int(tag))
	if err != nil {
		fail("MP_Recv", err)
	}
	st.mu.Lock()
	st.last = s
	st.mu.Unlock()
}

func addID(r *mplite.Request, recv bool, id *C.int) {
	st.mu.Lock()
	*id = st.next
	st.ids[st.next] = pending{r, recv}
	st.next++
	if st.next <= 0 {
		st.next = 1
	}
	st.mu.Unlock()
}

//export MP_ASend
func MP_ASend(buf unsafe.Pointer, nbytes, dest, tag C.int, id *C.int) {
	r, err := world("MP_ASend").Isend(bytesAt(buf, nbytes, "MP_ASend"), int(dest), int(tag))
	if err != nil {
		fail("MP_ASend", err)
	}
	addID(r, false, id)
}

//export MP_ARecv
func MP_ARecv(buf unsafe.Pointer, nbytes, src, tag C.int, id *C.int) {
	r, err := world("MP_ARecv").Irecv(bytesAt(buf, nbytes, "MP_ARecv"), peer(src), int(tag))
	if err != nil {
		fail("MP_ARecv", err)
	}
	addID(r, true, id)
}

//export MP_Wait
func MP_Wait(id *C.int) {
	st.mu.Lock()
	p, ok := st.ids[*id]
	delete(st.ids, *id)
	st.mu.Unlock()
	if !ok {
		fail("MP_Wait", fmt.Errorf("unknown message id %d", int(*id)))
	}
	s, err := p.r.Wait()
	if err != nil {
		fail("MP_Wait", err)
	}
	if p.recv {
		st.mu.Lock()
		st.last = s
		st.mu.Unlock()
	}
}

//export MP_Get_Last_Source
func MP_Get_Last_Source(src *C.int) {
	st.mu.Lock()
	*src = C.int(st.last.Source)
	st.mu.Unlock()
}

//export MP_Get_Last_Tag
func MP_Get_Last_Tag(tag *C.int) {
	st.mu.Lock()
	*tag = C.int(st.last.Tag)
	st.mu.Unlock()
}

//export MP_Get_Last_Size
func MP_Get_Last_Size(n *C.int) {
	st.mu.Lock()
	*n = C.int(st.last.Count)
	st.mu.Unlock()
}

//export MP_Sync
func MP_Sync() {
	if err := world("MP_Sync").Barrier(); err != nil {
		fail("MP_Sync", err)
	}
}

//export MP_Bcast
func MP_Bcast(ptr unsafe.Pointer, nbytes, root C.int) {
	if err := world("MP_Bcast").Bcast(bytesAt(ptr, nbytes, "MP_Bcast"), int(root)); err != nil {
		fail("MP_Bcast", err)
	}
}

func allreduce[T mplite.Number](fn string, p *T, n C.int, op mplite.Op[T]) {
	if n < 0 {
		fail(fn, fmt.Errorf("negative count %d", int(n)))
	}
	var buf []T
	if n > 0 {
		buf = unsafe.Slice(p, int(n))
	}
	if err := mplite.Allreduce(world(fn), buf, buf, op); err != nil {
		fail(fn, err)
	}
}

//export MP_dSum
func MP_dSum(p *C.double, n C.int) { allreduce("MP_dSum", (*float64)(p), n, mplite.Sum[float64]()) }

//export MP_iSum
func MP_iSum(p *C.int, n C.int) { allreduce("MP_iSum", (*int32)(p), n, mplite.Sum[int32]()) }

//export MP_dMax
func MP_dMax(p *C.double, n C.int) { allreduce("MP_dMax", (*float64)(p), n, mplite.Max[float64]()) }

//export MP_dMin
func MP_dMin(p *C.double, n C.int) { allreduce("MP_dMin", (*float64)(p), n, mplite.Min[float64]()) }

//export MP_Time
func MP_Time() C.double { return C.double(mplite.Wtime()) }
