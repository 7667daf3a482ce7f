package shm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Inbox is the receiving side of a process: the rings its senders write
// and the doorbell it polls. Its methods other than Close are for one
// goroutine at a time (the caller's lock), except AwaitWake.
type Inbox struct {
	path  string
	mem   []byte
	cfg   Config
	rings []Ring
	wake  *os.File // the FIFO's read end
	seen  uint64   // the doorbell when the rings were last read
}

// wakePath is the FIFO beside an inbox file.
func wakePath(path string) string { return path + ".wake" }

// Create makes the inbox file at path (in a shared-memory file system)
// and its wake FIFO, and maps it. A file left at path by a process that
// died is replaced. Create also lets processes of the same user read this
// one's memory where the kernel restricts that to ancestors (Yama's
// ptrace_scope 1), since single-copy transfers need it.
func Create(path string, cfg Config) (*Inbox, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	_ = unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0) // EINVAL without Yama
	_ = os.Remove(path)
	_ = os.Remove(wakePath(path))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("shm: create inbox: %w", err)
	}
	defer f.Close()
	size := cfg.fileSize()
	if err := f.Truncate(int64(size)); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("shm: size inbox %s: %w", path, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("shm: map inbox %s: %w", path, err)
	}
	in := &Inbox{path: path, mem: mem, cfg: cfg}
	fail := func(err error) (*Inbox, error) {
		in.Close()
		return nil, err
	}
	if err := unix.Mkfifo(wakePath(path), 0o600); err != nil {
		return fail(fmt.Errorf("shm: wake FIFO: %w", err))
	}
	// Read and write: the open never waits for a writer and reads never
	// see an end of file. Non-blocking: the runtime's poller waits.
	fd, err := unix.Open(wakePath(path), unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("shm: open wake FIFO: %w", err))
	}
	in.wake = os.NewFile(uintptr(fd), wakePath(path))
	store32(mem, offVersion, version)
	store32(mem, offRings, uint32(cfg.Rings))
	store32(mem, offSlots, uint32(cfg.Slots))
	store32(mem, offSlotSize, uint32(cfg.slotSize()))
	store32(mem, offPID, uint32(os.Getpid()))
	store64(mem, offProbe, uint64(uintptr(unsafe.Pointer(&mem[0]))))
	in.rings = make([]Ring, cfg.Rings)
	for i := range in.rings {
		in.rings[i].hdr, in.rings[i].slots = ringOf(mem, cfg, i)
		in.rings[i].cfg = cfg
	}
	// The magic last: an attacher that sees it sees the rest.
	store64(mem, offMagic, magic)
	return in, nil
}

// Path returns the inbox file's name.
func (in *Inbox) Path() string { return in.path }

// Config returns the inbox's shape.
func (in *Inbox) Config() Config { return in.cfg }

// Rings returns the inbox's rings, one per sender slot; a ring's Owner is
// zero until a sender claims it.
func (in *Inbox) Rings() []Ring { return in.rings }

// Pending reports commits since the last Seen.
func (in *Inbox) Pending() bool { return load64(in.mem, offDoorbell) != in.seen }

// Doorbell returns the commit count: pass it to Seen once every ring has
// been read after it was taken.
func (in *Inbox) Doorbell() uint64 { return load64(in.mem, offDoorbell) }

// Seen records that the rings were read after the doorbell showed n.
func (in *Inbox) Seen(n uint64) { in.seen = n }

// Sleeping tells senders whether the owner may block and must be woken.
// Set it before the last look at Pending: a commit then either shows in
// Pending or writes to the FIFO.
func (in *Inbox) Sleeping(on bool) {
	var v uint32
	if on {
		v = 1
	}
	store32(in.mem, offSleeping, v)
}

// AwaitWake blocks until a sender wrote to the wake FIFO (and drains what
// is there), or the inbox is closed.
func (in *Inbox) AwaitWake() error {
	var buf [64]byte
	_, err := in.wake.Read(buf[:])
	if err != nil {
		return fmt.Errorf("shm: wake: %w", err)
	}
	return nil
}

// Unlink removes the inbox's names; processes that mapped it keep it.
// Names already gone are no error.
func (in *Inbox) Unlink() error {
	var first error
	for _, p := range []string{in.path, wakePath(in.path)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && first == nil {
			first = err
		}
	}
	return first
}

// Close unlinks and unmaps the inbox and ends AwaitWake.
func (in *Inbox) Close() error {
	err := in.Unlink()
	if in.wake != nil {
		in.wake.Close()
	}
	if in.mem != nil {
		if e := unix.Munmap(in.mem); e != nil && err == nil {
			err = e
		}
		in.mem, in.rings = nil, nil
	}
	return err
}

// Ring is a sender's ring as its receiver sees it.
type Ring struct {
	hdr, slots []byte
	cfg        Config
	head       uint64 // local copy: only the receiver moves it
	tail       uint64 // the tail last read
	parsed     bool   // the entry at head is parsed into cur
	cur        Entry
}

// Owner returns the identity of the sender that claimed the ring, or 0.
func (r *Ring) Owner() uint32 { return load32(r.hdr, offOwner) }

// OwnerReads reports that the ring's owner found it can read this
// inbox's owner's memory: writes to it may then be WriteRemote.
func (r *Ring) OwnerReads() bool { return load32(r.hdr, offOwnerReads) == 1 }

// Peek returns the oldest entry not yet released, if any. The entry (its
// Data) stays valid until Release.
func (r *Ring) Peek() (*Entry, bool, error) {
	if r.parsed {
		return &r.cur, true, nil
	}
	if r.head == r.tail {
		r.tail = load64(r.hdr, offTail)
		if r.head == r.tail {
			return nil, false, nil
		}
		if r.tail-r.head > uint64(r.cfg.Slots) {
			return nil, false, fmt.Errorf("%w: %d entries in a ring of %d", ErrCorrupt, r.tail-r.head, r.cfg.Slots)
		}
	}
	size := r.cfg.slotSize()
	o := int(r.head&uint64(r.cfg.Slots-1)) * size
	if err := parseEntry(r.slots[o:o+size:o+size], r.cfg.SlotData, &r.cur); err != nil {
		return nil, false, err
	}
	r.parsed = true
	return &r.cur, true, nil
}

// Release frees the entry Peek returned; its sender may reuse the slot.
func (r *Ring) Release() {
	if !r.parsed {
		return
	}
	r.parsed = false
	r.cur = Entry{}
	r.head++
	atomic.StoreUint64(u64(r.hdr, offHead), r.head)
}
