package bonding

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/vi"
)

// ConnectPeer connects v to a bonded VI of the peer that makes the same call
// with v's addresses and the same discriminator: rail r's VI connects peer
// to peer with peer.MACs[r]. It returns once every rail is connected, or
// fails when ctx ends first.
func (v *VI) ConnectPeer(ctx context.Context, peer Peer) error {
	return v.connect(ctx, peer, func(rv *vi.VI, a vi.Address) error { return rv.ConnectPeer(ctx, a) })
}

// ConnectRequest connects v to the bonded VI that accepts it after
// Bond.ConnectWait at peer: rail r's VI sends its request to peer.MACs[r].
// It returns once every rail is connected, or fails when ctx ends first.
func (v *VI) ConnectRequest(ctx context.Context, peer Peer) error {
	return v.connect(ctx, peer, func(rv *vi.VI, a vi.Address) error { return rv.ConnectRequest(ctx, a) })
}

func (v *VI) connect(ctx context.Context, peer Peer, fn func(*vi.VI, vi.Address) error) error {
	if len(peer.MACs) != len(v.rails) {
		return fmt.Errorf("bonding: connect: %d peer addresses for %d rails", len(peer.MACs), len(v.rails))
	}
	if err := v.beginConnect(); err != nil {
		return err
	}
	errs := make([]error, len(v.rails))
	var wg sync.WaitGroup
	for r, rl := range v.rails {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(rl.v, vi.Address{MAC: peer.MACs[r], Discriminator: peer.Discriminator})
		}()
	}
	wg.Wait()
	return v.endConnect(peer, errors.Join(errs...))
}

// beginConnect moves an Idle VI to connecting.
func (v *VI) beginConnect() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.state == closedVI {
		return fmt.Errorf("bonding: connect: %w", ErrClosed)
	}
	if v.state != Idle || v.connecting {
		return fmt.Errorf("bonding: connect: %w: %v", ErrState, v.state)
	}
	v.connecting = true
	return nil
}

// endConnect establishes the bonded connection once every rail is
// connected, or undoes the rails on err.
func (v *VI) endConnect(peer Peer, err error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.connecting = false
	if err == nil && v.state != Idle {
		err = ErrClosed
	}
	if err != nil {
		for _, rl := range v.rails {
			v.resetRail(rl)
		}
		return fmt.Errorf("bonding: connect: %w", err)
	}
	v.peer = Peer{MACs: make([]net.HardwareAddr, len(peer.MACs)), Discriminator: peer.Discriminator}
	for r, m := range peer.MACs {
		v.peer.MACs[r] = append(net.HardwareAddr(nil), m...)
	}
	v.stopCtx, v.stopCancel = context.WithCancel(context.Background())
	for r, rl := range v.rails {
		rl.addr = vi.Address{MAC: v.peer.MACs[r], Discriminator: peer.Discriminator ^ ReconnectBit}
		rl.live, rl.failed, rl.connecting = true, false, false
		rl.lastDone = v.b.now()
	}
	v.state, v.err = Connected, nil
	v.sndMsn, v.peerLimit, v.rcvMsn, v.announced, v.hiSeen = 0, 0, 0, 0, 0
	v.sqStart = v.sq.Back()
	for r := range v.cur {
		v.cur[r] = v.sqStart
	}
	v.ctl.reset()
	v.creditQueued = false
	clear(v.handles)
	v.maybeCredit()
	v.schedule()
	for r := range v.rails {
		v.wg.Add(1)
		go v.railWaiter(r, v.stopCtx)
	}
	return nil
}

// railWaiter blocks on rail r's completion queue for the life of the
// connection and handles what arrives there, so that the bond makes
// progress (the peer's blocks are taken out of the rail buffers and placed,
// credit flows, sends move on) while nobody polls it, and so that a waiter
// blocked on the bond is woken by any rail. It is one goroutine per rail
// and connection, never per message. The rail providers do not spin: the
// bond's own waiters do.
func (v *VI) railWaiter(r int, ctx context.Context) {
	defer v.wg.Done()
	rl := v.rails[r]
	for {
		if _, err := rl.cq.Wait(ctx); err != nil {
			// The connection ended (or the CQ closed: the VI is going
			// away).
			return
		}
		v.mu.Lock()
		v.drainRail(rl)
		v.progressLocked()
		v.mu.Unlock()
	}
}

// Peer returns the connected (or last connected) peer.
func (v *VI) Peer() Peer {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.peer
}

// ConnRequest is a bonded connection request: one rail connection request
// per rail, to the same discriminator.
type ConnRequest struct {
	b    *Bond
	reqs []*vi.ConnRequest
}

