package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

//go:generate go run gen_stubs.go

func main() {} // required by -buildmode=c-shared

// MPICH 4.0.2 ABI constants (Debian libmpich-dev mpi.h).
const (
	commNull  = 0x04000000
	commWorld = 0x44000000
	commSelf  = 0x44000001
	commFirst = -0x7c000000 // 0x84000000 as an int32: MPICH's indirect communicator handles

	requestNull  = 0x2c000000
	requestFirst = -0x54000000 // 0xac000000 as an int32: MPICH's indirect request handles

	datatypeNull = 0x0c000000

	anySource = -2
	anyTag    = -1
	procNull  = -1
	undefined = -32766
	inPlace   = ^uintptr(0) // MPI_IN_PLACE is (void *)-1
	statusIgn = 1           // MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE are (MPI_Status *)1

	errorsAreFatal = 0x54000000
	errorsReturn   = 0x54000001
	errorsAbort    = 0x54000003

	threadSingle     = 0
	threadSerialized = 2

	maxProcessorName = 128
	maxErrorString   = 512
)

// MPI error codes (classes) of MPICH's mpi.h.
const (
	errSuccess  = 0
	errBuffer   = 1
	errCount    = 2
	errType     = 3
	errTag      = 4
	errComm     = 5
	errRank     = 6
	errRoot     = 7
	errOp       = 9
	errArg      = 12
	errUnknown  = 13
	errTruncate = 14
	errOther    = 15
	errIntern   = 16
	errInStatus = 17
	errPending  = 18
	errRequest  = 19
)

var errText = map[int]string{
	errSuccess:  "No MPI error",
	errBuffer:   "Invalid buffer pointer",
	errCount:    "Invalid count argument",
	errType:     "Invalid datatype argument",
	errTag:      "Invalid tag argument",
	errComm:     "Invalid communicator",
	errRank:     "Invalid rank",
	errRoot:     "Invalid root",
	errOp:       "Invalid operation",
	errArg:      "Invalid argument",
	errUnknown:  "Unknown error",
	errTruncate: "Message truncated on receive",
	errOther:    "Other error (see the message on stderr)",
	errIntern:   "Internal error",
	errInStatus: "Error code is in status",
	errPending:  "Pending request",
	errRequest:  "Invalid request handle",
}

// mpiError is an error with its MPI error code.
type mpiError struct {
	code int
	err  error
}

func (e *mpiError) Error() string { return e.err.Error() }
func (e *mpiError) Unwrap() error { return e.err }

func errorf(code int, format string, args ...any) error {
	return &mpiError{code, fmt.Errorf(format, args...)}
}

// codeOf maps an error to its MPI error code.
func codeOf(err error) int {
	var me *mpiError
	switch {
	case err == nil:
		return errSuccess
	case errors.As(err, &me):
		return me.code
	case errors.Is(err, mplite.ErrTruncate):
		return errTruncate
	case errors.Is(err, mplite.ErrRank):
		return errRank
	case errors.Is(err, mplite.ErrTag):
		return errTag
	case errors.Is(err, mplite.ErrFreed):
		return errComm
	}
	return errOther
}

// ret reports a failed call on stderr (the library never aborts on an
// error: MPI_ERRORS_RETURN) and returns its code.
func ret(fn string, err error) C.int {
	if err == nil {
		return errSuccess
	}
	fmt.Fprintf(os.Stderr, "libmpich(ethervia): %s: %v\n", fn, err)
	return C.int(codeOf(err))
}

// library is the state of the MPI library in this process. A C ABI has
// process-wide state by nature (MPI_COMM_WORLD is a constant), so this is the
// one package-level variable; every field is guarded by mu.
type library struct {
	mu        sync.Mutex
	state     int // 0 before MPI_Init, 1 initialized, 2 finalized
	world     *mplite.Comm
	comms     map[int32]*commEntry
	nextComm  int32
	reqs      map[int32]*request
	nextReq   int32
	bsends    []*mplite.Request // buffered sends not yet complete
	bufAddr   uintptr           // MPI_Buffer_attach's buffer (C memory), for detach
	bufSize   int
	fatalNote bool
}

var lib = &library{}

const (
	stateNone = iota
	stateInit
	stateFinal
)

// comm returns the entry of a communicator handle.
func (l *library) comm(h C.MPI_Comm) (*commEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateInit {
		return nil, errorf(errOther, "MPI is not initialized (or already finalized)")
	}
	ce := l.comms[int32(h)]
	if ce == nil {
		if h == commNull {
			return nil, errorf(errComm, "MPI_COMM_NULL")
		}
		return nil, errorf(errComm, "invalid communicator handle %#x", uint32(h))
	}
	return ce, nil
}

// addComm registers a communicator made by Dup or Split and returns its
// handle.
func (l *library) addComm(ce *commEntry) C.MPI_Comm {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.nextComm
	l.nextComm++
	l.comms[h] = ce
	return C.MPI_Comm(h)
}

