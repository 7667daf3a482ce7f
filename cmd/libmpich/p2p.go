package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"errors"
	"time"
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// setStatus fills a status the way MPICH does: the count in bytes split
// into count_lo and the upper bits of count_hi_and_cancelled (bit 0 is the
// cancelled flag).
func setStatus(st *C.MPI_Status, src, tag int, count int64) {
	if st == nil || uintptr(unsafe.Pointer(st)) == statusIgn {
		return
	}
	st.MPI_SOURCE = C.int(src)
	st.MPI_TAG = C.int(tag)
	st.count_lo = C.int(int32(uint32(count)))
	st.count_hi_and_cancelled = C.int(int32(uint32(count>>32) << 1))
}

func statusCount(st *C.MPI_Status) int64 {
	return int64(uint32(st.count_lo)) | int64(uint32(st.count_hi_and_cancelled)>>1)<<32
}

// emptyStatus is the status of a null or MPI_PROC_NULL request.
func emptyStatus(st *C.MPI_Status, src int) {
	setStatus(st, src, anyTag, 0)
	if st != nil && uintptr(unsafe.Pointer(st)) != statusIgn {
		st.MPI_ERROR = errSuccess
	}
}

// source translates an MPI source rank for mplite.
func source(src C.int) (int, error) {
	switch {
	case src == anySource:
		return mplite.AnySource, nil
	case src < 0:
		return 0, errorf(errRank, "invalid source rank %d", int(src))
	}
	return int(src), nil
}

func checkTag(tag C.int, wild bool) error {
	if tag < 0 && !(wild && tag == anyTag) {
		return errorf(errTag, "invalid tag %d", int(tag))
	}
	return nil
}

// request is a nonblocking operation behind an MPI_Request handle.
type request struct {
	r        *mplite.Request // nil for an operation on MPI_PROC_NULL
	ce       *commEntry
	recv     bool
	done     bool
	st       mplite.Status
	err      error
	procNull bool

	cancelAsked bool // MPI_Cancel was called: look whether it worked
	cancelled   bool

	persist  *persistent // MPI_Send_init and friends: the operation Start repeats
	inactive bool        // a persistent request not started, or completed

	stage tbuf // a receive's buffer, unpacked at completion (derived datatypes)

	nbc *nbcOp // a nonblocking collective, run by its communicator's worker

	greq *grequest // a generalized request (MPI_Grequest_start)

	r2     *mplite.Request // MPI_Isendrecv's send; r is its receive
	stage2 tbuf            // r2's staging copy
}

// finish records the completion of the operation (once).
func (q *request) finish(st mplite.Status, err error) {
	q.done, q.st, q.err = true, st, err
	if q.recv {
		q.stage.unpack(st.Count)
	}
	q.stage.release()
	q.stage = tbuf{}
	q.stage2.release()
	q.stage2 = tbuf{}
	if q.cancelAsked && q.r != nil {
		q.cancelled = q.r.Cancelled()
	}
	if q.recv && err != nil {
		var te *mplite.TruncateError
		if errors.As(err, &te) {
			q.st = mplite.Status{Source: te.Source, Tag: te.Tag, Count: te.Capacity} // matched, then truncated
		}
	}
}

func (q *request) wait() {
	switch {
	case q.done:
	case q.greq != nil:
		<-q.greq.done
		q.finishGreq()
	case q.nbc != nil:
		if w := q.ce.worker(); w != nil {
			q.finish(mplite.Status{}, w.await(q.nbc))
		} else {
			<-q.nbc.done // the communicator was freed: its worker drains
			q.finish(mplite.Status{}, q.nbc.err)
		}
	default:
		st, err := q.r.Wait()
		if q.r2 != nil {
			if _, err2 := q.r2.Wait(); err == nil {
				err = err2
			}
		}
		q.finish(st, err)
	}
}

