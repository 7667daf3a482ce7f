package shm

import (
	"encoding/binary"
	"fmt"
)

// Kind says what an entry carries.
type Kind uint8

// Entry kinds.
const (
	// Send is a message; its bytes are the entry's data.
	Send Kind = 1
	// Write puts the entry's data at Offset of the receiver's region RKey.
	Write Kind = 2
	// WriteRemote puts Length bytes, read from address Source of the
	// sender by cross-memory attach, at Offset of region RKey.
	WriteRemote Kind = 3
)

// flagImmediate marks an entry whose ImmData is valid. A Send always
// completes one receive of the receiver; a write does only if it carries
// immediate data (its last entry, then).
const flagImmediate = 1

// flagNotify asks the receiver to wake the sender, if it sleeps, once it
// has consumed the entry: the sender waits for the entry's completion.
const flagNotify = 2

// flagInline marks a Send whose data sits in the entry header, from
// offInline, instead of the slot's data part (Outbox.ReserveInline).
const flagInline = 4

// InlineData is the longest Send whose bytes travel inside the entry
// header: the header fields a Send does not use, offsets 8 to 55.
const InlineData = 48

const offInline = 8

// maxRemote bounds the length of a WriteRemote.
const maxRemote = 1 << 40

// An entry header, in the first EntryHeaderSize bytes of a slot:
//
//	0  4 length: data bytes (Send, Write) or bytes to read (WriteRemote)
//	4  1 kind
//	5  1 flags (flagImmediate, flagNotify, flagInline, flagShare)
//	6  2 zero
//	8  4 immediate data
//	12 4 rkey
//	16 8 offset in the region
//	24 8 source address (WriteRemote)
//	32 8 the length's upper bits (WriteRemote)
//	40 8 total: the bytes of the whole write an entry is part of
//	     (an inline Send, flag 4, has its data at 8 instead of the
//	     fields from 8 to 55)
//	56 8 sequence: the entry's number in its ring plus one, stored last
//	     (atomically): the slot holds an entry when it equals the
//	     receiver's head plus one

// Entry is one ring entry.
type Entry struct {
	Kind      Kind
	Immediate bool
	// Notify asks the receiver to wake the sender once the entry is
	// consumed (Ring.Notify).
	Notify bool
	// Share marks a WriteRemote whose sender helps copy it: the receiver
	// copies it with Ring.CopyRemote, the sender with Outbox.Help.
	Share   bool
	ImmData uint32
	RKey    uint32
	Offset  uint64
	// Length is the number of bytes: len(Data) for Send and Write.
	Length int
	// Source is the sender's address of the bytes of a WriteRemote.
	Source uint64
	// Total is the length of the whole write a Write or WriteRemote entry
	// is a piece of: what its immediate completion reports.
	Total uint64
	// Data is the bytes of a Send or Write, inside the ring: valid until
	// the entry is released.
	Data []byte
}

const offSeq = 56

// put writes e's header into slot, all but the sequence number.
func (e *Entry) put(slot []byte) {
	h := slot[:EntryHeaderSize:EntryHeaderSize]
	n := uint64(e.Length)
	binary.NativeEndian.PutUint32(h[0:], uint32(n))
	h[4] = byte(e.Kind)
	h[5] = 0
	if e.Immediate {
		h[5] = flagImmediate
	}
	if e.Notify {
		h[5] |= flagNotify
	}
	if e.Share && e.Kind == WriteRemote {
		h[5] |= flagShare
		resetShare(slot)
	}
	h[6], h[7] = 0, 0
	binary.NativeEndian.PutUint32(h[8:], e.ImmData)
	binary.NativeEndian.PutUint32(h[12:], e.RKey)
	binary.NativeEndian.PutUint64(h[16:], e.Offset)
	binary.NativeEndian.PutUint64(h[24:], e.Source)
	binary.NativeEndian.PutUint64(h[32:], n>>32)
	binary.NativeEndian.PutUint64(h[40:], e.Total)
}

// putInline writes the header of an inline Send of n bytes into slot, all
// but the sequence number (and the data, already there).
func putInline(slot []byte, n int) {
	h := slot[:offInline:offInline]
	binary.NativeEndian.PutUint32(h[0:], uint32(n))
	h[4], h[5], h[6], h[7] = byte(Send), flagInline, 0, 0
}

// parseEntry reads the entry in slot, whose data part holds at most
// slotData bytes. It reads each field of shared memory once and checks
// the copy, so a sender that rewrites the slot meanwhile cannot make it
// pass the checks with one value and be used with another.
func parseEntry(slot []byte, slotData int, e *Entry) error {
	if len(slot) < EntryHeaderSize+slotData {
		return fmt.Errorf("%w: slot of %d bytes", ErrCorrupt, len(slot))
	}
	h := slot[:EntryHeaderSize:EntryHeaderSize]
	flags := h[5]
	if flags&^(flagImmediate|flagNotify|flagInline|flagShare) != 0 || h[6] != 0 || h[7] != 0 {
		return fmt.Errorf("%w: flags %#x %#x %#x", ErrCorrupt, flags, h[6], h[7])
	}
	if flags&flagInline != 0 {
		return parseInline(h, flags, e)
	}
	n := uint64(binary.NativeEndian.Uint32(h[0:])) | binary.NativeEndian.Uint64(h[32:])<<32
	*e = Entry{Kind: Kind(h[4]), ImmData: binary.NativeEndian.Uint32(h[8:]),
		RKey: binary.NativeEndian.Uint32(h[12:]), Offset: binary.NativeEndian.Uint64(h[16:]),
		Total: binary.NativeEndian.Uint64(h[40:])}
	e.Immediate = flags&flagImmediate != 0
	e.Notify = flags&flagNotify != 0
	e.Share = flags&flagShare != 0
	if e.Share && e.Kind != WriteRemote {
		return fmt.Errorf("%w: shared entry of kind %d", ErrCorrupt, e.Kind)
	}
	if e.Kind != Send && e.Total > maxRemote {
		return fmt.Errorf("%w: write of %d bytes", ErrCorrupt, e.Total)
	}
	switch e.Kind {
	case Send, Write:
		if n > uint64(slotData) {
			return fmt.Errorf("%w: entry of %d bytes in a slot of %d", ErrCorrupt, n, slotData)
		}
		e.Length = int(n)
		e.Data = slot[EntryHeaderSize : EntryHeaderSize+e.Length : EntryHeaderSize+e.Length]
	case WriteRemote:
		if n > maxRemote {
			return fmt.Errorf("%w: remote write of %d bytes", ErrCorrupt, n)
		}
		e.Length = int(n)
		e.Source = binary.NativeEndian.Uint64(h[24:])
	default:
		return fmt.Errorf("%w: kind %d", ErrCorrupt, e.Kind)
	}
	return nil
}

// parseInline reads an inline Send from entry header h: only a plain
// Send may be inline, of at most InlineData bytes.
func parseInline(h []byte, flags byte, e *Entry) error {
	n := binary.NativeEndian.Uint32(h[0:])
	if Kind(h[4]) != Send || flags != flagInline || n > InlineData {
		return fmt.Errorf("%w: inline entry of kind %d, flags %#x, %d bytes", ErrCorrupt, h[4], flags, n)
	}
	*e = Entry{Kind: Send, Length: int(n), Data: h[offInline : offInline+int(n) : offInline+int(n)]}
	return nil
}
