package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Inbox is the receiving side of a process: the rings its senders write
// and the wake FIFO that ends its sleeps. Taking entries is for one
// goroutine at a time (the caller's lock); Pending, Sleeping, DrainWake and
// AwaitWake may be called from any.
type Inbox struct {
	path   string
	mem    []byte
	cfg    Config
	rings  []Ring
	wake   *os.File // the FIFO, open for reading and writing
	wakeFD int      // its descriptor (os.File.Fd would make it blocking)
}

// wakePath is the FIFO beside an inbox file.
func wakePath(path string) string { return path + ".wake" }

// Create makes the inbox file at path (in a shared-memory file system)
// and its wake FIFO, and maps it. A file left at path by a process that
// died is replaced; one whose owner still runs (this process included) is
// an error, ErrInUse. Create also lets processes of the same user read this
// one's memory where the kernel restricts that to ancestors (Yama's
// ptrace_scope 1), since single-copy transfers need it.
func Create(path string, cfg Config) (*Inbox, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	// A slot's data is what its aligned size leaves: the attachers read
	// it back from the slot size.
	cfg.SlotData = cfg.slotSize() - EntryHeaderSize
	_ = unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0) // EINVAL without Yama
	if pid := ownerOf(path); pid != 0 && alive(pid) {
		return nil, fmt.Errorf("shm: create %s: %w by process %d", path, ErrInUse, pid)
	}
	// Made under a temporary name and renamed into place once complete,
	// FIFO included: an attacher never sees a file being made.
	tmp := fmt.Sprintf("%s.new%d", path, os.Getpid())
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("shm: create inbox: %w", err)
	}
	defer f.Close()
	defer os.Remove(tmp) // nothing once renamed
	size := cfg.fileSize()
	if err := f.Truncate(int64(size)); err != nil {
		return nil, fmt.Errorf("shm: size inbox %s: %w", path, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: map inbox %s: %w", path, err)
	}
	in := &Inbox{path: path, mem: mem, cfg: cfg}
	fail := func(err error) (*Inbox, error) {
		in.Close()
		return nil, err
	}
	_ = os.Remove(wakePath(path))
	if err := unix.Mkfifo(wakePath(path), 0o600); err != nil {
		return fail(fmt.Errorf("shm: wake FIFO: %w", err))
	}
	// Read and write: the open never waits for a writer and reads never
	// see an end of file. Non-blocking: the runtime's poller waits.
	fd, err := unix.Open(wakePath(path), unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("shm: open wake FIFO: %w", err))
	}
	in.wake, in.wakeFD = os.NewFile(uintptr(fd), wakePath(path)), fd
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
	store64(mem, offMagic, magic)
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("shm: name inbox: %w", err))
	}
	return in, nil
}

// Path returns the inbox file's name.
func (in *Inbox) Path() string { return in.path }

// Config returns the inbox's shape.
func (in *Inbox) Config() Config { return in.cfg }

// Rings returns the inbox's rings, one per sender slot; a ring's Owner is
// zero until a sender claims it.
func (in *Inbox) Rings() []Ring { return in.rings }

// Pending reports an entry waiting in some ring. It may be called from
// any goroutine.
func (in *Inbox) Pending() bool {
	for i := range in.rings {
		if in.rings[i].Ready() {
			return true
		}
	}
	return false
}

// Sleeping counts the owner's goroutines that may block and must be woken
// by a sender: call it with true before the last look at Pending (a commit
// then either shows in Pending or writes to the FIFO), and with false once
// awake. It may be called from any goroutine.
func (in *Inbox) Sleeping(on bool) {
	d := ^uint32(0) // minus one
	if on {
		d = 1
	}
	atomic.AddUint32(u32(in.mem, offSleeping), d)
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

// WakeFD returns the wake FIFO's descriptor, for a poll that should end
// when a sender wakes this process (nic.WakeFDWaiter); DrainWake empties
// it afterwards. It stays valid until Close.
func (in *Inbox) WakeFD() int { return in.wakeFD }

// DrainWake empties the wake FIFO without blocking and reports whether a
// wake-up was in it. Any goroutine.
func (in *Inbox) DrainWake() bool {
	var buf [64]byte
	woke := false
	for {
		n, err := unix.Read(in.wakeFD, buf[:])
		if n <= 0 || err != nil {
			return woke
		}
		woke = true
	}
}

// Poke writes a wake-up into the inbox's own FIFO: it ends AwaitWake
// without closing anything.
func (in *Inbox) Poke() { _, _ = unix.Write(in.wakeFD, []byte{1}) }

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

// Close unlinks and unmaps the inbox and ends AwaitWake. No goroutine may
// use the inbox or its rings after it.
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

// ownerOf reads the owner's process id from the inbox file at path, or 0.
func ownerOf(path string) int {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < headerSize || binary.NativeEndian.Uint64(b[offMagic:]) != magic {
		return 0
	}
	return int(binary.NativeEndian.Uint32(b[offPID:]))
}

// alive reports whether process pid exists (one of another user counts).
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// Alive reports whether the process with the given id still runs: a
// receiver waiting on a sender that died would otherwise wait forever.
func Alive(pid int) bool { return alive(pid) }

// Ring is a sender's ring as its receiver sees it.
type Ring struct {
	hdr, slots []byte
	cfg        Config
	parsed     bool // the entry at the head is parsed into cur
	cur        Entry
}

// Owner returns the identity of the sender that claimed the ring, or 0.
func (r *Ring) Owner() uint32 { return load32(r.hdr, offOwner) }

// OwnerPID returns the process id of the ring's owner: where the bytes of
// its WriteRemote entries are read from.
func (r *Ring) OwnerPID() int { return int(load32(r.hdr, offOwnerPID)) }

// RoomWanted reports, once, that the ring's owner found the ring full
// since the last call: having released entries, the receiver should wake
// it. Call it after Release.
func (r *Ring) RoomWanted() bool {
	if load32(r.hdr, offWantRoom) == 0 {
		return false
	}
	store32(r.hdr, offWantRoom, 0)
	return true
}

// OwnerGone reports that the ring's owner closed its side (Outbox.Close):
// it sends nothing more.
func (r *Ring) OwnerGone() bool { return load32(r.hdr, offOwnerGone) == 1 }

// OwnerReads reports that the ring's owner found it can read this
// inbox's owner's memory: writes to it may then be WriteRemote.
func (r *Ring) OwnerReads() bool { return load32(r.hdr, offOwnerReads) == 1 }

// head returns the number of entries released. It is the receiver's own
// word: other goroutines of the receiver read it (Ready), the sender
// rarely.
func (r *Ring) head() uint64 { return load64(r.hdr, offHead) }

func (r *Ring) slot(seq uint64) []byte { return r.cfg.slotOf(r.slots, seq) }

// Ready reports an entry waiting. It may be called from any goroutine.
func (r *Ring) Ready() bool {
	h := r.head()
	return load64(r.slot(h), offSeq) == h+1
}

// Peek returns the oldest entry not yet released, if any. The entry (its
// Data) stays valid until Release.
func (r *Ring) Peek() (*Entry, bool, error) {
	if r.parsed {
		return &r.cur, true, nil
	}
	h := r.head()
	s := r.slot(h)
	if load64(s, offSeq) != h+1 {
		return nil, false, nil
	}
	if err := parseEntry(s, r.cfg.SlotData, &r.cur); err != nil {
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
	atomic.StoreUint64(u64(r.hdr, offHead), r.head()+1)
}
