// Package descriptors defines VI Architecture work descriptors and the FIFO
// work queues that hold them.
//
// A Descriptor tells a VI provider what to move: a control segment (the
// operation, the immediate-data and queue-fence flags and the immediate
// data), a scatter/gather list of data segments over registered memory, and,
// for RDMA, an address segment naming remote memory. The provider fills in
// the status, the length and, on receives, the immediate data when the
// descriptor completes.
//
// The consumer owns a descriptor and its buffers until it is posted, and
// again once the provider has handed it back through a Done or Wait call. In
// between neither may be touched.
package descriptors

import (
	"errors"
	"fmt"
	"strings"
)

// Op is the operation of a descriptor.
type Op uint8

// Operations. Receive descriptors use OpSend (VIA's SENDRECV).
const (
	OpSend      Op = 0 // send, or receive when posted on a receive queue
	OpRDMAWrite Op = 1 // write local segments into remote memory
	OpRDMARead  Op = 2 // read remote memory into local segments
)

func (o Op) String() string {
	switch o {
	case OpSend:
		return "send"
	case OpRDMAWrite:
		return "rdma-write"
	case OpRDMARead:
		return "rdma-read"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Control is a descriptor's control segment.
type Control struct {
	Op Op
	// Immediate sends ImmData with the data. On an RDMA write it also
	// consumes one receive descriptor at the remote end, which completes with
	// the immediate data; that is the only way an RDMA write notifies the
	// remote consumer.
	Immediate bool
	// Fence holds the descriptor back until every earlier RDMA read on the
	// same VI has completed.
	Fence bool
	// ImmData is the 32-bit immediate data sent when Immediate is set.
	ImmData uint32
}

// MemHandle names a registered memory region. Handles are unguessable keys
// bound to a protection tag and access rights.
type MemHandle uint32

// Segment is one element of a scatter/gather list: a buffer inside the
// registered region named by Handle.
type Segment struct {
	Buf    []byte
	Handle MemHandle
}

// AddressSegment names remote memory for RDMA: a region handle that the
// remote consumer exported and a byte offset inside that region.
type AddressSegment struct {
	Handle MemHandle
	Offset uint64
}

// Status is a descriptor's status word. The bit values follow VIPL 1.0.
type Status uint32

// Status bits.
const (
	StatusDone             Status = 0x001 // the provider has finished with the descriptor
	StatusFormat           Status = 0x002 // the descriptor is malformed
	StatusProtection       Status = 0x004 // a segment is not in registered memory the VI may use
	StatusLength           Status = 0x008 // the message does not fit the receive descriptor
	StatusPartial          Status = 0x010 // the descriptor was only partly processed
	StatusFlushed          Status = 0x020 // flushed: the VI broke or disconnected first
	StatusTransport        Status = 0x040 // the connection failed (peer silent, device gone)
	StatusRDMAProtection   Status = 0x080 // the remote end refused the RDMA access
	StatusRemoteDescriptor Status = 0x100 // the remote receive descriptor failed
	StatusErrorMask        Status = 0x1FE
	// StatusRemoteWrite on a completed receive says an RDMA write with
	// immediate data consumed it (VIPL's op code REMOTE_RDMA_WRITE); Length
	// is then the length of the write, and no byte went to the receive's
	// segments.
	StatusRemoteWrite Status = 0x30000
	// StatusImmediate on a completed receive says ImmData is valid.
	StatusImmediate Status = 0x80000
)

// Errors reported by Status.Err, one per VIA error kind. Use errors.Is.
var (
	ErrFormat           = errors.New("descriptor format error")
	ErrProtection       = errors.New("memory protection error")
	ErrLength           = errors.New("length error")
	ErrPartial          = errors.New("partial transfer")
	ErrFlushed          = errors.New("descriptor flushed")
	ErrTransport        = errors.New("transport error")
	ErrRDMAProtection   = errors.New("remote RDMA protection error")
	ErrRemoteDescriptor = errors.New("remote descriptor error")
)

var statusNames = [...]struct {
	bit  Status
	name string
	err  error
}{
	{StatusFormat, "format", ErrFormat},
	{StatusProtection, "protection", ErrProtection},
	{StatusLength, "length", ErrLength},
	{StatusPartial, "partial", ErrPartial},
	{StatusFlushed, "flushed", ErrFlushed},
	{StatusTransport, "transport", ErrTransport},
	{StatusRDMAProtection, "rdma-protection", ErrRDMAProtection},
	{StatusRemoteDescriptor, "remote-descriptor", ErrRemoteDescriptor},
}

// Done reports whether the provider has finished with the descriptor.
func (s Status) Done() bool { return s&StatusDone != 0 }

// Failed reports whether any error bit is set.
func (s Status) Failed() bool { return s&StatusErrorMask != 0 }

// Err returns the error of the lowest error bit set, or nil. It does not
// allocate.
func (s Status) Err() error {
	if s&StatusErrorMask == 0 {
		return nil
	}
	for _, n := range statusNames {
		if s&n.bit != 0 {
			return n.err
		}
	}
	return nil
}

func (s Status) String() string {
	var parts []string
	if s.Done() {
		parts = append(parts, "done")
	}
	for _, n := range statusNames {
		if s&n.bit != 0 {
			parts = append(parts, n.name)
		}
	}
	if s&StatusRemoteWrite == StatusRemoteWrite {
		parts = append(parts, "remote-write")
	}
	if s&StatusImmediate != 0 {
		parts = append(parts, "immediate")
	}
	if len(parts) == 0 {
		return "pending"
	}
	return strings.Join(parts, "|")
}

// Descriptor is one unit of work posted on a VI's send or receive queue.
type Descriptor struct {
	Control  Control
	Segments []Segment
	// Address is the remote memory of an RDMA write or read.
	Address AddressSegment

	// Status, Length and ImmData are written by the provider when the
	// descriptor completes; read them only after a Done or Wait call has
	// returned the descriptor.
	Status Status
	// Length is the number of bytes transferred: the message length on a
	// receive.
	Length int
	// ImmData is the immediate data a receive got (with StatusImmediate).
	ImmData uint32
}

// Reset clears the fields the provider writes, so the descriptor can be
// posted again.
func (d *Descriptor) Reset() {
	d.Status, d.Length, d.ImmData = 0, 0, 0
}

// TotalLength is the sum of the segment lengths.
func (d *Descriptor) TotalLength() int {
	n := 0
	for i := range d.Segments {
		n += len(d.Segments[i].Buf)
	}
	return n
}

// Limits are the bounds a provider puts on descriptors.
type Limits struct {
	MaxSegments int // data segments per descriptor
	MaxTransfer int // bytes per descriptor
}

// CheckFormat reports whether d is well formed for the given queue: a known
// operation, no more segments and bytes than the limits, and on a receive
// queue only OpSend without a fence. It returns nil or an error wrapping
// ErrFormat. It does not allocate on success.
func (d *Descriptor) CheckFormat(l Limits, recv bool) error {
	switch d.Control.Op {
	case OpSend, OpRDMAWrite, OpRDMARead:
	default:
		return fmt.Errorf("%w: unknown operation %d", ErrFormat, d.Control.Op)
	}
	if recv && (d.Control.Op != OpSend || d.Control.Fence) {
		return fmt.Errorf("%w: receive descriptor with %v", ErrFormat, d.Control.Op)
	}
	if len(d.Segments) > l.MaxSegments {
		return fmt.Errorf("%w: %d segments, limit %d", ErrFormat, len(d.Segments), l.MaxSegments)
	}
	if n := d.TotalLength(); n > l.MaxTransfer {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFormat, n, l.MaxTransfer)
	}
	return nil
}
