package mplite

// Hierarchical collectives, for communicators whose ranks share hosts:
// the ranks of a host meet at their leader (the host's lowest rank, or
// the root's own rank on the root's host) through shared memory, only the
// leaders talk over the network, and each leader hands the result back to
// its host. With 8 ranks per host an 8-byte Allreduce of 64 ranks sends 8
// messages per network step instead of 64, and every one of those frames
// also costs each packet socket of the receiving host a filter run.

// localStepShare is what one intra-host step costs against one network
// step (t_s) in the cost model: a message through shared memory takes
// about a tenth of one through the NIC on this machine's measurements
// (0.5 µs against 5 µs).
const localStepShare = 0.1

// hostLayout groups a communicator's ranks by host (rail-0 MAC).
type hostLayout struct {
	hostOf  []int   // by rank: its host's index
	members [][]int // by host: its ranks, ascending
	myHost  int
}

// hosts returns c's host layout, computed once per communicator.
func (c *Comm) hosts() *hostLayout {
	if c.coll.hosts != nil {
		return c.coll.hosts
	}
	h := &hostLayout{hostOf: make([]int, c.csize)}
	index := make(map[[6]byte]int)
	for r := range c.csize {
		mac := c.addrs[c.worldRank(r)].MAC
		i, ok := index[mac]
		if !ok {
			i = len(h.members)
			index[mac] = i
			h.members = append(h.members, nil)
		}
		h.hostOf[r] = i
		h.members[i] = append(h.members[i], r)
	}
	h.myHost = h.hostOf[c.crank]
	c.coll.hosts = h
	return h
}

// hierarchical reports whether a hierarchical algorithm applies: an
// intracommunicator over several hosts, some of them with several ranks,
// which talk through shared memory. Every rank must answer alike (they
// all run what they pick), so it asks the world's configuration, not
// whether this rank has local peers.
func hierarchical(s selection) bool {
	c := s.c
	if !c.cfg.shm || c.local != nil || c.csize < 3 {
		return false
	}
	h := c.hosts()
	return len(h.members) > 1 && len(h.members) < c.csize
}

// hierTuned is the cost of a hierarchical algorithm whose network part
// costs net for the hosts (nh of them, m bytes): the leaders' part plus
// two passes through the largest host's ranks at localStepShare a step.
func hierTuned(s selection, net func(nh, m int) (float64, float64)) (c1, c2, w1, w2 float64, ok bool) {
	if !hierarchical(s) {
		return 0, 0, 0, 0, false
	}
	h := s.c.hosts()
	most := 0
	for _, m := range h.members {
		most = max(most, len(m))
	}
	nh := len(h.members)
	c1, c2 = net(nh, s.m)
	local := 2 * float64(most-1) * localStepShare
	c1 += local
	// The job's work: the leaders' network messages, and a message per
	// rank each way inside the hosts, at the local share.
	w1 = float64(nh)*c1 + 2*float64(s.n-nh)*localStepShare
	w2 = float64(nh)*c2 + 2*float64(s.n-nh)*float64(s.m)*localStepShare
	return c1, c2, w1, w2, true
}

// allgatherHierTuned is allgatherHier's cost: the leaders' exchange of
// their hosts' blocks (nh-1 messages, all in flight), then the whole
// result, n blocks, from the leader to each other rank of its host.
func allgatherHierTuned(s selection) (c1, c2, w1, w2 float64, ok bool) {
	if !hierarchical(s) {
		return 0, 0, 0, 0, false
	}
	most := 0
	for _, m := range s.c.hosts().members {
		most = max(most, len(m))
	}
	down := float64(most-1) * float64(s.n) * float64(s.m) * localStepShare
	return hierTuned(s, func(nh, m int) (float64, float64) {
		return float64(nh - 1), float64(nh-1)*float64(most)*float64(m) + down
	})
}

// leaderOf is the leader of host i for a collective rooted at root (-1:
// no root): root on its own host, else the host's lowest rank.
func (h *hostLayout) leaderOf(i, root int) int {
	if root >= 0 && h.hostOf[root] == i {
		return root
	}
	return h.members[i][0]
}

