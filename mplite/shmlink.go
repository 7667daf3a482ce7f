package mplite

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/rdma"
	"github.com/ethervia/ethervia/reliability"
	"github.com/ethervia/ethervia/shm"
)

// shmLink is a connection to a rank of the same host through shared
// memory (package shm): the same descriptors as a VI, so the protocol
// above (eager slots, handshakes, offers, Finalize's exchange) is the
// network's, but no frame and no provider. Sends enter our ring in the
// peer's inbox and complete once the peer has consumed them; receives
// complete from the peer's ring in our inbox. RDMA writes travel in the
// ring, or, when the peer can read our memory, as an address it copies
// from in one step. Every method runs with c.mu held.
type shmLink struct {
	out  *shm.Outbox // our ring in the peer's inbox; nil until attached
	ring *shm.Ring   // the peer's ring in our inbox; nil until it attached
	// fill places the bytes of a write into our registered memory, with
	// filler's put (a method value made once: a closure per write would
	// allocate).
	fill   func(h descriptors.MemHandle, who rdma.Grantee, off uint64, n int, put func([]byte) error) error
	who    rdma.Grantee // the peer's writer identity (localGrantee)
	filler entryFiller
	put    func([]byte) error

	recvs descQueue                 // posted receives, oldest first
	pend  []*descriptors.Descriptor // posted sends not yet wholly in the ring
	ph    int
	at    int // bytes of pend[ph] already in the ring (a write in pieces)
	sent  []sentDesc
	sh    int
	// writes counts the RDMA writes in sent: their completions end
	// handshakes, so they are reaped at once. rankWrites counts them over
	// every link of the rank, for waiters deciding to spin on.
	writes     int
	rankWrites *atomic.Int32
	sdone      descQueue
	rdone      descQueue
	err        error
	// direct delivers a message straight from the ring to a posted
	// receive, reporting false to leave it to the descriptor path.
	direct func(msg []byte) bool
	// notify: an entry taken asked us to wake its sender (shm.Entry.Notify).
	notify bool
	// copies: writes always travel in the rings (a test's choice).
	copies bool
	// share: a write the peer reads from our memory is a shared copy
	// (shm.Entry.Share), which this end helps with while it waits, when
	// the rank has a CPU of its own and can write the peer's memory.
	share bool
	// helped counts the shared copies this end helped with.
	helped uint64
}

// sentDesc is a send whose last entry is in the ring, with that entry's
// sequence number: it completes when the peer has consumed it.
type sentDesc struct {
	d    *descriptors.Descriptor
	last uint64
	// share: the entry is a shared copy of d's one segment; helped:
	// this end copied some of it.
	share, helped bool
}

var errLinkClosed = errors.New("mplite: shared-memory link closed")

func (l *shmLink) PostSend(d *descriptors.Descriptor) error {
	if l.err != nil {
		return l.err
	}
	switch d.Control.Op {
	case descriptors.OpSend, descriptors.OpRDMAWrite:
	default:
		return fmt.Errorf("mplite: shared-memory link: operation %v not supported", d.Control.Op)
	}
	d.Reset()
	l.pend = append(l.pend, d)
	l.push()
	return nil
}

func (l *shmLink) PostRecv(d *descriptors.Descriptor) error {
	if l.err != nil {
		return l.err
	}
	d.Reset()
	l.recvs.push(d)
	return nil
}

func (l *shmLink) SendDone() (*descriptors.Descriptor, bool) { return l.sdone.pop() }
func (l *shmLink) RecvDone() (*descriptors.Descriptor, bool) { return l.rdone.pop() }

// descQueue is a FIFO of descriptors that reuses its array.
type descQueue struct {
	q []*descriptors.Descriptor
	h int
}

func (q *descQueue) push(d *descriptors.Descriptor) { q.q = append(q.q, d) }

func (q *descQueue) len() int { return len(q.q) - q.h }

func (q *descQueue) pop() (*descriptors.Descriptor, bool) {
	if q.h == len(q.q) {
		return nil, false
	}
	d := q.q[q.h]
	q.q[q.h] = nil
	q.h++
	if q.h == len(q.q) {
		q.q, q.h = q.q[:0], 0
	}
	return d, true
}

