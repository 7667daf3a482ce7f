package mplite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/vi"
)

// CC-MPI multicast (docs/design-notes.md, "Multicast"). A multicast group
// is an Ethernet group address (nic.GroupMAC of the job key and a group
// id) that every member adds to its NIC's filter. The root sends each
// chunk of a Bcast once, as a datagram (vi.DatagramPort, kind mcastKind) to
// the group address, straight from the user's buffer; receivers copy each
// chunk straight into theirs. Reliability comes from one of two protocols:
//
//   - "mcast-ack", the paper's: the root keeps a window of mcastWindow
//     chunks beyond the lowest cumulative acknowledgement; every receiver
//     acknowledges (datagram to the root's MAC) every mcastWindow/4 chunks,
//     when it is complete, and at once when a gap opens; the
//     acknowledgement names the missing chunks (a SACK map), which the root
//     resends. After a silence the root polls with the first
//     unacknowledged chunk. The root handles n-1 streams of
//     acknowledgements.
//   - "mcast-nak", the scalable one: the root sends everything; receivers
//     report gaps with NAKs (datagrams to the root); a receiver that hears
//     nothing for a timeout NAKs the gaps below the highest chunk it has
//     seen, and a root that hears nothing once it has sent everything
//     re-sends the last chunk as a poll, after which receivers NAK all they
//     lack. Completion is acknowledged once, aggregated up a binomial tree.
//
// Completion always travels over the reliable point-to-point path (a
// zero-byte message on the communicator's collective context, tag
// mcastTag): a lost datagram acknowledgement can then only cost a
// retransmission, never leave the root waiting for a receiver that has
// already returned.

const (
	// mcastKind is mplite's datagram kind (docs/wire.md).
	mcastKind = 0x81
	// mcastDepth is the datagram ring of a rank.
	mcastDepth = 1024
	// mcastWindow is the ACK protocol's window, and the NAK protocol's
	// burst between looks at the feedback, in chunks.
	mcastWindow = 256
	// mcastTag is the tag of the completion messages.
	mcastTag = 0x6d63
	// mcastStash bounds the datagrams of a later operation kept while an
	// earlier one finishes.
	mcastStash = 256
	mcastRTO   = 5 * time.Millisecond
	mcastRTOMx = 100 * time.Millisecond
	// mcastPoll bounds one wait for datagrams (completions on the
	// point-to-point path end it too: WatchCQ).
	mcastPoll = time.Millisecond
	// mcastAhead is how far a paced root may run ahead of the line: the
	// frames it has sent but the slowest port has not yet carried. A
	// switch port's queue then holds at most this much of the multicast
	// (the testbed's holds 55 ms), and a wait that oversleeps by a poll
	// interval still leaves the port busy.
	mcastAhead = 3 * time.Millisecond
)

// Multicast header, at the start of every mcastKind datagram's payload:
//
//	0  1 type    mcData, mcAck or mcNak
//	1  1 flags   mcPoll (on data: report now), mcRetx (a resend)
//	2  2 rank    the sender's rank in the group
//	4  4 group   group id (the low 24 bits pick the group MAC)
//	8  4 op      operation number of the group
//	12 4 seq     data: chunk index; ack: chunks received in order; nak: first missing chunk
//	16 4 total   the message length in bytes
//	20 8 bits    nak: bit i set = chunk seq+i missing
//	28 - data    data: the chunk
const (
	mcHdrLen        = 28
	mcData    uint8 = 1
	mcAck     uint8 = 2
	mcNak     uint8 = 3
	mcPoll    uint8 = 1
	mcRetx    uint8 = 2
	mcFlagAll       = mcPoll | mcRetx
)

type mcHdr struct {
	typ, flags uint8
	rank       uint16
	group, op  uint32
	seq, total uint32
	bits       uint64
}

func putMcHdr(b []byte, h *mcHdr) {
	_ = b[mcHdrLen-1]
	b[0], b[1] = h.typ, h.flags
	binary.BigEndian.PutUint16(b[2:], h.rank)
	binary.BigEndian.PutUint32(b[4:], h.group)
	binary.BigEndian.PutUint32(b[8:], h.op)
	binary.BigEndian.PutUint32(b[12:], h.seq)
	binary.BigEndian.PutUint32(b[16:], h.total)
	binary.BigEndian.PutUint64(b[20:], h.bits)
}

