package bonding

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ethervia/ethervia/internal/wake"
	"github.com/ethervia/ethervia/vi"
)

// Completion names a bonded work queue on which a descriptor completed.
// Fetch the descriptor with VI.SendDone or VI.RecvDone.
type Completion struct {
	VI   *VI
	Recv bool // the receive queue; false: the send queue
}

// CQ is a bonding completion queue: it merges the completions of the
// bonded work queues attached to it, in the order they completed. It is
// safe for concurrent use.
type CQ struct {
	b       *Bond
	mu      sync.Mutex
	ring    []Completion
	head, n int
	queued  atomic.Int32 // n, read without the lock by polls that find nothing
	// rounds counts the polls (Done) that looked past the queue: the
	// rail goroutines of the attached VIs step aside while it moves.
	rounds   atomic.Uint64
	reserved int
	closed   bool
	vis      atomic.Pointer[[]*VI] // attached VIs, copied on change
	wake     chan struct{}
	timers   timerPool
}

func doneSpinningAll(vis []*VI, blocking bool) {
	for _, v := range vis {
		v.doneSpinning(blocking)
	}
}

// NewCQ creates a completion queue of the given depth. Every work queue
// attached to it reserves its queue depth, so it can never overflow.
func (b *Bond) NewCQ(depth int) (*CQ, error) {
	if depth <= 0 {
		return nil, fmt.Errorf("bonding: %w: depth %d", vi.ErrCQ, depth)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, ErrClosed
	}
	cq := &CQ{b: b, ring: make([]Completion, depth), wake: make(chan struct{}, 1)}
	cq.vis.Store(new([]*VI))
	return cq, nil
}

// Depth is the CQ's capacity.
func (cq *CQ) Depth() int { return len(cq.ring) }

func (cq *CQ) attach(v *VI, depth int) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return fmt.Errorf("%w: closed", vi.ErrCQ)
	}
	if cq.reserved+depth > len(cq.ring) {
		return fmt.Errorf("%w: depth %d cannot hold %d more queue entries (%d reserved)", vi.ErrCQ, len(cq.ring), depth, cq.reserved)
	}
	cq.reserved += depth
	old := *cq.vis.Load()
	for _, x := range old {
		if x == v {
			return nil
		}
	}
	nv := append(append([]*VI(nil), old...), v)
	cq.vis.Store(&nv)
	return nil
}

func (cq *CQ) detach(v *VI, depth int) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	cq.reserved -= depth
	old := *cq.vis.Load()
	nv := make([]*VI, 0, len(old))
	for _, x := range old {
		if x != v {
			nv = append(nv, x)
		}
	}
	cq.vis.Store(&nv)
}

// push adds a completion; the VI's lock is held.
func (cq *CQ) push(v *VI, recv bool) {
	cq.mu.Lock()
	if cq.n < len(cq.ring) { // reservations bound the entries
		cq.ring[(cq.head+cq.n)%len(cq.ring)] = Completion{VI: v, Recv: recv}
		cq.n++
		cq.queued.Store(int32(cq.n))
	}
	cq.mu.Unlock()
	wake.Signal(cq.wake)
}