func (l *shmLink) Err() error { return l.err }

func (l *shmLink) Disconnect() error {
	if l.err == nil {
		l.err = errLinkClosed
	}
	return nil
}

func (l *shmLink) id() int                      { return -1 }
func (l *shmLink) raw() any                     { return l }
func (l *shmLink) railEvents() (uint64, uint64) { return 0, 0 }

func (l *shmLink) transport() reliability.Stats { return reliability.Stats{} }

func (l *shmLink) connect(context.Context, []net.HardwareAddr, uint16) error {
	return errors.New("mplite: a shared-memory link is not connected through the fabric")
}

// busy reports sends not yet consumed by the peer.
func (l *shmLink) busy() bool { return l.sh < len(l.sent) || l.ph < len(l.pend) }

// inFlight counts sends in the ring not yet known to be consumed.
func (l *shmLink) inFlight() int { return len(l.sent) - l.sh }

// push moves posted sends into the ring while it has room.
func (l *shmLink) push() {
	if l.out == nil || l.err != nil {
		return
	}
	for l.ph < len(l.pend) {
		d := l.pend[l.ph]
		seq, done, shared, ok := l.pushOne(d)
		if !ok {
			return
		}
		if !done {
			continue
		}
		l.pend[l.ph] = nil
		l.ph++
		l.at = 0
		l.sent = append(l.sent, sentDesc{d: d, last: seq, share: shared})
		if d.Control.Op == descriptors.OpRDMAWrite {
			l.writes++
			l.rankWrites.Add(1)
		}
	}
	l.pend, l.ph = l.pend[:0], 0
}

// pushOne commits the next entry of d: its sequence number, whether it
// was d's last entry, whether it is a shared copy, and false when the
// ring is full.
func (l *shmLink) pushOne(d *descriptors.Descriptor) (seq uint64, done, shared, ok bool) {
	slot, ok := l.out.Reserve()
	if !ok {
		return 0, false, false, false
	}
	e := shm.Entry{ImmData: d.Control.ImmData}
	if d.Control.Op == descriptors.OpSend {
		n := gatherAt(slot, d.Segments, 0)
		e.Kind, e.Length, e.Immediate = shm.Send, n, d.Control.Immediate
		return l.out.Commit(&e), true, false, true
	}
	total := 0
	for i := range d.Segments {
		total += len(d.Segments[i].Buf)
	}
	e.RKey, e.Total = uint32(d.Address.Handle), uint64(total)
	if len(d.Segments) == 1 && !l.copies && l.ring != nil && l.ring.OwnerReads() && total > len(slot) {
		// The peer reads it from our memory: one copy, in one step.
		e.Kind, e.Length, e.Offset = shm.WriteRemote, total, d.Address.Offset
		e.Source = shm.Address(d.Segments[0].Buf)
		e.Immediate, e.Notify = d.Control.Immediate, true
		e.Share = l.share && l.out.Writes()
		return l.out.Commit(&e), true, e.Share, true
	}
	// In pieces of a slot each; the last carries the immediate data.
	n := gatherAt(slot, d.Segments, l.at)
	e.Kind, e.Length, e.Offset = shm.Write, n, d.Address.Offset+uint64(l.at)
	l.at += n
	done = l.at == total
	e.Immediate = done && d.Control.Immediate
	e.Notify = done // a write's completion ends a handshake: the sender waits for it
	return l.out.Commit(&e), done, false, true
}

// gatherAt copies the segments' bytes from offset at into dst, as many as
// fit.
func gatherAt(dst []byte, segs []descriptors.Segment, at int) int {
	n := 0
	for i := range segs {
		b := segs[i].Buf
		if at >= len(b) {
			at -= len(b)
			continue
		}
		n += copy(dst[n:], b[at:])
		at = 0
		if n == len(dst) {
			break
		}
	}
	return n
}

