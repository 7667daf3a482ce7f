package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Nonblocking collectives. A communicator's first one starts a worker: a
// goroutine on a thread of its own that runs the communicator's
// collectives one at a time in the order they were started, so they make
// progress while the program computes when the rank has a CPU to spare
// (GOMAXPROCS above one); otherwise they run when the program tests or
// waits for them. A blocking collective started while
// nonblocking ones are pending waits its turn in the same queue (MPI
// orders all collectives of a communicator alike on every rank); with
// none pending it runs at once on the calling thread, as before.

// nbcQueue is a communicator's collective worker and its queue. Either
// the worker or a thread waiting for one of the queued operations runs
// them, one owner at a time, in order: a waiter that finds the worker idle
// runs the operations up to its own itself rather than wake the worker and
// sleep (two thread hand-offs, more than a small collective takes here).
type nbcQueue struct {
	mu      sync.Mutex
	list    []*nbcOp // queued, not yet started
	busy    bool     // an owner is running operations
	stop    bool
	wake    chan struct{} // the worker's doorbell
	pending atomic.Int32  // queued or running
	owner   atomic.Int64  // the thread running the queue's operations
}

// nbcOp is one queued collective.
type nbcOp struct {
	run  func() error
	err  error
	done chan struct{}
}

// raised is an error whose handler has already been called (in the
// worker): completing its request returns its code without calling the
// handler again.
type raised struct{ code int }

func (r raised) Error() string { return errText[r.code] }

// take makes the caller the owner and removes the queued operations up to
// and including upto (all of them when upto is nil); ok is false when
// another owner is busy.
func (q *nbcQueue) take(upto *nbcOp) ([]*nbcOp, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.busy || len(q.list) == 0 {
		return nil, false
	}
	n := len(q.list)
	if upto != nil {
		i := slices.Index(q.list, upto)
		if i < 0 {
			return nil, false
		}
		n = i + 1
	}
	ops := slices.Clone(q.list[:n])
	q.list = slices.Delete(q.list, 0, n)
	q.busy = true
	q.owner.Store(int64(unix.Gettid()))
	return ops, true
}

// runAll runs taken operations in order, then gives up ownership and
// rings the worker if more are queued.
func (q *nbcQueue) runAll(ops []*nbcOp) {
	for _, op := range ops {
		op.err = op.run()
		close(op.done)
		q.pending.Add(-1)
	}
	q.mu.Lock()
	q.busy = false
	q.owner.Store(0)
	more := len(q.list) > 0
	q.mu.Unlock()
	if more {
		q.ring()
	}
}

func (q *nbcQueue) ring() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *nbcQueue) work() {
	runtime.LockOSThread() // owner is known by thread id
	for range q.wake {
		for {
			ops, ok := q.take(nil)
			if !ok {
				break
			}
			q.runAll(ops)
		}
		q.mu.Lock()
		stop := q.stop && len(q.list) == 0 && !q.busy
		q.mu.Unlock()
		if stop {
			return
		}
	}
}

// poll runs op (and the operations queued before it) on the calling
// thread if no owner is busy, and reports whether op is done.
func (q *nbcQueue) poll(op *nbcOp) bool {
	if ops, ok := q.take(op); ok {
		q.runAll(ops)
	}
	select {
	case <-op.done:
		return true
	default:
		return false
	}
}

// await waits for op: it runs it (and the operations queued before it) on
// the calling thread when no owner is busy, else sleeps until it is done.
func (q *nbcQueue) await(op *nbcOp) error {
	for {
		select {
		case <-op.done:
			return op.err
		default:
		}
		if ops, ok := q.take(op); ok {
			q.runAll(ops)
			continue
		}
		select {
		case <-op.done:
			return op.err
		case <-time.After(time.Millisecond):
			// The owner may have finished without reaching op (a
			// waiter's run stops at its own operation): look again.
		}
	}
}

// queue returns ce's worker, starting it.
func (ce *commEntry) queue() *nbcQueue {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if ce.nbc == nil {
		ce.nbc = &nbcQueue{wake: make(chan struct{}, 1)}
		go ce.nbc.work()
	}
	return ce.nbc
}

func (ce *commEntry) worker() *nbcQueue {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	return ce.nbc
}

// enqueue queues f on ce's worker.
func (ce *commEntry) enqueue(f func() error) *nbcOp {
	q := ce.queue()
	op := &nbcOp{run: f, done: make(chan struct{})}
	q.pending.Add(1)
	q.mu.Lock()
	q.list = append(q.list, op)
	q.mu.Unlock()
	if runtime.GOMAXPROCS(0) > 1 {
		// A CPU to spare: the worker runs it while the program computes.
		// With one (mprun gives each rank its share), a worker would
		// only take that CPU from the computation: the operation runs
		// when the program waits for it or tests it, as in MPICH and
		// Open MPI.
		q.ring()
	}
	return op
}

// coll runs a collective operation of ce: at once when no nonblocking
// collective is pending (or when the caller is running the queue), else
// after the pending ones.
func (ce *commEntry) coll(f func() error) error {
	if err := interColl(ce); err != nil {
		return err
	}
	q := ce.worker()
	if q == nil || q.pending.Load() == 0 || int64(unix.Gettid()) == q.owner.Load() {
		return f()
	}
	return q.await(ce.enqueue(f))
}

