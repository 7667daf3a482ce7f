package vi

import (
	"errors"
	"fmt"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/internal/seq"
	"github.com/ethervia/ethervia/internal/sgl"
	"github.com/ethervia/ethervia/rdma"
	"github.com/ethervia/ethervia/reliability"
)

var (
	errProtocol = errors.New("peer broke the protocol")
	errNoDesc   = errors.New("message without a receive descriptor")
	errDisabled = fmt.Errorf("%w: operation not enabled on the VI", rdma.ErrProtection)
)

// onFrame handles a frame of v's current connection. p.mu is held.
func (v *VI) onFrame(now reliability.Time, h *reliability.Header, frame []byte) {
	c := v.conn
	verdict := c.Input(now, h)
	if verdict&reliability.Acked != 0 && v.attrs.Reliability == ReliableReception && v.state == Connected {
		v.ackedSends()
	}
	if verdict&reliability.Closed != 0 {
		v.remoteClosed(now)
		return
	}
	if verdict&reliability.Accept != 0 && v.state == Connected {
		if v.place(now, h, reliability.Payload(frame, h)) {
			c.Deliver(now, h)
			v.drain(now)
		}
	}
	v.p.markDirty(v)
}

// protocolError breaks the connection over a frame that cannot be right.
func (v *VI) protocolError(now reliability.Time, h *reliability.Header, reason reliability.Reason, cause error) {
	v.fail(now, failure{cause: fmt.Errorf("%w: %v frame %d", cause, h.Kind, h.Seq), reason: reason,
		seq: h.Seq, hasSeq: true, firstStatus: descriptors.StatusTransport})
}

// recvPos maps a message number to its receive position.
func (v *VI) recvPos(msn uint32) (uint64, bool) {
	k := uint64(msn - v.recvMsn)
	if k >= v.rq.Back()-v.rqNext {
		return 0, false
	}
	return v.rqNext + k, true
}

// place puts a new frame's payload where it belongs. It returns false when
// the frame was refused (the connection may have broken).
func (v *VI) place(now reliability.Time, h *reliability.Header, payload []byte) bool {
	reliable := v.attrs.Reliability.Reliable()
	switch h.Kind {
	case reliability.KindData:
		if !reliable {
			return v.placeUnreliable(now, h, payload, false)
		}
		return v.placeMessage(now, h, payload, false)

	case reliability.KindWrite:
		if !v.attrs.EnableRDMAWrite {
			v.refuse(now, h, errDisabled, true)
			return false
		}
		if uint64(h.Offset)+uint64(len(payload)) > uint64(h.MsgLen) {
			if reliable {
				v.protocolError(now, h, reliability.ReasonProtocol, errProtocol)
			}
			return false
		}
		imm := h.Flags&reliability.FlagImm != 0
		if imm && reliable {
			if _, ok := v.recvPos(h.Msg); !ok {
				v.protocolError(now, h, reliability.ReasonNoDescriptor, errNoDesc)
				return false
			}
		}
		// The whole write, [raddr-offset, +msglen), is checked with every
		// fragment, before any byte moves.
		base := h.RAddr - uint64(h.Offset)
		if err := v.p.mem.CopyInAt(rdma.Handle(h.RKey), v.attrs.PTag, v.Grantee(), base, uint64(h.MsgLen), uint64(h.Offset), payload); err != nil {
			v.refuse(now, h, err, false)
			return false
		}
		if !imm {
			return true
		}
		if reliable {
			return v.placeMessage(now, h, payload, true)
		}
		return v.placeUnreliable(now, h, payload, true)

	case reliability.KindReadReq:
		if !reliable || !v.attrs.EnableRDMARead {
			v.refuse(now, h, errDisabled, true)
			return false
		}
		if err := v.p.mem.Check(rdma.Handle(h.RKey), v.attrs.PTag, rdma.RemoteRead, h.RAddr, int(h.MsgLen)); err != nil {
			v.refuse(now, h, err, false)
			return false
		}
		for i := range v.jobs {
			if !v.jobs[i].used {
				v.jobs[i] = readJob{used: true, seq: h.Seq, id: h.Msg, handle: rdma.Handle(h.RKey), raddr: h.RAddr, n: int(h.MsgLen)}
				return true
			}
		}
		v.protocolError(now, h, reliability.ReasonProtocol, errProtocol)
		return false

	case reliability.KindReadResp:
		pos, ok := v.readPos(h.Msg)
		if !ok {
			v.protocolError(now, h, reliability.ReasonProtocol, errProtocol)
			return false
		}
		st := &v.ss[v.sq.Slot(pos)]
		if int(h.MsgLen) != st.total || uint64(h.Offset)+uint64(len(payload)) > uint64(st.total) {
			v.protocolError(now, h, reliability.ReasonProtocol, errProtocol)
			return false
		}
		sgl.Scatter(v.sq.At(pos).Segments, int(h.Offset), payload)
		return true
	}
	return false
}

