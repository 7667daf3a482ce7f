package bonding

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The bond header starts every message a bonded VI sends on a rail (except
// the RDMA segments, which are plain rail RDMA writes). All fields are
// big-endian:
//
//	0  version (1)
//	1  kind
//	2  flags
//	3  rails: the number of handles in a reply's payload
//	4  msn: the bond message sequence number (data, notice)
//	8  credit: the sender's receive limit; the peer may start every
//	   message whose msn is below it
//	12 total: the message length in bytes
//	16 offset: this block's byte offset in the message
//	20 length: payload bytes after the header
//	24 imm: immediate data (with flagImm)
//	28 aux: data: the message's block length; query and reply: the bond
//	   memory handle asked about
//
// A reply's payload is rails big-endian 32-bit rail memory handles.
const (
	hdrLen      = 32
	wireVersion = 1
	// maxRails bounds the rails of a bond (testbed.MaxRails).
	maxRails = 8
	// ctlCap is the room a control message needs after the header.
	ctlCap = 4 * maxRails
)

// kind is a bond message's type.
type kind uint8

const (
	kindData   kind = 1 // a block of an eager message
	kindNotice kind = 2 // every segment of an RDMA write with immediate data has landed
	kindCredit kind = 3 // only the credit field
	kindQuery  kind = 4 // what are the rail handles of bond handle aux?
	kindReply  kind = 5 // the rail handles of bond handle aux (flagOK), or none
)

func (k kind) String() string {
	switch k {
	case kindData:
		return "data"
	case kindNotice:
		return "notice"
	case kindCredit:
		return "credit"
	case kindQuery:
		return "query"
	case kindReply:
		return "reply"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Header flags.
const (
	flagImm = 1 << 0 // imm is valid
	flagOK  = 1 << 1 // a reply names a region the asker may write
)

// header is a parsed bond header.
type header struct {
	kind                                         kind
	flags                                        uint8
	rails                                        uint8
	msn, credit, total, offset, length, imm, aux uint32
}

var errHeader = errors.New("bonding: bad header")

// putHeader writes h into b, which holds at least hdrLen bytes.
func putHeader(b []byte, h *header) {
	_ = b[hdrLen-1]
	b[0] = wireVersion
	b[1] = byte(h.kind)
	b[2] = h.flags
	b[3] = h.rails
	binary.BigEndian.PutUint32(b[4:], h.msn)
	binary.BigEndian.PutUint32(b[8:], h.credit)
	binary.BigEndian.PutUint32(b[12:], h.total)
	binary.BigEndian.PutUint32(b[16:], h.offset)
	binary.BigEndian.PutUint32(b[20:], h.length)
	binary.BigEndian.PutUint32(b[24:], h.imm)
	binary.BigEndian.PutUint32(b[28:], h.aux)
}

// parseHeader reads the header of message b (header and payload) and
// checks that it is consistent: a known version and kind, a payload length
// that matches b, a block inside its message and a reply payload of the
// announced number of handles. It does not allocate.
func parseHeader(b []byte, h *header) error {
	if len(b) < hdrLen {
		return errHeader
	}
	if b[0] != wireVersion {
		return errHeader
	}
	*h = header{
		kind: kind(b[1]), flags: b[2], rails: b[3],
		msn:    binary.BigEndian.Uint32(b[4:]),
		credit: binary.BigEndian.Uint32(b[8:]),
		total:  binary.BigEndian.Uint32(b[12:]),
		offset: binary.BigEndian.Uint32(b[16:]),
		length: binary.BigEndian.Uint32(b[20:]),
		imm:    binary.BigEndian.Uint32(b[24:]),
		aux:    binary.BigEndian.Uint32(b[28:]),
	}
	if uint64(h.length) != uint64(len(b)-hdrLen) {
		return errHeader
	}
	switch h.kind {
	case kindData:
		// aux is the block length: every block but the last is that long,
		// and a message of n > 0 bytes has no empty block.
		if uint64(h.offset)+uint64(h.length) > uint64(h.total) {
			return errHeader
		}
		if h.total == 0 {
			if h.offset != 0 || h.aux != 0 {
				return errHeader
			}
			return nil
		}
		if h.aux == 0 || h.length == 0 || h.offset%h.aux != 0 || h.length > h.aux ||
			(h.length < h.aux && h.offset+h.length != h.total) {
			return errHeader
		}
	case kindNotice, kindCredit, kindQuery:
		if h.length != 0 {
			return errHeader
		}
	case kindReply:
		if h.rails > maxRails || h.length != 4*uint32(h.rails) {
			return errHeader
		}
	default:
		return errHeader
	}
	return nil
}

// replyHandle returns rail handle i of a reply's payload p.
func replyHandle(p []byte, i int) uint32 {
	return binary.BigEndian.Uint32(p[4*i:])
}