// ConnectWait waits for a bonded VI's ConnectRequest to discriminator: one
// request on every rail. Requests to one discriminator are paired rail by
// rail in arrival order, so only one peer should connect to a discriminator
// at a time.
func (b *Bond) ConnectWait(ctx context.Context, discriminator uint64) (*ConnRequest, error) {
	reqs := make([]*vi.ConnRequest, len(b.rails))
	errs := make([]error, len(b.rails))
	var wg sync.WaitGroup
	for r, p := range b.rails {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs[r], errs[r] = p.ConnectWait(ctx, discriminator)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, q := range reqs {
			if q != nil {
				q.Reject()
			}
		}
		return nil, fmt.Errorf("bonding: connect wait: %w", err)
	}
	return &ConnRequest{b: b, reqs: reqs}, nil
}

// Remote is the requesting peer: its MAC on every rail and the
// discriminator.
func (r *ConnRequest) Remote() Peer {
	p := Peer{Discriminator: r.reqs[0].Remote().Discriminator}
	for _, q := range r.reqs {
		p.MACs = append(p.MACs, q.Remote().MAC)
	}
	return p
}

// Accept connects v, which must be Idle, to the requesting bonded VI.
func (r *ConnRequest) Accept(v *VI) error {
	if v.b != r.b {
		return fmt.Errorf("bonding: accept: %w: VI of another bond", ErrState)
	}
	if err := v.beginConnect(); err != nil {
		return err
	}
	var err error
	for i, q := range r.reqs {
		if err = q.Accept(v.rails[i].v); err != nil {
			for _, q := range r.reqs[i+1:] {
				q.Reject()
			}
			err = fmt.Errorf("rail %d: %w", i, err)
			break
		}
	}
	return v.endConnect(r.Remote(), err)
}

// Reject refuses the request on every rail.
func (r *ConnRequest) Reject() error {
	var errs []error
	for _, q := range r.reqs {
		errs = append(errs, q.Reject())
	}
	return errors.Join(errs...)
}

// ---- rail failure ----

// checkRails takes down the live rails whose VI broke.
func (v *VI) checkRails() {
	for _, rl := range v.rails {
		if v.state != Connected {
			return
		}
		if rl.live && (rl.failed || rl.v.State() == vi.Error) {
			v.railDown(rl)
		}
	}
}

// resetRail disconnects a rail VI and takes back everything it held: sends
// come back as failed (and go to the other rails), receives are posted
// again for the next connection.
func (v *VI) resetRail(rl *rail) {
	rl.v.Disconnect()
	for {
		d, ok := rl.v.SendDone()
		if !ok {
			break
		}
		v.onRailSend(rl, d)
	}
	for {
		d, ok := rl.v.RecvDone()
		if !ok {
			break
		}
		v.onRailRecv(rl, d)
	}
	// The VI is Idle now (or closed): the parked buffers go back.
	for len(rl.parked) > 0 {
		d := rl.parked[len(rl.parked)-1]
		rl.parked = rl.parked[:len(rl.parked)-1]
		if rl.v.State() == vi.Error {
			rl.parked = append(rl.parked, d)
			break
		}
		_ = rl.v.PostRecv(d)
	}
	rl.head, rl.n, rl.inflight = 0, 0, 0
}

// railDown moves a dead rail's work to the other rails and starts its
// reconnection; with no rail left the VI fails.
func (v *VI) railDown(rl *rail) {
	cause := rl.v.Err()
	if cause == nil {
		cause = errors.New("a rail send failed")
	}
	rl.live, rl.failed = false, false
	rl.stats.Failures++
	v.resetRail(rl)
	r := rl.idx
	for pos := v.sqReap; pos < v.sqStart; pos++ {
		st := &v.ss[v.sq.Slot(pos)]
		if st.rdma && !st.done && st.next[r] < st.end[r] {
			v.ctl.pushBack(work{kind: kindRDMA, pos: pos, off: st.next[r], n: st.end[r] - st.next[r]})
			st.next[r] = st.end[r]
		}
	}
	if v.liveRails() == 0 {
		v.failLocked(fmt.Errorf("%w (last: rail %d: %w)", ErrAllRails, r, cause), 0, descriptors.StatusTransport, false)
		return
	}
	rl.connecting = true
	v.wg.Add(1)
	go v.reconnect(rl, v.stopCtx)
}