// refuse handles an RDMA frame refused before any byte moved: it counts
// the refusal and follows VIA's rules for the level. A reliable VI breaks
// the connection, telling the peer which frame failed, so the initiator's
// descriptor completes with an RDMA protection error and later ones are
// flushed. An unreliable VI drops the frame and carries on; a write with
// immediate data completes the receive it would have consumed with the
// error. disabled says the VI has not enabled the operation (the table
// counted the other reasons).
func (v *VI) refuse(now reliability.Time, h *reliability.Header, cause error, disabled bool) {
	v.stats.RDMARefused++
	if disabled {
		v.p.stats.RDMADisabled++
	}
	if v.attrs.Reliability.Reliable() {
		v.fail(now, failure{cause: fmt.Errorf("%w: %v frame %d: %w", descriptors.ErrRDMAProtection, h.Kind, h.Seq, cause),
			reason: reliability.ReasonRDMAProtection, seq: h.Seq, hasSeq: true})
		return
	}
	if h.Kind == reliability.KindWrite && h.Flags&reliability.FlagImm != 0 {
		v.refuseUnreliable(now, h)
	}
}

// refuseUnreliable completes the receive that a refused write with
// immediate data would have consumed (once per message) with the RDMA
// protection error, and drops the rest of the message.
func (v *VI) refuseUnreliable(now reliability.Time, h *reliability.Header) {
	u := &v.u
	m := h.Msg
	if u.active && m == u.msn {
		if u.discard {
			return
		}
	} else {
		if u.active && seq.Less(m, u.msn) || !u.active && seq.Less(m, v.recvMsn) {
			return // an older message: already complete or abandoned
		}
		if u.active && !u.discard {
			v.stats.MessagesLost++
		}
		u.active, u.msn = true, m
		if v.rqNext >= v.rq.Back() {
			v.stats.MessagesLost++
			u.discard = true
			v.recvMsn = m + 1
			v.updateLimit(now)
			return
		}
		st := &v.rs[v.rq.Slot(v.rqNext)]
		*st = recvState{capacity: st.capacity, started: true, write: true, msgLen: h.MsgLen}
	}
	u.discard = true
	v.completeRecv(descriptors.StatusRDMAProtection)
	v.recvMsn = m + 1
	v.updateLimit(now)
}

// readPos finds our outstanding RDMA read with the given id.
func (v *VI) readPos(id uint32) (uint64, bool) {
	for pos := v.sqReap; pos < v.sqStart; pos++ {
		if uint32(pos) != id {
			continue
		}
		st := &v.ss[v.sq.Slot(pos)]
		if st.done || v.sq.At(pos).Control.Op != descriptors.OpRDMARead {
			return 0, false
		}
		return pos, true
	}
	return 0, false
}

// placeMessage places a fragment of a send (or notes an RDMA write with
// immediate data) in the receive descriptor its message number names.
// Reliable levels only.
func (v *VI) placeMessage(now reliability.Time, h *reliability.Header, payload []byte, write bool) bool {
	pos, ok := v.recvPos(h.Msg)
	if !ok {
		v.protocolError(now, h, reliability.ReasonNoDescriptor, errNoDesc)
		return false
	}
	st := &v.rs[v.rq.Slot(pos)]
	if !st.started {
		st.started, st.write, st.msgLen = true, write, h.MsgLen
		// A message too long for the descriptor fails when it completes,
		// in order, so earlier messages still arrive.
		st.lenErr = !write && int(h.MsgLen) > st.capacity
	} else if st.msgLen != h.MsgLen || st.write != write {
		v.protocolError(now, h, reliability.ReasonProtocol, errProtocol)
		return false
	}
	if uint64(h.Offset)+uint64(len(payload)) > uint64(h.MsgLen) {
		v.protocolError(now, h, reliability.ReasonProtocol, errProtocol)
		return false
	}
	if h.Flags&reliability.FlagFirst != 0 {
		st.firstSeq, st.hasFirst = h.Seq, true
	}
	if h.Flags&reliability.FlagImm != 0 {
		st.imm, st.hasImm = h.Imm, true
	}
	if !st.lenErr && !write {
		sgl.Scatter(v.rq.At(pos).Segments, int(h.Offset), payload)
	}
	return true
}

