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

	knownFlags = FlagFirst | FlagLast | FlagImm | FlagAckReq | FlagAck | FlagRetx | FlagErrSeq
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

// Checksum returns the CRC32C of a frame of HeaderLen+payloadLen bytes: of
// the bytes before OffCRC followed by the bytes after the CRC field up to the
// end of the payload. The CRC field itself is not covered.
func Checksum(frame []byte, payloadLen int) uint32 {
	c := crc32.Update(0, castagnoli, frame[:OffCRC])
	return crc32.Update(c, castagnoli, frame[OffCRC+4:HeaderLen+payloadLen])
}

// Seal writes the CRC of a frame whose header (including its length field)
// is complete.
func Seal(frame []byte) {
	n := int(binary.BigEndian.Uint16(frame[OffLength:]))
	binary.BigEndian.PutUint32(frame[OffCRC:], Checksum(frame, n))
}

// Put writes h into the first HeaderLen bytes of frame, with the current
// wire version, and seals it: the payload must already be in place.
func Put(frame []byte, h *Header) {
	put(frame, h)
	Seal(frame)
}

// put writes h without sealing.
func put(frame []byte, h *Header) {
	_ = frame[HeaderLen-1]
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
	be.PutUint64(frame[OffSACK:], h.SACK)
	be.PutUint32(frame[OffCredit:], h.Credit)
	be.PutUint16(frame[OffLength:], uint16(h.Length))
	be.PutUint32(frame[OffMsg:], h.Msg)
	be.PutUint32(frame[OffMsgLen:], h.MsgLen)
	be.PutUint32(frame[OffOffset:], h.Offset)
	be.PutUint32(frame[OffImm:], h.Imm)
	be.PutUint32(frame[OffRKey:], h.RKey)
	be.PutUint64(frame[OffRAddr:], h.RAddr)
}

// Parse decodes and verifies frame: length, version, kind, flags, payload
// length and CRC. It does not check the EtherType or job key (the driver
// does) nor whom the frame is for. It never allocates.
func Parse(frame []byte, h *Header) error {
	if len(frame) < HeaderLen {
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
	if f&^knownFlags != 0 {
		return ErrFlags
	}
	n := int(be.Uint16(frame[OffLength:]))
	if HeaderLen+n > len(frame) {
		return ErrLength
	}
	if be.Uint32(frame[OffCRC:]) != Checksum(frame, n) {
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
	h.SACK = be.Uint64(frame[OffSACK:])
	h.Credit = be.Uint32(frame[OffCredit:])
	h.Length = n
	h.Msg = be.Uint32(frame[OffMsg:])
	h.MsgLen = be.Uint32(frame[OffMsgLen:])
	h.Offset = be.Uint32(frame[OffOffset:])
	h.Imm = be.Uint32(frame[OffImm:])
	h.RKey = be.Uint32(frame[OffRKey:])
	h.RAddr = be.Uint64(frame[OffRAddr:])
	return nil
}

// Payload returns the payload of a frame that Parse accepted.
func Payload(frame []byte, h *Header) []byte { return frame[HeaderLen : HeaderLen+h.Length] }

// putAck rewrites the transmission number, acknowledgement fields and flags
// of a built frame and reseals it.
func putAck(frame []byte, flags Flags, txn uint32, ack Seq, echo uint32, sack uint64, credit uint32) {
	be := binary.BigEndian
	be.PutUint16(frame[nic.OffFlags:], uint16(flags))
	be.PutUint32(frame[OffTxn:], txn)
	be.PutUint32(frame[OffAck:], uint32(ack))
	be.PutUint32(frame[OffEcho:], echo)
	be.PutUint64(frame[OffSACK:], sack)
	be.PutUint32(frame[OffCredit:], credit)
	Seal(frame)
}

// FrameLen is the number of bytes of a frame with payloadLen bytes of
// payload, before Ethernet padding.
func FrameLen(payloadLen int) int { return HeaderLen + payloadLen }
