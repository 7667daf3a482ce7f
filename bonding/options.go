package bonding

import (
	"fmt"
	"time"

	"github.com/ethervia/ethervia/vi"
)

// Defaults of Options.
const (
	DefaultStripeThreshold = 2 << 10
	DefaultBlockSize       = 32 << 10
	DefaultRDMAPiece       = 256 << 10
	DefaultRailSlots       = 32
	DefaultReconnectMin    = 10 * time.Millisecond
	DefaultReconnectMax    = time.Second
	// DefaultAckReqDelay is how long a rail holds back the acknowledgement
	// a message asks for so that a message back can carry it, unless
	// Options set AckReqDelay (as vi.Options.AckReqDelay: zero takes the
	// default; negative: acknowledge at once). It is ten times vi's: rails
	// run reliable reception, so every message asks, and in a collective
	// the next message to the same peer comes 100-200 µs later, not 20: with
	// vi's 20 µs an 8-rank Allreduce sent a frame of its own for a third of
	// its messages. What waits the longer is only the bond's send
	// completion, when nothing comes back.
	DefaultAckReqDelay = 10 * vi.DefaultAckReqDelay
	// DefaultMaxBlock is the rail providers' MaxBlock unless Options set
	// one (vi's default is 2 ms). A rail provider's background goroutine
	// wakes every MaxBlock while the bond's waiters poll the rail, only to
	// find that they ran its timers; each wake-up is a thread that takes a
	// CPU, or a spinning waiter's P in its next system call, for 0.1–1 ms
	// on a busy machine. With k rails there are k such goroutines per
	// bond.
	DefaultMaxBlock = 10 * time.Millisecond
)

// Options configure a Bond: the options of every rail's vi.Provider and
// the bonding parameters.
type Options struct {
	// Options are given to every rail's provider. MaxTransfer also bounds
	// the bond's descriptors, QueueDepth its work queues and PeerTimeout
	// how soon a silent rail is declared dead.
	vi.Options
	// StripeThreshold: eager messages shorter than this go on one rail as
	// one block (default 2 KiB, as in MP_Lite).
	StripeThreshold int
	// BlockSize is the largest eager block (default 32 KiB).
	BlockSize int
	// RDMAPiece is the largest rail RDMA write an RDMA segment is cut into
	// (default 256 KiB); a rail's pieces last about 2 ms at its measured
	// rate, down to 32 KiB. Pieces are the unit of re-sending after a
	// rail failure.
	RDMAPiece int
	// RailSlots is the number of rail descriptors a bonded VI keeps in
	// flight per rail, and of receive buffers it posts per rail (default 32).
	RailSlots int
	// ReconnectMin and ReconnectMax bound the backoff between attempts to
	// reconnect a failed rail (defaults 10ms and 1s).
	ReconnectMin, ReconnectMax time.Duration
	// Yield makes a spinning wait yield the processor between polls
	// (runtime.Gosched), as mplite.WithYield does for a communicator and
	// netpipe's Endpoint.Yield for a benchmark end. Set it when the peer
	// or the goroutines that complete the user's work share the process's
	// Ps (two ends in one process on few CPUs). Leave it unset (the
	// default) when the waits run on goroutines locked to their OS threads
	// (runtime.LockOSThread, cgo callers): there a yield hands the thread's
	// P to another thread and takes it back, two futex wake-ups per poll.
	Yield bool
}

func (o Options) withDefaults(k int) (Options, error) {
	if k < 1 || k > maxRails {
		return o, fmt.Errorf("bonding: %d rails, want 1 to %d", k, maxRails)
	}
	if o.MaxTransfer == 0 {
		o.MaxTransfer = vi.DefaultMaxTransfer
	}
	if o.QueueDepth <= 0 {
		o.QueueDepth = vi.DefaultQueueDepth
	}
	if o.MaxSegments <= 0 {
		o.MaxSegments = vi.DefaultMaxSegments
	}
	if o.MaxSegments < 2 {
		return o, fmt.Errorf("bonding: MaxSegments %d: a block needs a header segment", o.MaxSegments)
	}
	if o.SpinTime == 0 {
		o.SpinTime = vi.DefaultSpinTime
	}
	if o.PeerTimeout <= 0 {
		o.PeerTimeout = vi.DefaultPeerTimeout
	}
	if o.MaxBlock <= 0 {
		o.MaxBlock = DefaultMaxBlock
	}
	// As vi does: negative stays negative (at once), so that Bond.Options
	// opens an equal bond.
	if o.AckReqDelay == 0 {
		o.AckReqDelay = DefaultAckReqDelay
	}
	if o.StripeThreshold <= 0 {
		o.StripeThreshold = DefaultStripeThreshold
	}
	if o.BlockSize <= 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.BlockSize < o.StripeThreshold {
		o.BlockSize = o.StripeThreshold
	}
	if o.RDMAPiece <= 0 {
		o.RDMAPiece = DefaultRDMAPiece
	}
	if o.RailSlots <= 0 {
		o.RailSlots = DefaultRailSlots
	}
	if o.ReconnectMin <= 0 {
		o.ReconnectMin = DefaultReconnectMin
	}
	if o.ReconnectMax < o.ReconnectMin {
		o.ReconnectMax = max(DefaultReconnectMax, o.ReconnectMin)
	}
	return o, nil
}