// commEntry is a user communicator and the two shadow communicators of its
// synchronous sends.
type commEntry struct {
	c        *mplite.Comm
	syncReq  *mplite.Comm // Ssend requests: tag = user tag, payload = sequence number
	syncAck  *mplite.Comm // Ssend acknowledgements, same encoding
	mu       sync.Mutex
	sendSeq  map[peerTag]uint64   // messages sent per (dest, tag)
	recvCnt  map[peerTag]uint64   // messages received per (source, tag)
	pending  map[peerTag][]uint64 // Ssend requests not yet acknowledged, ascending
	freeable bool
}

type peerTag struct{ peer, tag int }

// newCommEntry makes the shadow communicators of c (collective over c) and
// starts serving Ssend requests.
func newCommEntry(c *mplite.Comm, freeable bool) (*commEntry, error) {
	req, err := c.Dup()
	if err != nil {
		return nil, fmt.Errorf("shadow communicator: %w", err)
	}
	ack, err := c.Dup()
	if err != nil {
		return nil, fmt.Errorf("shadow communicator: %w", err)
	}
	ce := &commEntry{
		c: c, syncReq: req, syncAck: ack, freeable: freeable,
		sendSeq: make(map[peerTag]uint64),
		recvCnt: make(map[peerTag]uint64),
		pending: make(map[peerTag][]uint64),
	}
	go ce.serveSync()
	return ce, nil
}

// sent counts a message sent to dest with tag and returns its number.
func (ce *commEntry) sent(dest, tag int) uint64 {
	ce.mu.Lock()
	k := peerTag{dest, tag}
	n := ce.sendSeq[k] + 1
	ce.sendSeq[k] = n
	ce.mu.Unlock()
	return n
}

// received counts a message received (matched) from src with tag and
// acknowledges the Ssends that are now matched.
func (ce *commEntry) received(src, tag int) {
	ce.mu.Lock()
	k := peerTag{src, tag}
	n := ce.recvCnt[k] + 1
	ce.recvCnt[k] = n
	var due []uint64
	if p := ce.pending[k]; len(p) > 0 {
		i := 0
		for i < len(p) && p[i] <= n {
			i++
		}
		due = p[:i:i]
		if i == len(p) {
			delete(ce.pending, k)
		} else {
			ce.pending[k] = p[i:]
		}
	}
	ce.mu.Unlock()
	for _, seq := range due {
		ce.ack(src, tag, seq)
	}
}

func (ce *commEntry) ack(src, tag int, seq uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seq)
	if err := ce.syncAck.Send(b[:], src, tag); err != nil {
		fmt.Fprintf(os.Stderr, "libmpich(ethervia): acknowledging an MPI_Ssend of rank %d: %v\n", src, err)
	}
}

// serveSync receives Ssend requests until the communicator ends, and
// acknowledges those whose message was already received.
func (ce *commEntry) serveSync() {
	var b [8]byte
	for {
		st, err := ce.syncReq.Recv(b[:], mplite.AnySource, mplite.AnyTag)
		if err != nil {
			return // finalized, freed or a peer died: nothing left to serve
		}
		seq := binary.LittleEndian.Uint64(b[:])
		k := peerTag{st.Source, st.Tag}
		ce.mu.Lock()
		now := ce.recvCnt[k] >= seq
		if !now {
			ce.pending[k] = append(ce.pending[k], seq)
		}
		ce.mu.Unlock()
		if now {
			ce.ack(st.Source, st.Tag, seq)
		}
	}
}

// ssend sends buf synchronously: it returns after the receiver matched it.
func (ce *commEntry) ssend(buf []byte, dest, tag int) error {
	seq := ce.sent(dest, tag)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seq)
	if err := ce.syncReq.Send(b[:], dest, tag); err != nil {
		return err
	}
	if err := ce.c.Send(buf, dest, tag); err != nil {
		return err
	}
	if _, err := ce.syncAck.Recv(b[:], dest, tag); err != nil {
		return fmt.Errorf("waiting for the receiver to match: %w", err)
	}
	if got := binary.LittleEndian.Uint64(b[:]); got != seq {
		return errorf(errIntern, "Ssend acknowledgement %d from rank %d, want %d", got, dest, seq)
	}
	return nil
}

func (ce *commEntry) free() error {
	return errors.Join(ce.syncReq.Free(), ce.syncAck.Free(), ce.c.Free())
}

// goBytes views n bytes of C memory at p as a slice (nil when n is 0).
func goBytes(p unsafe.Pointer, n int) []byte {
	if n == 0 || p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// cInts views n C ints at p.
func cInts(p *C.int, n int) []C.int {
	if n == 0 || p == nil {
		return nil
	}
	return unsafe.Slice(p, n)
}

// cString copies s into the C buffer p of size max (NUL-terminated) and
// stores its length in *n.
func cString(p *C.char, max int, s string, n *C.int) {
	if len(s) > max-1 {
		s = s[:max-1]
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(p)), max)
	copy(b, s)
	b[len(s)] = 0
	if n != nil {
		*n = C.int(len(s))
	}
}
