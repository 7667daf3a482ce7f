package shm

import (
	"bytes"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
)

// sharedWrite commits a shared WriteRemote of src and returns the sender's
// outbox, the entry's sequence number and the receiver's ring with the
// entry peeked.
func sharedWrite(t *testing.T, src []byte) (*Outbox, uint64, *Ring, *Entry) {
	t.Helper()
	in := newInbox(t, Config{Rings: 1, Slots: 2, SlotData: 1})
	o := attach(t, in, 1)
	if !o.Writes() {
		t.Skip("this process cannot write itself by process_vm_writev")
	}
	if _, ok := o.Reserve(); !ok {
		t.Fatal("full")
	}
	seq := o.Commit(&Entry{Kind: WriteRemote, Length: len(src), Source: Address(src), Share: true})
	r := ringOwnedBy(t, in, 1)
	e, ok, err := r.Peek()
	if err != nil || !ok || !e.Share || e.Length != len(src) {
		t.Fatalf("%+v %v %v", e, ok, err)
	}
	return o, seq, r, e
}

// openedCopy is a shared write of n random bytes whose copy the receiver
// has opened.
type openedCopy struct {
	o        *Outbox
	seq      uint64
	r        *Ring
	e        *Entry
	src, dst []byte
	oc       openCopy
}

func openCopyOf(t *testing.T, n int, seed uint64) openedCopy {
	t.Helper()
	c := openedCopy{src: randomBytes(n, seed), dst: make([]byte, n)}
	c.o, c.seq, c.r, c.e = sharedWrite(t, c.src)
	var ok bool
	if c.oc, ok = c.r.openShare(c.e, c.dst); !ok || c.oc.chunks < 2 {
		t.Fatalf("not opened: %+v", c.oc)
	}
	return c
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestSharedCopySenderDoesAll: the sender helps as soon as the receiver
// has opened the copy and takes every chunk; the receiver finds none left
// and the bytes are all there.
func TestSharedCopySenderDoesAll(t *testing.T) {
	src := randomBytes(1<<20+12345, 1)
	o, seq, r, e := sharedWrite(t, src)
	if helped, err := o.Help(seq, src); helped || err != nil {
		t.Fatalf("helped %v (%v) before the copy was opened", helped, err)
	}
	dst := make([]byte, len(src))
	oc, ok := r.openShare(e, dst)
	if !ok || oc.chunks < 2 {
		t.Fatalf("not opened: %+v", oc)
	}
	helped, err := o.Help(seq, src)
	if !helped || err != nil {
		t.Fatalf("helped %v: %v", helped, err)
	}
	if got := int(load32(oc.a, offShareDone)); got != oc.chunks {
		t.Fatalf("sender did %d of %d chunks", got, oc.chunks)
	}
	if err := oc.finish(r.OwnerPID(), e.Source, dst); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("shared copy differs")
	}
	r.Release()
	if helped, err := o.Help(seq, src); helped || err != nil {
		t.Fatalf("helped %v (%v) after the entry was consumed", helped, err)
	}
}

// TestSharedCopyBothEnds runs the receiver and a helping sender at once.
func TestSharedCopyBothEnds(t *testing.T) {
	src := randomBytes(8<<20+7, 2)
	o, seq, r, e := sharedWrite(t, src)
	dst := make([]byte, len(src))
	var stop atomic.Bool
	done := make(chan error, 1)
	go func() {
		var err error
		for !stop.Load() && err == nil {
			_, err = o.Help(seq, src)
		}
		done <- err
	}()
	shared, err := r.CopyRemote(e, dst)
	stop.Store(true)
	if err != nil || !shared {
		t.Fatalf("shared %v: %v", shared, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("shared copy differs")
	}
}

// TestSharedCopySenderFails: a sender that cannot write its chunk leaves
// it to the receiver, which reads it itself.
func TestSharedCopySenderFails(t *testing.T) {
	c := openCopyOf(t, 1<<20, 3)
	c.o.pid = 1 << 30 // no such process: the write fails
	if _, err := c.o.Help(c.seq, c.src); err == nil {
		t.Fatal("a write to no process succeeded")
	}
	if load32(c.oc.a, offShareFailed) != 1 {
		t.Fatalf("failed chunk %d, want 1", load32(c.oc.a, offShareFailed))
	}
	if err := c.oc.finish(c.r.OwnerPID(), c.e.Source, c.dst); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.dst, c.src) {
		t.Fatal("shared copy differs")
	}
}

// TestSharedCopyDeadSender: a sender that ended holding a chunk ends the
// copy with an error, not a wait forever.
func TestSharedCopyDeadSender(t *testing.T) {
	c := openCopyOf(t, 1<<20, 4)
	atomic.AddUint32(u32(c.oc.a, offShareClaimed), 1) // the sender's, never done
	if err := c.oc.finish(1<<30, c.e.Source, c.dst); err == nil {
		t.Fatal("a copy from a dead sender succeeded")
	}
}

// TestShareChunks: short writes are not shared; long ones get about
// shareChunks chunks of whole pages.
func TestShareChunks(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, 0}, {2*shareMinChunk - 1, 0}, {2 * shareMinChunk, shareMinChunk},
		{4 << 20, 256 << 10}, {4<<20 + 1, 256<<10 + 4096},
	} {
		if got := shareChunk(c.n); got != c.want {
			t.Errorf("shareChunk(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestRemoteCopiesAllocateNothing: the copies are on every long message's
// path.
func TestRemoteCopiesAllocateNothing(t *testing.T) {
	src, dst := randomBytes(64<<10, 5), make([]byte, 64<<10)
	pid := os.Getpid()
	if err := ReadRemote(pid, Address(src), dst); err != nil {
		t.Skipf("this process cannot read itself: %v", err)
	}
	if n := testing.AllocsPerRun(20, func() {
		_ = ReadRemote(pid, Address(src), dst)
		_ = PutRemote(pid, Address(dst), src)
	}); n != 0 {
		t.Fatalf("%v allocations a read and a write", n)
	}
}
