package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Outbox is a sender's ring in another process's inbox. Its methods are
// for one goroutine at a time.
type Outbox struct {
	path   string
	mem    []byte
	cfg    Config
	hdr    []byte
	slots  []byte
	wake   int    // the FIFO's write end (a raw descriptor: os.File.Fd would make it blocking)
	tail   uint64 // entries committed (only this side moves it)
	head   uint64 // the head last read
	pid    int    // the receiver's process
	reads  bool   // we may read the receiver's memory
	writes bool   // and write it (shared copies)
	wakeup [1]byte
}

// Attach maps the inbox at path and claims a ring in it for identity id
// (not zero; a ring id already holds is taken again). It probes whether
// this process may read the inbox owner's memory and records the answer
// in the ring (Ring.OwnerReads). When the last ring is claimed it removes
// the inbox's names: every process that will use it has it mapped.
func Attach(path string, id uint32) (*Outbox, error) {
	if id == 0 {
		return nil, errors.New("shm: attach: identity 0")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: attach: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shm: attach: %w", err)
	}
	if st.Size() < headerSize || st.Size() > maxFileSize {
		return nil, fmt.Errorf("shm: attach %s: file of %d bytes", path, st.Size())
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: attach %s: map: %w", path, err)
	}
	o := &Outbox{path: path, mem: mem, wake: -1}
	fail := func(err error) (*Outbox, error) {
		o.Close()
		return nil, fmt.Errorf("shm: attach %s: %w", path, err)
	}
	if o.cfg, err = readHeader(mem); err != nil {
		return fail(err)
	}
	ring, claimed := -1, false
	for i := 0; i < o.cfg.Rings && ring < 0; i++ {
		hdr, _ := ringOf(mem, o.cfg, i)
		if load32(hdr, offOwner) == id {
			ring = i
		} else if atomic.CompareAndSwapUint32(u32(hdr, offOwner), 0, id) {
			ring, claimed = i, true
		}
	}
	if ring < 0 {
		return fail(ErrFull)
	}
	o.hdr, o.slots = ringOf(mem, o.cfg, ring)
	// Taking a ring again, go on after the entries already committed: from
	// the head, every slot whose sequence number follows.
	o.head = load64(o.hdr, offHead)
	for o.tail = o.head; o.tail-o.head < uint64(o.cfg.Slots) && load64(o.slot(), offSeq) == o.tail+1; o.tail++ {
	}
	fd, err := unix.Open(wakePath(path), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("wake FIFO: %w", err))
	}
	o.wake = fd
	o.pid = int(load32(mem, offPID))
	o.reads = probe(o.pid, load64(mem, offProbe))
	o.writes = o.reads && probeWrite(o.pid, load64(mem, offProbe))
	var reads uint32
	if o.reads {
		reads = 1
	}
	store32(o.hdr, offOwnerReads, reads)
	store32(o.hdr, offOwnerPID, uint32(os.Getpid()))
	store32(o.hdr, offOwnerGone, 0)
	if claimed && int(atomic.AddUint32(u32(mem, offAttached), 1)) == o.cfg.Rings {
		_ = os.Remove(path)
		_ = os.Remove(wakePath(path))
	}
	return o, nil
}

// probe reports whether this process can read pid's memory at addr, where
// the inbox's magic is.
func probe(pid int, addr uint64) bool {
	var b [8]byte
	return ReadRemote(pid, addr, b[:]) == nil && binary.NativeEndian.Uint64(b[:]) == magic
}

// Reads reports whether this process can read the receiver's memory.
func (o *Outbox) Reads() bool { return o.reads }

// Reserve returns the data part of the next free slot, or false when the
// ring is full.
func (o *Outbox) Reserve() ([]byte, bool) {
	if !o.room() {
		return nil, false
	}
	s := o.slot()
	return s[EntryHeaderSize : EntryHeaderSize+o.cfg.SlotData : EntryHeaderSize+o.cfg.SlotData], true
}