// leaders is the span of the hosts' leaders of an unrooted collective, in
// host order, with this host's leader as member; ranks is room for them.
func (h *hostLayout) leaders(ranks []int) span {
	for i := range ranks {
		ranks[i] = h.leaderOf(i, -1)
	}
	return span{n: len(ranks), me: h.myHost, ranks: ranks}
}

// gatherHost runs the intra-host half on the way up: a leader receives
// one message from each rank of its host (into tmp, handing each to fold
// if not nil), every other rank sends buf to its leader.
func (c *Comm) gatherHost(x *xfer, h *hostLayout, leader int, buf, tmp []byte, fold func(in []byte)) error {
	if c.crank != leader {
		if err := x.send(buf, leader, hierUpTag); err != nil {
			return err
		}
		return x.wait()
	}
	for _, r := range h.members[h.myHost] {
		if r == leader {
			continue
		}
		if err := x.recv(tmp, r, hierUpTag); err != nil {
			return err
		}
		if err := x.wait(); err != nil {
			return err
		}
		if fold != nil {
			fold(tmp)
		}
	}
	return nil
}

// scatterHost runs the intra-host half on the way down: the leader sends
// buf to every rank of its host, which receives it into buf.
func (c *Comm) scatterHost(x *xfer, h *hostLayout, leader int, buf []byte) error {
	if c.crank != leader {
		if err := x.recv(buf, leader, hierDownTag); err != nil {
			return err
		}
		return x.wait()
	}
	for _, r := range h.members[h.myHost] {
		if r != leader {
			if err := x.send(buf, r, hierDownTag); err != nil {
				_ = x.wait()
				return err
			}
		}
	}
	return x.wait()
}

// Tags of the hierarchical algorithms' intra-host messages; the leaders'
// steps use the flat algorithms' own, all below these.
const (
	hierUpTag     = 500
	hierDownTag   = 501
	hierLeaderTag = 502
)

// allreduceHier: each host reduces to its leader, the leaders allreduce
// by recursive doubling, and each leader hands the result to its host.
// Commutative operators only: the order of reduction is not rank order.
func (c *Comm) allreduceHier(send, recv []byte, red *Reducer) error {
	h := c.hosts()
	leader := h.leaderOf(h.myHost, -1)
	acc := recv
	copy(acc, send)
	tmp := c.coll.scr.get(len(send))
	x := c.newXfer()
	if err := c.gatherHost(x, h, leader, acc, tmp, func(in []byte) { red.Fn(acc, in, acc) }); err != nil {
		return err
	}
	if c.crank == leader {
		if err := c.recDoubling(x, h.leaders(c.coll.layout(len(h.members))), acc, tmp, red); err != nil {
			return err
		}
	}
	return c.scatterHost(x, h, leader, acc)
}

// bcastHier: the root hands buf to the other hosts' leaders down a
// binomial tree, and each leader to its host.
func (c *Comm) bcastHier(buf []byte, root int) error {
	h := c.hosts()
	leader := h.leaderOf(h.myHost, root)
	x := c.newXfer()
	if c.crank == leader {
		// The tree numbers the hosts from the root's.
		nh, first := len(h.members), h.hostOf[root]
		at := func(v int) int { return h.leaderOf((v+first)%nh, root) }
		if err := binomialDown(x, buf, nh, (h.myHost-first+nh)%nh, at, 0); err != nil {
			return err
		}
	}
	return c.scatterHost(x, h, leader, buf)
}

// barrierHier: each host checks in with its leader, the leaders run a
// dissemination barrier, and each leader releases its host.
func (c *Comm) barrierHier() error {
	h := c.hosts()
	leader := h.leaderOf(h.myHost, -1)
	x := c.newXfer()
	if err := c.gatherHost(x, h, leader, nil, nil, nil); err != nil {
		return err
	}
	if c.crank == leader {
		if err := c.dissemination(x, h.leaders(c.coll.layout(len(h.members)))); err != nil {
			return err
		}
	}
	return c.scatterHost(x, h, leader, nil)
}