// parseMcHdr decodes a multicast header; false for a malformed one.
func parseMcHdr(b []byte, h *mcHdr) bool {
	if len(b) < mcHdrLen || b[0] < mcData || b[0] > mcNak || b[1]&^mcFlagAll != 0 {
		return false
	}
	h.typ, h.flags = b[0], b[1]
	h.rank = binary.BigEndian.Uint16(b[2:])
	h.group = binary.BigEndian.Uint32(b[4:])
	h.op = binary.BigEndian.Uint32(b[8:])
	h.seq = binary.BigEndian.Uint32(b[12:])
	h.total = binary.BigEndian.Uint32(b[16:])
	h.bits = binary.BigEndian.Uint64(b[20:])
	return h.typ == mcData || len(b) == mcHdrLen
}

// McastStats count a rank's multicast work.
type McastStats struct {
	// Joins and Leaves count group addresses added to and removed from
	// the NIC's filter; Joined is how many are in it now.
	Joins, Leaves, Joined int
	// Fallbacks counts groups that could not be opened on every member
	// (no multicast support, or the NIC's group limit) and use the
	// binomial tree instead.
	Fallbacks int
	// Bcasts counts multicast Bcasts this rank took part in.
	Bcasts int
	// DataSent counts chunks first sent, Resent retransmitted chunks and
	// polls; AcksSent and NaksSent the feedback datagrams; Duplicates the
	// chunks received again; Stashed datagrams of a later operation kept
	// for it; Bad malformed or unexpected datagrams.
	DataSent, Resent, AcksSent, NaksSent, Duplicates, Stashed, Bad uint64
	// Dropped counts datagrams lost on this rank before an operation took
	// them: a later operation's with the stash full, stashed ones that aged
	// out, and those that found the rank's datagram ring full
	// (vi.DatagramStats.Dropped). The protocols recover them by
	// retransmission.
	Dropped uint64
}

// mcGroup is one multicast group as a member sees it.
type mcGroup struct {
	id       uint32
	mac      [6]byte
	op       uint32 // operations done, the same count on every member
	joined   bool
	fallback bool // the members agreed to use the binomial tree
	opened   bool // the members agreed on fallback
}

// addr is the group's address: its MAC, for every endpoint.
func (g *mcGroup) addr() nic.Addr { return nic.Addr{MAC: g.mac, EP: nic.EndpointAll} }

// mcastEP is a rank's multicast state, shared by its communicators.
type mcastEP struct {
	// run serialises the multicast operations of the rank: they share
	// one datagram ring. Multicast collectives of different communicators
	// of one rank must not overlap (like the paper's).
	run sync.Mutex

	mu      sync.Mutex // guards the fields below
	port    *vi.DatagramPort
	joins   map[[6]byte]int
	groups  map[uint16]*mcGroup // communicators' own groups by collective context
	dynamic map[uint16]bool     // communicators that join per call
	stats   McastStats

	// Scratch of the running operation (under run).
	op    mcOp
	frame []byte
	stash []mcStashed
	have  []uint64
	retx  []int64
	acked []uint32
	hdr   mcHdr // the datagram being handled
	// The concurrent Allgather's per-stream counters and NAK flags.
	streams []int
	naks    []bool
	lens    [vi.DatagramBatch]int
}

// McastStats returns the rank's multicast counters.
func (c *Comm) McastStats() McastStats {
	m := &c.mc
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Joined = len(m.joins)
	if m.port != nil {
		s.Dropped += m.port.Stats().Dropped
	}
	return s
}

// SetMulticastGroups chooses how the communicator's multicast Bcast
// ("mcast-ack", "mcast-nak") gets its group: static (the default) opens the
// communicator's group on first use and keeps it until Finalize; dynamic
// opens and closes it around every call, as CC-MPI's dynamic scheme (costly:
// every call agrees on the group before sending). Every member must choose
// the same.
func (c *Comm) SetMulticastGroups(dynamic bool) {
	m := &c.mc
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dynamic == nil {
		m.dynamic = make(map[uint16]bool)
	}
	m.dynamic[c.cctx] = dynamic
}

// mcastPort opens the rank's datagram port on first use.
func (c *Comm) mcastPort() (*vi.DatagramPort, error) {
	m := &c.mc
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.port != nil {
		return m.port, nil
	}
	if c.fab == nil {
		return nil, errors.New("no device")
	}
	p, err := c.fab.openDatagram(mcastKind, mcastDepth)
	if err != nil {
		return nil, err
	}
	m.port = p
	m.frame = make([]byte, p.MaxPayload())
	return p, nil
}

