package mplite

import (
	"errors"
	"fmt"
	"time"
)

// wtimeEpoch is set once when the package loads and never changed.
var wtimeEpoch = time.Now()

// Wtime returns the wall-clock time in seconds since an arbitrary moment
// fixed for the life of the process (MPI_Wtime), from the monotonic clock.
func Wtime() float64 { return time.Since(wtimeEpoch).Seconds() }

// barrier is Finalize's: up a binomial tree to rank 0 and back down. A
// dissemination barrier is one round shorter per doubling, but each rank
// talks to log2(n) partners, most of them not yet connected at the end of
// a job (about 900 new connections for 128 ranks, and over a second of
// the job's end); the tree needs n-1 connections at most.
func (c *Comm) barrier() error {
	parent := -1
	var children []int
	for mask := 1; mask < c.size; mask <<= 1 {
		if c.rank&mask != 0 {
			parent = c.rank - mask
			break
		}
		if c.rank+mask < c.size {
			children = append(children, c.rank+mask)
		}
	}
	const up, down = 0, 1
	for _, ch := range children {
		if _, err := c.recv(nil, ch, up, ctxInternal); err != nil {
			return err
		}
	}
	if parent >= 0 {
		if err := c.send(nil, parent, up, ctxInternal); err != nil {
			return err
		}
		if _, err := c.recv(nil, parent, down, ctxInternal); err != nil {
			return err
		}
	}
	for _, ch := range children {
		if err := c.send(nil, ch, down, ctxInternal); err != nil {
			return err
		}
	}
	return nil
}

// Finalize ends the rank's part in the job: it synchronises with every
// rank (a barrier), waits until what this rank sent has left, exchanges a
// final message with every connected peer so that no message in flight is
// lost, and releases the connections, the provider and (for Init and
// NewLocalWorld) the device. Operations still pending fail with
// ErrFinalized. It returns an error naming a peer that died on the way;
// the resources are released in any case.
func (c *Comm) Finalize() error {
	if !c.IsWorld() {
		return errors.New("mplite: Finalize is for the world communicator (Free the others)")
	}
	c.mu.Lock()
	if c.finalizing || c.finalized {
		c.mu.Unlock()
		return ErrFinalized
	}
	c.finalizing = true
	c.mu.Unlock()
	var errs []error
	if err := c.barrier(); err != nil {
		errs = append(errs, fmt.Errorf("mplite rank %d: finalize: barrier: %w", c.rank, err))
	}
	if c.fab != nil {
		if err := c.drain(); err != nil {
			errs = append(errs, fmt.Errorf("mplite rank %d: finalize: %w", c.rank, err))
		}
	}
	c.teardown()
	// The launcher hears of the end only once the peers have (Hydra and
	// Slurm count a rank that exits without it as failed).
	errs = append(errs, closeLauncher(c.launcher, len(errs) == 0))
	return errors.Join(errs...)
}

// Close releases the communicator at once, without Finalize's barrier
// and drain: operations still pending fail with ErrFinalized, and peers
// see this rank's connections close (their operations on it fail with
// ErrPeerDead). Use it to abandon a job after an error; Finalize is the
// orderly end. Close after Finalize does nothing.
func (c *Comm) Close() error {
	if !c.IsWorld() {
		return errors.New("mplite: Close is for the world communicator (Free the others)")
	}
	c.teardown()
	return closeLauncher(c.launcher, false)
}

// Abort ends the job: the launcher, if it speaks PMI, is asked to stop
// every rank (with code as the exit code and text for its log), and this
// rank's communicator is closed as by Close. The caller then exits.
func (c *Comm) Abort(code int, text string) error {
	var err error
	if c.world.launcher != nil {
		err = c.world.launcher.Abort(code, text)
	}
	c.world.teardown()
	return err
}

// drainCond waits, until a deadline, for one stage of Finalize.
type drainCond struct {
	c        *Comm
	deadline int64
	stage    int
	timedOut bool
	// next is the first peer not yet seen idle in this stage: ready runs
	// once per wake-up, and a scan of every peer each time made the
	// drain of a 256-rank job quadratic.
	next int
}

