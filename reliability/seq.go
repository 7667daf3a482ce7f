package reliability

// Seq is a 32-bit frame sequence number compared with serial number
// arithmetic (RFC 1982): a is before b when the signed difference b-a is
// positive, so comparisons stay right across wrap-around as long as the
// numbers compared are less than 2^31 apart.
type Seq uint32

// Less reports whether a comes before b.
func (a Seq) Less(b Seq) bool { return int32(a-b) < 0 }

// LessEq reports whether a comes before b or equals it.
func (a Seq) LessEq(b Seq) bool { return int32(a-b) <= 0 }

// Sub returns the signed distance a-b.
func (a Seq) Sub(b Seq) int { return int(int32(a - b)) }

// Add returns a advanced by n.
func (a Seq) Add(n int) Seq { return a + Seq(uint32(n)) }

// txnLess compares transmission numbers.
func txnLess(a, b uint32) bool { return int32(a-b) < 0 }

// msnLess compares 32-bit message sequence numbers the same way.
func msnLess(a, b uint32) bool { return int32(a-b) < 0 }