// join adds mac to the device's filter (counted per rank).
func (c *Comm) join(mac [6]byte) error {
	mc, ok := c.dev.(nic.Multicaster)
	if !ok {
		return fmt.Errorf("device %T cannot join multicast groups", c.dev)
	}
	m := &c.mc
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.joins[mac] == 0 {
		if err := mc.JoinMulticast(mac[:]); err != nil {
			return err
		}
		m.stats.Joins++
	}
	if m.joins == nil {
		m.joins = make(map[[6]byte]int)
	}
	m.joins[mac]++
	return nil
}

func (c *Comm) leaveGroup(mac [6]byte) {
	m := &c.mc
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.joins[mac] == 0 {
		return
	}
	if m.joins[mac]--; m.joins[mac] == 0 {
		delete(m.joins, mac)
		if mc, ok := c.dev.(nic.Multicaster); ok {
			_ = mc.LeaveMulticast(mac[:])
		}
		m.stats.Leaves++
	}
}

// mcastTeardown leaves every group and closes the port; Finalize calls it
// before the provider closes.
func (c *Comm) mcastTeardown() {
	m := &c.mc
	m.mu.Lock()
	defer m.mu.Unlock()
	if mc, ok := c.dev.(nic.Multicaster); ok {
		for mac := range m.joins {
			_ = mc.LeaveMulticast(mac[:])
			m.stats.Leaves++
		}
	}
	clear(m.joins)
	if m.port != nil {
		m.port.Close()
		m.port = nil
	}
}

// groupID is the id of c's group: its collective context and the low byte
// of its first member's world rank, so that disjoint communicators sharing
// a context (Split) mostly get different addresses.
func (c *Comm) groupID() uint32 { return uint32(c.cctx)<<8 | uint32(c.worldRank(0)&0xff) }

// commGroup returns c's own group, and whether it is joined per call.
func (c *Comm) commGroup() (*mcGroup, bool) {
	m := &c.mc
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.groups == nil {
		m.groups = make(map[uint16]*mcGroup)
	}
	g := m.groups[c.cctx]
	if g == nil {
		id := c.groupID()
		g = &mcGroup{id: id, mac: nic.GroupMAC(c.cfg.jobKey, id)}
		m.groups[c.cctx] = g
	}
	return g, m.dynamic[c.cctx]
}

// openGroup joins g on every member of c and agrees on the outcome: if any
// member failed (no multicast, the NIC's limit), all fall back to the
// binomial tree. It is collective over c and also makes sure every member
// joined before anyone multicasts.
func (c *Comm) openGroup(g *mcGroup) error {
	var fail uint64
	if _, err := c.mcastPort(); err != nil {
		fail = 1
	} else if err := c.join(g.mac); err != nil {
		fail = 1
	} else {
		g.joined = true
	}
	var in, out [8]byte
	binary.LittleEndian.PutUint64(in[:], fail)
	if err := c.runReducing(&c.tables.allreduce, 8, true, &collArgs{send: in[:], recv: out[:]}, new(maxU64())); err != nil {
		return fmt.Errorf("open multicast group: %w", err)
	}
	g.opened = true
	g.fallback = binary.LittleEndian.Uint64(out[:]) != 0
	if g.fallback {
		c.mc.mu.Lock()
		c.mc.stats.Fallbacks++
		c.mc.mu.Unlock()
		if g.joined {
			c.leaveGroup(g.mac)
			g.joined = false
		}
	}
	return nil
}

func (c *Comm) closeGroup(g *mcGroup) {
	if g.joined {
		c.leaveGroup(g.mac)
		g.joined = false
	}
	g.opened = false
}

// bcastMulticast is Bcast by reliable multicast over c's own group; nak
// picks the protocol. The group falls back to the binomial tree when it
// cannot be opened on every member.
func (c *Comm) bcastMulticast(buf []byte, root int, nak bool) error {
	g, dynamic := c.commGroup()
	if !g.opened {
		if err := c.openGroup(g); err != nil {
			return err
		}
	}
	var err error
	if g.fallback {
		err = c.bcastBinomial(buf, root)
	} else {
		err = c.mcastBcast(g, buf, root, nak)
	}
	if dynamic || g.fallback {
		// Dynamic groups are joined per call; a fallback is decided per
		// opening, so a later call tries again (the limit may have room).
		c.closeGroup(g)
	}
	return err
}

// ---- the reliable multicast Bcast ----

