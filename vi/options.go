package vi

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/reliability"
)

// Level is a VIA reliability level.
type Level = reliability.Level

// Reliability levels (VIPL's bit values; a provider reports the OR of the
// levels it supports).
const (
	Unreliable        = reliability.Unreliable
	ReliableDelivery  = reliability.ReliableDelivery
	ReliableReception = reliability.ReliableReception
)

// Defaults of Options.
const (
	DefaultMaxTransfer = 1 << 20
	DefaultQueueDepth  = 1024
	DefaultMaxSegments = 64
	DefaultMaxVIs      = 1024
	DefaultSpinTime    = 30 * time.Microsecond
	DefaultPeerTimeout = 5 * time.Second
	DefaultWindow      = 256
	DefaultPollGrace   = 200 * time.Microsecond
	// DefaultAckReqDelay is how long the acknowledgement a ReliableReception
	// send asks for waits for a frame to ride on unless Options set it:
	// long enough for a polling peer's reply, short against a send's
	// transfer time.
	DefaultAckReqDelay = 20 * time.Microsecond
	// MaxMaxTransfer is the largest MaxTransfer a provider accepts.
	MaxMaxTransfer = 1 << 26
	// maxReads bounds the RDMA reads outstanding per connection, each way.
	maxReads = 16
)

// Options configure a Provider. The zero value (with the job's EtherType and
// key) gives the defaults.
type Options struct {
	// Config is the EtherType and job key the device was opened with; its
	// BatchSize, when set, overrides the device's batch size.
	nic.Config
	// MaxTransfer is the largest descriptor in bytes (default 1 MiB).
	MaxTransfer int
	// QueueDepth is the most descriptors per work queue (default 1024).
	QueueDepth int
	// MaxSegments is the most data segments per descriptor (default 64).
	MaxSegments int
	// MaxVIs bounds the VIs of the provider (default 1024, at most 65535),
	// and with them the connection requests that may wait for ConnectWait
	// (never fewer than 64).
	MaxVIs int
	// SpinTime is how long Wait polls before it blocks (default 30µs;
	// negative: never spin).
	SpinTime time.Duration
	// PeerTimeout moves a VI to the error state when its peer has been
	// silent this long (default 5s). Keepalives keep idle connections up.
	PeerTimeout time.Duration
	// Window is the send and receive window per connection in frames
	// (default 256, rounded up to a power of two).
	Window int
	// Retransmission and acknowledgement timing; zero takes the defaults of
	// reliability.Config.
	RTOInit, RTOMin, RTOMax, AckDelay time.Duration
	// AckReqDelay is how long this end may hold back the acknowledgement a
	// ReliableReception send asks for, so that a reply carries it instead of
	// a frame of its own (reliability.Config.AckReqDelay). Zero takes
	// DefaultAckReqDelay; negative: acknowledge at once. RDMA writes are
	// acknowledged at once. It delays the peer's send completion by as much
	// when no reply comes.
	AckReqDelay time.Duration
	// ConnectRetry is the first interval between repeated connection
	// requests; it doubles up to 200ms (default 5ms).
	ConnectRetry time.Duration
	// MaxBlock caps one blocking wait on the device, which bounds how late a
	// timer runs when nobody polls (default 2ms).
	MaxBlock time.Duration
	// PollGrace is how long after a caller's last poll the provider's
	// background goroutine leaves the timers to the callers, and how often
	// at most it looks while they poll (default 200us). A timer runs up to
	// this late once the callers stop polling. Raise it where every
	// goroutine wake-up takes a CPU from a rank that needs it (more ranks
	// than CPUs); mplite does under WithProcessYield.
	PollGrace time.Duration
	// BackgroundNaps keeps the background goroutine out of the device:
	// when no caller polls it naps PollGrace and polls, instead of
	// sleeping in the device. Set it where many processes share each CPU:
	// a sleep in the device is a blocking system call, and each one keeps
	// the Go runtime's sysmon thread polling every 20µs for a while (see
	// nic.ThreadWaiter). Frames then wait up to PollGrace for a provider
	// nobody polls.
	BackgroundNaps bool
	// MaxRegions and MaxRegisteredBytes bound the memory registered on the
	// provider (zero: no bound); RegisterMemory fails with an error
	// matching rdma.ErrLimit beyond them.
	MaxRegions         int
	MaxRegisteredBytes int64
}