// stopWorker ends ce's worker once its queue is empty (MPI_Comm_free,
// MPI_Finalize: the program has completed its requests).
func (ce *commEntry) stopWorker() {
	lib.mu.Lock()
	q := ce.nbc
	ce.nbc = nil
	lib.mu.Unlock()
	if q != nil {
		q.mu.Lock()
		q.stop = true
		q.mu.Unlock()
		q.ring()
	}
}

// asOp makes a queued operation of an exported blocking call, whose
// error handler has run by the time it returns.
func asOp(call func() C.int) func() error {
	return func() error {
		if rc := call(); rc != errSuccess {
			return raised{int(rc)}
		}
		return nil
	}
}

// startNBC starts blocking collective call (the exported function, run by
// the worker) as a nonblocking one, handing out its request.
func startNBC(fn string, comm C.MPI_Comm, req *C.MPI_Request, call func() C.int) C.int {
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	if req == nil {
		return retc(comm, fn, errorf(errArg, "NULL request"))
	}
	q := lib.newReq()
	q.ce = ce
	q.nbc = ce.enqueue(asOp(call))
	return retc(comm, fn, lib.handOut(q, req))
}

//export PMPI_Ibarrier
func PMPI_Ibarrier(comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ibarrier", &mpirc)
	return startNBC("MPI_Ibarrier", comm, req, func() C.int { return PMPI_Barrier(comm) })
}

//export PMPI_Ibcast
func PMPI_Ibcast(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, root C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ibcast", &mpirc)
	return startNBC("MPI_Ibcast", comm, req, func() C.int { return PMPI_Bcast(buf, count, dt, root, comm) })
}

//export PMPI_Ireduce
func PMPI_Ireduce(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, root C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ireduce", &mpirc)
	return startNBC("MPI_Ireduce", comm, req, func() C.int { return PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm) })
}

//export PMPI_Iallreduce
func PMPI_Iallreduce(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Iallreduce", &mpirc)
	return startNBC("MPI_Iallreduce", comm, req, func() C.int { return PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm) })
}

//export PMPI_Iscan
func PMPI_Iscan(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Iscan", &mpirc)
	return startNBC("MPI_Iscan", comm, req, func() C.int { return PMPI_Scan(sbuf, rbuf, count, dt, op, comm) })
}

//export PMPI_Iexscan
func PMPI_Iexscan(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Iexscan", &mpirc)
	return startNBC("MPI_Iexscan", comm, req, func() C.int { return PMPI_Exscan(sbuf, rbuf, count, dt, op, comm) })
}

//export PMPI_Igather
func PMPI_Igather(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype,
	root C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Igather", &mpirc)
	return startNBC("MPI_Igather", comm, req, func() C.int { return PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm) })
}

//export PMPI_Igatherv
func PMPI_Igatherv(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, displs *C.int,
	rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Igatherv", &mpirc)
	return startNBC("MPI_Igatherv", comm, req, func() C.int {
		return PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm)
	})
}

//export PMPI_Iscatter
func PMPI_Iscatter(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype,
	root C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Iscatter", &mpirc)
	return startNBC("MPI_Iscatter", comm, req, func() C.int { return PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm) })
}

//export PMPI_Iscatterv
func PMPI_Iscatterv(sbuf unsafe.Pointer, scounts, displs *C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int,
	rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Iscatterv", &mpirc)
	return startNBC("MPI_Iscatterv", comm, req, func() C.int {
		return PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm)
	})
}

//export PMPI_Iallgather
func PMPI_Iallgather(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype,
	comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Iallgather", &mpirc)
	return startNBC("MPI_Iallgather", comm, req, func() C.int { return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm) })
}

//export PMPI_Iallgatherv
func PMPI_Iallgatherv(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, displs *C.int,
	rtype C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Iallgatherv", &mpirc)
	return startNBC("MPI_Iallgatherv", comm, req, func() C.int {
		return PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm)
	})
}

//export PMPI_Ialltoall
func PMPI_Ialltoall(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype,
	comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ialltoall", &mpirc)
	return startNBC("MPI_Ialltoall", comm, req, func() C.int { return PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm) })
}

//export PMPI_Ialltoallv
func PMPI_Ialltoallv(sbuf unsafe.Pointer, scounts, sdispls *C.int, stype C.MPI_Datatype, rbuf unsafe.Pointer, rcounts, rdispls *C.int,
	rtype C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ialltoallv", &mpirc)
	return startNBC("MPI_Ialltoallv", comm, req, func() C.int {
		return PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm)
	})
}

//export PMPI_Ireduce_scatter_block
func PMPI_Ireduce_scatter_block(sbuf, rbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ireduce_scatter_block", &mpirc)
	return startNBC("MPI_Ireduce_scatter_block", comm, req, func() C.int { return PMPI_Reduce_scatter_block(sbuf, rbuf, count, dt, op, comm) })
}

//export PMPI_Ireduce_scatter
func PMPI_Ireduce_scatter(sbuf, rbuf unsafe.Pointer, counts *C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Ireduce_scatter", &mpirc)
	return startNBC("MPI_Ireduce_scatter", comm, req, func() C.int { return PMPI_Reduce_scatter(sbuf, rbuf, counts, dt, op, comm) })
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// isRaised reports an error whose handler was already called.
func isRaised(err error) (int, bool) {
	var r raised
	if errors.As(err, &r) {
		return r.code, true
	}
	return 0, false
}
