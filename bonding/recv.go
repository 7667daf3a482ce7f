package bonding

import (
	"fmt"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/internal/seq"
	"github.com/ethervia/ethervia/internal/sgl"
	"github.com/ethervia/ethervia/vi"
)

type recvState struct {
	capacity          int
	started, complete bool
	lenErr, write     bool
	hasImm            bool
	status            descriptors.Status
	msgLen, blockLen  uint32
	nblocks, got      int
	imm               uint32
}

// PostRecv posts d on the receive queue. Receives may be posted in any
// state but closed; each is a credit the peer may use for one message.
func (v *VI) PostRecv(d *descriptors.Descriptor) error {
	d.Reset()
	if err := d.CheckFormat(descriptors.Limits{MaxSegments: v.maxSegs + 1, MaxTransfer: v.maxTransfer}, true); err != nil {
		d.Status = descriptors.StatusDone | descriptors.StatusFormat
		return fmt.Errorf("bonding: post recv: %w", err)
	}
	if err := v.acquire(d); err != nil {
		d.Status = descriptors.StatusDone | descriptors.StatusProtection
		return fmt.Errorf("bonding: post recv: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.setQuiet(false)
	if v.state == closedVI {
		v.release(d)
		return fmt.Errorf("bonding: post recv: %w", ErrClosed)
	}
	pos, err := v.rq.Push(d)
	if err != nil {
		v.release(d)
		return fmt.Errorf("bonding: post recv: %w", err)
	}
	v.rs[v.rq.Slot(pos)] = recvState{capacity: d.TotalLength()}
	if v.state == Error {
		v.flushRecvs()
		v.publish()
		return nil
	}
	// A peer that used up its credit learns of this receive at once;
	// otherwise the credit rides on the next message or progress.
	if v.state == Connected && v.announced == v.hiSeen {
		v.maybeCredit()
		v.schedule()
	}
	return nil
}

// onRailRecv handles a rail receive and posts its buffer again.
func (v *VI) onRailRecv(rl *rail, d *descriptors.Descriptor) {
	v.changed = true
	if !d.Status.Failed() {
		buf := d.Segments[0].Buf[:d.Length]
		var h header
		if err := parseHeader(buf, &h); err != nil {
			v.stats.Refused++
		} else {
			rl.stats.Received++
			rl.stats.ReceivedBytes += uint64(h.length)
			v.onMessage(&h, buf[hdrLen:])
		}
	}
	v.repost(rl, d)
}

// repost gives a rail receive buffer back to the rail VI. A connected VI,
// or an idle one that reconnects, takes it. One in the Error state would
// flush it at once (and the reap loop would see it again, forever), so it
// is parked until resetRail; the rail is then broken. A closed VI refuses
// it, and it is gone with the VI.
func (v *VI) repost(rl *rail, d *descriptors.Descriptor) {
	if rl.v.State() == vi.Error {
		rl.parked = append(rl.parked, d)
		if rl.live {
			rl.failed = true
		}
		return
	}
	_ = rl.v.PostRecv(d)
}

// onMessage handles one bond message.
func (v *VI) onMessage(h *header, payload []byte) {
	if v.state != Connected {
		return
	}
	if seq.Less(v.peerLimit, h.credit) {
		v.peerLimit = h.credit
	}
	switch h.kind {
	case kindData, kindNotice:
		v.place(h, payload)
	case kindQuery:
		if v.ctl.n >= maxControlQueue {
			// A peer that asks faster than we can answer (it grants
			// us no credit to send) must not grow the queue.
			v.stats.Refused++
			return
		}
		v.ctl.pushBack(work{kind: kindReply, aux: h.aux})
	case kindReply:
		pr := v.handles[descriptors.MemHandle(h.aux)]
		if pr == nil || !pr.pending {
			return
		}
		pr.pending = false
		pr.ok = h.flags&flagOK != 0 && int(h.rails) == len(v.rails)
		if pr.ok {
			for i := range v.rails {
				pr.rail[i] = descriptors.MemHandle(replyHandle(payload, i))
			}
		}
	}
}

// place puts a block (or notes a notice) in the receive its message number
// names, dropping what it already has.
func (v *VI) place(h *header, payload []byte) {
	if seq.Less(h.msn, v.rcvMsn) {
		v.stats.Duplicates++
		return
	}
	k := h.msn - v.rcvMsn
	if uint64(k) >= v.rq.Back()-v.rqNext {
		v.stats.Refused++ // beyond our credit: cannot be
		return
	}
	if !seq.Less(h.msn, v.hiSeen) {
		v.hiSeen = h.msn + 1
	}
	pos := v.rqNext + uint64(k)
	slot := v.rq.Slot(pos)
	rs := &v.rs[slot]
	write := h.kind == kindNotice
	if !rs.started {
		n := 1
		if !write && h.total > 0 {
			n = int((uint64(h.total) + uint64(h.aux) - 1) / uint64(h.aux))
		}
		if n > v.maxBlocks {
			v.stats.Refused++
			return
		}
		rs.started, rs.write, rs.msgLen, rs.blockLen, rs.nblocks = true, write, h.total, h.aux, n
		rs.lenErr = !write && int(h.total) > rs.capacity
		clear(v.bits[slot*v.words : slot*v.words+(n+63)/64])
	} else if rs.msgLen != h.total || rs.write != write || (!write && rs.blockLen != h.aux) {
		v.stats.Refused++
		return
	}
	if rs.complete {
		v.stats.Duplicates++
		return
	}
	idx := 0
	if !write && h.total > 0 {
		idx = int(h.offset / h.aux)
	}
	w := &v.bits[slot*v.words+idx/64]
	if *w&(1<<(idx%64)) != 0 {
		v.stats.Duplicates++
		return
	}
	*w |= 1 << (idx % 64)
	if h.flags&flagImm != 0 {
		rs.imm, rs.hasImm = h.imm, true
	}
	if !write && !rs.lenErr {
		sgl.Scatter(v.rq.At(pos).Segments, int(h.offset), payload)
	}
	rs.got++
	if rs.got == rs.nblocks {
		rs.complete = true
		if rs.lenErr {
			rs.status = descriptors.StatusLength
		}
		v.publish()
	}
}

// limit is our receive limit: the peer may start messages below it.
func (v *VI) limit() uint32 { return v.rcvMsn + uint32(v.rq.Back()-v.rqNext) }

// maybeCredit queues a credit-only message when the peer is short of
// credit we have not told it about: when what it does not know of is at
// least half of what it could use.
func (v *VI) maybeCredit() {
	if v.state != Connected || v.creditQueued {
		return
	}
	lim := v.limit()
	if lim == v.announced {
		return
	}
	if unann, avail := lim-v.announced, lim-v.hiSeen; 2*uint64(unann) >= uint64(avail) {
		v.creditQueued = true
		v.ctl.pushBack(work{kind: kindCredit})
	}
}