func (o Options) withDefaults() (Options, error) {
	if o.MaxTransfer == 0 {
		o.MaxTransfer = DefaultMaxTransfer
	}
	if o.MaxTransfer < 0 || o.MaxTransfer > MaxMaxTransfer {
		return o, fmt.Errorf("vi: MaxTransfer %d outside [0, %d]", o.MaxTransfer, MaxMaxTransfer)
	}
	if o.QueueDepth <= 0 {
		o.QueueDepth = DefaultQueueDepth
	}
	if o.MaxSegments <= 0 {
		o.MaxSegments = DefaultMaxSegments
	}
	if o.MaxVIs <= 0 {
		o.MaxVIs = DefaultMaxVIs
	}
	if o.MaxVIs > 65535 {
		return o, fmt.Errorf("vi: MaxVIs %d above 65535", o.MaxVIs)
	}
	if o.SpinTime == 0 {
		o.SpinTime = DefaultSpinTime
	}
	if o.PeerTimeout <= 0 {
		o.PeerTimeout = DefaultPeerTimeout
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.ConnectRetry <= 0 {
		o.ConnectRetry = 5 * time.Millisecond
	}
	if o.MaxBlock <= 0 {
		o.MaxBlock = 2 * time.Millisecond
	}
	if o.PollGrace <= 0 {
		o.PollGrace = DefaultPollGrace
	}
	// Negative stays negative, so that options with their defaults filled
	// in keep their meaning: reliability.Config takes it as at once.
	if o.AckReqDelay == 0 {
		o.AckReqDelay = DefaultAckReqDelay
	}
	if o.MaxRegions < 0 || o.MaxRegisteredBytes < 0 {
		return o, fmt.Errorf("vi: negative registration limit (%d regions, %d bytes)", o.MaxRegions, o.MaxRegisteredBytes)
	}
	if o.EtherType == 0 {
		o.EtherType = nic.DefaultEtherType
	}
	return o, nil
}

// ProviderAttributes describe an opened provider (VipQueryNic).
type ProviderAttributes struct {
	HardwareAddr net.HardwareAddr
	MTU          int // the device's MTU
	MaxPayload   int // payload bytes per frame: the most a send's frame carries
	MaxTransfer  int // bytes per descriptor
	QueueDepth   int // descriptors per work queue
	MaxSegments  int // data segments per descriptor
	MaxVIs       int
	// Reliability is the OR of the supported levels.
	Reliability Level
	RDMAWrite   bool
	RDMARead    bool
	// MaxRegions and MaxRegisteredBytes are the registration limits (zero:
	// none).
	MaxRegions         int
	MaxRegisteredBytes int64
}

// Attributes are a VI's attributes (VipCreateVi).
type Attributes struct {
	Reliability Level
	// MaxTransfer bounds this VI's descriptors; zero means the provider's.
	MaxTransfer int
	// PTag is the protection tag: the VI may only use memory registered
	// under the same tag.
	PTag PTag
	// EnableRDMAWrite and EnableRDMARead let the peer write and read memory
	// registered under PTag with the matching access.
	EnableRDMAWrite, EnableRDMARead bool
	// SendCQ and RecvCQ, when set, receive a completion for every
	// descriptor that completes on the queue.
	SendCQ, RecvCQ *CQ
	// QueueDepth bounds each work queue; zero means the provider's.
	QueueDepth int
	// AckDelay, AckReqDelay and RTOMin, where not zero, replace the
	// provider's (Options) for this VI's connection: a VI that carries
	// short messages can hold its acknowledgements for the next one
	// longer than its neighbours on the same NIC that carry bulk.
	// Negative AckReqDelay: acknowledge at once.
	AckDelay, AckReqDelay, RTOMin time.Duration
}

// RemoteAttributes are what a connecting peer asked for.
type RemoteAttributes struct {
	Reliability                     Level
	MaxTransfer                     int
	EnableRDMAWrite, EnableRDMARead bool
}

// Address names a VI endpoint on the network: the host's MAC address, the
// endpoint on that NIC (0 unless several providers share it, see
// nic.Config.Endpoint) and a discriminator chosen by the consumers (like a
// port number).
type Address struct {
	MAC           net.HardwareAddr
	Endpoint      uint16
	Discriminator uint64
}

func (a Address) String() string {
	if a.Endpoint != 0 {
		return fmt.Sprintf("%v.%d/%d", a.MAC, a.Endpoint, a.Discriminator)
	}
	return fmt.Sprintf("%v/%d", a.MAC, a.Discriminator)
}

// State is a VI's connection state.
type State uint8

// VI states.
const (
	Idle      State = iota // not connected
	Pending                // a connection request is under way
	Connected              // data may flow
	Error                  // the connection broke; Disconnect returns to Idle
	closedVI               // destroyed
)

func (s State) String() string {
	switch s {
	case Idle:
		return "idle"
	case Pending:
		return "pending"
	case Connected:
		return "connected"
	case Error:
		return "error"
	case closedVI:
		return "closed"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Errors.
var (
	// ErrClosed is returned after Provider.Close or VI.Close.
	ErrClosed = errors.New("vi: closed")
	// ErrState means the VI is in the wrong state for the call.
	ErrState = errors.New("vi: wrong state")
	// ErrRejected means the peer rejected the connection.
	ErrRejected = errors.New("vi: connection rejected")
	// ErrAttributes means the two ends' attributes do not match.
	ErrAttributes = errors.New("vi: attributes do not match")
	// ErrBroken means the connection broke; errors.Is also matches the
	// cause, such as reliability.ErrPeerTimeout.
	ErrBroken = errors.New("connection broken")
	// ErrCQ means a completion queue problem: too small or still in use.
	ErrCQ = errors.New("vi: completion queue")
)