// reconnect connects a dead rail again, peer to peer, with growing pauses
// between attempts, until it succeeds or ctx ends.
func (v *VI) reconnect(rl *rail, ctx context.Context) {
	defer v.wg.Done()
	o := v.b.opts
	pause := o.ReconnectMin
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		// A peer connection needs both ends pending at once: an attempt
		// lasts at least three pauses, so the two ends' attempts overlap
		// by at least a pause whatever their phase.
		attempt := max(o.PeerTimeout, 100*time.Millisecond, 3*pause)
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := rl.v.ConnectPeer(actx, rl.addr)
		cancel()
		v.mu.Lock()
		if err == nil {
			if ctx.Err() != nil || v.state != Connected {
				v.resetRail(rl)
				rl.connecting = false
				v.mu.Unlock()
				return
			}
			rl.live, rl.failed, rl.connecting = true, false, false
			rl.stats.Reconnects++
			rl.lastDone = v.b.now()
			v.schedule()
			v.mu.Unlock()
			return
		}
		if rl.v.State() != vi.Idle {
			v.resetRail(rl)
		}
		if ctx.Err() != nil {
			rl.connecting = false
			v.mu.Unlock()
			return
		}
		v.mu.Unlock()
		t.Reset(pause)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		pause = min(2*pause, o.ReconnectMax)
	}
}

// failLocked moves v to the Error state (or, for a disconnection, ends
// the connection): every pending descriptor completes, the one at failPos
// (or the oldest) with status and the rest flushed, and the rails are
// disconnected.
func (v *VI) failLocked(cause error, failPos uint64, status descriptors.Status, quiet bool) {
	if v.state != Connected {
		return
	}
	v.state = Error
	v.err = fmt.Errorf("bonding: %w", cause)
	v.stopCancel()
	first := true
	for pos := v.sqReap; pos < v.sq.Back(); pos++ {
		st := &v.ss[v.sq.Slot(pos)]
		if st.done {
			continue
		}
		st.started, st.done, st.status = true, true, descriptors.StatusFlushed
		switch {
		case quiet:
		case status == descriptors.StatusRDMAProtection && pos == failPos:
			st.status = status
		case status != descriptors.StatusRDMAProtection && first:
			st.status = status
		}
		first = false
	}
	v.sqStart = v.sq.Back()
	v.flushRecvs()
	v.ctl.reset()
	v.publish()
	for _, rl := range v.rails {
		rl.live, rl.failed = false, false
		v.resetRail(rl)
	}
	signal(v.sendWake)
	signal(v.recvWake)
}

// flushRecvs completes every pending receive as flushed.
func (v *VI) flushRecvs() {
	for pos := v.rqNext; pos < v.rq.Back(); pos++ {
		rs := &v.rs[v.rq.Slot(pos)]
		rs.complete, rs.status = true, descriptors.StatusFlushed
	}
	v.publish()
}

// Disconnect ends the connection: every rail disconnects, every pending
// descriptor completes as flushed and the VI returns to Idle, from where it
// may connect again. It also clears the Error state.
func (v *VI) Disconnect() error {
	v.mu.Lock()
	if v.state == closedVI {
		v.mu.Unlock()
		return fmt.Errorf("bonding: disconnect: %w", ErrClosed)
	}
	v.failLocked(errors.New("disconnected"), 0, 0, true)
	if v.state == Error {
		v.state, v.err = Idle, nil
	}
	v.mu.Unlock()
	v.wg.Wait()
	return nil
}

// Close destroys the VI, disconnecting it first, and its rail VIs.
// Descriptors still queued complete as flushed; Done and Wait still return
// them.
func (v *VI) Close() error {
	v.mu.Lock()
	if v.state == closedVI {
		v.mu.Unlock()
		return nil
	}
	v.failLocked(errors.New("closed"), 0, 0, true)
	v.state = closedVI
	v.flushRecvs()
	v.mu.Unlock()
	v.wg.Wait()
	v.destroyRails()
	for _, cq := range []*CQ{v.attrs.SendCQ, v.attrs.RecvCQ} {
		if cq != nil {
			cq.detach(v, v.attrs.QueueDepth)
		}
	}
	v.b.mu.Lock()
	delete(v.b.vis, v)
	v.b.mu.Unlock()
	return nil
}

// ---- waiting ----

// maxSleep bounds one blocking wait on a wake channel, so that a wake-up
// lost between two waiters of one channel costs at most this.
const maxSleep = 2 * time.Millisecond

// signal wakes one waiter on c without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// timerPool keeps idle timers, so that blocking allocates nothing once
// there are as many timers as waiters block at once.
type timerPool struct {
	mu sync.Mutex
	ts []*time.Timer
}

func (p *timerPool) get() *time.Timer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.ts); n > 0 {
		t := p.ts[n-1]
		p.ts = p.ts[:n-1]
		return t
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

func (p *timerPool) put(t *time.Timer) {
	p.mu.Lock()
	p.ts = append(p.ts, t)
	p.mu.Unlock()
}

// sleep blocks until wake is signalled, ctx ends or maxSleep passes.
func (p *timerPool) sleep(ctx context.Context, wake chan struct{}) {
	t := p.get()
	t.Reset(maxSleep)
	select {
	case <-wake:
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	p.put(t)
}
