package mplite

import "testing"

// TestScratch: a call's buffers are disjoint; memory a call wanted is kept
// for the next (up to maxScratch); beyond what is kept, get allocates.
func TestScratch(t *testing.T) {
	var s scratch
	s.reset()
	a, b := s.get(10), s.get(20)
	if len(a) != 10 || len(b) != 20 {
		t.Fatalf("lengths %d %d", len(a), len(b))
	}
	s.reset() // keeps 30 bytes
	if len(s.buf) != 30 {
		t.Fatalf("kept %d bytes, want 30", len(s.buf))
	}
	a, b = s.get(10), s.clone([]byte("0123456789abcdefghij"))
	if &a[0] != &s.buf[0] || &b[0] != &s.buf[10] || string(b) != "0123456789abcdefghij" {
		t.Fatal("the second call does not reuse the kept memory in order")
	}
	a[9] = 'x'
	if b[0] != '0' || cap(a) != 10 {
		t.Fatal("lent buffers overlap")
	}
	if c := s.get(1); &c[0] == &s.buf[0] {
		t.Fatal("a get past the kept memory reused it")
	}
	s.reset()
	if len(s.buf) != 31 {
		t.Fatalf("kept %d bytes, want 31", len(s.buf))
	}
	s.get(maxScratch + 1)
	s.reset()
	if len(s.buf) != 31 {
		t.Fatalf("kept %d bytes after a call above maxScratch", len(s.buf))
	}
}
