package mplite

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/shm"
)

// Ranks of one host (the same rail-0 MAC, so the same NIC) talk through
// shared memory (shmlink.go) instead of the NIC. Each such rank creates
// its inbox when the world is made and attaches to every other local
// rank's inbox in the background, so that the inboxes' names are gone from
// the file system soon after the job starts; a peer's connection is ready
// once we are attached to its inbox.

// localSlots is the number of entries in each ring: enough to keep a
// peer's eager messages flowing while the receiver copies.
const localSlots = 8

// localChunk is the largest RDMA write to a rank of this host: its bytes
// are copied in one step (or in ring slots), not framed, so one descriptor
// may cover a whole message.
const localChunk = 1 << 30

// chunkFor is the largest RDMA write descriptor to p.
func (c *Comm) chunkFor(p *peer) int {
	if p.local {
		return localChunk
	}
	return c.chunk
}

// localNICSkips is how many turns a call that waits only on ranks of its
// host lets pass between polls of the NIC (for the protocol's timers and
// the other peers; a turn without it takes about 100 ns): polling it is a
// system call, several times the cost of looking at every ring, and on
// every turn of the spin it delayed the local message.
const localNICSkips = 128

// nicNeeded reports whether a waiter's turn should poll the NIC: always,
// unless w waits only for ranks of this host and the NIC was polled within
// the last localNICSkips turns. c.mu is held.
func (c *Comm) nicNeeded(w waitCond) bool {
	if !c.waitsLocal(w) {
		return true
	}
	if c.shmEP.nicSkips++; c.shmEP.nicSkips < localNICSkips {
		return false
	}
	c.shmEP.nicSkips = 0
	return true
}

// waitsLocal reports whether w waits only on ranks of this host, through
// shared memory. c.mu is held.
func (c *Comm) waitsLocal(w waitCond) bool {
	if c.shmEP == nil || w == nil {
		return false
	}
	switch w := w.(type) {
	case *Request:
		return c.localReq(w)
	case *reqSet:
		for _, r := range *w {
			if !c.localReq(r) {
				return false
			}
		}
		return true
	}
	return false
}

// localReq reports a request whose peer is a rank of this host.
func (c *Comm) localReq(r *Request) bool {
	return r.peer >= 0 && r.peer < len(c.peers) && c.peers[r.peer].local
}

// localWriteSpin is how long past its spin time a waiter goes on polling
// while a write of its to a rank of this host is being copied: the copy
// of a few MiB takes about a millisecond, and a sender that slept through
// it paid a wake-up on every large message.
const localWriteSpin = int64(2 * time.Millisecond)

// localWriteSpin reports whether a waiter whose spin time ran out should
// spin on: a write to a local peer is in flight and the waiter has not
// spun localWriteSpin past its window.
func (c *Comm) localWriteSpin(win *spinWindow) bool {
	l := c.shmEP
	return l != nil && l.writes.Load() > 0 && c.nanos()-win.last <= win.limit+localWriteSpin
}

// livenessEvery is how often a waiting rank checks that its local peers'
// processes still run (a dead one would never consume or send again).
const livenessEvery = int64(100 * time.Millisecond)

// localEP is a rank's shared-memory side.
type localEP struct {
	in       *shm.Inbox
	dir      string
	tag      string
	ranks    []int         // the local peers, by rank
	outs     []*shm.Outbox // by rank: attached to its inbox
	failed   []error       // by rank: why attaching failed for good
	byRing   []*peer       // by ring of our inbox, once its owner is known
	links    []*peer       // peers with a shared-memory link
	woken    atomic.Bool   // a wake-up came through the FIFO since the last poll
	quit     atomic.Bool   // the wake goroutine should end
	writes   atomic.Int32  // RDMA writes to local peers not yet consumed (localWriteSpin)
	taken    atomic.Uint64 // entries taken from the rings (spinWindow)
	done     chan struct{} // the wake goroutine ended
	stop     chan struct{} // the attach goroutine should give up
	last     int64         // the last liveness check
	nicSkips int           // a waiter's turns since the NIC was last polled
	closed   bool
}

