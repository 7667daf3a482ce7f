package mplite

import (
	"errors"
	"fmt"
)

// Errors. Test for them with errors.Is; *PeerError and *TruncateError
// carry the details.
var (
	// ErrTruncate: a message was longer than its receive buffer.
	ErrTruncate = errors.New("mplite: message truncated")
	// ErrPeerDead: the peer died, exited without Finalize, or finalized
	// while an operation on it was pending.
	ErrPeerDead = errors.New("mplite: peer dead")
	// ErrRank: a rank outside [0, Size), or AnySource where a rank is needed.
	ErrRank = errors.New("mplite: invalid rank")
	// ErrTag: a tag outside [0, MaxTag], or AnyTag where a tag is needed.
	ErrTag = errors.New("mplite: invalid tag")
	// ErrFinalized: the communicator was finalized.
	ErrFinalized = errors.New("mplite: finalized")
	// ErrEnvironment: Init found no usable bootstrap environment.
	ErrEnvironment = errors.New("mplite: bootstrap environment")
	// ErrTimeout: Finalize gave up waiting for a peer.
	ErrTimeout = errors.New("mplite: timeout")
)

// errPeerFinalized is the cause of a PeerError for a peer that finalized.
var errPeerFinalized = errors.New("finalized")

// PeerError reports an operation that failed because rank Rank is gone.
// errors.Is(err, ErrPeerDead) holds.
type PeerError struct {
	Rank int
	Err  error // the cause, such as the VI layer's peer timeout
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("mplite: rank %d is dead: %v", e.Rank, e.Err)
}

// Is makes errors.Is(err, ErrPeerDead) true.
func (e *PeerError) Is(target error) bool { return target == ErrPeerDead }

func (e *PeerError) Unwrap() error { return e.Err }

// TruncateError reports a message of Length bytes for a receive buffer of
// Capacity bytes; the first Capacity bytes were delivered. errors.Is(err,
// ErrTruncate) holds.
type TruncateError struct {
	Source, Tag      int
	Length, Capacity int
}

func (e *TruncateError) Error() string {
	return fmt.Sprintf("mplite: message of %d bytes from rank %d tag %d truncated to the %d-byte receive buffer",
		e.Length, e.Source, e.Tag, e.Capacity)
}

// Is makes errors.Is(err, ErrTruncate) true.
func (e *TruncateError) Is(target error) bool { return target == ErrTruncate }
