package rdma

import (
	"errors"
	"testing"
)

// TestGrantedWrite: a GrantedWrite region takes remote writes only between
// Grant and Revoke, grants nest, and every refusal is counted as an access
// denial and reported as ErrNotGranted.
func TestGrantedWrite(t *testing.T) {
	tb := NewTable(Limits{})
	buf := make([]byte, 64)
	r, err := tb.Register(buf, 7, GrantedWrite)
	if err != nil {
		t.Fatal(err)
	}
	h := r.Handle()
	write := func() error { return tb.CopyInAt(h, 7, 0, 8, 0, []byte{1, 2, 3, 4, 5, 6, 7, 8}) }
	if err := write(); !errors.Is(err, ErrNotGranted) || !errors.Is(err, ErrProtection) {
		t.Fatalf("write before any grant: %v, want ErrNotGranted", err)
	}
	r.Grant()
	r.Grant()
	if err := write(); err != nil || buf[7] != 8 {
		t.Fatalf("write under a grant: %v", err)
	}
	r.Revoke()
	if err := tb.Fill(h, 7, 0, 4, func(dst []byte) error { copy(dst, "abcd"); return nil }); err != nil {
		t.Fatalf("write under the second grant: %v", err)
	}
	r.Revoke()
	if r.Granted() {
		t.Fatal("granted after every grant was revoked")
	}
	if err := write(); !errors.Is(err, ErrNotGranted) {
		t.Fatalf("write after the last revoke: %v, want ErrNotGranted", err)
	}
	if err := tb.CopyOut(h, 7, 0, make([]byte, 4)); !errors.Is(err, ErrAccess) || errors.Is(err, ErrNotGranted) {
		t.Fatalf("a read of a write-only region: %v, want ErrAccess", err)
	}
	if s := tb.Stats(); s.AccessDenied != 3 {
		t.Fatalf("AccessDenied %d, want 3", s.AccessDenied)
	}
	if got := GrantedWrite.String(); got != "granted-write" {
		t.Fatalf("String %q", got)
	}
}