func (q *request) test() bool {
	switch {
	case q.done:
	case q.greq != nil:
		if isClosed(q.greq.done) {
			q.finishGreq()
		}
	case q.nbc != nil:
		if w := q.ce.worker(); (w != nil && w.poll(q.nbc)) || (w == nil && isClosed(q.nbc.done)) {
			q.finish(mplite.Status{}, q.nbc.err)
		}
	default:
		ok, st, err := q.r.Test()
		if ok && q.r2 != nil {
			var err2 error
			if ok, _, err2 = q.r2.Test(); ok && err == nil {
				err = err2
			}
		}
		if ok {
			q.finish(st, err)
		}
	}
	return q.done
}

// status writes the request's status (for a completed request).
func (q *request) status(st *C.MPI_Status) {
	switch {
	case q.inactive:
		emptyStatus(st, anySource)
	case q.greq != nil:
		if st != nil && uintptr(unsafe.Pointer(st)) != statusIgn {
			*st = q.greq.st
		}
	case q.cancelled:
		setStatus(st, q.st.Source, q.st.Tag, 0)
		if st != nil && uintptr(unsafe.Pointer(st)) != statusIgn {
			st.count_hi_and_cancelled |= 1
		}
	case q.procNull:
		emptyStatus(st, procNull)
	case q.recv:
		setStatus(st, q.st.Source, q.st.Tag, int64(q.st.Count))
	default:
		emptyStatus(st, anySource)
	}
}

// newReq returns a request to start, recycled if one is free.
func (l *library) newReq() *request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reqs.newRequest()
}

// addReq gives a started request its handle.
func (l *library) addReq(q *request) (C.MPI_Request, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.reqs.add(q)
	if !ok {
		return requestNull, errorf(errIntern, "%d requests in flight: no handle left", maxRequests)
	}
	return C.MPI_Request(h), nil
}

func (l *library) req(h C.MPI_Request) (*request, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.reqs.get(int32(h)); q != nil {
		return q, nil
	}
	return nil, errorf(errRequest, "invalid request handle %#x", uint32(h))
}

// delReq frees the handle *h (setting it to MPI_REQUEST_NULL) but not its
// request, which goes on (MPI_Request_free).
func (l *library) delReq(h *C.MPI_Request) {
	l.mu.Lock()
	l.reqs.del(int32(*h))
	l.mu.Unlock()
	*h = requestNull
}

// release ends a completed request: it writes its status, frees the handle
// *h and recycles the request (and mplite's), and returns its error.
func (l *library) release(h *C.MPI_Request, q *request, st *C.MPI_Status) error {
	q.status(st)
	err := q.err
	if q.r != nil {
		q.r.Free()
	}
	if q.r2 != nil {
		q.r2.Free()
	}
	if q.persist != nil {
		// A persistent request keeps its handle: it becomes inactive.
		q.r, q.nbc, q.inactive, q.err, q.cancelAsked, q.cancelled = nil, nil, true, nil, false, false
		return err
	}
	l.mu.Lock()
	l.reqs.del(int32(*h))
	l.reqs.recycle(q)
	l.mu.Unlock()
	*h = requestNull
	return err
}

// handOut stores the handle of a started request in *req. With no handle
// left the operation is waited for (it cannot be given up) and fails.
func (l *library) handOut(q *request, req *C.MPI_Request) error {
	h, err := l.addReq(q)
	if err != nil {
		q.wait()
		l.drop(q)
	}
	*req = h
	return err
}

// drop recycles a request that never got a handle.
func (l *library) drop(q *request) {
	l.mu.Lock()
	l.reqs.recycle(q)
	l.mu.Unlock()
}

// send is MPI_Send (and MPI_Rsend: a ready send may be a standard send).
func send(fn string, buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm) C.int {
	if rc, ok := sendSimple(fn, buf, count, dt, dest, tag, comm); ok {
		return rc
	}
	ce, b, err := p2pView(buf, count, dt, tag, false, comm)
	if err != nil || dest == procNull {
		b.release()
		return retc(comm, fn, err)
	}
	if b.lay != nil {
		var r *mplite.Request
		if r, err = ce.c.IsendLayout(b.lay, int(dest), int(tag)); err == nil {
			_, err = r.Wait()
			r.Free()
		}
	} else {
		err = ce.c.Send(b.b, int(dest), int(tag))
	}
	b.release()
	return retc(comm, fn, err)
}

