package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import (
	"sync"
	"sync/atomic"
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

	errhandlerNull = 0x14000000
	keyvalInvalid  = 0x24000000

	// predefined attribute keys
	keyTagUB         = 0x64400001
	keyHost          = 0x64400003
	keyIO            = 0x64400005
	keyWtimeIsGlobal = 0x64400007
	keyUniverseSize  = 0x64400009
	keyLastUsedCode  = 0x6440000b
	keyAppNum        = 0x6440000d

	commTypeShared = 1 // MPI_COMM_TYPE_SHARED

	orderC       = 56 // MPI_ORDER_C
	orderFortran = 57 // MPI_ORDER_FORTRAN

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
	errGroup    = 8
	errTopology = 10
	errDims     = 11
	errNoMem    = 34
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
	errNoMem:    "Out of memory",
}

// library is the state of the MPI library in this process. A C ABI has
// process-wide state by nature (MPI_COMM_WORLD is a constant), so this is the
// one package-level variable; every field is guarded by mu.
type library struct {
	mu    sync.Mutex
	state int // 0 before MPI_Init, 1 initialized, 2 finalized
	world *mplite.Comm
	comms map[int32]*commEntry
	// worldEntry is comms[commWorld] while MPI is initialized, nil
	// otherwise: most calls name MPI_COMM_WORLD, and this finds it without
	// the library's lock.
	worldEntry atomic.Pointer[commEntry]
	nextComm   int32
	reqs       reqTable
	bsends     []*mplite.Request // buffered sends not yet complete
	bufAddr    uintptr           // MPI_Buffer_attach's buffer (C memory), for detach
	bufSize    int
	errhs      handles[*errhandler] // user error handlers
	keyvals    handles[*keyval]     // user attribute keys
	types      handles[*typeEntry]  // derived datatypes
	groups     handles[[]int]       // groups: world ranks in group order
	ops        handles[*userOp]     // user reduction operations
	infos      handles[*info]       // MPI_Info objects
	stages     [][]byte             // staging copies kept for reuse (tbuf)
	layouts    []*cLayout           // layout views kept for reuse (tbuf)
	messages   handles[*probed]     // messages taken by MPI_Mprobe
	attrVals   unsafe.Pointer       // C memory for the predefined attributes' values
	typeNames  map[uint32]string    // MPI_Type_set_name
	typeAttrs  map[int32]*attrSet   // the predefined datatypes' attributes
	userErrs   map[int]userErr      // MPI_Add_error_class and _code
	lastErr    int                  // the largest added error class or code
	classes    int                  // error classes added

	worldCalled bool           // MPI_Init ran
	worldDone   bool           // MPI_Finalize ran
	sessions    int            // sessions open (MPI_Session_init)
	nextSess    int32          // the last session handle handed out
	sessOpen    map[int32]bool // open session handles
}

var lib = &library{}

const (
	stateNone = iota
	stateInit
	stateFinal
)

// comm returns the entry of a communicator handle.
func (l *library) comm(h C.MPI_Comm) (*commEntry, error) {
	if h == commWorld {
		if ce := l.worldEntry.Load(); ce != nil {
			return ce, nil
		}
	}
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
	ce.h = C.MPI_Comm(h)
	return ce.h
}

// forget removes a communicator handle.
func (l *library) forget(h C.MPI_Comm) {
	l.mu.Lock()
	delete(l.comms, int32(h))
	l.mu.Unlock()
}

// commEntry is a user communicator.
type commEntry struct {
	c        *mplite.Comm
	h        C.MPI_Comm // its handle
	freeable bool
	eh       int32        // error handler: errorsAreFatal, errorsReturn, errorsAbort or a user one
	attrSet  attrSet      // user attributes by keyval
	cart     *cart        // a Cartesian topology, or nil
	graph    *graph       // a graph topology, or nil
	dist     *distGraph   // a distributed graph topology, or nil
	nbc      *nbcQueue    // the nonblocking collectives' worker, once started
	nbr      *mplite.Comm // the neighbourhood collectives' duplicate, once used
	name     *string      // MPI_Comm_set_name
}

// newCommEntry makes the entry of a communicator derived from parent (nil
// for the predefined ones), whose error handler it inherits.
func newCommEntry(c *mplite.Comm, freeable bool, parent *commEntry) (*commEntry, error) {
	ce := &commEntry{c: c, freeable: freeable, eh: errorsAreFatal}
	if parent != nil {
		lib.mu.Lock()
		ce.eh = parent.eh
		lib.mu.Unlock()
	}
	return ce, nil
}

func (ce *commEntry) free() error {
	if ce.nbr != nil {
		if err := ce.nbr.Free(); err != nil {
			return err
		}
	}
	return ce.c.Free()
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
