package bonding

import (
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/vi"
)

// work is one thing to send on a rail: a block, an RDMA piece (or a longer
// range to cut into pieces) or a control message.
type work struct {
	kind kind
	pos  uint64 // the user send it belongs to
	off  int
	n    int
	aux  uint32
}

// kindRDMA is a work item that is a rail RDMA write; it has no header.
const kindRDMA kind = 0x80

type slot struct {
	d   descriptors.Descriptor
	hdr []byte
	w   work
}

// rail is one rail of a bonded VI: its rail VI and CQ, the send slots in
// flight (a FIFO, as rail sends complete in order) and the receive buffers.
type rail struct {
	idx        int
	v          *vi.VI
	cq         *vi.CQ
	ptag       vi.PTag
	addr       vi.Address // the peer on this rail, for reconnections
	live       bool
	failed     bool // a completion failed: take the rail down
	connecting bool

	slots    []slot
	head, n  int
	inflight int

	rds []descriptors.Descriptor
	// parked holds receive buffers that came back while the rail VI was
	// in the Error state: posting them there would flush them at once,
	// forever. resetRail posts them again once the VI is Idle.
	parked            []*descriptors.Descriptor
	hdrArea, recvArea []byte
	hdrH, recvH       descriptors.MemHandle
	rate              float64 // bytes per nanosecond
	winStart          int64   // the rate window: since when the rail was busy; 0: not timed
	winBytes          int     // bytes completed in the window
	samples           int     // rate samples taken
	stats             RailStats
	hdrRegd, recvRegd bool
	// activeRound is the last progress round that found a completion on
	// the rail.
	activeRound uint32
}

// The rail rate EWMA: a sample is the bytes a busy rail completed in at
// least rateWindow and rateMinBytes; each moves the estimate by rateGain.
const (
	rateWindow   = int64(200 * time.Microsecond)
	rateMinBytes = 64 << 10
	rateGain     = 0.25
	// rateMaxWindow: a longer window measured a stall, not a rate.
	rateMaxWindow = int64(50 * time.Millisecond)
)

func (v *VI) newRail(r int, p *vi.Provider, tag vi.PTag) (*rail, error) {
	o := v.b.opts
	s := o.RailSlots
	rl := &rail{idx: r, ptag: tag, slots: make([]slot, s), rds: make([]descriptors.Descriptor, s), parked: make([]*descriptors.Descriptor, 0, s), rate: 1}
	cq, err := p.NewCQ(2 * s)
	if err != nil {
		return nil, err
	}
	rl.cq = cq
	cq.Notify(v.note, v.b.note) // wakes the VI, and the bond, from quiet (VI.poll, CQ.quietRound)
	rl.v, err = p.NewVI(vi.Attributes{Reliability: vi.ReliableReception, PTag: tag,
		EnableRDMAWrite: v.attrs.EnableRDMAWrite, SendCQ: cq, RecvCQ: cq, QueueDepth: s})
	if err != nil {
		cq.Close()
		rl.cq = nil
		return nil, err
	}
	// Rails are appended only when complete; clean up this one on failure.
	fail := func(err error) (*rail, error) {
		rl.destroy(p)
		return nil, err
	}
	const hdrSlot = hdrLen + ctlCap
	rl.hdrArea = make([]byte, s*hdrSlot)
	if rl.hdrH, err = p.RegisterMemory(rl.hdrArea, tag, 0); err != nil {
		return fail(err)
	}
	rl.hdrRegd = true
	bufLen := hdrLen + max(o.BlockSize, ctlCap)
	rl.recvArea = make([]byte, s*bufLen)
	if rl.recvH, err = p.RegisterMemory(rl.recvArea, tag, 0); err != nil {
		return fail(err)
	}
	rl.recvRegd = true
	for i := range rl.slots {
		sl := &rl.slots[i]
		sl.hdr = rl.hdrArea[i*hdrSlot : (i+1)*hdrSlot : (i+1)*hdrSlot]
		sl.d.Segments = make([]descriptors.Segment, 0, o.MaxSegments)
	}
	for i := range rl.rds {
		d := &rl.rds[i]
		d.Segments = []descriptors.Segment{{Buf: rl.recvArea[i*bufLen : (i+1)*bufLen : (i+1)*bufLen], Handle: rl.recvH}}
		if err := rl.v.PostRecv(d); err != nil {
			return fail(err)
		}
	}
	return rl, nil
}

// destroy closes the rail VI and CQ and deregisters its buffers.
func (rl *rail) destroy(p *vi.Provider) {
	if rl.v != nil {
		rl.v.Close()
	}
	if rl.cq != nil {
		rl.cq.Close()
	}
	if rl.hdrRegd {
		p.DeregisterMemory(rl.hdrH)
	}
	if rl.recvRegd {
		p.DeregisterMemory(rl.recvH)
	}
}

func (v *VI) destroyRails() {
	for r, rl := range v.rails {
		rl.destroy(v.b.rails[r])
	}
}