// p2pArgs checks a point-to-point call's arguments and views its buffer;
// a send's staging copy (derived datatypes) is filled.
func p2pArgs(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, tag C.int, wild bool, comm C.MPI_Comm) (*commEntry, tbuf, error) {
	return p2pBuf(typedBuf, buf, count, dt, tag, wild, comm)
}

// p2pView is p2pArgs for the calls that hand mplite a layout (layoutBuf):
// no staging copy.
func p2pView(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, tag C.int, wild bool, comm C.MPI_Comm) (*commEntry, tbuf, error) {
	return p2pBuf(layoutBuf, buf, count, dt, tag, wild, comm)
}

func p2pBuf(view func(unsafe.Pointer, C.int, C.MPI_Datatype) (tbuf, error),
	buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, tag C.int, wild bool, comm C.MPI_Comm) (*commEntry, tbuf, error) {
	ce, err := lib.comm(comm)
	if err != nil {
		return nil, tbuf{}, err
	}
	t, err := view(buf, count, dt)
	if err != nil {
		return nil, tbuf{}, err
	}
	if err := checkTag(tag, wild); err != nil {
		t.release()
		return nil, tbuf{}, err
	}
	if !wild {
		t.pack()
	}
	return ce, t, nil
}

//export PMPI_Send
func PMPI_Send(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Send", &mpirc)
	return send("MPI_Send", buf, count, dt, dest, tag, comm)
}

//export PMPI_Rsend
func PMPI_Rsend(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Rsend", &mpirc)
	return send("MPI_Rsend", buf, count, dt, dest, tag, comm)
}

//export PMPI_Ssend
func PMPI_Ssend(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Ssend", &mpirc)
	ce, b, err := p2pArgs(buf, count, dt, tag, false, comm)
	if err != nil || dest == procNull {
		return retc(comm, "MPI_Ssend", err)
	}
	err = ce.c.Ssend(b.b, int(dest), int(tag))
	b.release()
	return retc(comm, "MPI_Ssend", err)
}

//export PMPI_Bsend
func PMPI_Bsend(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Bsend", &mpirc)
	ce, b, err := p2pArgs(buf, count, dt, tag, false, comm)
	if err != nil || dest == procNull {
		return retc(comm, "MPI_Bsend", err)
	}
	// A buffered send must not wait for the receiver: copy and Isend; the
	// copies are completed by MPI_Buffer_detach or MPI_Finalize.
	cp := append([]byte(nil), b.b...)
	b.release()
	r, err := ce.c.Isend(cp, int(dest), int(tag))
	if err != nil {
		return retc(comm, "MPI_Bsend", err)
	}
	lib.mu.Lock()
	if len(lib.bsends) >= 64 {
		live := lib.bsends[:0]
		for _, q := range lib.bsends {
			if done, _, qerr := q.Test(); !done || qerr != nil {
				live = append(live, q) // failures are reported at detach
			}
		}
		lib.bsends = live
	}
	lib.bsends = append(lib.bsends, r)
	lib.mu.Unlock()
	return errSuccess
}

//export PMPI_Recv
func PMPI_Recv(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, src, tag C.int, comm C.MPI_Comm, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Recv", &mpirc)
	st := statusPtr(stArg)
	if rc, ok := recvSimple(buf, count, dt, src, tag, comm, st); ok {
		return rc
	}
	ce, b, err := p2pView(buf, count, dt, tag, true, comm)
	if err != nil {
		return retc(comm, "MPI_Recv", err)
	}
	defer b.release()
	if src == procNull {
		emptyStatus(st, procNull)
		return errSuccess
	}
	s, err := source(src)
	if err != nil {
		return retc(comm, "MPI_Recv", err)
	}
	q := &request{ce: ce, recv: true}
	if b.lay != nil {
		var r *mplite.Request
		if r, err = b.irecv(ce.c, s, int(tag)); err != nil {
			q.finish(mplite.Status{}, err)
		} else {
			q.finish(r.Wait())
			r.Free()
		}
	} else {
		q.finish(ce.c.Recv(b.b, s, int(tag)))
	}
	q.status(st)
	return retc(comm, "MPI_Recv", q.err)
}

