package mplite

import (
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/vi"
)

// mcPacer keeps a multicast root's sending to a line rate: a virtual clock
// (due) that each frame advances by its bytes at the line's time per byte,
// which the root may run at most ahead of now (mcastAhead, or two frames
// on a line so slow that one frame takes longer), and at most as far
// behind: a sender that was off the CPU makes up that much of the time it
// lost, which a switch port's queue absorbs; clamped to the present, a rank
// sharing its CPU lost every slot it was away for (docs/design-notes.md,
// Multicast: 16 ranks' 64 KiB Allgather 96 -> 88 ms).
type mcPacer struct {
	byteTime time.Duration // per byte on the line; 0: unpaced
	over     int           // a frame's bytes beyond its payload
	full     time.Duration // a full frame's time on the line
	ahead    time.Duration // how far due may run ahead of now
	behind   time.Duration // how far due may lag now (newPacer: ahead)
	due      time.Time     // when the line will have carried what was sent
}

// newPacer paces a port's datagrams to rate bit/s shared by streams
// senders (each gets rate/streams); rate 0 leaves it unpaced.
func newPacer(rate uint64, streams int, port *vi.DatagramPort, dev nic.Device) mcPacer {
	if rate == 0 {
		return mcPacer{}
	}
	p := mcPacer{byteTime: max(time.Duration(8e9/float64(rate)*float64(max(streams, 1))), 1),
		over: nic.FrameCap(dev.MTU()) - port.MaxPayload() + auth.Overhead(dev)} // the tag trailer is on the wire too
	p.full = time.Duration(port.MaxPayload()+p.over) * p.byteTime
	p.ahead = max(mcastAhead, 2*p.full)
	p.behind = p.ahead
	return p
}

// sent counts frames frames of n payload bytes in all against the line
// (one clock reading per batch).
func (p *mcPacer) sent(n, frames int) {
	if p.byteTime == 0 {
		return
	}
	if floor := time.Now().Add(-p.behind); p.due.Before(floor) {
		p.due = floor
	}
	p.due = p.due.Add(time.Duration(n+frames*p.over) * p.byteTime)
}

// room is how many full frames may go now, at most a batch.
func (p *mcPacer) room() int {
	if p.byteTime == 0 {
		return vi.DatagramBatch
	}
	ahead := max(time.Until(p.due), -p.behind) // a zero due is far in the past
	return min(max(int((p.ahead-ahead)/p.full), 0), vi.DatagramBatch)
}

// wait is how long to wait before sending again: until the line has
// carried half of what the root may be ahead (<= 0: send now).
func (p *mcPacer) wait() time.Duration {
	if p.byteTime == 0 {
		return 0
	}
	return time.Until(p.due) - p.ahead/2
}

// sendNew multicasts the next chunks of msg (chunks of cs bytes) from
// *sent up to limit, as many as a batch and pace allow, each with header h
// and its index, copied once from msg into its frame; it advances *sent
// and returns how many it sent.
func (m *mcastEP) sendNew(port *vi.DatagramPort, pace *mcPacer, group nic.Addr, h mcHdr, msg []byte, cs int, sent *int, limit int) (int, error) {
	cnt := min(limit-*sent, pace.room())
	if cnt <= 0 {
		return 0, nil
	}
	bytes := 0
	for i := range cnt {
		b := port.BatchBuffer(i)
		h.seq = uint32(*sent + i)
		putMcHdr(b, &h)
		m.lens[i] = mcHdrLen + copy(b[mcHdrLen:], segment(msg, *sent+i, cs))
		bytes += m.lens[i]
	}
	if err := port.SendBatch(group, m.lens[:cnt]); err != nil {
		return 0, err
	}
	pace.sent(bytes, cnt)
	*sent += cnt
	m.count(&m.stats.DataSent, uint64(cnt))
	return cnt, nil
}

// sendChunk multicasts chunk i of msg alone with header h (its flags
// saying whether it is a resend or a poll).
func (m *mcastEP) sendChunk(port *vi.DatagramPort, pace *mcPacer, group nic.Addr, h mcHdr, msg []byte, cs, i int) error {
	h.seq = uint32(i)
	putMcHdr(m.frame, &h)
	n := copy(m.frame[mcHdrLen:], segment(msg, i, cs))
	if err := port.SendTo(group, m.frame[:mcHdrLen+n]); err != nil {
		return err
	}
	pace.sent(mcHdrLen+n, 1)
	if h.flags != 0 {
		m.count(&m.stats.Resent, 1)
	} else {
		m.count(&m.stats.DataSent, 1)
	}
	return nil
}