// ReserveInline returns n bytes inside the next free slot's entry header,
// for a Send of at most InlineData bytes that CommitInline publishes: the
// receiver then reads one cache line for the whole message. It reports
// false when n is too long or the ring is full.
func (o *Outbox) ReserveInline(n int) ([]byte, bool) {
	if n < 0 || n > InlineData || !o.room() {
		return nil, false
	}
	s := o.slot()
	return s[offInline : offInline+n : offInline+n], true
}

// ReserveSend returns the n bytes of a Send: inside the next free slot's
// entry header when n is at most InlineData (ReserveInline), else at the
// start of its data part. It reports false when n is longer than a slot
// holds or the ring is full. CommitSend publishes the Send.
func (o *Outbox) ReserveSend(n int) ([]byte, bool) {
	if n <= InlineData {
		return o.ReserveInline(n)
	}
	b, ok := o.Reserve()
	if !ok || n > len(b) {
		return nil, false
	}
	return b[:n], true
}

// CommitSend publishes the Send of n bytes written into what ReserveSend
// returned, as Commit does.
func (o *Outbox) CommitSend(n int) uint64 {
	if n <= InlineData {
		return o.CommitInline(n)
	}
	return o.Commit(&Entry{Kind: Send, Length: n})
}

// room reports whether the next slot is free.
func (o *Outbox) room() bool {
	if o.tail-o.head < uint64(o.cfg.Slots) {
		return true
	}
	o.head = load64(o.hdr, offHead)
	if o.tail-o.head < uint64(o.cfg.Slots) {
		return true
	}
	// Ask the receiver to say when it consumes, then look again: either
	// it sees the request or we see its head.
	store32(o.hdr, offWantRoom, 1)
	o.head = load64(o.hdr, offHead)
	return o.tail-o.head < uint64(o.cfg.Slots)
}

func (o *Outbox) slot() []byte { return o.slotAt(o.tail) }

func (o *Outbox) slotAt(seq uint64) []byte { return o.cfg.slotOf(o.slots, seq) }

// Commit publishes the entry in the slot Reserve returned (for Send and
// Write, its Length bytes of data are already there; Data is ignored) and
// wakes the receiver if it sleeps. It returns the
// entry's sequence number: it is consumed once Consumed exceeds it.
func (o *Outbox) Commit(e *Entry) uint64 {
	s := o.slot()
	e.put(s)
	return o.publish(s)
}

// CommitInline publishes the Send of n bytes written into the slot
// ReserveInline returned, as Commit does.
func (o *Outbox) CommitInline(n int) uint64 {
	s := o.slot()
	putInline(s, n)
	return o.publish(s)
}

// publish stores slot s's sequence number, which hands the entry to the
// receiver, and wakes the receiver if it sleeps.
func (o *Outbox) publish(s []byte) uint64 {
	seq := o.tail
	o.tail++
	// The sequence number last: the receiver that sees it sees the rest.
	atomic.StoreUint64(u64(s, offSeq), o.tail)
	if load32(o.mem, offSleeping) != 0 {
		// A full FIFO already holds a wake-up: EAGAIN is fine.
		_, _ = unix.Write(o.wake, o.wakeup[:])
	}
	return seq
}

// Wake writes to the inbox owner's wake FIFO if it sleeps: for a receiver
// that made room in a ring the owner of this outbox's inbox is waiting to
// fill (Ring.RoomWanted).
func (o *Outbox) Wake() {
	if o.mem != nil && load32(o.mem, offSleeping) != 0 {
		_, _ = unix.Write(o.wake, o.wakeup[:])
	}
}

// Consumed returns the number of entries the receiver has released.
func (o *Outbox) Consumed() uint64 {
	o.head = load64(o.hdr, offHead)
	return o.head
}

// Close marks the ring gone (Ring.OwnerGone) and unmaps it. Entries
// committed stay for the receiver.
func (o *Outbox) Close() error {
	if o.hdr != nil {
		store32(o.hdr, offOwnerGone, 1)
	}
	if o.wake >= 0 {
		unix.Close(o.wake)
		o.wake = -1
	}
	if o.mem == nil {
		return nil
	}
	err := unix.Munmap(o.mem)
	o.mem, o.hdr, o.slots = nil, nil, nil
	return err
}