//export PMPI_Sendrecv
func PMPI_Sendrecv(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, dest, stag C.int,
	rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, src, rtag C.int, comm C.MPI_Comm, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Sendrecv", &mpirc)
	st := statusPtr(stArg)
	ce, sb, err := p2pView(sbuf, scount, stype, stag, false, comm)
	if err != nil {
		return retc(comm, "MPI_Sendrecv", err)
	}
	_, rb, err := p2pView(rbuf, rcount, rtype, rtag, true, comm)
	if err != nil {
		sb.release()
		return retc(comm, "MPI_Sendrecv", err)
	}
	s := procNull
	if src != procNull {
		s, err = source(src)
	}
	switch {
	case err != nil:
	case dest == procNull && src == procNull:
		emptyStatus(st, procNull)
	case dest == procNull:
		sb.release()
		rb.release()
		return PMPI_Recv(rbuf, rcount, rtype, src, rtag, comm, stArg)
	case src == procNull:
		sb.release()
		rb.release()
		emptyStatus(st, procNull)
		return send("MPI_Sendrecv", sbuf, scount, stype, dest, stag, comm)
	default:
		q := &request{ce: ce, recv: true}
		q.finish(sendrecv(ce.c, sb, int(dest), int(stag), rb, s, int(rtag)))
		q.status(st)
		err = q.err
	}
	sb.release()
	rb.release()
	return retc(comm, "MPI_Sendrecv", err)
}

// sendrecv is MPI_Sendrecv's exchange: through mplite's Sendrecv for
// slices, else by a layout receive and send, so that datatypes with gaps
// move without a staging copy.
func sendrecv(c *mplite.Comm, sb tbuf, dest, stag int, rb tbuf, src, rtag int) (mplite.Status, error) {
	if sb.lay == nil && rb.lay == nil {
		return c.Sendrecv(sb.b, dest, stag, rb.b, src, rtag)
	}
	rr, err := rb.irecv(c, src, rtag)
	if err != nil {
		return mplite.Status{}, err
	}
	sr, serr := sb.isend(c, dest, stag)
	if serr == nil {
		_, serr = sr.Wait()
		sr.Free()
	}
	st, err := rr.Wait()
	rr.Free()
	if err == nil {
		err = serr
	}
	return st, err
}

//export PMPI_Isend
func PMPI_Isend(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Isend", &mpirc)
	return isend("MPI_Isend", nil, buf, count, dt, dest, tag, comm, req)
}

//export PMPI_Issend
func PMPI_Issend(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Issend", &mpirc)
	return isend("MPI_Issend", (*mplite.Comm).Issend, buf, count, dt, dest, tag, comm, req)
}

// isend starts a nonblocking send with start (Isend or Issend; nil: Isend
// of a layout, without a staging copy).
func isend(fn string, start func(*mplite.Comm, []byte, int, int) (*mplite.Request, error),
	buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) C.int {
	ce, b, err := isendBuf(start == nil, buf, count, dt, tag, comm)
	if err != nil {
		return retc(comm, fn, err)
	}
	q := lib.newReq()
	q.ce, q.stage = ce, b // a send's staging copy is released at completion
	switch {
	case dest == procNull:
		q.procNull, q.done = true, true
	case start == nil:
		q.r, err = b.isend(ce.c, int(dest), int(tag))
	default:
		q.r, err = start(ce.c, b.b, int(dest), int(tag))
	}
	if err != nil {
		lib.drop(q)
		return retc(comm, fn, err)
	}
	return retc(comm, fn, lib.handOut(q, req))
}

//export PMPI_Irecv
func PMPI_Irecv(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, src, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Irecv", &mpirc)
	ce, b, err := irecvBuf(buf, count, dt, tag, comm)
	if err != nil {
		return retc(comm, "MPI_Irecv", err)
	}
	s := 0
	if src != procNull {
		if s, err = source(src); err != nil {
			return retc(comm, "MPI_Irecv", err)
		}
	}
	q := lib.newReq()
	q.ce, q.recv, q.stage = ce, true, b
	if src == procNull {
		q.procNull, q.done = true, true
	} else if q.r, err = b.irecv(ce.c, s, int(tag)); err != nil {
		lib.drop(q)
		return retc(comm, "MPI_Irecv", err)
	}
	return retc(comm, "MPI_Irecv", lib.handOut(q, req))
}

