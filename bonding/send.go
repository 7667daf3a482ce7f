package bonding

import (
	"fmt"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/internal/seq"
	"github.com/ethervia/ethervia/vi"
)

type sendState struct {
	started, done  bool
	rdma, consumes bool
	noticeSent     bool
	status         descriptors.Status
	msn            uint32
	total          int
	blockLen       int
	nblocks        int
	blocksOut      int
	left           int // eager: blocks; RDMA: bytes not yet completed
	peer           *peerRegion
	rdmaNext       int // RDMA: the first byte not yet handed to a rail
}

// peerRegion is what the peer told us about one of its bond handles.
type peerRegion struct {
	pending, ok bool
	rail        [maxRails]descriptors.MemHandle
}

// acquire checks that every non-empty segment lies in a bond region of the
// VI's tag and holds the regions until release.
func (v *VI) acquire(d *descriptors.Descriptor) error {
	b := v.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	for i := range d.Segments {
		s := &d.Segments[i]
		if len(s.Buf) == 0 {
			continue
		}
		rg := b.lookup(s.Handle)
		if rg == nil || rg.ptag != v.attrs.PTag || !rg.regs[0].Contains(s.Buf) {
			releaseSegs(b, d.Segments[:i])
			return descriptors.ErrProtection
		}
		rg.inUse.Add(1)
	}
	return nil
}

func (v *VI) release(d *descriptors.Descriptor) {
	v.b.mu.RLock()
	releaseSegs(v.b, d.Segments)
	v.b.mu.RUnlock()
}

func releaseSegs(b *Bond, segs []descriptors.Segment) {
	for i := range segs {
		if len(segs[i].Buf) == 0 {
			continue
		}
		if rg := b.lookup(segs[i].Handle); rg != nil {
			rg.inUse.Add(-1)
		}
	}
}

func (v *VI) limits() descriptors.Limits {
	return descriptors.Limits{MaxSegments: v.maxSegs, MaxTransfer: v.maxTransfer}
}

