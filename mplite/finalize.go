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

// barrier is Finalize's dissemination barrier over the world: in round k every rank tells rank+2^k
// and hears from rank-2^k, so after ceil(log2 n) rounds each has heard,
// indirectly, from all.
func (c *Comm) barrier() error {
	for k, round := 1, 0; k < c.size; k, round = k<<1, round+1 {
		to := (c.rank + k) % c.size
		from := (c.rank - k + c.size) % c.size
		if _, err := c.sendrecv(nil, to, round, nil, from, round, ctxInternal); err != nil {
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
	return nil
}

// drainCond waits, until a deadline, for one stage of Finalize.
type drainCond struct {
	c        *Comm
	deadline int64
	stage    int
	timedOut bool
}

func (d *drainCond) ready() bool {
	c := d.c
	busy := false
	for _, p := range c.peers {
		if p.rank == c.rank {
			continue
		}
		switch d.stage {
		case 0: // connections settled, our sends handed to the VI layer
			if p.state == stConnecting || p.state == stAwaiting ||
				p.state == stConnected && (p.sendq.head != nil || p.rdmaq.head != nil || p.ctrlH < len(p.ctrlq)) {
				busy = true
			}
		case 1: // every connected peer said Fin and acknowledged ours
			if p.finSent && p.state == stConnected && !(p.finRecv && p.finAcked) {
				busy = true
			}
		}
	}
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
	d.stage = 1
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
		if c.ownDev {
			for _, d := range c.devs {
				d.Close()
			}
		}
	}
	c.cond.Broadcast()
}