//export PMPI_Wait
func PMPI_Wait(req *C.MPI_Request, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Wait", &mpirc)
	st := statusPtr(stArg)
	if *req == requestNull {
		emptyStatus(st, anySource)
		return errSuccess
	}
	q, err := lib.req(*req)
	if err != nil {
		return ret("MPI_Wait", err)
	}
	q.wait()
	h := q.ce.h
	return retc(h, "MPI_Wait", lib.release(req, q, st))
}

//export PMPI_Test
func PMPI_Test(req *C.MPI_Request, flag *C.int, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Test", &mpirc)
	st := statusPtr(stArg)
	*flag = 1
	if *req == requestNull {
		emptyStatus(st, anySource)
		return errSuccess
	}
	q, err := lib.req(*req)
	if err != nil {
		return ret("MPI_Test", err)
	}
	if !q.test() {
		*flag = 0
		return errSuccess
	}
	h := q.ce.h
	return retc(h, "MPI_Test", lib.release(req, q, st))
}

// statusAt returns element i of a status array (nil when ignored).
func statusAt(sts *C.MPI_Status, i int) *C.MPI_Status {
	if sts == nil || uintptr(unsafe.Pointer(sts)) == statusIgn {
		return nil
	}
	return (*C.MPI_Status)(unsafe.Add(unsafe.Pointer(sts), i*int(unsafe.Sizeof(*sts))))
}

// lookupAll returns the requests of an array (nil for MPI_REQUEST_NULL).
// qs is scratch space for the result (a caller's array on its stack, so a
// call on a few requests allocates nothing).
func lookupAll(n C.int, reqs *C.MPI_Request, qs []*request) ([]C.MPI_Request, []*request, error) {
	if n < 0 {
		return nil, nil, errorf(errCount, "negative count %d", int(n))
	}
	hs := unsafe.Slice(reqs, int(n))
	if cap(qs) < int(n) {
		qs = make([]*request, n)
	}
	qs = qs[:n]
	clear(qs)
	for i, h := range hs {
		if h == requestNull {
			continue
		}
		q, err := lib.req(h)
		if err != nil {
			return nil, nil, err
		}
		if q.inactive {
			continue // an inactive persistent request counts as null
		}
		qs[i] = q
	}
	return hs, qs, nil
}

