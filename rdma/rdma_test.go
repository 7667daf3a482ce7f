package rdma

import (
	"errors"
	"math"
	"testing"
)

func TestRegisterHandlesUniqueNonZero(t *testing.T) {
	tb := NewTable(Limits{})
	seen := map[Handle]bool{}
	for i := 0; i < 10000; i++ {
		r, err := tb.Register(make([]byte, 8), 1, RemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		if r.Handle() == 0 || seen[r.Handle()] {
			t.Fatalf("handle %#x zero or reused", r.Handle())
		}
		seen[r.Handle()] = true
	}
}

func TestLimits(t *testing.T) {
	tb := NewTable(Limits{MaxRegions: 2, MaxBytes: 100})
	a, err := tb.Register(make([]byte, 60), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Register(make([]byte, 41), 1, 0); !errors.Is(err, ErrLimit) {
		t.Fatalf("byte limit: %v", err)
	}
	if _, err := tb.Register(make([]byte, 40), 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Register(make([]byte, 1), 1, 0); !errors.Is(err, ErrLimit) {
		t.Fatalf("region limit: %v", err)
	}
	if err := tb.Deregister(a); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Register(make([]byte, 60), 1, 0); err != nil {
		t.Fatalf("after deregister: %v", err)
	}
	if _, err := tb.Register(nil, 1, 0); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty: %v", err)
	}
}

func TestDeregisterInUse(t *testing.T) {
	tb := NewTable(Limits{})
	r, _ := tb.Register(make([]byte, 8), 1, RemoteWrite)
	if err := r.Acquire(); err != nil {
		t.Fatal(err)
	}
	if err := tb.Deregister(r); !errors.Is(err, ErrInUse) {
		t.Fatalf("deregister in use: %v", err)
	}
	r.Release()
	if err := tb.Deregister(r); err != nil {
		t.Fatal(err)
	}
	if err := r.Acquire(); !errors.Is(err, ErrNoRegion) {
		t.Fatalf("acquire after deregister: %v", err)
	}
	if err := tb.Deregister(r); !errors.Is(err, ErrNoRegion) {
		t.Fatalf("double deregister: %v", err)
	}
}

func TestRemoteChecks(t *testing.T) {
	tb := NewTable(Limits{})
	buf := make([]byte, 100)
	w, _ := tb.Register(buf, 7, RemoteWrite)
	ro, _ := tb.Register(make([]byte, 100), 7, RemoteRead)
	data := []byte{1, 2, 3, 4}
	cases := []struct {
		name string
		h    Handle
		tag  PTag
		off  uint64
		n    int
		want error
	}{
		{"ok", w.Handle(), 7, 96, 4, nil},
		{"no region", w.Handle() ^ ro.Handle() ^ 0x5a5a, 7, 0, 4, ErrNoRegion},
		{"ptag", w.Handle(), 8, 0, 4, ErrPTag},
		{"access", ro.Handle(), 7, 0, 4, ErrAccess},
		{"end", w.Handle(), 7, 97, 4, ErrBounds},
		{"offset", w.Handle(), 7, 101, 0, ErrBounds},
		{"overflow", w.Handle(), 7, math.MaxUint64 - 1, 4, ErrBounds},
	}
	for _, c := range cases {
		for i := range buf {
			buf[i] = 0
		}
		err := tb.CopyIn(c.h, c.tag, 1, c.off, data[:c.n])
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
		if c.want != nil {
			if !errors.Is(err, ErrProtection) {
				t.Errorf("%s: %v is not a protection error", c.name, err)
			}
			for i, b := range buf {
				if b != 0 {
					t.Fatalf("%s: refused write changed byte %d", c.name, i)
				}
			}
		}
	}
	if err := tb.CopyIn(w.Handle(), 7, 1, 10, data); err != nil || string(buf[10:14]) != string(data) {
		t.Fatalf("good write: %v %v", err, buf[10:14])
	}
	out := make([]byte, 4)
	if err := tb.CopyOut(w.Handle(), 7, 10, out); !errors.Is(err, ErrAccess) {
		t.Fatalf("read from write-only region: %v", err)
	}
	s := tb.Stats()
	if s.NoRegion != 1 || s.PTagMismatch != 1 || s.AccessDenied != 2 || s.OutOfBounds != 3 {
		t.Fatalf("refusal counters %+v", s)
	}
}

func TestCopyOutAfterDeregisterRefused(t *testing.T) {
	tb := NewTable(Limits{})
	r, _ := tb.Register([]byte("secret"), 1, RemoteRead)
	out := make([]byte, 6)
	if err := tb.CopyOut(r.Handle(), 1, 0, out); err != nil || string(out) != "secret" {
		t.Fatalf("read: %v %q", err, out)
	}
	tb.Deregister(r)
	if err := tb.CopyOut(r.Handle(), 1, 0, make([]byte, 6)); !errors.Is(err, ErrNoRegion) {
		t.Fatalf("read after deregister: %v", err)
	}
}

func TestRemoteAccessAllocatesNothing(t *testing.T) {
	tb := NewTable(Limits{})
	r, _ := tb.Register(make([]byte, 4096), 1, RemoteWrite|RemoteRead)
	data := make([]byte, 1024)
	if a := testing.AllocsPerRun(100, func() {
		tb.CopyIn(r.Handle(), 1, 1, 100, data)
		tb.CopyOut(r.Handle(), 1, 100, data)
	}); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}

func TestContains(t *testing.T) {
	tb := NewTable(Limits{})
	buf := make([]byte, 100)
	r, _ := tb.Register(buf[10:50], 1, 0)
	if !r.Contains(buf[10:50]) || !r.Contains(buf[20:30]) {
		t.Fatal("inner slice not contained")
	}
	if r.Contains(buf[5:20]) || r.Contains(buf[40:60]) || r.Contains(make([]byte, 4)) {
		t.Fatal("outer slice contained")
	}
}

func FuzzCopyIn(f *testing.F) {
	f.Add(uint32(0), uint32(1), uint64(0), 4, true)
	f.Add(uint32(0), uint32(1), uint64(1<<63), 4, false)
	f.Fuzz(func(t *testing.T, h uint32, tag uint32, off uint64, n int, useReal bool) {
		tb := NewTable(Limits{})
		buf := make([]byte, 64)
		r, _ := tb.Register(buf, 1, RemoteWrite)
		if useReal {
			h = uint32(r.Handle())
		}
		if n < 0 || n > 128 {
			n = 8
		}
		data := make([]byte, n)
		for i := range data {
			data[i] = 0xff
		}
		err := tb.CopyIn(Handle(h), PTag(tag), 1, off, data)
		allowed := Handle(h) == r.Handle() && tag == 1 && off <= 64 && uint64(n) <= 64-off
		if (err == nil) != allowed {
			t.Fatalf("h=%#x tag=%d off=%d n=%d: err=%v allowed=%v", h, tag, off, n, err, allowed)
		}
		if err != nil {
			for _, b := range buf {
				if b != 0 {
					t.Fatal("refused write changed the region")
				}
			}
		}
	})
}