// PostSend posts d on the send queue. Sends and RDMA writes (with or
// without immediate data) are supported; RDMA reads are not. The VI must be
// Connected, or in the Error state, where d completes at once as flushed.
// Segments name bond memory handles; an RDMA write's address segment names
// a bond handle of the peer.
func (v *VI) PostSend(d *descriptors.Descriptor) error {
	d.Reset()
	if err := d.CheckFormat(v.limits(), false); err != nil {
		d.Status = descriptors.StatusDone | descriptors.StatusFormat
		return fmt.Errorf("bonding: post send: %w", err)
	}
	if d.Control.Op == descriptors.OpRDMARead {
		d.Status = descriptors.StatusDone | descriptors.StatusFormat
		return fmt.Errorf("bonding: post send: %w: RDMA read is not supported on a bond", descriptors.ErrFormat)
	}
	if err := v.acquire(d); err != nil {
		d.Status = descriptors.StatusDone | descriptors.StatusProtection
		return fmt.Errorf("bonding: post send: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.setQuiet(false)
	if v.state != Connected && v.state != Error {
		v.release(d)
		if v.state == closedVI {
			return fmt.Errorf("bonding: post send: %w", ErrClosed)
		}
		return fmt.Errorf("bonding: post send: %w: %v", ErrState, v.state)
	}
	pos, err := v.sq.Push(d)
	if err != nil {
		v.release(d)
		return fmt.Errorf("bonding: post send: %w", err)
	}
	v.ss[v.sq.Slot(pos)] = sendState{}
	if v.state == Error {
		st := &v.ss[v.sq.Slot(pos)]
		st.started, st.done, st.status = true, true, descriptors.StatusFlushed
		v.sqStart = v.sq.Back()
		v.publish()
		return nil
	}
	v.schedule()
	return nil
}

// schedule posts work on the live rails, one item per rail per round, so
// that a striped message spreads over them and a rail that completes
// faster takes more.
func (v *VI) schedule() {
	if v.state != Connected {
		return
	}
	for {
		posted := false
		for r, rl := range v.rails {
			if !rl.live || rl.failed || rl.n == len(rl.slots) {
				continue
			}
			w, ok := v.nextWork(r)
			if !ok {
				continue
			}
			if v.post(rl, w) {
				posted = true
			}
		}
		if !posted {
			return
		}
	}
}

// nextWork takes the next item rail r should send: control messages and
// re-sends first, then the oldest send with work for the rail, starting
// sends in order as credit and peer handles allow.
func (v *VI) nextWork(r int) (work, bool) {
	if v.ctl.n > 0 {
		w := v.ctl.front()
		if w.kind == kindRDMA && w.n > v.b.opts.RDMAPiece {
			p := work{kind: kindRDMA, pos: w.pos, off: w.off, n: v.b.opts.RDMAPiece}
			w.off += p.n
			w.n -= p.n
			return p, true
		}
		return v.ctl.popFront(), true
	}
	if v.cur[r] < v.sqReap {
		v.cur[r] = v.sqReap
	}
	for pos := v.cur[r]; pos < v.sq.Back(); pos++ {
		if pos == v.sqStart && !v.start(pos) {
			return work{}, false
		}
		st := &v.ss[v.sq.Slot(pos)]
		switch {
		case st.done:
		case !st.rdma && st.blocksOut < st.nblocks:
			off := st.blocksOut * st.blockLen
			n := min(st.blockLen, st.total-off)
			if st.nblocks == 1 && !v.smallRail(r, n) {
				// Another rail will carry it sooner; later sends wait
				// for it, to keep one message's blocks in order.
				return work{}, false
			}
			st.blocksOut++
			return work{kind: kindData, pos: pos, off: off, n: n}, true
		case st.rdma && st.rdmaNext < st.total:
			// Rails pull an RDMA write's pieces as they drain, a few
			// pieces ahead each (piecesAhead): a faster rail takes more,
			// none sits idle while another still has a backlog, and as
			// pieces last about pieceTime on any rail, the rails finish a
			// write within about that of each other.
			// A write is cut into at least one piece per live rail, so
			// that one shorter than two pieces is striped too.
			live := v.liveRails()
			piece := min(v.piece(r), max((st.total+live-1)/live, minSplit))
			n := min(piece, st.total-st.rdmaNext)
			if v.rails[r].inflight < v.piecesAhead(r)*piece {
				w := work{kind: kindRDMA, pos: pos, off: st.rdmaNext, n: n}
				st.rdmaNext += n
				return w, true
			}
			// This rail has enough of the write; a later message (a
			// handshake's reply, say) may go ahead of the pieces still
			// to be pulled rather than wait for the whole write.
			continue
		}
		if pos == v.cur[r] {
			v.cur[r]++
		}
	}
	return work{}, false
}

// smallRail reports whether rail r should carry a message of one n-byte
// block: the first live rail (the one the peer polls every round) while
// what it holds in flight drains within smallQueue, else the rail that
// finishes it first, so that a short reply does not queue behind a bulk
// transfer's pieces. (Sending it on any idle rail instead put small
// messages on rails whose acknowledgement was merely pending, and a peer
// that receives on a second rail polls two devices for a while.)
func (v *VI) smallRail(r, n int) bool {
	if f := v.blockRail(); f >= 0 && float64(v.rails[f].inflight)/v.rails[f].rate <= float64(smallQueue) {
		return f == r
	}
	return v.finishesFirst(r, n)
}

// smallWork is the size below which a message posted on an idle rail
// starts no rate window.
const smallWork = 4 << 10

// smallQueue is how long a queue on the first live rail may take to drain
// before small messages look for a faster rail.
const smallQueue = 500 * time.Microsecond

// start begins the send at pos: it takes a message number if the send
// consumes a receive (and the peer's credit allows), resolves an RDMA
// write's peer handles, and cuts the send into blocks or rail segments. It
// reports false when the send must wait.
func (v *VI) start(pos uint64) bool {
	d := v.sq.At(pos)
	st := &v.ss[v.sq.Slot(pos)]
	total := d.TotalLength()
	rdma := d.Control.Op == descriptors.OpRDMAWrite
	consumes := !rdma || d.Control.Immediate
	if consumes && !seq.Less(v.sndMsn, v.peerLimit) {
		return false
	}
	var pr *peerRegion
	if rdma && total > 0 {
		h := d.Address.Handle
		pr = v.handles[h]
		if pr == nil {
			// The first write to this handle: ask for its rail handles.
			pr = &peerRegion{pending: true}
			v.handles[h] = pr
			v.ctl.pushBack(work{kind: kindQuery, aux: uint32(h)})
			v.stats.Queries++
			return false
		}
		if pr.pending {
			return false
		}
	}
	*st = sendState{started: true, rdma: rdma, consumes: consumes, total: total, peer: pr}
	v.sqStart++
	if rdma && pr != nil && !pr.ok {
		// The peer has no such region for us: as a refused write at
		// reliable delivery, the descriptor reports it.
		st.done, st.status = true, descriptors.StatusRDMAProtection
		v.publish()
		return true
	}
	if consumes {
		st.msn = v.sndMsn
		v.sndMsn++
	}
	if rdma {
		st.left = total
		if total == 0 {
			if d.Control.Immediate {
				v.notify() // once every earlier send has landed
			} else {
				st.done = true
				v.publish()
			}
			return true
		}
		return true
	}
	// At or above the stripe threshold a message is cut into one block
	// per live rail, or into BlockSize blocks when it is longer than that.
	live := v.liveRails()
	bl := min(total, v.b.opts.BlockSize)
	if total >= v.b.opts.StripeThreshold && live > 1 {
		bl = min(bl, (total+live-1)/live)
	}
	st.blockLen = bl
	st.nblocks = 1
	if total > 0 {
		st.nblocks = (total + bl - 1) / bl
	}
	st.left = st.nblocks
	return true
}

func (v *VI) liveRails() int {
	n := 0
	for _, rl := range v.rails {
		if rl.live && !rl.failed {
			n++
		}
	}
	return n
}

// minSplit is the smallest piece a write is cut into to spread it over
// the rails.
const minSplit = 4 << 10

// Pieces last about pieceTime on their rail, but are at least minPiece
// bytes: what a rail holds in flight (two pieces) is what a frame sent
// behind it waits at a rate-limited switch port, where the queue is.
const (
	pieceTime = 2 * time.Millisecond
	minPiece  = 32 << 10
)

// piece is the RDMA piece size for rail r: pieceTime at its measured rate,
// from minPiece to Options.RDMAPiece. At 100 Mbit/s two 256 KiB pieces
// held a reply 42 ms behind them; a rail not yet measured takes full ones.
func (v *VI) piece(r int) int {
	b := v.rails[r].rate * float64(pieceTime)
	switch {
	case b >= float64(v.b.opts.RDMAPiece):
		return v.b.opts.RDMAPiece
	case b <= minPiece:
		return min(minPiece, v.b.opts.RDMAPiece)
	}
	return int(b)
}

// piecesAhead is how many of a write's pieces rail r may hold in flight:
// two, or floorAhead while its pieces are at the minPiece floor and another
// live rail's are not.
func (v *VI) piecesAhead(r int) int {
	if v.piece(r) > minPiece {
		return 2
	}
	for s, rl := range v.rails {
		if s != r && rl.live && !rl.failed && v.piece(s) > minPiece {
			return floorAhead
		}
	}
	return 2
}

// floorAhead: a rail at the piece floor beside a faster one holds four
// pieces. Posting a piece transmits it, so the slow rail waits for the
// sender between the fast rail's longer posts (0.5-0.9 ms each); starved,
// it measures its rate low, and two floor pieces (2 ms of a 250 Mbit/s
// line) drained before the sender came back (0.1-3.4 ms), which kept it
// starved. With four, 250 + 500 Mbit/s rails carried 654 Mbit/s against
// 634 (eight interleaved rounds, 2026-12-02). Rails all at the floor (100
// Mbit/s) keep two: what a rail holds is what a frame behind it waits at
// the switch port. A third piece on every rail cost four 250 Mbit/s rails
// 3 %.
const floorAhead = 4

// finishesFirst reports whether rail r, at its measured rate and behind
// what it has in flight, would finish n more bytes no later than any other
// live rail would. (For RDMA pieces this rule, on rates measured with the
// noise of a shared CPU, starved rails of equal speed; time-sized pieces
// bound how far apart the rails finish instead.)
func (v *VI) finishesFirst(r, n int) bool {
	mine := float64(v.rails[r].inflight+n) / v.rails[r].rate
	for s, rl := range v.rails {
		if s == r || !rl.live || rl.failed {
			continue
		}
		if float64(rl.inflight+n)/rl.rate < mine {
			return false
		}
	}
	return true
}

// railSegs appends the rail-r segments of bytes [off, off+n) of d to dst.
func (v *VI) railSegs(dst []descriptors.Segment, d *descriptors.Descriptor, r, off, n int) []descriptors.Segment {
	b := v.b
	b.mu.RLock()
	for i := range d.Segments {
		if n == 0 {
			break
		}
		s := &d.Segments[i]
		l := len(s.Buf)
		if off >= l {
			off -= l
			continue
		}
		k := min(l-off, n)
		var h descriptors.MemHandle
		if rg := b.lookup(s.Handle); rg != nil {
			h = rg.rail[r]
		}
		dst = append(dst, descriptors.Segment{Buf: s.Buf[off : off+k], Handle: h})
		n -= k
		off = 0
	}
	b.mu.RUnlock()
	return dst
}

// post sends w on rail rl. It reports false, and puts w back, when the rail
// refuses it.
func (v *VI) post(rl *rail, w work) bool {
	s := &rl.slots[(rl.head+rl.n)%len(rl.slots)]
	s.w = w
	if rl.n == 0 {
		// The rail was idle: its rate window starts now, unless this is
		// a small message (see sampleRate).
		rl.winStart, rl.winBytes = 0, 0
		if w.n >= smallWork {
			rl.winStart = v.b.now()
		}
	}
	d := &s.d
	d.Control = descriptors.Control{}
	d.Address = descriptors.AddressSegment{}
	segs := d.Segments[:0]
	if w.kind == kindRDMA {
		ud := v.sq.At(w.pos)
		st := &v.ss[v.sq.Slot(w.pos)]
		d.Control.Op = descriptors.OpRDMAWrite
		d.Address = descriptors.AddressSegment{Handle: st.peer.rail[rl.idx], Offset: ud.Address.Offset + uint64(w.off)}
		segs = v.railSegs(segs, ud, rl.idx, w.off, w.n)
	} else {
		h := header{kind: w.kind, credit: v.limit(), aux: w.aux}
		switch w.kind {
		case kindData, kindNotice:
			ud := v.sq.At(w.pos)
			st := &v.ss[v.sq.Slot(w.pos)]
			h.msn, h.total = st.msn, uint32(st.total)
			if ud.Control.Immediate {
				h.flags |= flagImm
				h.imm = ud.Control.ImmData
			}
			if w.kind == kindData {
				h.offset, h.length, h.aux = uint32(w.off), uint32(w.n), uint32(st.blockLen)
			}
		case kindReply:
			h.rails = uint8(len(v.rails))
			h.length = 4 * uint32(h.rails)
			if v.replyHandles(s.hdr[hdrLen:], descriptors.MemHandle(w.aux)) {
				h.flags |= flagOK
			}
		case kindCredit:
			v.creditQueued = false
			v.stats.Credits++
		}
		putHeader(s.hdr, &h)
		hl := hdrLen
		if w.kind == kindReply {
			hl += int(h.length)
		}
		segs = append(segs, descriptors.Segment{Buf: s.hdr[:hl], Handle: rl.hdrH})
		if w.kind == kindData {
			segs = v.railSegs(segs, v.sq.At(w.pos), rl.idx, w.off, w.n)
		}
		v.announced = h.credit
	}
	d.Segments = segs
	if err := rl.v.PostSend(d); err != nil {
		if w.kind == kindCredit {
			v.creditQueued = true
		}
		v.ctl.pushFront(w)
		rl.failed = true
		return false
	}
	rl.n++
	rl.inflight += w.n
	return true
}

// replyHandles writes the rail handles of our bond handle h into b, and
// reports whether the peer may write the region through this VI.
func (v *VI) replyHandles(b []byte, h descriptors.MemHandle) bool {
	v.b.mu.RLock()
	defer v.b.mu.RUnlock()
	rg := v.b.lookup(h)
	ok := rg != nil && v.attrs.EnableRDMAWrite && rg.ptag == v.attrs.PTag &&
		(rg.access&vi.AccessRDMAWrite != 0 || rg.access&vi.AccessGrantedWrite != 0 && rg.regs[0].GrantedTo(v.rails[0].v.Grantee()))
	for i := range v.rails {
		var x uint32
		if ok {
			x = uint32(rg.rail[i])
		}
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(x>>24), byte(x>>16), byte(x>>8), byte(x)
	}
	return ok
}
