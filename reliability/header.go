package reliability

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/ethervia/ethervia/nic"
)

// Byte offsets of the Ethervia transport header, which follows the 26-byte
// nic prefix. All fields are big endian. docs/wire.md is the normative
// description.
const (
	OffDstVI  = nic.PrefixLen + 0  // 2: receiver's VI number (0: the provider)
	OffSrcVI  = nic.PrefixLen + 2  // 2: sender's VI number
	OffConnID = nic.PrefixLen + 4  // 4: the receiver's connection nonce
	OffSeq    = nic.PrefixLen + 8  // 4: sequence number
	OffTxn    = nic.PrefixLen + 12 // 4: transmission number
	OffAck    = nic.PrefixLen + 16 // 4: cumulative acknowledgement
	OffEcho   = nic.PrefixLen + 20 // 4: highest transmission number received
	OffSACK   = nic.PrefixLen + 24 // 8: selective acknowledgement bitmap
	OffCredit = nic.PrefixLen + 32 // 4: credit limit (message sequence)
	OffLength = nic.PrefixLen + 36 // 2: payload length
	OffCRC    = nic.PrefixLen + 38 // 4: CRC32C
	OffMsg    = nic.PrefixLen + 42 // 4: message sequence number / kind-specific
	OffMsgLen = nic.PrefixLen + 46 // 4: message length / kind-specific
	OffOffset = nic.PrefixLen + 50 // 4: byte offset in the message
	OffImm    = nic.PrefixLen + 54 // 4: immediate data / kind-specific
	OffRKey   = nic.PrefixLen + 58 // 4: remote memory handle / kind-specific
	OffRAddr  = nic.PrefixLen + 62 // 8: remote offset / kind-specific

	// HeaderLen is the length of prefix plus header: the payload starts here.
	HeaderLen = nic.PrefixLen + 70
)

// The short transport header (FlagShort) of data, write and read-response
// frames leaves out the SACK bitmap and every field its kind does not use.
// The fields up to Echo sit where they do in the full header; then:
const (
	OffShortCredit = nic.PrefixLen + 24 // 4: credit limit
	OffShortLength = nic.PrefixLen + 28 // 2: payload length
	OffShortCRC    = nic.PrefixLen + 30 // 4: CRC32C
	OffShortMsg    = nic.PrefixLen + 34 // 4: message sequence number
	OffShortMsgLen = nic.PrefixLen + 38 // 4: message length
	OffShortOffset = nic.PrefixLen + 42 // 4: byte offset in the message

	// ShortHeaderLen is the length of prefix plus short header. Immediate
	// data (4 bytes, with FlagImm) follows, then a write's remote key (4)
	// and address (8), then the payload: PayloadOffset.
	ShortHeaderLen = nic.PrefixLen + 46
)

// Kind is a frame kind, carried in the prefix's kind byte.
type Kind uint8

// Frame kinds. The four data-bearing kinds are sequenced; the rest are not.
const (
	KindData       Kind = 1  // a fragment of a send
	KindWrite      Kind = 2  // a fragment of an RDMA write
	KindReadReq    Kind = 3  // an RDMA read request
	KindReadResp   Kind = 4  // a fragment of an RDMA read response
	KindAck        Kind = 5  // acknowledgement, credit update, keepalive
	KindConnReq    Kind = 6  // client/server connection request
	KindConnAccept Kind = 7  // connection accepted
	KindConnReject Kind = 8  // connection rejected
	KindPeerReq    Kind = 9  // peer-to-peer connection request (and its answer)
	KindDisconnect Kind = 10 // the connection is over; Msg carries a Reason
	maxKind             = KindDisconnect
)

var kindNames = [...]string{"", "data", "write", "read-req", "read-resp", "ack", "conn-req", "conn-accept", "conn-reject", "peer-req", "disconnect"}