func (cq *CQ) pop() (Completion, bool) {
	if cq.queued.Load() == 0 {
		// A spinning poll's usual answer, without the lock; a push racing
		// with it is found by the next poll.
		return Completion{}, false
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.n == 0 {
		return Completion{}, false
	}
	c := cq.ring[cq.head]
	cq.ring[cq.head] = Completion{}
	cq.head = (cq.head + 1) % len(cq.ring)
	cq.n--
	cq.queued.Store(int32(cq.n))
	return c, true
}

// Done returns the oldest completion, if any, after making progress on
// the attached VIs. It never blocks.
func (cq *CQ) Done() (Completion, bool) {
	if c, ok := cq.pop(); ok {
		return c, true
	}
	cq.rounds.Add(1)
	round := cq.b.cqRound.Add(1)
	if cq.b.quietRound(round) {
		return cq.pop()
	}
	for _, v := range *cq.vis.Load() {
		v.poll(round)
	}
	return cq.pop()
}

// quietRound makes CQ round round for a bond none of whose VIs is loud
// and reports whether that was all: the devices of the quiet VIs' first
// live rails (every rail each quietPollEvery-th round), and no VI at all
// unless those polls queued a rail completion (note), or every
// quietProgressEvery-th round. A rank whose short messages ride lanes
// beside the bond (mplite) polls in a loop while its bonded connections
// carry nothing: measured, one NIC's empty round took 98 ns and two NICs'
// 382 before this (BenchmarkIdleProgress in mplite), the time every other
// rank sharing the CPU waits for this one's turn.
func (b *Bond) quietRound(round uint64) bool {
	if b.loud.Load() != 0 || round%quietProgressEvery == 0 {
		return false
	}
	if wake.Take(b.note) { // a rail completion queued since the last round: VIs look
		return false
	}
	b.pollQuiet(b.firstRails.Load(), round)
	return !wake.Take(b.note)
}

// pollQuiet polls in CQ round round what quiet VIs owe their rails: the
// devices of the rails in first (a bit per rail), of every rail each
// quietPollEvery-th round, and of the rails that found frames lately
// (railHot).
func (b *Bond) pollQuiet(first uint32, round uint64) {
	all := round%quietPollEvery == 0
	for r := range b.rails {
		if all || first&(1<<r) != 0 || b.railHot(r, round) {
			b.pollRail(r, round)
		}
	}
}

// Wait returns the oldest completion, waiting for one until ctx ends.
func (cq *CQ) Wait(ctx context.Context) (Completion, error) {
	c, _, err := cq.WaitOr(ctx, nil)
	return c, err
}

// Follow makes Wait and WaitOr wake when q, a completion queue of a plain
// VI on one of the bond's rail providers, gets a completion. cq does not
// poll q: a WaitOr's stop function looks at it. A waiter asleep in a
// rail's device wakes on that rail's frames anyway; one asleep on cq's
// channel (while a rail goroutine holds the device) needs this signal.
func (cq *CQ) Follow(q *vi.CQ) { q.Notify(cq.wake) }

// Interrupt wakes a Wait or WaitOr under way, so that it looks at its stop
// function again. It never blocks.
func (cq *CQ) Interrupt() {
	wake.Signal(cq.wake)
	cq.b.interruptBlocked()
}

// WaitOr is Wait that also gives up, reporting ok false and no error, once
// stop (if not nil) reports true; stop is checked before every sleep and
// after every wake-up (Interrupt wakes a sleep for it).
func (cq *CQ) WaitOr(ctx context.Context, stop func() bool) (Completion, bool, error) {
	var start int64
	// spun holds the VIs whose pollers count this wait raised while it
	// spins (see VI.pollers).
	var spun *[]*VI
	var sl sleeper
	var slept []*VI
	defer func() {
		if spun != nil {
			doneSpinningAll(*spun, false)
		}
		if sl.armed {
			sl.disarm(cq.b)
			for _, v := range slept {
				v.sleepers.Add(-1)
			}
		}
	}()
	for {
		if c, ok := cq.Done(); ok {
			return c, true, nil
		}
		if stop != nil && stop() {
			return Completion{}, false, nil
		}
		cq.mu.Lock()
		closed := cq.closed
		cq.mu.Unlock()
		if closed {
			return Completion{}, false, fmt.Errorf("bonding: cq wait: %w", ErrClosed)
		}
		if err := ctx.Err(); err != nil {
			return Completion{}, false, fmt.Errorf("bonding: cq wait: %w", err)
		}
		now := cq.b.now()
		if start == 0 {
			start = now
		}
		if sp := cq.b.opts.SpinTime; sp > 0 && now-start < int64(sp) {
			if spun == nil {
				spun = cq.vis.Load()
				for _, v := range *spun {
					v.pollers.Add(1)
				}
			}
			if cq.b.opts.Yield {
				runtime.Gosched() // as VI.waitQ does
			}
			continue
		}
		// Armed, the wait looks once more before it sleeps (see
		// VI.waitQ).
		if !sl.armed {
			slept = *cq.vis.Load()
			for _, v := range slept {
				v.sleepers.Add(1)
			}
			r := -1
			if len(slept) > 0 {
				// The rails are the bond's: every VI's first live rail
				// is the same one unless some rail failed for some.
				v := slept[0]
				v.mu.Lock()
				r = v.blockRail()
				v.mu.Unlock()
			}
			sl.arm(cq.b, r, nil, slept)
			if spun != nil {
				doneSpinningAll(*spun, true)
				spun = nil
			}
			continue
		}
		sl.sleep(ctx, cq.b, &cq.timers, cq.wake)
		sl.disarm(cq.b)
		for _, v := range slept {
			v.sleepers.Add(-1)
		}
		start = 0
	}
}

// Close destroys the CQ. It fails while work queues are attached.
func (cq *CQ) Close() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.reserved > 0 {
		return fmt.Errorf("%w: %d queue entries still attached", vi.ErrCQ, cq.reserved)
	}
	cq.closed = true
	wake.Signal(cq.wake)
	cq.b.interruptBlocked()
	return nil
}