// finishAll frees completed requests and writes their statuses; with
// errors, each status gets its own code and the call MPI_ERR_IN_STATUS.
func finishAll(fn string, hs []C.MPI_Request, qs []*request, sts *C.MPI_Status) C.int {
	var errs []error
	for i, q := range qs {
		st := statusAt(sts, i)
		if q == nil {
			emptyStatus(st, anySource)
			continue
		}
		err := lib.release(&hs[i], q, st)
		if st != nil {
			st.MPI_ERROR = C.int(codeOf(err))
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		ret(fn, errors.Join(errs...))
		return errInStatus
	}
	return errSuccess
}

//export PMPI_Waitall
func PMPI_Waitall(n C.int, reqs *C.MPI_Request, stsArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Waitall", &mpirc)
	sts := statusPtr(stsArg)
	var scratch [16]*request
	hs, qs, err := lookupAll(n, reqs, scratch[:0])
	if err != nil {
		return ret("MPI_Waitall", err)
	}
	for _, q := range qs {
		if q != nil {
			q.wait()
		}
	}
	return finishAll("MPI_Waitall", hs, qs, sts)
}

//export PMPI_Testall
func PMPI_Testall(n C.int, reqs *C.MPI_Request, flag *C.int, stsArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Testall", &mpirc)
	sts := statusPtr(stsArg)
	var scratch [16]*request
	hs, qs, err := lookupAll(n, reqs, scratch[:0])
	if err != nil {
		return ret("MPI_Testall", err)
	}
	*flag = 1
	for _, q := range qs {
		if q != nil && !q.test() {
			*flag = 0
		}
	}
	if *flag == 0 {
		return errSuccess // MPI_Testall completes all or none
	}
	return finishAll("MPI_Testall", hs, qs, sts)
}

// poll waits between rounds of tests (each test makes progress): spin
// first, then sleep briefly. No runtime.Gosched: the caller is a C thread,
// locked to its M, where a Gosched hands the P to another thread and back.
func poll(round int) {
	if round >= 1000 {
		time.Sleep(20 * time.Microsecond)
	}
}

//export PMPI_Waitany
func PMPI_Waitany(n C.int, reqs *C.MPI_Request, index *C.int, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Waitany", &mpirc)
	st := statusPtr(stArg)
	var scratch [16]*request
	hs, qs, err := lookupAll(n, reqs, scratch[:0])
	if err != nil {
		return ret("MPI_Waitany", err)
	}
	for round := 0; ; round++ {
		active := false
		for i, q := range qs {
			if q == nil {
				continue
			}
			active = true
			if q.test() {
				*index = C.int(i)
				return ret("MPI_Waitany", lib.release(&hs[i], q, st))
			}
		}
		if !active {
			*index = undefined
			emptyStatus(st, anySource)
			return errSuccess
		}
		poll(round)
	}
}

//export PMPI_Testany
func PMPI_Testany(n C.int, reqs *C.MPI_Request, index *C.int, flag *C.int, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Testany", &mpirc)
	st := statusPtr(stArg)
	var scratch [16]*request
	hs, qs, err := lookupAll(n, reqs, scratch[:0])
	if err != nil {
		return ret("MPI_Testany", err)
	}
	*flag, *index = 1, undefined
	active := false
	for i, q := range qs {
		if q == nil {
			continue
		}
		active = true
		if q.test() {
			*index = C.int(i)
			return ret("MPI_Testany", lib.release(&hs[i], q, st))
		}
	}
	if active {
		*flag = 0
	} else {
		emptyStatus(st, anySource)
	}
	return errSuccess
}

//export PMPI_Request_free
func PMPI_Request_free(req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Request_free", &mpirc)
	q, err := lib.req(*req)
	if err != nil {
		return ret("MPI_Request_free", err)
	}
	lib.delReq(req)
	if !q.done {
		go q.wait() // completes (and counts a receive) in the background
	}
	return errSuccess
}

func probeArgs(src, tag C.int, comm C.MPI_Comm) (*commEntry, int, error) {
	ce, err := lib.comm(comm)
	if err != nil {
		return nil, 0, err
	}
	if err := checkTag(tag, true); err != nil {
		return nil, 0, err
	}
	s, err := source(src)
	return ce, s, err
}

//export PMPI_Probe
func PMPI_Probe(src, tag C.int, comm C.MPI_Comm, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Probe", &mpirc)
	st := statusPtr(stArg)
	if src == procNull {
		emptyStatus(st, procNull)
		return errSuccess
	}
	ce, s, err := probeArgs(src, tag, comm)
	if err != nil {
		return retc(comm, "MPI_Probe", err)
	}
	ps, err := ce.c.Probe(s, int(tag))
	if err != nil {
		return retc(comm, "MPI_Probe", err)
	}
	setStatus(st, ps.Source, ps.Tag, int64(ps.Count))
	return errSuccess
}

//export PMPI_Iprobe
func PMPI_Iprobe(src, tag C.int, comm C.MPI_Comm, flag *C.int, stArg C.uintptr_t) (mpirc C.int) {
	defer guard("MPI_Iprobe", &mpirc)
	st := statusPtr(stArg)
	if src == procNull {
		*flag = 1
		emptyStatus(st, procNull)
		return errSuccess
	}
	ce, s, err := probeArgs(src, tag, comm)
	if err != nil {
		return retc(comm, "MPI_Iprobe", err)
	}
	ok, ps, err := ce.c.Iprobe(s, int(tag))
	if err != nil {
		return retc(comm, "MPI_Iprobe", err)
	}
	*flag = 0
	if ok {
		*flag = 1
		setStatus(st, ps.Source, ps.Tag, int64(ps.Count))
	}
	return errSuccess
}