// reap completes the sends the peer has consumed, in order, and pushes
// what waits for room.
func (l *shmLink) reap() {
	if l.sh == len(l.sent) {
		l.push() // a write in pieces may wait for room
		return
	}
	if s := &l.sent[l.sh]; s.share {
		l.help(s)
	}
	consumed := l.out.Consumed()
	for l.sh < len(l.sent) && l.sent[l.sh].last < consumed {
		d := l.sent[l.sh].d
		l.sent[l.sh] = sentDesc{}
		l.sh++
		if d.Control.Op == descriptors.OpRDMAWrite {
			l.writes--
			l.rankWrites.Add(-1)
		}
		d.Status = descriptors.StatusDone
		for i := range d.Segments {
			d.Length += len(d.Segments[i].Buf)
		}
		l.sdone.push(d)
	}
	if l.sh == len(l.sent) {
		l.sent, l.sh = l.sent[:0], 0
	}
	l.push()
}

// take handles the entries waiting in the peer's ring, and reports how
// many and any error that breaks the link. It stops at a message (or a
// write with immediate data) when no receive is posted: the entry stays
// at the ring's head, which keeps the ring Ready, so the next poll tries
// again.
func (l *shmLink) take() (taken int, err error) {
	for l.ring != nil && l.err == nil {
		e, ok, err := l.ring.Peek()
		if err != nil {
			return taken, err
		}
		if !ok {
			return taken, nil
		}
		if e.Kind == shm.Send && l.rdone.len() == 0 && l.direct != nil && l.direct(e.Data) {
			// Delivered in place; nothing that came before waits in
			// rdone, so order holds.
			l.ring.Release()
			taken++
			continue
		}
		if (e.Kind == shm.Send || e.Immediate) && l.recvs.len() == 0 {
			return taken, nil
		}
		switch e.Kind {
		case shm.Send:
			d := l.nextRecv()
			n := 0
			for i := range d.Segments {
				n += copy(d.Segments[i].Buf, e.Data[n:])
			}
			d.Length, d.ImmData = e.Length, e.ImmData
			d.Status = descriptors.StatusDone
			if e.Immediate {
				d.Status |= descriptors.StatusImmediate
			}
			if n < e.Length {
				d.Status |= descriptors.StatusLength
			}
			l.rdone.push(d)
		case shm.Write, shm.WriteRemote:
			if err := l.write(e); err != nil {
				return taken, err
			}
			if e.Immediate {
				d := l.nextRecv()
				d.Length, d.ImmData = int(e.Total), e.ImmData
				d.Status = descriptors.StatusDone | descriptors.StatusRemoteWrite | descriptors.StatusImmediate
				l.rdone.push(d)
			}
		}
		if e.Notify {
			l.notify = true
		}
		l.ring.Release()
		taken++
	}
	return taken, nil
}

// write places a write entry's bytes in our registered memory.
func (l *shmLink) write(e *shm.Entry) error {
	if l.put == nil {
		l.put = l.filler.fill
	}
	l.filler.e, l.filler.ring = e, l.ring
	err := l.fill(descriptors.MemHandle(e.RKey), l.who, e.Offset, e.Length, l.put)
	l.filler.e = nil
	if err != nil {
		return fmt.Errorf("remote write of %d bytes: %w", e.Length, err)
	}
	return nil
}

// help copies chunks of s, a shared copy the peer has opened, into the
// peer's memory: this end waits for the send anyway, on a CPU of its own.
// A chunk it could not write is left to the peer, and so are the shared
// copies that follow.
func (l *shmLink) help(s *sentDesc) {
	helped, err := l.out.Help(s.last, s.d.Segments[0].Buf)
	if helped && !s.helped {
		s.helped = true
		l.helped++
	}
	if err != nil {
		l.share = false
		s.share = false
	}
}

// entryFiller copies a write entry's bytes into the memory it names, and
// counts the copies it shared with their sender.
type entryFiller struct {
	e      *shm.Entry
	ring   *shm.Ring
	shared uint64
}

func (f *entryFiller) fill(dst []byte) error {
	if f.e.Kind == shm.Write {
		copy(dst, f.e.Data)
		return nil
	}
	shared, err := f.ring.CopyRemote(f.e, dst)
	if shared {
		f.shared++
	}
	return err
}

func (l *shmLink) nextRecv() *descriptors.Descriptor {
	d, _ := l.recvs.pop()
	return d
}
