package mplite

import (
	"fmt"
	"github.com/ethervia/ethervia/nic"
	"time"

	"github.com/ethervia/ethervia/vi"
)

// The concurrent multicast Allgather ("mcast" at a known line rate). One
// root after another (allgatherMulticast's n Bcasts) leaves each port idle
// during its own root's turn: n turns where each port needs n-1, 8/7 of the
// receive side's minimum on 8 ranks at best. Here every rank multicasts its
// block at once, paced at 1/(n-1) of the slowest port's rate, so that the
// n-1 streams a port receives add up to its line. Receivers keep one
// bitmap per stream and NAK a stream's gaps to its root; a receiver that
// hears nothing for a timeout NAKs everything it lacks. A rank that has
// every block tells every other rank over the reliable path; a rank
// returns once it has every block and every rank's word, so no root stops
// serving retransmissions while someone still lacks a chunk of its block.

// mcAllOp is one concurrent multicast Allgather in progress.
type mcAllOp struct {
	c     *Comm
	g     *mcGroup
	port  *vi.DatagramPort
	send  []byte // this rank's block
	recv  []byte // every rank's block, in rank order
	m     int    // block length
	n, me int
	cs, k int // chunk size, chunks per block
	x     *xfer
	// Receiving: have holds a bitmap of words bits per stream; got and
	// highest count each stream's chunks and its highest chunk + 1.
	words        int
	have         []uint64
	got, highest []int
	missing      int // chunks of other ranks' blocks still to come
	told         bool
	rto          time.Duration
	lastProg     time.Time
	nakNow       []bool
	sent         int     // chunks of this rank's block sent at least once
	pace         mcPacer // this rank's stream: its share of the line
	retx         []int64
}

// allgatherMcastConcurrent runs the concurrent multicast Allgather over g,
// which every member of c has joined.
func (c *Comm) allgatherMcastConcurrent(g *mcGroup, send, recv []byte) error {
	m := &c.mc
	m.run.Lock()
	defer m.run.Unlock()
	g.op++
	port, err := c.mcastPort()
	if err != nil {
		return err
	}
	n := c.csize
	o := &mcAllOp{c: c, g: g, port: port, send: send, recv: recv, m: len(send), n: n, me: c.crank,
		cs: port.MaxPayload() - mcHdrLen, x: c.newXfer(), rto: mcastRTO}
	if uint64(o.m) > 0xffffffff {
		return fmt.Errorf("multicast Allgather of %d-byte blocks: at most 4 GiB", o.m)
	}
	o.k = (o.m + o.cs - 1) / o.cs
	o.words = (o.k + 63) / 64
	m.mu.Lock()
	m.stats.Bcasts += n
	m.mu.Unlock()
	o.scratch()
	// n-1 streams share each port's line.
	o.pace = newPacer(c.Tuning().Rate, n-1, port, c.devs[0])
	c.startPolling()
	defer c.donePolling()
	err = o.run()
	if werr := o.x.wait(); err == nil {
		err = werr
	}
	return err
}

// scratch sizes the operation's per-stream state from the rank's
// multicast scratch (kept across calls).
func (o *mcAllOp) scratch() {
	m := &o.c.mc
	n := o.n
	if cap(m.have) < n*o.words {
		m.have = make([]uint64, n*o.words)
	}
	o.have = m.have[:n*o.words]
	clear(o.have)
	if cap(m.retx) < o.k {
		m.retx = make([]int64, o.k)
	}
	o.retx = m.retx[:o.k]
	clear(o.retx)
	if cap(m.streams) < 2*n {
		m.streams = make([]int, 2*n)
		m.naks = make([]bool, n)
	}
	o.got, o.highest = m.streams[:n], m.streams[n:2*n]
	clear(o.got)
	clear(o.highest)
	o.nakNow = m.naks[:n]
	clear(o.nakNow)
	o.missing = (n - 1) * o.k
}

func (o *mcAllOp) run() error {
	c := o.c
	copy(o.recv[o.me*o.m:], o.send)
	// Every other rank's word that it has everything.
	for r := range o.n {
		if r != o.me {
			if err := o.x.recv(nil, r, mcastTag); err != nil {
				return err
			}
		}
	}
	o.lastProg = time.Now()
	for first := true; ; first = false {
		for burst := 0; o.sent < o.k && burst < mcastWindow; {
			n, err := o.sendNew()
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			burst += n
		}
		if err := c.mc.drain(o.port, o.g, first, o); err != nil {
			return err
		}
		if o.missing == 0 && !o.told {
			// Everything is here: say so to every rank.
			for r := range o.n {
				if r != o.me {
					if err := o.x.send(nil, r, mcastTag); err != nil {
						return err
					}
				}
			}
			o.told = true
		}
		if o.told && o.sent == o.k && o.allTold() {
			return nil
		}
		if err := c.deadPeer(-1); err != nil {
			return err
		}
		now := time.Now()
		if o.missing > 0 && now.Sub(o.lastProg) >= o.rto {
			// Nothing new for a while: NAK every stream's gaps.
			for r := range o.n {
				o.nakNow[r] = r != o.me && o.got[r] < o.k
				if o.nakNow[r] {
					o.highest[r] = o.k
				}
			}
			o.lastProg = now
			o.rto = min(2*o.rto, mcastRTOMx)
		}
		for r := range o.n {
			if o.nakNow[r] {
				o.nakNow[r] = false
				if err := o.nak(r); err != nil {
					return err
				}
			}
		}
		switch {
		case o.sent < o.k:
			if d := o.pace.wait(); d > 0 {
				o.port.WaitUntil(now.Add(min(d, mcastPoll)))
			}
		default:
			o.port.WaitUntil(now.Add(min(o.rto, mcastPoll)))
		}
	}
}

