package bonding

import "testing"

// TestQueriesBounded: a connected peer that sends handle queries and
// never lets us answer cannot grow the control queue past its bound; the
// rest are refused and counted.
func TestQueriesBounded(t *testing.T) {
	v := &VI{state: Connected}
	v.ctl.init(8)
	for i := range 3 * maxControlQueue {
		v.onMessage(&header{kind: kindQuery, aux: uint32(i)}, nil)
	}
	if v.ctl.n != maxControlQueue {
		t.Fatalf("%d replies queued, want the bound %d", v.ctl.n, maxControlQueue)
	}
	if v.stats.Refused != 2*maxControlQueue {
		t.Fatalf("Refused %d, want %d", v.stats.Refused, 2*maxControlQueue)
	}
}
