package shm

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// The file: a header page, then the rings. Each field that one side writes
// while the other reads sits on a cache line of its own.
//
//	header (headerSize bytes)
//	  0   8  magic
//	  8   4  version
//	  12  4  rings
//	  16  4  slots per ring (a power of two)
//	  20  4  slot size (entry header and data)
//	  24  4  owner's process id
//	  32  8  probe: the owner's address of this file's first byte
//	  128 4  sleeping: the owner's goroutines that may block
//	  192 4  attached: rings claimed
//	ring (ringHeaderSize bytes, then slots × slot size)
//	  0   4  owner: the identity that claimed the ring (0: free)
//	  4   4  owner reads: 1 if the ring's owner can read this file's
//	         owner's memory by cross-memory attach
//	  8   4  the ring owner's process id
//	  12  4  gone: 1 once the owner closed its side
//	  16  4  room wanted: the owner found the ring full and waits for the
//	         receiver to consume (Ring.RoomWanted)
//	  128 8  head: entries consumed
//
// A slot's entry is published by its sequence number (entryHeader): the
// receiver polls the next slot of each ring, so a message costs it the
// cache lines of that slot and nothing else.
const (
	magic          = 0x31_4d_48_53_56_48_54_45 // "ETHVSHM1" read little-endian
	version        = 3                         // 2: inline Sends (flagInline); 3: shared copies (flagShare)
	headerSize     = 4096
	ringHeaderSize = 256

	offMagic    = 0
	offVersion  = 8
	offRings    = 12
	offSlots    = 16
	offSlotSize = 20
	offPID      = 24
	offProbe    = 32
	offSleeping = 128
	offAttached = 192

	offOwner      = 0
	offOwnerReads = 4
	offOwnerPID   = 8
	offOwnerGone  = 12
	offWantRoom   = 16
	offHead       = 128
)

// EntryHeaderSize is the part of a slot before its data.
const EntryHeaderSize = 64

// Limits on a Config: a file of at most maxFileSize bytes.
const (
	MaxRings    = 4096
	MaxSlots    = 1 << 12
	maxFileSize = 1 << 36
)

// ErrCorrupt reports a ring whose indices or entry make no sense.
var ErrCorrupt = errors.New("shm: corrupt ring")

// ErrInUse reports an inbox name that a running process holds.
var ErrInUse = errors.New("shm: inbox in use")

// ErrFull reports an inbox without a free ring for a new sender.
var ErrFull = errors.New("shm: every ring of the inbox is taken")

// Config shapes an inbox.
type Config struct {
	// Rings is the number of senders the inbox takes, one ring each.
	Rings int
	// Slots is the number of entries per ring, a power of two.
	Slots int
	// SlotData is the largest message (or piece of a write) one entry
	// carries.
	SlotData int
}

func (c Config) slotSize() int { return (EntryHeaderSize + c.SlotData + 63) &^ 63 }

func (c Config) ringSize() int { return ringHeaderSize + c.Slots*c.slotSize() }

// slotOf is the slot of entry seq in a ring's slots, for either end.
func (c Config) slotOf(slots []byte, seq uint64) []byte {
	size := c.slotSize()
	o := int(seq&uint64(c.Slots-1)) * size
	return slots[o : o+size : o+size]
}

func (c Config) fileSize() int { return headerSize + c.Rings*c.ringSize() }

func (c Config) check() error {
	switch {
	case c.Rings < 1 || c.Rings > MaxRings:
		return fmt.Errorf("shm: %d rings: want 1 to %d", c.Rings, MaxRings)
	case c.Slots < 1 || c.Slots > MaxSlots || c.Slots&(c.Slots-1) != 0:
		return fmt.Errorf("shm: %d slots: want a power of two up to %d", c.Slots, MaxSlots)
	case c.SlotData < 1 || c.SlotData > 16<<20:
		return fmt.Errorf("shm: %d bytes per slot: want 1 to 16 MiB", c.SlotData)
	case int64(c.Rings)*int64(c.ringSize())+headerSize > maxFileSize:
		return fmt.Errorf("shm: %d rings of %d bytes: file too large", c.Rings, c.ringSize())
	}
	return nil
}

// u32 and u64 address a field of shared memory for atomic access. Every
// offset used is aligned: the mapping starts on a page.
func u32(b []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
func u64(b []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }

func load32(b []byte, off int) uint32     { return atomic.LoadUint32(u32(b, off)) }
func load64(b []byte, off int) uint64     { return atomic.LoadUint64(u64(b, off)) }
func store32(b []byte, off int, v uint32) { atomic.StoreUint32(u32(b, off), v) }
func store64(b []byte, off int, v uint64) { atomic.StoreUint64(u64(b, off), v) }

// readHeader checks a mapped file's header and returns its shape.
func readHeader(mem []byte) (Config, error) {
	if len(mem) < headerSize {
		return Config{}, fmt.Errorf("shm: file of %d bytes has no header", len(mem))
	}
	if load64(mem, offMagic) != magic {
		return Config{}, errors.New("shm: not an inbox (bad magic)")
	}
	if v := load32(mem, offVersion); v != version {
		return Config{}, fmt.Errorf("shm: inbox version %d, want %d", v, version)
	}
	c := Config{Rings: int(load32(mem, offRings)), Slots: int(load32(mem, offSlots))}
	size := int(load32(mem, offSlotSize))
	c.SlotData = size - EntryHeaderSize
	if err := c.check(); err != nil {
		return Config{}, err
	}
	if c.slotSize() != size {
		return Config{}, fmt.Errorf("shm: slot size %d is not aligned", size)
	}
	if c.fileSize() > len(mem) {
		return Config{}, fmt.Errorf("shm: file of %d bytes, header says %d", len(mem), c.fileSize())
	}
	return c, nil
}

// ring returns ring i's header and slots in mem.
func ringOf(mem []byte, c Config, i int) (hdr, slots []byte) {
	o := headerSize + i*c.ringSize()
	return mem[o : o+ringHeaderSize : o+ringHeaderSize], mem[o+ringHeaderSize : o+c.ringSize() : o+c.ringSize()]
}