// mcOp is one multicast Bcast in progress.
type mcOp struct {
	c        *Comm
	g        *mcGroup
	port     *vi.DatagramPort
	buf      []byte // the root's message, or the receiver's part of it
	off      int    // where the receiver's part starts in the message
	total    int    // message length
	root     int
	n, me    int
	nak      bool
	cs       int // chunk size
	k        int // chunks
	rootAddr nic.Addr
	x        *xfer
	rto      time.Duration
	lastProg time.Time
	pace     mcPacer // the root's, at a known line rate
	// receiver
	got, cum  int // chunks received; chunks received in order
	ackedUpTo int // cum in the last ACK sent
	highest   int // highest chunk seen + 1
	ackNow    bool
	nakNow    bool
	poll      bool // the root asked for a report
	// root
	sent int // chunks sent at least once
}

// mcStashed is a datagram of a later operation, kept until it runs.
type mcStashed struct {
	b   []byte
	n   int
	src nic.Addr
	age int // operations started since it was kept
}

// mcastBcast broadcasts buf from root to every member of c, which is the
// group g, by reliable multicast.
func (c *Comm) mcastBcast(g *mcGroup, buf []byte, root int, nak bool) error {
	return c.mcastRun(g, buf, 0, len(buf), root, nak)
}

// mcastRun multicasts a message of total bytes from root: the root's buf
// is the whole message; a receiver's buf is the part of it at offset off,
// and the receiver needs only the chunks that overlap it (an aggregated
// Scatter; Bcast has off 0 and buf the whole message).
func (c *Comm) mcastRun(g *mcGroup, buf []byte, off, total, root int, nak bool) error {
	m := &c.mc
	m.run.Lock()
	defer m.run.Unlock()
	g.op++
	port, err := c.mcastPort()
	if err != nil {
		return err
	}
	c.mc.mu.Lock()
	c.mc.stats.Bcasts++
	c.mc.mu.Unlock()
	if total == 0 || c.csize == 1 {
		return nil
	}
	if c.crank == root {
		off, total = 0, len(buf)
	}
	o := &m.op // under m.run: one operation at a time
	*o = mcOp{c: c, g: g, port: port, buf: buf, off: off, total: total, root: root, n: c.csize, me: c.crank, nak: nak,
		cs: port.MaxPayload() - mcHdrLen, rootAddr: c.addrs[c.worldRank(root)], x: c.newXfer(), rto: mcastRTO}
	o.k = (total + o.cs - 1) / o.cs
	if o.me == root {
		// Paced to the slowest port (the tuning's rate).
		o.pace = newPacer(c.Tuning().Rate, 1, port, c.devs[0])
	}
	if uint64(total) > 0xffffffff {
		return fmt.Errorf("multicast of %d bytes: at most 4 GiB", total)
	}
	c.startPolling()
	defer c.donePolling()
	if o.me == root {
		err = o.runRoot()
	} else {
		err = o.runRecv()
	}
	if werr := o.x.wait(); err == nil {
		err = werr
	}
	return err
}

// vrank is a rank's position in the tree rooted at the root.
func (o *mcOp) vrank(r int) int { return (r - o.root + o.n) % o.n }
func (o *mcOp) real(v int) int  { return (v + o.root) % o.n }

// postDoneRecvs posts the receives of the completion messages this rank waits
// for: every receiver's at the root with the ACK protocol, else the tree
// children's.
func (o *mcOp) postDoneRecvs() error {
	if !o.nak {
		if o.me != o.root {
			return nil
		}
		for r := range o.n {
			if r != o.root {
				if err := o.x.recv(nil, r, mcastTag); err != nil {
					return err
				}
			}
		}
		return nil
	}
	v := o.vrank(o.me)
	low := o.n // the lowest set bit of v bounds the children; the root has all
	if v != 0 {
		low = v & -v
	}
	for mask := 1; mask < low && v+mask < o.n; mask <<= 1 {
		if err := o.x.recv(nil, o.real(v+mask), mcastTag); err != nil {
			return err
		}
	}
	return nil
}

// doneRecvsReady makes point-to-point progress and reports whether every
// completion message this rank waits for arrived (or failed).
func (o *mcOp) doneRecvsReady() bool { return o.c.progressReady(o.x.reqs) }

// progressReady makes point-to-point progress and reports whether every
// request of s is done.
func (c *Comm) progressReady(s reqSet) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.progressLocked()
	return s.ready()
}

// peerErr makes point-to-point progress and returns the error of a peer
// this rank depends on that died (the root, for a receiver; any receiver,
// for the root), or of the rank's own end.
func (o *mcOp) peerErr() error {
	only := o.root
	if o.me == o.root {
		only = -1
	}
	return o.c.deadPeer(only)
}

