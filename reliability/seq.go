package reliability

import "github.com/ethervia/ethervia/internal/seq"

// Seq is a 32-bit frame sequence number compared with serial number
// arithmetic (RFC 1982): a is before b when the signed difference b-a is
// positive, so comparisons stay right across wrap-around as long as the
// numbers compared are less than 2^31 apart. Transmission and message
// numbers, plain uint32s, compare the same way (package internal/seq).
type Seq uint32

// Less reports whether a comes before b.
func (a Seq) Less(b Seq) bool { return seq.Less(uint32(a), uint32(b)) }

// LessEq reports whether a comes before b or equals it.
func (a Seq) LessEq(b Seq) bool { return seq.LessEq(uint32(a), uint32(b)) }

// Sub returns the signed distance a-b.
func (a Seq) Sub(b Seq) int { return int(seq.Diff(uint32(a), uint32(b))) }

// Add returns a advanced by n.
func (a Seq) Add(n int) Seq { return a + Seq(uint32(n)) }
