package shm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func newInbox(t *testing.T, cfg Config) *Inbox {
	t.Helper()
	in, err := Create(filepath.Join(t.TempDir(), "inbox"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in
}

func attach(t *testing.T, in *Inbox, id uint32) *Outbox {
	t.Helper()
	o, err := Attach(in.Path(), id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func ringOwnedBy(t *testing.T, in *Inbox, id uint32) *Ring {
	t.Helper()
	for i := range in.Rings() {
		if r := &in.Rings()[i]; r.Owner() == id {
			return r
		}
	}
	t.Fatalf("no ring owned by %d", id)
	return nil
}

func TestSendsInOrder(t *testing.T) {
	in := newInbox(t, Config{Rings: 2, Slots: 4, SlotData: 100})
	o := attach(t, in, 7)
	r := ringOwnedBy(t, in, 7)
	if in.Pending() {
		t.Fatal("pending before any commit")
	}
	for round := range 3 {
		for i := range 4 {
			b, ok := o.Reserve()
			if !ok {
				t.Fatalf("round %d: ring full after %d", round, i)
			}
			n := copy(b, []byte{byte(round), byte(i), 9})
			if seq := o.Commit(&Entry{Kind: Send, Immediate: true, ImmData: uint32(i), Length: n}); seq != uint64(round*4+i) {
				t.Fatalf("sequence %d, want %d", seq, round*4+i)
			}
		}
		if _, ok := o.Reserve(); ok {
			t.Fatal("reserved a fifth slot of four")
		}
		if !in.Pending() {
			t.Fatal("nothing pending after four commits")
		}
		for i := range 4 {
			e, ok, err := r.Peek()
			if err != nil || !ok {
				t.Fatalf("peek %d: %v %v", i, ok, err)
			}
			if e.Kind != Send || e.ImmData != uint32(i) || !bytes.Equal(e.Data, []byte{byte(round), byte(i), 9}) {
				t.Fatalf("entry %d: %+v", i, e)
			}
			r.Release()
		}
		if _, ok, _ := r.Peek(); ok || in.Pending() {
			t.Fatal("entry after the last")
		}
		if got := o.Consumed(); got != uint64(4*(round+1)) {
			t.Fatalf("consumed %d", got)
		}
	}
}

func TestRemoteWrite(t *testing.T) {
	in := newInbox(t, Config{Rings: 1, Slots: 2, SlotData: 64})
	o := attach(t, in, 1)
	if !o.Reads() || !ringOwnedBy(t, in, 1).OwnerReads() {
		t.Skip("this process cannot read itself by process_vm_readv")
	}
	src := bytes.Repeat([]byte("ethervia"), 1<<17)
	if _, ok := o.Reserve(); !ok {
		t.Fatal("full")
	}
	o.Commit(&Entry{Kind: WriteRemote, RKey: 5, Offset: 3, Length: len(src), Source: Address(src)})
	e, ok, err := ringOwnedBy(t, in, 1).Peek()
	if err != nil || !ok || e.Kind != WriteRemote || e.Length != len(src) || e.RKey != 5 || e.Offset != 3 {
		t.Fatalf("%+v %v %v", e, ok, err)
	}
	dst := make([]byte, e.Length)
	if err := ReadRemote(os.Getpid(), e.Source, dst); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("remote read differs")
	}
}

func TestWakeOnlyWhenSleeping(t *testing.T) {
	in := newInbox(t, Config{Rings: 1, Slots: 2, SlotData: 8})
	o := attach(t, in, 3)
	woke := make(chan error, 1)
	go func() { woke <- in.AwaitWake() }()
	o.Reserve()
	o.Commit(&Entry{Kind: Send, Immediate: true})
	select {
	case <-woke:
		t.Fatal("woken while awake")
	case <-time.After(50 * time.Millisecond):
	}
	in.Sleeping(true)
	ringOwnedBy(t, in, 3).Peek()
	ringOwnedBy(t, in, 3).Release()
	o.Reserve()
	o.Commit(&Entry{Kind: Send, Immediate: true})
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a sleeping inbox was not woken")
	}
}

func TestFullInboxAndNames(t *testing.T) {
	in := newInbox(t, Config{Rings: 2, Slots: 1, SlotData: 8})
	a := attach(t, in, 1)
	if _, err := os.Stat(in.Path()); err != nil {
		t.Fatalf("names gone before every ring was claimed: %v", err)
	}
	again := attach(t, in, 1) // the same identity takes its ring again
	_ = again
	attach(t, in, 2)
	if _, err := os.Stat(in.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("inbox still named once every ring was claimed: %v", err)
	}
	if _, err := Attach(in.Path(), 3); err == nil {
		t.Fatal("attached to an unnamed inbox")
	}
	_ = a
}

func TestRingFull(t *testing.T) {
	cfg := Config{Rings: 1, Slots: 1, SlotData: 8}
	in := newInbox(t, cfg)
	o := attach(t, in, 1)
	_ = in
	// Attach claimed ring 0 of a one-ring inbox: a second identity fails.
	if _, err := Attach(in.Path(), 2); err == nil {
		t.Fatal("attached a second sender to a one-ring inbox")
	}
	o.Reserve()
	o.Commit(&Entry{Kind: Send, Immediate: true})
	if _, ok := o.Reserve(); ok {
		t.Fatal("reserved in a full ring")
	}
}

func TestCorruptRing(t *testing.T) {
	in := newInbox(t, Config{Rings: 1, Slots: 2, SlotData: 16})
	o := attach(t, in, 1)
	r := ringOwnedBy(t, in, 1)
	o.Reserve()
	o.Commit(&Entry{Kind: Send, Immediate: true, Length: in.Config().SlotData + 1}) // longer than a slot
	if _, _, err := r.Peek(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("oversized entry: %v", err)
	}
	// A sequence number from another lap is no entry.
	store64(o.slot(), offSeq, 1+2)
	r2 := Ring{hdr: r.hdr, slots: r.slots, cfg: r.cfg}
	store64(r.hdr, offHead, 1)
	if _, ok, err := r2.Peek(); ok || err != nil {
		t.Fatalf("stale sequence number taken for an entry: %v %v", ok, err)
	}
}

func TestNameInUse(t *testing.T) {
	in := newInbox(t, Config{Rings: 1, Slots: 1, SlotData: 8})
	if _, err := Create(in.Path(), in.Config()); !errors.Is(err, ErrInUse) {
		t.Fatalf("second inbox on a live owner's name: %v", err)
	}
	// A file whose owner is gone is replaced.
	store32(in.mem, offPID, 0x7ffffff0)
	again, err := Create(in.Path(), in.Config())
	if err != nil {
		t.Fatalf("stale inbox not replaced: %v", err)
	}
	again.Close()
}

func TestBadConfigAndFiles(t *testing.T) {
	dir := t.TempDir()
	for _, cfg := range []Config{{}, {Rings: 1, Slots: 3, SlotData: 8}, {Rings: 1, Slots: 2, SlotData: 0}, {Rings: MaxRings + 1, Slots: 2, SlotData: 8}} {
		if _, err := Create(filepath.Join(dir, "x"), cfg); err == nil {
			t.Errorf("created an inbox with %+v", cfg)
		}
	}
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, bytes.Repeat([]byte{0xff}, headerSize), 0o600)
	if _, err := Attach(junk, 1); err == nil {
		t.Error("attached to a file that is not an inbox")
	}
	if _, err := Attach(filepath.Join(dir, "none"), 1); err == nil {
		t.Error("attached to nothing")
	}
}

// TestInlineSends mixes inline Sends with ones in the data part, in a ring
// whose slots are reused, and checks each arrives whole: an inline entry
// must not be read from the data part a longer entry left in its slot.
func TestInlineSends(t *testing.T) {
	in := newInbox(t, Config{Rings: 1, Slots: 2, SlotData: 100})
	o := attach(t, in, 3)
	r := ringOwnedBy(t, in, 3)
	if _, ok := o.ReserveInline(InlineData + 1); ok {
		t.Fatalf("reserved %d inline bytes; at most %d fit", InlineData+1, InlineData)
	}
	for i, n := range []int{InlineData, 0, 70, 1, 100, InlineData - 1} {
		want := bytes.Repeat([]byte{byte(i + 1)}, n)
		if n > InlineData {
			b, _ := o.Reserve()
			o.Commit(&Entry{Kind: Send, Length: copy(b, want)})
		} else {
			b, ok := o.ReserveInline(n)
			if !ok || len(b) != n {
				t.Fatalf("send %d: reserve inline %d: %d bytes, %v", i, n, len(b), ok)
			}
			copy(b, want)
			o.CommitInline(n)
		}
		e, ok, err := r.Peek()
		if err != nil || !ok {
			t.Fatalf("send %d: peek: %v %v", i, ok, err)
		}
		if e.Kind != Send || e.Length != n || !bytes.Equal(e.Data, want) || e.Immediate || e.ImmData != 0 {
			t.Fatalf("send %d of %d bytes: got %+v", i, n, e)
		}
		r.Release()
	}
	// A full ring refuses inline reservations too.
	for range 2 {
		if _, ok := o.ReserveInline(1); !ok {
			t.Fatal("ring full too soon")
		}
		o.CommitInline(1)
	}
	if _, ok := o.ReserveInline(1); ok {
		t.Fatal("reserved an inline slot in a full ring")
	}
}

// TestReserveSend: a Send goes inside the entry header up to InlineData
// bytes and in the data part above, up to a slot's worth.
func TestReserveSend(t *testing.T) {
	in := newInbox(t, Config{Rings: 1, Slots: 4, SlotData: 128}) // a whole number of cache lines
	o := attach(t, in, 5)
	r := ringOwnedBy(t, in, 5)
	if _, ok := o.ReserveSend(129); ok {
		t.Fatal("reserved 129 bytes in a slot of 128")
	}
	for _, n := range []int{0, InlineData, InlineData + 1, 128} {
		b, ok := o.ReserveSend(n)
		if !ok || len(b) != n {
			t.Fatalf("reserve %d: %d bytes, %v", n, len(b), ok)
		}
		want := bytes.Repeat([]byte{byte(n)}, n)
		copy(b, want)
		o.CommitSend(n)
		e, ok, err := r.Peek()
		if err != nil || !ok || e.Kind != Send || !bytes.Equal(e.Data, want) {
			t.Fatalf("send of %d: %+v, %v, %v", n, e, ok, err)
		}
		r.Release()
	}
}

func FuzzParseEntry(f *testing.F) {
	slot := make([]byte, EntryHeaderSize+32)
	putInline(slot, 5)
	f.Add(append([]byte(nil), slot...))
	(&Entry{Kind: Send, Immediate: true, Length: 5}).put(slot)
	f.Add(append([]byte(nil), slot...))
	(&Entry{Kind: WriteRemote, Length: 1 << 20, Source: 0x1000}).put(slot)
	f.Add(append([]byte(nil), slot...))
	(&Entry{Kind: Write, RKey: 9, Offset: 7, Length: 32, Immediate: true}).put(slot)
	f.Add(append([]byte(nil), slot...))
	big := make([]byte, EntryHeaderSize+64)
	(&Entry{Kind: WriteRemote, Length: 1 << 20, Source: 0x1000, Share: true}).put(big)
	f.Add(big[:len(slot)])
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Entry
		if err := parseEntry(b, 32, &e); err != nil {
			return
		}
		if e.Kind == Send || e.Kind == Write {
			if e.Length != len(e.Data) || e.Length > max(32, InlineData) {
				t.Fatalf("length %d, data %d", e.Length, len(e.Data))
			}
		}
	})
}