// inboxPath names rank q's inbox: the job, then the rank's address.
func (l *localEP) inboxPath(c *Comm, q int) string {
	a := c.addrs[q]
	return filepath.Join(l.dir, fmt.Sprintf("ethervia-%s-%x-%d", l.tag, a.MAC[:], a.EP))
}

// shmDir is where inboxes live: MPLITE_SHM_DIR, else /dev/shm, else the
// temporary directory.
func shmDir(getenv func(string) string) string {
	if d := getenv("MPLITE_SHM_DIR"); d != "" {
		return d
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// randomTag names the inboxes of a world made in one process
// (NewLocalWorld), where nothing else tells its ranks from another
// world's.
func randomTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("w%016x", binary.LittleEndian.Uint64(b[:]))
}

// Host numbers this rank's host: the lowest world rank that shares its
// NIC (its rail-0 MAC). Ranks of one host get the same number and ranks
// of different hosts different ones: the color of MPI_COMM_TYPE_SHARED.
func (c *Comm) Host() int {
	me := c.addrs[c.rank].MAC
	for r := range c.addrs {
		if c.addrs[r].MAC == me {
			return r
		}
	}
	return c.rank
}

// isLocal reports whether rank q shares this rank's NIC.
func (c *Comm) isLocal(q int) bool {
	return q != c.rank && c.addrs[q].MAC == c.addrs[c.rank].MAC
}

// openLocal creates the rank's inbox if other ranks share its NIC, and
// starts attaching to theirs.
func (c *Comm) openLocal() error {
	if !c.cfg.shm {
		return nil
	}
	var ranks []int
	for q := range c.addrs {
		if c.isLocal(q) {
			ranks = append(ranks, q)
		}
	}
	if len(ranks) == 0 {
		return nil
	}
	tag := c.cfg.shmTag
	if tag == "" {
		tag = fmt.Sprintf("%08x", c.cfg.jobKey)
	}
	l := &localEP{dir: shmDir(os.Getenv), tag: tag, ranks: ranks,
		outs: make([]*shm.Outbox, c.size), failed: make([]error, c.size),
		done: make(chan struct{}), stop: make(chan struct{})}
	in, err := shm.Create(l.inboxPath(c, c.rank), shm.Config{Rings: len(ranks), Slots: localSlots, SlotData: c.slot})
	if err != nil {
		return fmt.Errorf("mplite rank %d: shared memory for the ranks of this host (MPLITE_SHM=0 turns it off): %w", c.rank, err)
	}
	l.in = in
	l.byRing = make([]*peer, len(ranks))
	c.shmEP = l
	c.fab.alsoWake(l.pending)
	// A rank blocked in its NIC's poll watches the wake FIFO there too:
	// with ranks sharing CPUs that poll holds the thread and its P, and a
	// goroutine reading the FIFO could not run until it timed out. The
	// goroutine remains for waits elsewhere (a bond's, memnic's).
	for _, d := range c.devs {
		if w, ok := d.(nic.WakeFDWaiter); ok {
			w.SetWakeFD(in.WakeFD())
		}
	}
	go func() {
		defer close(l.done)
		for in.AwaitWake() == nil && !l.quit.Load() {
			l.woken.Store(true)
			c.fab.interrupt()
		}
	}()
	c.conns.Add(1)
	go c.attachLocal(l)
	for _, q := range ranks {
		c.peers[q].local = true
	}
	return nil
}

// pending reports work for the shared-memory side: an entry in a ring, or
// a wake-up (a peer consumed from a ring we found full, or wrote while we
// slept). Any goroutine; the fabric's waits ask it with the provider's
// lock held.
func (l *localEP) pending() bool {
	if l.woken.Load() || l.in.Pending() {
		return true
	}
	if l.in.DrainWake() {
		l.woken.Store(true)
		return true
	}
	return false
}

// attachLocal attaches to every local peer's inbox, waiting for the ones
// not yet created (their ranks are still starting) until the connect
// timeout.
func (c *Comm) attachLocal(l *localEP) {
	defer c.conns.Done()
	deadline := time.Now().Add(c.cfg.connectTimeout)
	todo := append([]int(nil), l.ranks...)
	pause := 100 * time.Microsecond
	for len(todo) > 0 {
		left := todo[:0]
		for _, q := range todo {
			o, err := shm.Attach(l.inboxPath(c, q), uint32(c.rank+1))
			switch {
			case err == nil:
				c.mu.Lock()
				if l.closed {
					o.Close()
				} else {
					c.attached(q, o)
				}
				c.mu.Unlock()
				c.cond.Broadcast()
			case errors.Is(err, fs.ErrNotExist) && time.Now().Before(deadline):
				left = append(left, q)
			default:
				if errors.Is(err, fs.ErrNotExist) {
					err = fmt.Errorf("rank %d's shared memory never appeared: %w", q, err)
				}
				c.mu.Lock()
				c.attachFailed(q, err)
				c.mu.Unlock()
				c.cond.Broadcast()
			}
		}
		todo = left
		if len(todo) == 0 {
			return
		}
		select {
		case <-l.stop:
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 10*time.Millisecond)
	}
}

// attached records our ring in rank q's inbox; c.mu is held.
func (c *Comm) attached(q int, o *shm.Outbox) {
	c.shmEP.outs[q] = o
	p := c.peers[q]
	if sl, ok := p.v.(*shmLink); ok {
		sl.out = o
		if p.state == stConnecting {
			c.connected(p)
		}
	}
}

func (c *Comm) attachFailed(q int, err error) {
	c.shmEP.failed[q] = err
	if p := c.peers[q]; p.state == stConnecting {
		c.peerFailed(p, fmt.Errorf("shared memory: %w", err), true)
	}
}

// newShmLink makes p's link to a rank of this host; c.mu is held.
func (c *Comm) newShmLink(p *peer) *shmLink {
	l := &shmLink{out: c.shmEP.outs[p.rank], fill: c.fab.fillMemory, who: localGrantee(p.rank), copies: c.cfg.shmCopies,
		share: !c.cfg.osYield, rankWrites: &c.shmEP.writes}
	l.direct = func(msg []byte) bool { return c.recvDirect(p, msg) }
	c.shmEP.links = append(c.shmEP.links, p)
	return l
}

// recvDirect delivers an eager message from local peer p straight from
// its ring slot into the posted receive it matches, as onEager would from
// a receive slot. Anything else (no receive posted, other types) it
// leaves to the descriptor path, reporting false.
func (c *Comm) recvDirect(p *peer, msg []byte) bool {
	var e envelope
	if len(msg) == 0 || msg[0] != msgEager || parseEager(msg, c.cfg.eagerLimit, &e) != nil {
		return false
	}
	return c.eagerToPosted(p, &e, msg[eagerLen:])
}

// connectLocal starts p's connection: ready if we are attached to its
// inbox, else when we are.
func (c *Comm) connectLocal(p *peer) {
	if err := c.shmEP.failed[p.rank]; err != nil {
		c.peerFailed(p, fmt.Errorf("shared memory: %w", err), true)
		return
	}
	if c.shmEP.outs[p.rank] != nil {
		c.connected(p)
		return
	}
	c.setState(p, stConnecting)
}

// pollLocal moves what the shared-memory links have: entries from the
// peers' rings, sends the peers consumed, queued sends into rings with
// room. c.mu is held.
func (c *Comm) pollLocal() {
	l := c.shmEP
	if l == nil || l.closed {
		return
	}
	if l.woken.Load() {
		l.woken.Store(false)
	}
	rings := l.in.Rings()
	for i := range rings {
		r := &rings[i]
		if !r.Ready() {
			continue
		}
		p := l.byRing[i]
		if p == nil {
			if p = c.ringOwner(r); p == nil {
				continue
			}
			l.byRing[i] = p
		}
		c.takeLocal(p)
	}
	for _, p := range l.links {
		if sl := p.v.(*shmLink); sl.busy() && c.needReap(p, sl) {
			sl.reap()
			c.localDone(p, sl)
		}
	}
}

// postDirect writes an envelope (and eager r's data) straight into p's
// ring when nothing posted waits before it and the ring has room: no send
// slot, no descriptor, nothing to complete later. It reports false when
// the message must take the descriptor path instead.
func (c *Comm) postDirect(p *peer, e *envelope, r *Request) bool {
	sl := ringLink(p)
	if sl == nil {
		return false
	}
	if n := messageLen(e, r); n >= 0 {
		// A short one goes inside the entry header (shm.InlineData):
		// one cache line for the receiver to read.
		b, ok := sl.out.ReserveSend(n)
		if !ok {
			return false
		}
		putMessage(b, e, r)
		sl.out.CommitSend(n)
		return true
	}
	b, ok := sl.out.Reserve() // a CTS with runs: its length is known once written
	if !ok {
		return false
	}
	k := putMessage(b, e, r)
	sl.out.Commit(&shm.Entry{Kind: shm.Send, Length: k})
	return true
}

// ringLink returns p's shared-memory link if a message may go straight
// into its ring: attached, unbroken, and no send of the descriptor path
// waiting for room, which the message must not overtake.
func ringLink(p *peer) *shmLink {
	sl, ok := p.v.(*shmLink)
	if !ok || sl.out == nil || sl.err != nil || sl.ph < len(sl.pend) {
		return nil
	}
	return sl
}

// messageLen is the length of the message putMessage writes for e and r,
// or -1 for a CTS with runs (putRuns decides how many).
func messageLen(e *envelope, r *Request) int {
	n := envelopeLen(e.typ)
	switch {
	case e.sendRuns != nil:
		return -1
	case r == nil:
	case r.lay != nil && r.buf == nil:
		n += r.layLen
	default:
		n += len(r.buf)
	}
	return n
}

// needReap reports whether p's consumed sends must be completed now:
// reading how far the peer consumed moves a cache line the peer writes on
// every message, so it waits until the sends' buffers (or their
// completions) are wanted: the ring or the free slots run short, sends
// queue, a handshake's write waits for its completion, or Finalize drains.
func (c *Comm) needReap(p *peer, sl *shmLink) bool {
	return sl.inFlight() >= localSlots/2 || sl.writes > 0 || sl.ph < len(sl.pend) ||
		len(p.sfre) < 4 || p.sendq.head != nil || p.ctrlH < len(p.ctrlq) || c.finalizing
}

// ringOwner returns the local peer that claimed ring r, setting up its
// link (it talks to us before we talked to it), or nil.
func (c *Comm) ringOwner(r *shm.Ring) *peer {
	id := int(r.Owner())
	if id == 0 {
		return nil
	}
	q := id - 1
	if q >= c.size || !c.peers[q].local {
		return nil // not a rank of ours on this host: its entries are ignored
	}
	p := c.peers[q]
	c.ensureConn(p)
	sl, ok := p.v.(*shmLink)
	if !ok {
		return nil
	}
	sl.ring = r
	return p
}

// takeLocal handles the entries in p's ring and what they completed.
func (c *Comm) takeLocal(p *peer) {
	sl, ok := p.v.(*shmLink)
	if !ok || sl.ring == nil || p.state == stDead {
		return
	}
	for range 64 {
		n, err := sl.take()
		if err != nil {
			sl.err = err
			c.peerFailed(p, fmt.Errorf("shared memory: %w", err), true)
			return
		}
		c.consumedLocal(sl, n)
		if !c.localDone(p, sl) {
			return
		}
	}
}

// consumedLocal counts n entries taken from sl's ring and wakes the peer if
// it waits for room or for an entry's consumption.
func (c *Comm) consumedLocal(sl *shmLink, n int) {
	if n == 0 {
		return
	}
	c.shmEP.taken.Add(uint64(n))
	c.stats.SharedMemory += uint64(n)
	if (sl.ring.RoomWanted() || sl.notify) && sl.out != nil {
		sl.notify = false
		sl.out.Wake()
	}
}

// localDone hands p's completed descriptors to the protocol; it reports
// whether there were any.
func (c *Comm) localDone(p *peer, sl *shmLink) bool {
	moved := false
	for {
		d, ok := sl.RecvDone()
		if !ok {
			break
		}
		moved = true
		c.onRecv(p, d, false)
	}
	for {
		d, ok := sl.SendDone()
		if !ok {
			break
		}
		moved = true
		c.onSend(p, d)
	}
	return moved
}

// checkLocalPeers fails local peers whose processes are gone, after taking
// what they left in their rings. It runs before every sleep (sleepLocal),
// not on the turns of a spin: a waiter on a dead peer sees no message
// and sleeps within its spin time. c.mu is held.
func (c *Comm) checkLocalPeers(now int64) {
	l := c.shmEP
	if l == nil || l.closed || now-l.last < livenessEvery {
		return
	}
	l.last = now
	for _, p := range l.links {
		sl := p.v.(*shmLink)
		if p.state != stConnected || sl.ring == nil {
			continue
		}
		var cause error
		if pid := sl.ring.OwnerPID(); sl.ring.OwnerGone() {
			cause = errors.New("it closed its shared memory")
		} else if !shm.Alive(pid) {
			cause = fmt.Errorf("its process %d exited", pid)
		} else {
			continue
		}
		c.takeLocal(p)
		if p.state == stConnected {
			c.peerFailed(p, fmt.Errorf("shared memory: %w", cause), true)
		}
	}
}

// sleepLocal tells local peers that a goroutine of this rank may block
// (true) or is awake again (false). Going to sleep, with c.mu held, it
// then polls the rings once more: what a peer did before it could see the
// announcement is found now, anything later wakes us. It reports whether
// there are local peers.
func (c *Comm) sleepLocal(on bool) bool {
	l := c.shmEP
	if l == nil {
		return false
	}
	l.in.Sleeping(on)
	if on {
		c.pollLocal()
		c.checkLocalPeers(c.nanos()) // before a sleep, not on every turn of a spin
	}
	return true
}

// received counts what the fabric and the shared-memory rings delivered.
func (c *Comm) received() uint64 {
	n := c.fab.received()
	if l := c.shmEP; l != nil {
		n += l.taken.Load()
	}
	return n
}

// closeLocal releases the shared memory once nothing polls it (teardown,
// after the progress goroutine ended).
func (c *Comm) closeLocal() {
	c.mu.Lock()
	l := c.shmEP
	if l == nil || l.closed {
		c.mu.Unlock()
		return
	}
	l.closed = true
	for _, p := range l.links {
		p.v.(*shmLink).out = nil
	}
	c.mu.Unlock()
	close(l.stop)
	c.conns.Wait()
	for _, o := range l.outs {
		if o != nil {
			o.Close() // used under c.mu only, and l.closed keeps them out
		}
	}
	_ = l.in.Unlink()
	l.quit.Store(true)
	l.in.Poke()
	<-l.done
	for _, d := range c.devs {
		if w, ok := d.(nic.WakeFDWaiter); ok {
			w.SetWakeFD(-1)
		}
	}
	// A call may still be on its way out of a wait that looks at the
	// rings and the FIFO without c.mu (the fabric's wake-up check): they
	// are unmapped and closed only once the communicator is unreachable.
	runtime.AddCleanup(c.endpoint, func(in *shm.Inbox) { in.Close() }, l.in)
}
