// Package seq compares 32-bit sequence numbers that wrap around (frame
// sequence numbers, message sequence numbers, credit limits) with serial
// number arithmetic (RFC 1982): a is before b when the signed difference
// a-b is negative. The comparisons stay right across wrap-around as long as
// the numbers compared are less than 2^31 apart.
package seq

// Less reports whether a comes before b.
func Less(a, b uint32) bool { return int32(a-b) < 0 }

// LessEq reports whether a comes before b or equals it.
func LessEq(a, b uint32) bool { return int32(a-b) <= 0 }

// Diff returns the signed distance a-b.
func Diff(a, b uint32) int32 { return int32(a - b) }