// allTold makes point-to-point progress and reports whether every other
// rank said it has everything (requests 0 to n-2 are those receives).
func (o *mcAllOp) allTold() bool { return o.c.progressReady(o.x.reqs[:o.n-1]) }

func (o *mcAllOp) hdr(typ uint8) mcHdr {
	return mcHdr{typ: typ, rank: uint16(o.me), group: o.g.id, op: o.g.op, total: uint32(o.m)}
}

// sendNew multicasts the next chunks of this rank's block, up to a batch
// and the pacing's room.
func (o *mcAllOp) sendNew() (int, error) {
	return o.c.mc.sendNew(o.port, &o.pace, o.g.addr(), o.hdr(mcData), o.send, o.cs, &o.sent, o.k)
}

// resend retransmits chunk j of this rank's block unless it went within
// half an RTO (several receivers often ask for the same chunk).
func (o *mcAllOp) resend(j int) error {
	now := time.Now().UnixNano()
	if now-o.retx[j] < int64(mcastRTO/2) {
		return nil
	}
	o.retx[j] = now
	h := o.hdr(mcData)
	h.flags = mcRetx
	return o.c.mc.sendChunk(o.port, &o.pace, o.g.addr(), h, o.send, o.cs, j)
}

// nak asks rank r for the chunks of its block missing among the 64 after
// the first missing one, below what has been seen of its stream.
func (o *mcAllOp) nak(r int) error {
	m := &o.c.mc
	bits := o.have[r*o.words : (r+1)*o.words]
	first := 0
	for first < o.k && bits[first>>6]&(1<<(first&63)) != 0 {
		first++
	}
	if first == o.k {
		return nil
	}
	h := o.hdr(mcNak)
	h.seq = uint32(first)
	for b := 0; b < 64 && first+b < o.highest[r]; b++ {
		if j := first + b; bits[j>>6]&(1<<(j&63)) == 0 {
			h.bits |= 1 << b
		}
	}
	var f [mcHdrLen]byte
	putMcHdr(f[:], &h)
	to := o.c.addrs[o.c.worldRank(r)]
	if err := o.port.SendTo(to, f[:]); err != nil {
		return err
	}
	m.count(&m.stats.NaksSent, 1)
	return nil
}

// handle acts on one datagram of this operation: another rank's chunk, or
// a NAK for this rank's block.
func (o *mcAllOp) handle(h *mcHdr, src nic.Addr, pl []byte) error {
	c := o.c
	r := int(h.rank)
	if r >= o.n || r == o.me || src != c.addrs[c.worldRank(r)] || int(h.total) != o.m || int(h.seq) >= o.k {
		if int(h.total) != o.m && r < o.n && r != o.me && src == c.addrs[c.worldRank(r)] {
			return fmt.Errorf("multicast Allgather: rank %d sends %d-byte blocks, this rank expects %d (mismatched calls?)",
				r, h.total, o.m)
		}
		c.mc.count(&c.mc.stats.Bad, 1)
		return nil
	}
	if h.typ == mcNak {
		for b := 0; b < 64; b++ {
			if j := int(h.seq) + b; h.bits&(1<<b) != 0 && j < o.sent {
				if err := o.resend(j); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if h.typ != mcData {
		c.mc.count(&c.mc.stats.Bad, 1)
		return nil
	}
	i := int(h.seq)
	data := pl[mcHdrLen:]
	want := segment(o.recv[r*o.m:(r+1)*o.m], i, o.cs)
	if len(data) != len(want) {
		c.mc.count(&c.mc.stats.Bad, 1)
		return nil
	}
	bits := o.have[r*o.words : (r+1)*o.words]
	if bits[i>>6]&(1<<(i&63)) != 0 {
		c.mc.count(&c.mc.stats.Duplicates, 1)
		return nil
	}
	bits[i>>6] |= 1 << (i & 63)
	copy(want, data)
	o.got[r]++
	o.missing--
	o.lastProg = time.Now()
	o.rto = mcastRTO
	if i > o.highest[r] {
		o.nakNow[r] = true // a gap opened in r's stream
	}
	o.highest[r] = max(o.highest[r], i+1)
	return nil
}
