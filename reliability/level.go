package reliability

import "fmt"

// Level is a VIA reliability level. The values are VIPL's bits, so a set of
// levels is their OR.
type Level uint8

// Reliability levels.
const (
	// Unreliable delivery: corrupt and duplicate frames are dropped, nothing
	// lost is repaired, messages may be lost and a lost fragment loses its
	// message. A send completes when its frames are handed to the device.
	Unreliable Level = 1
	// ReliableDelivery: every message arrives exactly once and in order;
	// losses are repaired by retransmission. A send completes once its
	// frames are handed to the device (held for retransmission by the
	// provider). Any error breaks the connection.
	ReliableDelivery Level = 2
	// ReliableReception: as ReliableDelivery, and a send completes only when
	// the remote end has placed its data. After an error, the failing
	// descriptor reports it and no later one is delivered.
	ReliableReception Level = 4
)

// Reliable reports whether l repairs loss.
func (l Level) Reliable() bool { return l == ReliableDelivery || l == ReliableReception }

// Valid reports whether l is exactly one level.
func (l Level) Valid() bool { return l == Unreliable || l.Reliable() }

func (l Level) String() string {
	switch l {
	case Unreliable:
		return "unreliable"
	case ReliableDelivery:
		return "reliable-delivery"
	case ReliableReception:
		return "reliable-reception"
	}
	return fmt.Sprintf("level(%d)", uint8(l))
}