// deadPeer makes point-to-point progress and returns the error of member
// only (any other member if only is -1) if it died, or of this rank's own
// end.
func (c *Comm) deadPeer(only int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.progressLocked()
	if c.finalized {
		return ErrFinalized
	}
	for r := range c.csize {
		if r == c.crank || only >= 0 && r != only {
			continue
		}
		if p := c.peers[c.worldRank(r)]; p.state == stDead && p.err != nil {
			return p.err
		}
	}
	return nil
}

// parentDone sends this rank's completion message: to the root with the
// ACK protocol, up the tree with the NAK one.
func (o *mcOp) parentDone() error {
	to := o.root
	if o.nak {
		v := o.vrank(o.me)
		to = o.real(v & (v - 1))
	}
	return o.x.send(nil, to, mcastTag)
}

// wait blocks for datagrams for at most d (and mcastPoll).
func (o *mcOp) wait(d time.Duration) {
	o.port.WaitUntil(time.Now().Add(min(d, mcastPoll)))
}

func (o *mcOp) hdr(typ uint8) mcHdr {
	return mcHdr{typ: typ, rank: uint16(o.me), group: o.g.id, op: o.g.op, total: uint32(o.total)}
}

// sendChunk multicasts chunk i.
func (o *mcOp) sendChunk(i int, flags uint8) error {
	h := o.hdr(mcData)
	h.flags = flags
	return o.c.mc.sendChunk(o.port, &o.pace, o.g.addr(), h, o.buf, o.cs, i)
}

// sendNew multicasts the next chunks below limit, up to a batch and the
// pacing's room, each copied once from the user's buffer into its frame.
// It returns how many it sent.
func (o *mcOp) sendNew(limit int) (int, error) {
	return o.c.mc.sendNew(o.port, &o.pace, o.g.addr(), o.hdr(mcData), o.buf, o.cs, &o.sent, limit)
}

// feedback sends an ACK or NAK to the root.
func (o *mcOp) feedback(h *mcHdr) error {
	m := &o.c.mc
	var b [mcHdrLen]byte
	putMcHdr(b[:], h)
	if err := o.port.SendTo(o.rootAddr, b[:]); err != nil {
		return err
	}
	m.mu.Lock()
	if h.typ == mcAck {
		m.stats.AcksSent++
	} else {
		m.stats.NaksSent++
	}
	m.mu.Unlock()
	return nil
}

// mcHandler acts on one datagram of the running multicast operation.
type mcHandler interface {
	handle(h *mcHdr, src nic.Addr, pl []byte) error
}

// drain handles the waiting datagrams of this operation: first those
// stashed earlier, then the port's.
func (o *mcOp) drain(fromStash bool) error { return o.c.mc.drain(o.port, o.g, fromStash, o) }