// poll makes progress for a CQ poll in the given round (Bond.cqRound).
// A quiet VI (idleLocked) costs the round only the device poll it owes
// its first live rail, if no VI made that one yet, until a rail of its
// queues a completion (note), a post wakes it, or every
// quietProgressEvery-th round: a rank with many bonded connections that
// carry nothing (their short messages ride lanes beside the bond) polled
// each one's lock and rail queues every round. Every rail's device is
// polled each quietPollEvery-th round (by progressRound, or by the CQ
// round when every VI is quiet), for RDMA writes, which complete nothing
// until their notice.
func (v *VI) poll(round uint64) {
	if v.quiet.Load() && round%quietProgressEvery != 0 && len(v.note) == 0 {
		v.b.pollQuiet(1<<v.first.Load(), round)
		if len(v.note) == 0 {
			return
		}
	}
	v.mu.Lock()
	select {
	case <-v.note: // before the rails are reaped: what comes later signals again
	default:
	}
	v.progressRound(round)
	v.setQuiet(v.idleLocked())
	v.mu.Unlock()
}

// pollRail polls rail r's device in CQ round round unless a VI did in
// this round, and notes a poll that found frames (railHot).
func (b *Bond) pollRail(r int, round uint64) {
	if b.polled[r].Load() == round || b.polled[r].Swap(round) == round {
		return
	}
	if b.rails[r].Poll() > 0 {
		b.railBusy[r].Store(round)
	}
}

// railHot reports that a poll of rail r's device found frames in the last
// hotRounds CQ rounds. A quiet VI's rails may be taking in an RDMA write,
// which completes nothing until its notice: an 8 MiB ping-pong over 4
// rails carried 12 % less while the receiver polled its other rails only
// every quietPollEvery-th round (bench/bond-mplite.sh, 2026-12-02).
func (b *Bond) railHot(r int, round uint64) bool {
	return round-b.railBusy[r].Load() < hotRounds
}

// setQuiet records whether v is quiet, keeping the bond's count of loud
// VIs (v.mu held). A VI going quiet adds its first live rail to the ones
// quiet CQ rounds poll.
func (v *VI) setQuiet(q bool) {
	if v.quiet.Swap(q) == q || !v.counted {
		return
	}
	if q {
		v.b.firstRails.Or(1 << v.first.Load())
		v.b.loud.Add(-1)
	} else {
		v.b.loud.Add(1)
	}
}

// idleLocked reports that the VI waits only for its rails: connected, every
// send completed, nothing queued to send, no rail busy or recently active.
// A frame, a post or a failure changes that; a timer alone never does.
func (v *VI) idleLocked() bool {
	if v.state != Connected || v.changed || v.ctl.n > 0 || v.creditQueued || v.sqReap != v.sq.Back() {
		return false
	}
	first := -1
	for r, rl := range v.rails {
		if rl.n > 0 || rl.failed || rl.connecting || v.round-rl.activeRound < hotRounds {
			return false
		}
		if first < 0 && rl.live {
			first = r
		}
	}
	if first < 0 {
		return false
	}
	v.first.Store(int32(first))
	return true
}