// reduceHier: each host reduces to its leader (the root on the root's
// host), and the leaders reduce to the root up a binomial tree numbered
// from the root's host. Commutative operators only, as allreduceHier.
func (c *Comm) reduceHier(send, recv []byte, red *Reducer, root int) error {
	h := c.hosts()
	leader := h.leaderOf(h.myHost, root)
	acc := c.coll.scr.clone(send)
	tmp := c.coll.scr.get(len(send))
	x := c.newXfer()
	if err := c.gatherHost(x, h, leader, acc, tmp, func(in []byte) { red.Fn(acc, in, acc) }); err != nil {
		return err
	}
	if c.crank != leader {
		return nil
	}
	nh, first := len(h.members), h.hostOf[root]
	at := func(v int) int { return h.leaderOf((v+first)%nh, root) }
	if err := binomialUp(x, acc, tmp, red, nh, (h.myHost-first+nh)%nh, at, 0); err != nil {
		return err
	}
	if c.crank == root {
		copy(recv, acc)
	}
	return nil
}

// allgatherHier: each host's ranks hand their blocks to its leader, the
// leaders swap their hosts' blocks (one message per pair of hosts, all in
// flight at once), and each leader hands the whole result to its host.
// A host whose ranks are consecutive sends and receives its blocks where
// they lie in recv; another's travel packed in member order.
func (c *Comm) allgatherHier(send, recv []byte) error {
	h := c.hosts()
	m := len(send)
	leader := h.leaderOf(h.myHost, -1)
	x := c.newXfer()
	if c.crank != leader {
		if err := x.send(send, leader, hierUpTag); err != nil {
			return err
		}
		if err := x.wait(); err != nil {
			return err
		}
		return c.scatterHost(x, h, leader, recv)
	}
	for _, r := range h.members[h.myHost] {
		if r == c.crank {
			copy(recv[r*m:], send)
		} else if err := x.recv(recv[r*m:(r+1)*m], r, hierUpTag); err != nil {
			_ = x.wait()
			return err
		}
	}
	if err := x.wait(); err != nil {
		return err
	}
	// Where each host's blocks travel: in recv if its ranks are
	// consecutive, else packed in member order at off[i] in scr.
	off := c.coll.layout(len(h.members))
	packed := 0
	for i, ms := range h.members {
		off[i] = packed
		if !consecutive(ms) {
			packed += len(ms) * m
		}
	}
	scr := c.coll.scr.get(packed)
	blocks := func(i int) []byte {
		ms := h.members[i]
		if consecutive(ms) {
			return recv[ms[0]*m : (ms[len(ms)-1]+1)*m]
		}
		return scr[off[i] : off[i]+len(ms)*m]
	}
	mine := blocks(h.myHost)
	if !consecutive(h.members[h.myHost]) {
		for k, r := range h.members[h.myHost] {
			copy(mine[k*m:], recv[r*m:(r+1)*m])
		}
	}
	for i := range h.members {
		if i == h.myHost {
			continue
		}
		if err := x.recv(blocks(i), h.leaderOf(i, -1), hierLeaderTag); err != nil {
			_ = x.wait()
			return err
		}
	}
	for i := range h.members {
		if i == h.myHost {
			continue
		}
		if err := x.send(mine, h.leaderOf(i, -1), hierLeaderTag); err != nil {
			_ = x.wait()
			return err
		}
	}
	if err := x.wait(); err != nil {
		return err
	}
	for i, ms := range h.members {
		if i != h.myHost && !consecutive(ms) {
			b := blocks(i)
			for k, r := range ms {
				copy(recv[r*m:(r+1)*m], b[k*m:])
			}
		}
	}
	return c.scatterHost(x, h, leader, recv)
}

// consecutive reports whether ranks (ascending) are consecutive numbers.
func consecutive(ranks []int) bool {
	return len(ranks) > 0 && ranks[len(ranks)-1]-ranks[0] == len(ranks)-1
}
