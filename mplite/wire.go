package mplite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The envelope opens every VI send of mplite (the payload of the VI
// message, after the VI layer's own header). All fields are big endian.
// An eager message's envelope is the short form, eagerLen bytes:
//
//	0  1  type (msgEager)
//	1  1  flags: zero
//	2  2  communicator context id
//	4  4  tag (0 .. MaxTag)
//	8  4  payload bytes
//	12 -  payload
//
// (on a rate-limited port every byte of a short message's frame is time:
// the long form cost a 1 KiB message 2.4 % more wire). The other types
// have the long form, envLen bytes:
//
//	0  1  type (msgRTS ... msgOffer)
//	1  1  flags: RTS: 1 = synchronous (any length, even at most the eager
//	      limit: Ssend); otherwise zero
//	2  2  communicator context id
//	4  4  tag (0 .. MaxTag)
//	8  8  length: RTS: message bytes; CTS, Done, Offer: granted bytes
//	16 4  send id: the sender's request (RTS, CTS, Done); Offer: the number of
//	      the sender's next message on the connection (counted from 0 over
//	      eager, RTS and offered messages), the only one the offer is for
//	20 4  receive id: the receiver's request (CTS, Done), also the immediate
//	      data of the final RDMA write
//	24 4  rkey: the handle of the receive buffer (CTS, Offer)
//	28 4  CTS: the number of runs that follow (0: the receive buffer is
//	      contiguous); zero in other types
//	32 8  raddr: the offset of the receive buffer in its region (CTS, Offer)
//	40 -  CTS: its runs, 16 bytes each
//
// A CTS with runs names a receive whose memory has gaps (a RunLayout):
// run i is 8 bytes of offset from raddr and 8 bytes of length, in message
// order, and the lengths add up to the granted bytes. The sender writes
// each run's part of the message there.
const envLen = 40

// eagerLen is the length of an eager message's envelope.
const eagerLen = 12

// envelopeLen is the length of the envelope of a message of type typ.
func envelopeLen(typ uint8) int {
	if typ == msgEager {
		return eagerLen
	}
	return envLen
}

// runLen is the size of one run of a CTS.
const runLen = 16

// Message types.
const (
	msgEager  = 1 // data follows the envelope
	msgRTS    = 2 // request to send a handshake message
	msgCTS    = 3 // clear to send, with the receive buffer's handle
	msgDone   = 4 // the sender finished a handshake with nothing to write
	msgFin    = 5 // Finalize: this rank sends nothing more on the connection
	msgFinAck = 6 // the answer to msgFin
	// msgOffer offers a posted receive's buffer (context and tag in the
	// envelope) for the sender's next message, which may then be written
	// there with the receive's id as immediate data and no RTS or CTS.
	msgOffer = 7
)

// flagSync marks the RTS of a synchronous send.
const flagSync = 1

// MaxTag is the largest tag.
const MaxTag = math.MaxInt32

// maxMessage bounds the length field, far above anything a rank can hold.
const maxMessage = 1 << 48

// errEnvelope reports a malformed envelope.
var errEnvelope = errors.New("mplite: malformed envelope")

// envelope is a decoded envelope.
type envelope struct {
	typ    uint8
	sync   bool // an RTS of a synchronous send
	ctx    uint16
	tag    int
	length int
	sendID uint32
	recvID uint32
	rkey   uint32
	raddr  uint64
	// runs: a received CTS's runs (nruns of them, encoded, in the
	// message); sendRuns: the runs of the receive a CTS to send names.
	runs     []byte
	nruns    int
	sendRuns []Run
}

// putEnvelope writes e into b and returns its length (envelopeLen).
func putEnvelope(b []byte, e *envelope) int {
	if e.typ == msgEager {
		_ = b[eagerLen-1]
		b[0], b[1] = msgEager, 0
		binary.BigEndian.PutUint16(b[2:], e.ctx)
		binary.BigEndian.PutUint32(b[4:], uint32(e.tag))
		binary.BigEndian.PutUint32(b[8:], uint32(e.length))
		return eagerLen
	}
	_ = b[envLen-1]
	b[0] = e.typ
	b[1] = 0
	if e.sync {
		b[1] = flagSync
	}
	binary.BigEndian.PutUint16(b[2:], e.ctx)
	binary.BigEndian.PutUint32(b[4:], uint32(e.tag))
	binary.BigEndian.PutUint64(b[8:], uint64(e.length))
	binary.BigEndian.PutUint32(b[16:], e.sendID)
	binary.BigEndian.PutUint32(b[20:], e.recvID)
	binary.BigEndian.PutUint32(b[24:], e.rkey)
	binary.BigEndian.PutUint32(b[28:], 0)
	binary.BigEndian.PutUint64(b[32:], e.raddr)
	return envLen
}

// putRuns writes the runs that hold a receive's first grant bytes after
// the CTS envelope in b (the last one cut short) and returns their encoded
// length.
func putRuns(b []byte, runs []Run, grant int) int {
	k, at := 0, envLen
	for _, run := range runs {
		if grant == 0 {
			break
		}
		n := min(run.Len, grant)
		binary.BigEndian.PutUint64(b[at:], uint64(run.Off))
		binary.BigEndian.PutUint64(b[at+8:], uint64(n))
		grant -= n
		at += runLen
		k++
	}
	binary.BigEndian.PutUint32(b[28:], uint32(k))
	return at - envLen
}

// runAt decodes run i of a received CTS.
func (e *envelope) runAt(i int) Run {
	b := e.runs[i*runLen:]
	return Run{Off: int(binary.BigEndian.Uint64(b)), Len: int(binary.BigEndian.Uint64(b[8:]))}
}

// checkRuns checks a received CTS's runs: each non-empty, within the
// bounds of a message, and together exactly the granted bytes.
func (e *envelope) checkRuns() error {
	total := 0
	for i := range e.nruns {
		run := e.runAt(i) // a field above 2^63 decodes negative
		if run.Len <= 0 || run.Off < 0 || run.Off > maxMessage || run.Len > e.length-total {
			return fmt.Errorf("%w: CTS run %d of %d bytes at %d for %d granted", errEnvelope, i, run.Len, run.Off, e.length)
		}
		total += run.Len
	}
	if total != e.length {
		return fmt.Errorf("%w: CTS runs of %d bytes for %d granted", errEnvelope, total, e.length)
	}
	return nil
}

// parseEnvelope decodes the envelope of a received VI message msg (its
// whole length) and checks it against the eager limit. It does not
// allocate when msg is well formed.
func parseEnvelope(msg []byte, eagerLimit int, e *envelope) error {
	if len(msg) > 0 && msg[0] == msgEager {
		return parseEager(msg, eagerLimit, e)
	}
	if len(msg) < envLen {
		return fmt.Errorf("%w: %d bytes", errEnvelope, len(msg))
	}
	e.typ = msg[0]
	e.sync = msg[1] == flagSync && e.typ == msgRTS
	e.runs, e.nruns, e.sendRuns = nil, 0, nil
	nruns := binary.BigEndian.Uint32(msg[28:])
	if (msg[1] != 0 && !e.sync) || (nruns != 0 && e.typ != msgCTS) {
		return fmt.Errorf("%w: reserved bits set", errEnvelope)
	}
	e.ctx = binary.BigEndian.Uint16(msg[2:])
	tag := binary.BigEndian.Uint32(msg[4:])
	if tag > MaxTag {
		return fmt.Errorf("%w: tag %d", errEnvelope, tag)
	}
	e.tag = int(tag)
	n := binary.BigEndian.Uint64(msg[8:])
	if n > maxMessage {
		return fmt.Errorf("%w: length %d", errEnvelope, n)
	}
	e.length = int(n)
	e.sendID = binary.BigEndian.Uint32(msg[16:])
	e.recvID = binary.BigEndian.Uint32(msg[20:])
	e.rkey = binary.BigEndian.Uint32(msg[24:])
	e.raddr = binary.BigEndian.Uint64(msg[32:])
	switch e.typ {
	case msgRTS:
		if (e.length <= eagerLimit && !e.sync) || e.sendID == 0 {
			return fmt.Errorf("%w: RTS of %d bytes, send id %d", errEnvelope, e.length, e.sendID)
		}
	case msgCTS:
		if e.sendID == 0 || e.recvID == 0 {
			return fmt.Errorf("%w: CTS with ids %d/%d", errEnvelope, e.sendID, e.recvID)
		}
		if nruns > 0 {
			if nruns > maxRuns || len(msg) != envLen+int(nruns)*runLen {
				return fmt.Errorf("%w: CTS of %d runs in a %d-byte message", errEnvelope, nruns, len(msg))
			}
			e.runs, e.nruns = msg[envLen:], int(nruns)
			return e.checkRuns()
		}
	case msgDone:
		if e.recvID == 0 {
			return fmt.Errorf("%w: Done without a receive id", errEnvelope)
		}
	case msgOffer:
		if e.recvID == 0 || e.length == 0 {
			return fmt.Errorf("%w: offer of %d bytes, receive id %d", errEnvelope, e.length, e.recvID)
		}
	case msgFin, msgFinAck:
	default:
		return fmt.Errorf("%w: type %d", errEnvelope, e.typ)
	}
	if len(msg) != envLen {
		return fmt.Errorf("%w: type %d with %d bytes", errEnvelope, e.typ, len(msg))
	}
	return nil
}

// parseEager decodes the short envelope of an eager message msg (its whole
// length): its payload is msg[eagerLen:].
func parseEager(msg []byte, eagerLimit int, e *envelope) error {
	if len(msg) < eagerLen {
		return fmt.Errorf("%w: eager message of %d bytes", errEnvelope, len(msg))
	}
	if msg[1] != 0 {
		return fmt.Errorf("%w: reserved bits set", errEnvelope)
	}
	tag := binary.BigEndian.Uint32(msg[4:])
	if tag > MaxTag {
		return fmt.Errorf("%w: tag %d", errEnvelope, tag)
	}
	n := int(binary.BigEndian.Uint32(msg[8:]))
	if n > eagerLimit || len(msg) != eagerLen+n {
		return fmt.Errorf("%w: eager length %d in a %d-byte message", errEnvelope, n, len(msg))
	}
	*e = envelope{typ: msgEager, ctx: binary.BigEndian.Uint16(msg[2:]), tag: int(tag), length: n}
	return nil
}
