package netpipe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/ethervia/ethervia/nic"
)

// Conn is one end of a benchmark connection. It moves whole messages in
// order, and a message is received into a buffer of exactly its length, as
// NetPIPE's modules do. A Conn is used by one goroutine at a time; Close may
// be called from anywhere and makes blocked calls return.
type Conn interface {
	// Send transmits msg as one message. msg may be reused on return.
	Send(ctx context.Context, msg []byte) error
	// Recv receives the next message, which must be len(msg) bytes long.
	Recv(ctx context.Context, msg []byte) error
	// Exchange sends out and receives in at the same time, for
	// bidirectional runs where both ends transmit at once.
	Exchange(ctx context.Context, out, in []byte) error
	// Close releases the connection (not the devices it was given).
	Close() error
}

// ErrLost reports an operation that failed because frames were lost. A
// Conn that also implements Resyncer can go on after it.
var ErrLost = errors.New("frames were lost")

// Resyncer is a Conn that can recover from lost frames. After an operation
// failed with an error wrapping ErrLost on either end, both ends call
// Resync, which returns once the two ends agree to drop every message in
// flight; then the ends carry on with new messages.
type Resyncer interface {
	Resync(ctx context.Context) error
}

// Role says which end of a run an endpoint is.
type Role int

// The two ends of a run. The transmitter drives the schedule and reports
// results; the receiver follows.
const (
	Transmitter Role = iota
	Receiver
)

func (r Role) String() string {
	if r == Receiver {
		return "receiver"
	}
	return "transmitter"
}

// Endpoint is what a module needs to build one end of a connection. Connect
// is called on the goroutine (and so in the network namespace) where the
// end's sockets must live.
type Endpoint struct {
	Role Role
	// Devices are the end's NICs, one per link, for frame modules. The
	// caller owns and closes them.
	Devices []nic.Device
	// PeerMACs are the other end's addresses, one per link. A receiver may
	// leave them empty and learn them from the transmitter's hello.
	PeerMACs []net.HardwareAddr
	// Endpoint and PeerEndpoint are the two ends' endpoints on their NICs
	// (nic.Config.Endpoint): different when both ends share one NIC
	// (-same-host), where the devices are opened shared. The mplite module
	// alone takes them.
	Endpoint, PeerEndpoint uint16
	// Announce makes a transmitter that has PeerMACs also take part in
	// the module's discovery, for a receiver that learns its peer that way
	// (the mplite module in two-machine mode).
	Announce bool
	// Filter holds the EtherType and job key to put in every frame.
	Filter nic.Filter
	// Addr is the TCP address: where the receiver listens, or what the
	// transmitter dials.
	Addr string
	// Listener, if set, is an open listener the receiver accepts on instead
	// of listening on Addr.
	Listener net.Listener
	// Spin is how long a frame module polls before it blocks; negative
	// means never spin.
	Spin time.Duration
	// Yield makes a spinning end call runtime.Gosched: set it when both ends
	// share this process's Ps (-mem), where a spinner would starve the peer
	// it just woke. Never set it for ends on locked OS threads (-local):
	// there a yield parks the thread, and waking it costs about 30 µs.
	Yield bool
	// Bond makes the vi module use the bonding layer even over one link,
	// to tell what the bond itself costs from what more links cost.
	Bond bool
	// Window is the number of frames a raw sender may have in flight before
	// the receiver returns credit; zero picks a default from the MTU.
	Window int
	// Timeout bounds how long a message may make no progress before the
	// operation fails (frames lost, peer gone). Zero means 5 s.
	Timeout time.Duration
	// Integrity makes a frame module report malformed frames as integrity
	// failures instead of dropping them.
	Integrity bool
}

// Module builds one end of a benchmark connection of one kind.
type Module interface {
	// Name is the -module value.
	Name() string
	// Frames reports whether the module runs on Endpoint.Devices (true) or
	// on kernel sockets (false).
	Frames() bool
	// Connect builds the end and completes the handshake with the peer.
	Connect(ctx context.Context, ep Endpoint) (Conn, error)
}

// ErrNotBuilt reports a module whose layer does not exist yet.
var ErrNotBuilt = errors.New("not built yet")

// Modules maps -module names to modules. A nil entry names a module whose
// layer is not built yet.
type Modules map[string]Module

// Lookup returns the module called name, an error wrapping ErrNotBuilt for
// a known module that is not built yet, or an error listing the choices.
func (m Modules) Lookup(name string) (Module, error) {
	mod, ok := m[name]
	if !ok {
		return nil, fmt.Errorf("unknown module %q (have %v)", name, m.Names())
	}
	if mod == nil {
		return nil, fmt.Errorf("module %s is %w", name, ErrNotBuilt)
	}
	return mod, nil
}

// Names lists every module name, built or not, sorted.
func (m Modules) Names() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// DefaultModules returns the modules this library provides (raw, tcp, vi,
// rdma and mplite). Callers add modules from other packages to the
// returned map.
func DefaultModules() Modules {
	return Modules{
		"raw":    RawModule{},
		"tcp":    TCPModule{},
		"vi":     VIModule{},
		"rdma":   RDMAModule{},
		"mplite": MPLiteModule{},
	}
}