// drain handles the messages the connection completed in order.
func (v *VI) drain(now reliability.Time) {
	c := v.conn
	for v.state == Connected {
		x, ok := c.NextCompletion()
		if !ok {
			return
		}
		switch x.Kind {
		case reliability.KindData, reliability.KindWrite:
			if x.Kind == reliability.KindWrite && x.Flags&reliability.FlagImm == 0 {
				continue
			}
			if x.Aux != v.recvMsn || v.rqNext >= v.rq.Back() {
				v.protocolError(now, &reliability.Header{Kind: x.Kind, Seq: x.Seq}, reliability.ReasonProtocol, errProtocol)
				return
			}
			st := &v.rs[v.rq.Slot(v.rqNext)]
			if st.lenErr {
				seq := x.Seq
				if st.hasFirst {
					seq = st.firstSeq
				}
				v.fail(now, failure{
					cause:  fmt.Errorf("%w: message of %d bytes for a %d-byte receive", descriptors.ErrLength, st.msgLen, st.capacity),
					reason: reliability.ReasonLength, seq: seq, hasSeq: true,
					recvStatus: descriptors.StatusLength,
				})
				return
			}
			v.completeRecv(0)
			v.recvMsn++
		case reliability.KindReadReq:
			for i := range v.jobs {
				j := &v.jobs[i]
				if j.used && !j.ready && j.seq == x.Seq {
					j.ready = true
					v.ready[(v.readyHead+v.readyN)%maxReads] = int8(i)
					v.readyN++
					break
				}
			}
		case reliability.KindReadResp:
			if pos, ok := v.readPos(x.Aux); ok {
				v.completeSend(pos, 0)
				v.readsOut--
				v.publishSend()
			}
		}
	}
}

// placeUnreliable reassembles messages of an unreliable VI: one message at
// a time in the receive at rqNext; a newer message abandons an incomplete
// one, whose descriptor is reused.
func (v *VI) placeUnreliable(now reliability.Time, h *reliability.Header, payload []byte, write bool) bool {
	u := &v.u
	m := h.Msg
	if !(u.active && m == u.msn) {
		if u.active && seq.Less(m, u.msn) || !u.active && seq.Less(m, v.recvMsn) {
			return true // an older message: already complete or abandoned
		}
		if u.active && !u.discard {
			v.stats.MessagesLost++
		}
		u.active, u.msn, u.discard = true, m, false
		v.recvMsn = m
		if v.rqNext >= v.rq.Back() {
			// The peer outran its credit; nothing to put it in.
			v.stats.MessagesLost++
			u.discard = true
			v.recvMsn = m + 1
			v.updateLimit(now)
			return true
		}
		st := &v.rs[v.rq.Slot(v.rqNext)]
		*st = recvState{capacity: st.capacity, started: true, write: write, msgLen: h.MsgLen}
		if !write && int(h.MsgLen) > st.capacity {
			// Unreliable: the descriptor reports the length error and the
			// connection carries on.
			u.discard = true
			v.completeRecv(descriptors.StatusLength)
			v.recvMsn = m + 1
			v.updateLimit(now)
			return true
		}
	}
	if u.discard {
		return true
	}
	st := &v.rs[v.rq.Slot(v.rqNext)]
	if st.msgLen != h.MsgLen || st.write != write || uint64(h.Offset)+uint64(len(payload)) > uint64(h.MsgLen) {
		return false // inconsistent: drop the frame
	}
	if !write {
		sgl.Scatter(v.rq.At(v.rqNext).Segments, int(h.Offset), payload)
	}
	if h.Flags&reliability.FlagImm != 0 {
		st.imm, st.hasImm = h.Imm, true
	}
	st.got += len(payload)
	if st.got >= int(st.msgLen) {
		v.completeRecv(0)
		u.active = false
		v.recvMsn = m + 1
		v.updateLimit(now)
	}
	return true
}

// updateLimit advertises the receives posted beyond the next message.
func (v *VI) updateLimit(now reliability.Time) {
	if v.conn != nil {
		v.conn.SetRecvLimit(now, v.recvLimit())
	}
}

// recvLimit is the credit limit the posted receives give the peer: the
// next message number to complete plus the receives posted beyond it.
func (v *VI) recvLimit() uint32 { return v.recvMsn + uint32(v.rq.Back()-v.rqNext) }
