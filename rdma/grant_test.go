package rdma

import (
	"errors"
	"testing"
)

// TestGrantedWrite: a GrantedWrite region takes remote writes only from
// the writer it is granted to, only between Grant and Revoke; grants
// nest; every refusal is counted as an access denial and reported as
// ErrNotGranted.
func TestGrantedWrite(t *testing.T) {
	tb := NewTable(Limits{})
	buf := make([]byte, 64)
	r, err := tb.Register(buf, 7, GrantedWrite)
	if err != nil {
		t.Fatal(err)
	}
	h := r.Handle()
	const peer, other Grantee = 3, 4
	write := func(who Grantee) error { return tb.CopyInAt(h, 7, who, 0, 8, 0, []byte{1, 2, 3, 4, 5, 6, 7, 8}) }
	if err := write(peer); !errors.Is(err, ErrNotGranted) || !errors.Is(err, ErrProtection) {
		t.Fatalf("write before any grant: %v, want ErrNotGranted", err)
	}
	r.Grant(peer)
	r.Grant(peer)
	if err := write(other); !errors.Is(err, ErrNotGranted) {
		t.Fatalf("a write by another writer during the grant: %v, want ErrNotGranted", err)
	}
	if err := write(peer); err != nil || buf[7] != 8 {
		t.Fatalf("write under a grant: %v", err)
	}
	r.Revoke(other) // not granted: nothing changes
	r.Revoke(peer)
	if err := tb.Fill(h, 7, peer, 0, 4, func(dst []byte) error { copy(dst, "abcd"); return nil }); err != nil {
		t.Fatalf("write under the second grant: %v", err)
	}
	r.Revoke(peer)
	if r.Granted() || r.GrantedTo(peer) {
		t.Fatal("granted after every grant was revoked")
	}
	if err := write(peer); !errors.Is(err, ErrNotGranted) {
		t.Fatalf("write after the last revoke: %v, want ErrNotGranted", err)
	}
	if err := write(AnyWriter); !errors.Is(err, ErrNotGranted) {
		t.Fatalf("a write by AnyWriter: %v, want ErrNotGranted", err)
	}
	if err := tb.CopyOut(h, 7, 0, make([]byte, 4)); !errors.Is(err, ErrAccess) || errors.Is(err, ErrNotGranted) {
		t.Fatalf("a read of a write-only region: %v, want ErrAccess", err)
	}
	if s := tb.Stats(); s.AccessDenied != 5 {
		t.Fatalf("AccessDenied %d, want 5", s.AccessDenied)
	}
	if got := GrantedWrite.String(); got != "granted-write" {
		t.Fatalf("String %q", got)
	}
}