// busy reports whether p holds up the stage.
func (d *drainCond) busy(p *peer) bool {
	if p.rank == d.c.rank {
		return false
	}
	switch d.stage {
	case 0: // connections settled, our sends handed to the VI layer
		return p.state == stConnecting || p.state == stAwaiting ||
			p.state == stConnected && (p.sendq.head != nil || p.rdmaq.head != nil || p.ctrlH < len(p.ctrlq))
	default: // every connected peer said Fin and acknowledged ours
		return p.finSent && p.state == stConnected && !(p.finRecv && p.finAcked)
	}
}

// firstBusy returns the index of the first peer from d.next on that holds
// up the stage, or len(c.peers). Once the cursor reaches the end, one full
// pass confirms it: a peer passed earlier may have work again (a control
// message it is owed).
func (d *drainCond) firstBusy() int {
	peers := d.c.peers
	for d.next < len(peers) && !d.busy(peers[d.next]) {
		d.next++
	}
	if d.next < len(peers) {
		return d.next
	}
	for i, p := range peers {
		if d.busy(p) {
			d.next = i
			return i
		}
	}
	return len(peers)
}

func (d *drainCond) ready() bool {
	c := d.c
	busy := d.firstBusy() < len(c.peers)
	if d.stage == 0 && !busy {
		for _, r := range c.sendIDs {
			if !r.done {
				busy = true
				break
			}
		}
	}
	if busy && c.nanos() > d.deadline {
		d.timedOut = true
		return true
	}
	return !busy
}

func (c *Comm) drain() error {
	budget := c.cfg.connectTimeout + 2*c.cfg.peerTimeout
	d := &drainCond{c: c, deadline: c.nanos() + int64(budget)}
	c.mu.Lock()
	if c.timed == 0 || d.deadline < c.timedBy {
		c.timedBy = d.deadline
	}
	c.timed++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.timed--
		c.mu.Unlock()
	}()
	c.wait(d)
	if d.timedOut {
		return fmt.Errorf("%w: sends still pending after %v", ErrTimeout, budget)
	}
	c.mu.Lock()
	for _, p := range c.peers {
		if p.rank != c.rank && p.state == stConnected {
			p.finSent = true
			c.queueCtrl(p, envelope{typ: msgFin})
		}
	}
	c.mu.Unlock()
	d.stage, d.next = 1, 0
	c.wait(d)
	if d.timedOut {
		c.mu.Lock()
		var late []int
		for _, p := range c.peers {
			if p.finSent && p.state == stConnected && !(p.finRecv && p.finAcked) {
				late = append(late, p.rank)
			}
		}
		c.mu.Unlock()
		return fmt.Errorf("%w: ranks %v did not finalize within %v", ErrTimeout, late, budget)
	}
	return nil
}

// teardown fails what is pending and releases everything, once.
func (c *Comm) teardown() {
	c.mu.Lock()
	if c.finalized {
		c.mu.Unlock()
		return
	}
	c.finalized = true
	fail := func(l *rlist) {
		for r := l.head; r != nil; r = l.head {
			l.remove(r)
			c.complete(r, ErrFinalized)
		}
	}
	fail(&c.anyPost)
	for i := range c.posted {
		fail(&c.posted[i])
	}
	for _, p := range c.peers {
		fail(&p.sendq)
		fail(&p.rdmaq)
	}
	for _, r := range c.sendIDs {
		c.complete(r, ErrFinalized)
	}
	for _, r := range c.recvIDs {
		c.complete(r, ErrFinalized)
	}
	for i := range c.unexp {
		for m := c.unexp[i].head; m != nil; m = c.unexp[i].head {
			c.unexp[i].remove(m)
			if m.sreq != nil {
				c.complete(m.sreq, ErrFinalized)
			}
		}
	}
	c.mu.Unlock()
	c.cancel()
	if c.fab != nil {
		c.stopped.Store(true)
		close(c.bgStop)
		c.mcastTeardown() // leaves the multicast groups (mcast.go)
		c.fab.close()     // disconnects every VI and wakes the progress goroutine
		<-c.bgDone
		c.conns.Wait()
		c.closeLocal()
		if c.ownDev {
			for _, d := range c.devs {
				d.Close()
			}
		}
	}
	c.cond.Broadcast()
}