// drain hands the waiting datagrams of group g's running operation to hd:
// first those stashed earlier (if fromStash), then the port's. Datagrams of
// earlier operations of the group are dropped; those of later operations
// (or other groups: the next operation of this rank may be theirs) are
// stashed, as room allows.
func (m *mcastEP) drain(port *vi.DatagramPort, g *mcGroup, fromStash bool, hd mcHandler) error {
	h := &m.hdr // not on the stack: the handler's interface call would move it to the heap
	if fromStash {
		for i := range m.stash {
			e := &m.stash[i]
			if e.n == 0 {
				continue
			}
			e.age++
			if e.age > 16 { // its operation never came
				m.count(&m.stats.Dropped, 1)
				e.n = 0
				continue
			}
			if !parseMcHdr(e.b[:e.n], h) || h.group == g.id && int32(h.op-g.op) < 0 {
				e.n = 0
				continue
			}
			if h.group == g.id && h.op == g.op {
				n := e.n
				e.n = 0
				if err := hd.handle(h, e.src, e.b[:n]); err != nil {
					return err
				}
			}
		}
	}
	for range mcastDepth {
		pl, src, ok := port.Next()
		if !ok {
			return nil
		}
		var err error
		switch {
		case !parseMcHdr(pl, h):
			m.count(&m.stats.Bad, 1)
		case h.group == g.id && h.op == g.op:
			err = hd.handle(h, src, pl)
		case h.group != g.id || int32(h.op-g.op) > 0:
			m.stashIt(port, pl, src)
		}
		port.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// count adds n to one of the stats' counters.
func (m *mcastEP) count(ctr *uint64, n uint64) {
	m.mu.Lock()
	*ctr += n
	m.mu.Unlock()
}

func (m *mcastEP) stashIt(port *vi.DatagramPort, pl []byte, src nic.Addr) {
	if m.stash == nil {
		m.stash = make([]mcStashed, mcastStash)
	}
	for i := range m.stash {
		e := &m.stash[i]
		if e.n != 0 {
			continue
		}
		if len(e.b) < len(pl) {
			e.b = make([]byte, port.MaxPayload())
		}
		e.n = copy(e.b, pl)
		e.src, e.age = src, 0
		m.count(&m.stats.Stashed, 1)
		return
	}
	m.count(&m.stats.Dropped, 1) // the stash is full
}

// handle acts on one datagram of this operation. Who sent it is checked
// before anything it says is believed: a datagram from a host that is not
// the member it claims to be is counted and dropped, and only the real
// sender's disagreement about the length ends the call.
func (o *mcOp) handle(h *mcHdr, src nic.Addr, pl []byte) error {
	c := o.c
	if o.me == o.root {
		if h.typ == mcData || int(h.rank) >= o.n || int(h.rank) == o.root || src != c.addrs[c.worldRank(int(h.rank))] {
			o.bad()
			return nil
		}
	} else if h.typ != mcData || src != o.rootAddr {
		o.bad()
		return nil
	}
	if int(h.total) != o.total {
		return fmt.Errorf("multicast Bcast: rank %d sends %d bytes, this rank expects %d (mismatched calls?)",
			h.rank, h.total, o.total)
	}
	if o.me == o.root {
		return o.onFeedback(h)
	}
	if int(h.seq) >= o.k {
		o.bad()
		return nil
	}
	o.onData(h, pl[mcHdrLen:])
	return nil
}

func (o *mcOp) bad() {
	m := &o.c.mc
	m.mu.Lock()
	m.stats.Bad++
	m.mu.Unlock()
}

// ---- receiver ----

func (o *mcOp) onData(h *mcHdr, data []byte) {
	i := int(h.seq)
	lo := i * o.cs
	want := min(lo+o.cs, o.total) - lo
	if len(data) != want {
		o.bad()
		return
	}
	m := &o.c.mc
	if h.flags&mcPoll != 0 {
		o.ackNow, o.nakNow, o.poll = true, true, true
	}
	if m.have[i>>6]&(1<<(i&63)) != 0 {
		m.mu.Lock()
		m.stats.Duplicates++
		m.mu.Unlock()
		o.ackNow = true // the root resends: it has not heard us
		return
	}
	m.have[i>>6] |= 1 << (i & 63)
	// Only the part that overlaps this rank's buffer is kept.
	if a, b := max(lo, o.off), min(lo+len(data), o.off+len(o.buf)); a < b {
		copy(o.buf[a-o.off:b-o.off], data[a-lo:b-lo])
	}
	o.got++
	o.lastProg = time.Now()
	o.rto = mcastRTO
	if i+1 > o.highest {
		if i > o.highest {
			o.nakNow = true // a gap opened
		}
		o.highest = i + 1
	}
	for o.cum < o.k && m.have[o.cum>>6]&(1<<(o.cum&63)) != 0 {
		o.cum++
	}
	if o.cum-o.ackedUpTo >= mcastWindow/4 || o.got == o.k {
		o.ackNow = true
	}
}

// feedbackHdr fills an ACK or NAK: the chunks received in order, and the
// missing ones among the next 64 below limit.
func (o *mcOp) feedbackHdr(typ uint8, limit int) mcHdr {
	m := &o.c.mc
	h := o.hdr(typ)
	h.seq = uint32(o.cum)
	for b := 0; b < 64 && o.cum+b < limit; b++ {
		j := o.cum + b
		if m.have[j>>6]&(1<<(j&63)) == 0 {
			h.bits |= 1 << b
		}
	}
	return h
}

// feedbackLimit is the chunk below which a receiver's ACK or NAK may name
// missing chunks: those passed by a later one, or all of them after the
// root's poll (it has sent everything) or, with the ACK protocol, a
// silence (the root waits for acknowledgements to move its window). A NAK
// after a silence names only passed chunks: the silence is most often the
// root's, off a shared CPU, and the chunks beyond were not yet sent; it
// sends them on waking and then reads NAKs that asked for them. At 16
// ranks on 2 CPUs every such resend had been a duplicate at every
// receiver, a fifth of the line; the root's poll covers a lost tail.
func (o *mcOp) feedbackLimit(timedOut bool) int {
	if o.poll || timedOut && !o.nak {
		return o.k
	}
	return o.highest
}

func (o *mcOp) runRecv() error {
	m := &o.c.mc
	words := (o.k + 63) / 64
	if cap(m.have) < words {
		m.have = make([]uint64, words)
	}
	m.have = m.have[:words]
	clear(m.have)
	// Chunks that do not overlap this rank's part count as received.
	first, last := o.off/o.cs, (o.off+len(o.buf)+o.cs-1)/o.cs
	if len(o.buf) == 0 {
		first, last = 0, 0
	}
	for i := range o.k {
		if i < first || i >= last {
			m.have[i>>6] |= 1 << (i & 63)
			o.got++
		}
	}
	for o.cum < o.k && m.have[o.cum>>6]&(1<<(o.cum&63)) != 0 {
		o.cum++
	}
	o.highest = o.cum
	if err := o.postDoneRecvs(); err != nil {
		return err
	}
	o.lastProg = time.Now()
	for first := true; o.got < o.k; first = false {
		if err := o.drain(first); err != nil {
			return err
		}
		if err := o.peerErr(); err != nil {
			return err
		}
		now := time.Now()
		timedOut := o.got < o.k && now.Sub(o.lastProg) >= o.rto
		if timedOut {
			// Nothing new for a while: tell the root what we lack.
			o.ackNow, o.nakNow = true, true
			o.lastProg = now
			o.rto = min(2*o.rto, mcastRTOMx)
		}
		limit := o.feedbackLimit(timedOut)
		switch {
		case !o.nak && (o.ackNow || o.nakNow):
			// The ACK protocol's acknowledgement carries the gaps too
			// (a selective acknowledgement), so a loss costs no timeout.
			h := o.feedbackHdr(mcAck, limit)
			if err := o.feedback(&h); err != nil {
				return err
			}
			o.ackedUpTo = o.cum
		case o.nak && o.nakNow && o.got < o.k:
			h := o.feedbackHdr(mcNak, limit)
			if err := o.feedback(&h); err != nil {
				return err
			}
		}
		o.ackNow, o.nakNow, o.poll = false, false, false
		if o.got < o.k {
			o.wait(o.rto)
		}
	}
	if o.nak {
		// Aggregate: the subtree below is complete before we report. The
		// datagrams are left in the ring meanwhile: those that come now
		// are the next operation's.
		if err := o.x.wait(); err != nil {
			return err
		}
	}
	return o.parentDone()
}

// ---- root ----

func (o *mcOp) onFeedback(h *mcHdr) error {
	m := &o.c.mc
	r := int(h.rank)
	o.lastProg = time.Now()
	o.rto = mcastRTO
	if h.typ == mcAck {
		if a := min(int(h.seq), o.k); uint32(a) > m.acked[r] {
			m.acked[r] = uint32(a)
		}
	}
	for b := 0; b < 64; b++ {
		if h.bits&(1<<b) != 0 {
			if j := int(h.seq) + b; j < o.sent {
				if err := o.resend(j); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// resend retransmits chunk j unless it was resent within half an RTO
// (several receivers often ask for the same chunk).
func (o *mcOp) resend(j int) error {
	m := &o.c.mc
	now := time.Now().UnixNano()
	if now-m.retx[j] < int64(mcastRTO/2) {
		return nil
	}
	m.retx[j] = now
	return o.sendChunk(j, mcRetx)
}

// minAcked is the lowest acknowledgement of the receivers not yet done.
func (o *mcOp) minAcked() int {
	m := &o.c.mc
	lo := o.k
	for r := range o.n {
		if r != o.root && int(m.acked[r]) < lo {
			lo = int(m.acked[r])
		}
	}
	return lo
}

func (o *mcOp) runRoot() error {
	m := &o.c.mc
	if cap(m.retx) < o.k {
		m.retx = make([]int64, o.k)
	}
	m.retx = m.retx[:o.k]
	clear(m.retx)
	if cap(m.acked) < o.n {
		m.acked = make([]uint32, o.n)
	}
	m.acked = m.acked[:o.n]
	clear(m.acked)
	if err := o.postDoneRecvs(); err != nil {
		return err
	}
	o.lastProg = time.Now()
	for first := true; ; first = false {
		limit := o.k
		if !o.nak {
			limit = min(o.k, o.minAcked()+mcastWindow)
		}
		for burst := 0; o.sent < limit && burst < mcastWindow; {
			n, err := o.sendNew(limit)
			if err != nil {
				return err
			}
			if n == 0 {
				break // paced: the line is mcastAhead behind
			}
			burst += n
		}
		if err := o.drain(first); err != nil {
			return err
		}
		if o.sent == o.k && o.doneRecvsReady() {
			return nil
		}
		if err := o.peerErr(); err != nil {
			return err
		}
		now := time.Now()
		// Silence counts from when the line has carried what was sent:
		// at 100 Mbit/s a 1 MiB multicast is 84 ms on the wire.
		quiet := o.lastProg
		if o.pace.due.After(quiet) {
			quiet = o.pace.due
		}
		if o.sent == o.k || !o.nak {
			if now.Sub(quiet) >= o.rto {
				if err := o.timeout(); err != nil {
					return err
				}
				o.lastProg = now
				o.rto = min(2*o.rto, mcastRTOMx)
			}
		}
		if o.sent == limit {
			o.wait(o.rto)
		} else if d := o.pace.wait(); d > 0 {
			o.wait(d)
		}
	}
}

// timeout repairs after a silence: it re-sends a chunk as a poll, which
// makes every incomplete receiver report what it lacks: the first
// unacknowledged chunk with the ACK protocol, the last with the NAK one.
func (o *mcOp) timeout() error {
	if o.nak {
		return o.sendChunk(o.k-1, mcPoll|mcRetx)
	}
	if o.sent == 0 {
		return nil // nothing sent yet: nothing to poll with
	}
	return o.sendChunk(min(o.minAcked(), o.sent-1), mcPoll|mcRetx)
}

// ---- cost model ----

// mcastCostChunk is the chunk the cost model assumes (a jumbo frame's).
const mcastCostChunk = 8192

// mcastCost is C1 of the multicast Bcasts (C2 is m: the root sends every
// byte once, whatever n). "mcast-ack" pays a round trip per window and the
// root's handling of four acknowledgements per receiver per window
// (counted as an eighth of a start-up each); "mcast-nak" one send plus the
// aggregated acknowledgement up a tree. Opening a static group is paid once
// and left out.
func mcastCost(nak bool, n, m int) float64 {
	k := (m + mcastCostChunk - 1) / mcastCostChunk
	if nak {
		return 1 + float64(ceilLog2(n))
	}
	rounds := float64((k + mcastWindow - 1) / mcastWindow)
	return 1 + rounds*(1+float64(n-1)/2)
}

// allgatherMulticast is CC-MPI's multicast Allgather: every rank in turn
// multicasts its block to all (n reliable multicast Bcasts, mcast-nak),
// straight into the receive buffers. On a switch it needs no fewer phases
// than unicast (the paper's point); it pays off for small blocks. At a
// known line rate every rank multicasts at once instead, each paced at its
// share of the line (mcast_all.go).
func (c *Comm) allgatherMulticast(send, recv []byte) error {
	n, m := c.csize, len(send)
	copy(recv[c.crank*m:], send)
	if n == 1 {
		return nil
	}
	g, dynamic := c.commGroup()
	if !g.opened {
		if err := c.openGroup(g); err != nil {
			return err
		}
	}
	var err error
	switch {
	case g.fallback:
		for r := 0; r < n && err == nil; r++ {
			err = c.bcastBinomial(recv[r*m:(r+1)*m], r)
		}
	case c.Tuning().Rate > 0:
		// At a known line rate every rank multicasts at once, paced.
		err = c.allgatherMcastConcurrent(g, send, recv)
	default:
		for r := 0; r < n && err == nil; r++ {
			err = c.mcastBcast(g, recv[r*m:(r+1)*m], r, true)
		}
	}
	if dynamic || g.fallback {
		c.closeGroup(g)
	}
	return err
}

// scatterMulticast is CC-MPI's aggregated multicast Scatter: the root
// multicasts the whole send buffer once and every member keeps its block.
// It wins only for small blocks: every receiver handles the aggregate's
// chunks that overlap its block, the root makes few system calls.
func (c *Comm) scatterMulticast(send, recv []byte, root int) error {
	n, m := c.csize, len(recv)
	if c.crank == root {
		copy(recv, send[root*m:(root+1)*m])
	}
	if n == 1 {
		return nil
	}
	g, dynamic := c.commGroup()
	if !g.opened {
		if err := c.openGroup(g); err != nil {
			return err
		}
	}
	var err error
	switch {
	case g.fallback:
		err = c.scatterBinomial(send, recv, root)
	case c.crank == root:
		err = c.mcastRun(g, send, 0, n*m, root, true)
	default:
		err = c.mcastRun(g, recv, c.crank*m, n*m, root, true)
	}
	if dynamic || g.fallback {
		c.closeGroup(g)
	}
	return err
}
