package vi

import (
	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/reliability"
)

// service moves v's work to the wire: it fragments posted descriptors into
// the connection's window and appends what the connection has to send to
// the provider's batch. p.mu is held.
func (p *Provider) service(v *VI, now reliability.Time) {
	c := v.conn
	if c == nil {
		return
	}
	reliable := v.attrs.Reliability.Reliable()
	for guard := 0; guard < 1<<20; guard++ {
		queued := v.pump(now)
		var more bool
		before := len(p.tx)
		p.tx, more = c.Output(now, p.tx)
		if len(p.tx) == cap(p.tx) || (!reliable && len(p.tx) > before) {
			// Unreliable frames live in a small pool that the next pump
			// reuses, so they must be on the wire first.
			p.sendTx()
		}
		if c.IsClosed() && v.state == Connected {
			// The connection gave up (peer timeout); the Disconnect
			// frame is already in the batch.
			v.fail(now, failure{cause: c.Err(), reason: reliability.ReasonTransport,
				firstStatus: descriptors.StatusTransport})
		}
		if !queued && !more {
			break
		}
		if !more && c.Room() == 0 {
			break
		}
	}
	p.noteDeadline(c.Deadline())
}

// pump fragments as much posted work as the window and the peer's credits
// allow. It reports whether it queued any frame. p.mu is held.
func (v *VI) pump(now reliability.Time) bool {
	c := v.conn
	if c == nil || c.IsClosed() || v.state != Connected {
		return false
	}
	queued := v.pumpReads(now)
	if v.state != Connected {
		return queued // a read was refused
	}
	level := v.attrs.Reliability
	for v.sqStart < v.sq.Back() {
		pos := v.sqStart
		d := v.sq.At(pos)
		st := &v.ss[v.sq.Slot(pos)]
		op := d.Control.Op
		if !st.begun {
			if c.Room() == 0 {
				break
			}
			if d.Control.Fence && v.readsOut > 0 {
				break
			}
			if op == descriptors.OpRDMARead && v.readsOut >= maxReads {
				break
			}
			if op == descriptors.OpSend || op == descriptors.OpRDMAWrite && d.Control.Immediate {
				if !c.CanSendMessage() {
					c.WaitCredit(now)
					break
				}
				st.msn = c.TakeMessage()
			}
			st.begun = true
			st.total = d.TotalLength()
		}
		for !st.queued {
			f := c.NewFrame()
			if f == nil {
				return queued
			}
			fr := reliability.Frag{Msg: st.msn, MsgLen: uint32(st.total), Offset: uint32(st.off)}
			if st.off == 0 {
				fr.Flags |= reliability.FlagFirst
			}
			if d.Control.Immediate && op != descriptors.OpRDMARead {
				fr.Flags |= reliability.FlagImm
				fr.Imm = d.Control.ImmData
			}
			switch op {
			case descriptors.OpRDMARead:
				fr.Kind = reliability.KindReadReq
				fr.Msg = uint32(pos)
				fr.RKey = uint32(d.Address.Handle)
				fr.RAddr = d.Address.Offset
			case descriptors.OpRDMAWrite:
				fr.Kind = reliability.KindWrite
				fr.RKey = uint32(d.Address.Handle)
				fr.RAddr = d.Address.Offset + uint64(st.off)
			default:
				fr.Kind = reliability.KindData
			}
			if fr.Kind != reliability.KindReadReq {
				fr.Flags |= reliability.FlagShort
				fr.Length = gather(v.p.payloadArea(f, fr.Kind, fr.Flags), d.Segments, &st.seg, &st.segOff)
			}
			st.off += fr.Length
			last := st.off == st.total || op == descriptors.OpRDMARead
			if last {
				fr.Flags |= reliability.FlagLast
				if level == ReliableReception {
					fr.Flags |= reliability.FlagAckReq
				}
			}
			seq := c.Queue(f, &fr)
			queued = true
			if fr.Flags&reliability.FlagFirst != 0 {
				st.first = seq
			}
			if last {
				st.last = seq
				st.queued = true
			}
		}
		v.sqStart++
		switch {
		case op == descriptors.OpRDMARead:
			v.readsOut++
		case level != ReliableReception:
			// Unreliable and reliable delivery complete once the frames are
			// handed over: the connection holds their copies.
			v.completeSend(pos, 0)
		}
	}
	if level != ReliableReception {
		v.sqAcked = v.sqStart
	}
	v.publishSend()
	return queued
}

// pumpReads queues the responses to the peer's RDMA reads, in order. Each
// fragment is copied straight from the region into its frame through the
// table's check, so a region deregistered mid-transfer is refused like a
// bad request: the connection breaks with an RDMA protection error naming
// the request.
func (v *VI) pumpReads(now reliability.Time) bool {
	c := v.conn
	queued := false
	const respFlags = reliability.FlagShort
	for v.readyN > 0 {
		j := &v.jobs[v.ready[v.readyHead]]
		for j.off < j.n || !j.sentAny {
			f := c.NewFrame()
			if f == nil {
				return queued
			}
			area := v.p.payloadArea(f, reliability.KindReadResp, respFlags)
			n := min(len(area), j.n-j.off)
			if err := v.p.mem.CopyOut(j.handle, v.attrs.PTag, j.raddr+uint64(j.off), area[:n]); err != nil {
				v.refuse(now, &reliability.Header{Kind: reliability.KindReadReq, Seq: j.seq}, err, false)
				return queued
			}
			fr := reliability.Frag{Kind: reliability.KindReadResp, Flags: respFlags, Length: n, Msg: j.id,
				MsgLen: uint32(j.n), Offset: uint32(j.off)}
			if !j.sentAny {
				fr.Flags |= reliability.FlagFirst
			}
			j.off += n
			j.sentAny = true
			if j.off == j.n {
				fr.Flags |= reliability.FlagLast
			}
			c.Queue(f, &fr)
			queued = true
		}
		*j = readJob{}
		v.readyHead = (v.readyHead + 1) % maxReads
		v.readyN--
	}
	return queued
}

// ackedSends completes reliable-reception sends whose last frame the peer
// has acknowledged, which it does only once the data is placed.
func (v *VI) ackedSends() {
	una := v.conn.SndUna()
	for v.sqAcked < v.sqStart {
		pos := v.sqAcked
		st := &v.ss[v.sq.Slot(pos)]
		if st.done || v.sq.At(pos).Control.Op == descriptors.OpRDMARead {
			v.sqAcked++
			continue
		}
		if !st.last.Less(una) {
			break
		}
		v.completeSend(pos, 0)
		v.sqAcked++
	}
	v.publishSend()
}

// payloadArea is the part of frame f (FrameCap bytes) where the payload of
// a frame of kind k with flags fl goes: after its header, up to the MTU.
func (p *Provider) payloadArea(f []byte, k reliability.Kind, fl reliability.Flags) []byte {
	at := reliability.PayloadOffset(k, fl)
	return f[at:min(p.frameLen, at+maxPayloadLen)]
}

// maxPayloadLen is the most a frame's 16-bit length field can say.
const maxPayloadLen = 0xffff

// gather copies from the scatter/gather list, starting at segment *seg
// offset *off, into dst and advances the cursor.
func gather(dst []byte, segs []descriptors.Segment, seg, off *int) int {
	n := 0
	for n < len(dst) && *seg < len(segs) {
		b := segs[*seg].Buf
		k := copy(dst[n:], b[*off:])
		n += k
		*off += k
		if *off == len(b) {
			*seg++
			*off = 0
		}
	}
	return n
}