func (k Kind) String() string {
	if k >= 1 && k <= maxKind {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Sequenced reports whether frames of kind k carry a sequence number that the
// receiver acknowledges and orders.
func (k Kind) Sequenced() bool { return k >= KindData && k <= KindReadResp }

// Short reports whether frames of kind k may have the short header: the
// kinds that carry a message's bytes.
func (k Kind) Short() bool { return k == KindData || k == KindWrite || k == KindReadResp }

// Flags are the frame flags, carried in the prefix's flags field.
type Flags uint16

// Frame flags.
const (
	FlagFirst  Flags = 0x0001 // first fragment of a message
	FlagLast   Flags = 0x0002 // last fragment of a message
	FlagImm    Flags = 0x0004 // Imm carries immediate data
	FlagAckReq Flags = 0x0008 // acknowledge at once
	FlagAck    Flags = 0x0010 // Ack and SACK are valid
	FlagRetx   Flags = 0x0020 // a retransmission (informational)
	FlagErrSeq Flags = 0x0040 // on Disconnect: Seq names the frame that failed
	// FlagShort: the frame has the short header (ShortHeaderLen), which
	// only the data-bearing kinds (Kind.Short) may use. With FlagAck it
	// acknowledges Ack and Echo; it never carries a SACK bitmap.
	FlagShort Flags = 0x0080

	knownFlags = FlagFirst | FlagLast | FlagImm | FlagAckReq | FlagAck | FlagRetx | FlagErrSeq | FlagShort
)

// Header is a decoded frame header, prefix included.
type Header struct {
	Dst, Src  [6]byte
	EtherType uint16
	Kind      Kind
	Flags     Flags
	JobKey    uint32
	// DstEP and SrcEP are the endpoints on the two NICs (nic.PrefixLen).
	DstEP, SrcEP uint16

	DstVI, SrcVI uint16
	ConnID       uint32
	Seq          Seq
	Txn          uint32
	Ack          Seq
	Echo         uint32
	SACK         uint64
	Credit       uint32
	Length       int // payload length

	Msg    uint32
	MsgLen uint32
	Offset uint32
	Imm    uint32
	RKey   uint32
	RAddr  uint64
}

// Source is the sender's address: its MAC and endpoint.
func (h *Header) Source() nic.Addr { return nic.Addr{MAC: h.Src, EP: h.SrcEP} }

// Errors returned by Parse.
var (
	ErrShort   = errors.New("reliability: frame shorter than the header")
	ErrVersion = errors.New("reliability: unknown wire version")
	ErrKind    = errors.New("reliability: unknown frame kind")
	ErrFlags   = errors.New("reliability: unknown flags")
	ErrLength  = errors.New("reliability: payload length beyond the frame")
	ErrCRC     = errors.New("reliability: CRC32C mismatch")
)

// castagnoli is immutable once built.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// layout places the fields whose offsets differ between the full and the
// short header; -1: the field is not carried.
type layout struct {
	sack, credit, length, crc int
	msg, msgLen, offset       int
	imm, rkey, raddr, payload int
}

// layoutOf returns the layout of a frame of kind k with flags f.
func layoutOf(k Kind, f Flags) layout {
	if f&FlagShort == 0 {
		return layout{sack: OffSACK, credit: OffCredit, length: OffLength, crc: OffCRC, msg: OffMsg, msgLen: OffMsgLen,
			offset: OffOffset, imm: OffImm, rkey: OffRKey, raddr: OffRAddr, payload: HeaderLen}
	}
	l := layout{sack: -1, credit: OffShortCredit, length: OffShortLength, crc: OffShortCRC, msg: OffShortMsg,
		msgLen: OffShortMsgLen, offset: OffShortOffset, imm: -1, rkey: -1, raddr: -1}
	at := ShortHeaderLen
	if f&FlagImm != 0 {
		l.imm = at
		at += 4
	}
	if k == KindWrite {
		l.rkey, l.raddr = at, at+4
		at += 12
	}
	l.payload = at
	return l
}

// PayloadOffset is where the payload of a frame of kind k with flags f
// starts: HeaderLen, or less with FlagShort.
func PayloadOffset(k Kind, f Flags) int { return layoutOf(k, f).payload }

// frameLayout is the layout of a built frame, read from its prefix.
func frameLayout(frame []byte) layout {
	return layoutOf(Kind(frame[nic.OffKind]), Flags(binary.BigEndian.Uint16(frame[nic.OffFlags:])))
}

// Checksum returns the CRC32C of a frame of HeaderLen+payloadLen bytes with
// the full header: of the bytes before OffCRC followed by the bytes after
// the CRC field up to the end of the payload. The CRC field itself is not
// covered. A short header's CRC covers the same way around OffShortCRC.
func Checksum(frame []byte, payloadLen int) uint32 {
	return checksum(frame, OffCRC, HeaderLen+payloadLen)
}

// checksum is the CRC32C of frame[:end] less the 4 bytes at crc.
func checksum(frame []byte, crc, end int) uint32 {
	c := crc32.Update(0, castagnoli, frame[:crc])
	return crc32.Update(c, castagnoli, frame[crc+4:end])
}

// Seal writes the CRC of a frame whose header (including its kind, flags
// and length fields) is complete.
func Seal(frame []byte) { seal(frame, frameLayout(frame)) }

func seal(frame []byte, l layout) {
	n := int(binary.BigEndian.Uint16(frame[l.length:]))
	binary.BigEndian.PutUint32(frame[l.crc:], checksum(frame, l.crc, l.payload+n))
}

// Put writes h into the first PayloadOffset(h.Kind, h.Flags) bytes of
// frame, with the current wire version, and seals it: the payload must
// already be in place.
func Put(frame []byte, h *Header) {
	seal(frame, put(frame, h))
}

// put writes h without sealing and returns its layout. Fields the layout
// does not carry are left out.
func put(frame []byte, h *Header) layout {
	l := layoutOf(h.Kind, h.Flags)
	_ = frame[l.payload-1]
	nic.PutPrefix(frame, &nic.Prefix{Dst: h.Dst, Src: h.Src, EtherType: h.EtherType,
		Version: nic.Version, Kind: uint8(h.Kind), Flags: uint16(h.Flags), JobKey: h.JobKey, DstEP: h.DstEP, SrcEP: h.SrcEP})
	be := binary.BigEndian
	be.PutUint16(frame[OffDstVI:], h.DstVI)
	be.PutUint16(frame[OffSrcVI:], h.SrcVI)
	be.PutUint32(frame[OffConnID:], h.ConnID)
	be.PutUint32(frame[OffSeq:], uint32(h.Seq))
	be.PutUint32(frame[OffTxn:], h.Txn)
	be.PutUint32(frame[OffAck:], uint32(h.Ack))
	be.PutUint32(frame[OffEcho:], h.Echo)
	if l.sack >= 0 {
		be.PutUint64(frame[l.sack:], h.SACK)
	}
	be.PutUint32(frame[l.credit:], h.Credit)
	be.PutUint16(frame[l.length:], uint16(h.Length))
	be.PutUint32(frame[l.msg:], h.Msg)
	be.PutUint32(frame[l.msgLen:], h.MsgLen)
	be.PutUint32(frame[l.offset:], h.Offset)
	if l.imm >= 0 {
		be.PutUint32(frame[l.imm:], h.Imm)
	}
	if l.rkey >= 0 {
		be.PutUint32(frame[l.rkey:], h.RKey)
		be.PutUint64(frame[l.raddr:], h.RAddr)
	}
	return l
}

// Parse decodes and verifies frame: length, version, kind, flags, payload
// length and CRC. It does not check the EtherType or job key (the driver
// does) nor whom the frame is for. Fields a short header does not carry
// are zero. It never allocates.
func Parse(frame []byte, h *Header) error {
	if len(frame) < ShortHeaderLen {
		return ErrShort
	}
	if frame[nic.OffVersion] != nic.Version {
		return ErrVersion
	}
	be := binary.BigEndian
	k := Kind(frame[nic.OffKind])
	if k < 1 || k > maxKind {
		return ErrKind
	}
	f := Flags(be.Uint16(frame[nic.OffFlags:]))
	if f&^knownFlags != 0 || f&FlagShort != 0 && !k.Short() {
		return ErrFlags
	}
	l := layoutOf(k, f)
	if len(frame) < l.payload {
		return ErrShort
	}
	n := int(be.Uint16(frame[l.length:]))
	if l.payload+n > len(frame) {
		return ErrLength
	}
	if be.Uint32(frame[l.crc:]) != checksum(frame, l.crc, l.payload+n) {
		return ErrCRC
	}
	copy(h.Dst[:], frame[0:6])
	copy(h.Src[:], frame[6:12])
	h.EtherType = be.Uint16(frame[nic.OffEtherType:])
	h.Kind = k
	h.Flags = f
	h.JobKey = be.Uint32(frame[nic.OffJobKey:])
	h.DstEP = be.Uint16(frame[nic.OffDstEP:])
	h.SrcEP = be.Uint16(frame[nic.OffSrcEP:])
	h.DstVI = be.Uint16(frame[OffDstVI:])
	h.SrcVI = be.Uint16(frame[OffSrcVI:])
	h.ConnID = be.Uint32(frame[OffConnID:])
	h.Seq = Seq(be.Uint32(frame[OffSeq:]))
	h.Txn = be.Uint32(frame[OffTxn:])
	h.Ack = Seq(be.Uint32(frame[OffAck:]))
	h.Echo = be.Uint32(frame[OffEcho:])
	h.SACK, h.Imm, h.RKey, h.RAddr = 0, 0, 0, 0
	if l.sack >= 0 {
		h.SACK = be.Uint64(frame[l.sack:])
	}
	h.Credit = be.Uint32(frame[l.credit:])
	h.Length = n
	h.Msg = be.Uint32(frame[l.msg:])
	h.MsgLen = be.Uint32(frame[l.msgLen:])
	h.Offset = be.Uint32(frame[l.offset:])
	if l.imm >= 0 {
		h.Imm = be.Uint32(frame[l.imm:])
	}
	if l.rkey >= 0 {
		h.RKey = be.Uint32(frame[l.rkey:])
		h.RAddr = be.Uint64(frame[l.raddr:])
	}
	return nil
}

// Payload returns the payload of a frame that Parse accepted.
func Payload(frame []byte, h *Header) []byte {
	at := PayloadOffset(h.Kind, h.Flags)
	return frame[at : at+h.Length]
}

// putAck rewrites the transmission number, acknowledgement fields and flags
// of a built frame and reseals it. A short header has no room for sack: the
// caller leaves FlagAck out of such a frame while it has one to tell.
func putAck(frame []byte, flags Flags, txn uint32, ack Seq, echo uint32, sack uint64, credit uint32) {
	be := binary.BigEndian
	be.PutUint16(frame[nic.OffFlags:], uint16(flags))
	l := frameLayout(frame)
	be.PutUint32(frame[OffTxn:], txn)
	be.PutUint32(frame[OffAck:], uint32(ack))
	be.PutUint32(frame[OffEcho:], echo)
	if l.sack >= 0 {
		be.PutUint64(frame[l.sack:], sack)
	}
	be.PutUint32(frame[l.credit:], credit)
	seal(frame, l)
}

// FrameLen is the number of bytes of a frame with payloadLen bytes of
// payload and the full header, before Ethernet padding.
func FrameLen(payloadLen int) int { return HeaderLen + payloadLen }

// frameBytes is the length of a built frame: its header and payload.
func frameBytes(frame []byte) int {
	l := frameLayout(frame)
	return l.payload + int(binary.BigEndian.Uint16(frame[l.length:]))
}
