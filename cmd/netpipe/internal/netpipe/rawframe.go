package netpipe

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ethervia/ethervia/nic"
)

// The raw module's frames: the 26-byte Ethervia prefix (nic.PutPrefix),
// whose kind byte says what follows, then big-endian fields:
//
//	data   22 u32 frame seq | 26 u32 msg seq | 30 u32 msg len |
//	       34 u32 fragment index | 38 u16 fragment size | 40 u16 payload len |
//	       42 payload
//	credit 22 u32 data frames the receiver has taken off its devices
//	hello  22 u32 nonce | 26 u16 link index | 28 u16 links
//	ack    as hello, echoing the nonce
//	reset, reset ack
//	       22 u32 epoch | 26 u32 frames sent | 30 u32 messages sent
//	reset request
//	       22 u32 the receiver's current epoch
//
// There is no checksum: raw frames are bare, so a corrupted payload is
// caught only by the integrity mode.
const (
	kindData     = 0x41
	kindCredit   = 0x42
	kindHello    = 0x43
	kindHelloAck = 0x44
	kindReset    = 0x45 // transmitter: drop everything in flight (Resync)
	kindResetAck = 0x46 // receiver: done, and here are my counters
	kindResetReq = 0x47 // receiver: I lost frames, please reset

	rawOffFrameSeq = nic.PrefixLen
	rawOffMsgSeq   = rawOffFrameSeq + 4
	rawOffMsgLen   = rawOffMsgSeq + 4
	rawOffFrag     = rawOffMsgLen + 4
	rawOffFragSize = rawOffFrag + 4
	rawOffPayLen   = rawOffFragSize + 2
	rawHdrLen      = rawOffPayLen + 2 // 42

	rawCtlFrameLen = 60 // control frames fill Ethernet's minimum
)

// rawOverhead is what a data frame carries beyond its payload after the
// Ethernet header, so the payload per frame is MTU - rawOverhead.
const rawOverhead = rawHdrLen - nic.EthHeaderLen

// dataHdr is a decoded data frame header.
type dataHdr struct {
	frameSeq, msgSeq, msgLen, frag uint32
	fragSize, payLen               uint16
}

// errMalformed reports a raw frame whose fields do not add up.
var errMalformed = errors.New("malformed raw frame")

// parseData decodes and checks the header of the data frame f.
func parseData(f []byte) (dataHdr, error) {
	var h dataHdr
	if len(f) < rawHdrLen {
		return h, fmt.Errorf("%w: %d bytes", errMalformed, len(f))
	}
	h.frameSeq = binary.BigEndian.Uint32(f[rawOffFrameSeq:])
	h.msgSeq = binary.BigEndian.Uint32(f[rawOffMsgSeq:])
	h.msgLen = binary.BigEndian.Uint32(f[rawOffMsgLen:])
	h.frag = binary.BigEndian.Uint32(f[rawOffFrag:])
	h.fragSize = binary.BigEndian.Uint16(f[rawOffFragSize:])
	h.payLen = binary.BigEndian.Uint16(f[rawOffPayLen:])
	if h.msgLen > maxMessage+4096 {
		return h, fmt.Errorf("%w: message length %d", errMalformed, h.msgLen)
	}
	if h.fragSize == 0 {
		return h, fmt.Errorf("%w: fragment size 0", errMalformed)
	}
	off := uint64(h.frag) * uint64(h.fragSize)
	want := uint64(0)
	if off < uint64(h.msgLen) {
		want = min(uint64(h.fragSize), uint64(h.msgLen)-off)
	} else if !(h.msgLen == 0 && h.frag == 0) {
		return h, fmt.Errorf("%w: fragment %d of size %d beyond a %d-byte message", errMalformed, h.frag, h.fragSize, h.msgLen)
	}
	if uint64(h.payLen) != want {
		return h, fmt.Errorf("%w: payload %d bytes, want %d", errMalformed, h.payLen, want)
	}
	if len(f) < rawHdrLen+int(h.payLen) {
		return h, fmt.Errorf("%w: %d bytes for a %d-byte payload", errMalformed, len(f), h.payLen)
	}
	return h, nil
}

// putData writes a data header into f (after the prefix).
func putData(f []byte, h *dataHdr) {
	_ = f[rawHdrLen-1]
	binary.BigEndian.PutUint32(f[rawOffFrameSeq:], h.frameSeq)
	binary.BigEndian.PutUint32(f[rawOffMsgSeq:], h.msgSeq)
	binary.BigEndian.PutUint32(f[rawOffMsgLen:], h.msgLen)
	binary.BigEndian.PutUint32(f[rawOffFrag:], h.frag)
	binary.BigEndian.PutUint16(f[rawOffFragSize:], h.fragSize)
	binary.BigEndian.PutUint16(f[rawOffPayLen:], h.payLen)
}

// fragments is the number of frames a message of n bytes takes; an empty
// message still takes one.
func fragments(n, fragSize int) int {
	if n == 0 {
		return 1
	}
	return (n + fragSize - 1) / fragSize
}
