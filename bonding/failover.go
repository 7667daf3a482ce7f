package bonding

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/internal/wake"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/vi"
)

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
	// (Pieces of RDMA writes not yet handed out wait for the other rails;
	// the ones the rail had in flight come back as failed completions.)
	if v.liveRails() == 0 {
		v.failLocked(fmt.Errorf("%w (last: rail %d: %w)", ErrAllRails, r, cause), 0, descriptors.StatusTransport, false)
		return
	}
	v.startReconnect(rl)
}

// startReconnect starts the background reconnection of a rail that is
// down, unless the peer's MAC on the rail is unknown (a rail that an
// Accept left down before its request came): then the rail stays down.
func (v *VI) startReconnect(rl *rail) {
	if _, ok := nic.MAC(rl.addr.MAC); !ok {
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
			v.setQuiet(false)
			rl.stats.Reconnects++
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
	wake.Signal(v.sendWake)
	wake.Signal(v.recvWake)
	v.b.interruptBlocked()
}

// flushRecvs completes every pending receive as flushed.
func (v *VI) flushRecvs() {
	for pos := v.rqNext; pos < v.rq.Back(); pos++ {
		rs := &v.rs[v.rq.Slot(pos)]
		rs.complete, rs.status = true, descriptors.StatusFlushed
	}
	v.publish()
}
