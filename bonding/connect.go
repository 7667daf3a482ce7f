package bonding

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/vi"
)

// ConnectPeer connects v to a bonded VI of the peer that makes the same call
// with v's addresses and the same discriminator: rail r's VI connects peer
// to peer with peer.MACs[r], every rail at once. Rail 0 must connect: the
// call fails when it has not by the time ctx ends, or when Disconnect or
// Close aborts it. Once rail 0 is connected, the other rails get the rail
// wait (PeerTimeout clamped to [100 ms, 1 s]) more, or until ctx ends,
// which then no longer fails the call. A rail still not connected then
// (its link is down, say) is left down, counted as a rail failure, and
// reconnects in the background as a rail that died would, while the
// connection runs on the others.
func (v *VI) ConnectPeer(ctx context.Context, peer Peer) error {
	if err := v.checkPeer(peer); err != nil {
		return err
	}
	cctx, err := v.beginConnect(ctx, opPeer)
	if err != nil {
		return err
	}
	return v.endConnect(opPeer, peer, v.peerRails(cctx, peer))
}

// peerRails makes the rail peer connections of ConnectPeer.
func (v *VI) peerRails(ctx context.Context, peer Peer) error {
	addr := func(r int) vi.Address {
		return vi.Address{MAC: peer.MACs[r], Endpoint: peer.Endpoint, Discriminator: peer.Discriminator}
	}
	if err := ctx.Err(); err != nil {
		return err // aborted already: send nothing
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	others := make(chan error, 1)
	go func() {
		others <- v.eachRail(rctx, 1, func(ctx context.Context, r int) error {
			return v.rails[r].v.ConnectPeer(ctx, addr(r))
		})
	}()
	if err := v.rails[0].v.ConnectPeer(ctx, addr(0)); err != nil {
		cancel()
		<-others
		return fmt.Errorf("rail 0: %w", err)
	}
	// The peer's rail 0 connected within a round trip of ours, and its
	// other rails have been asking since its call began, as ours have.
	t := time.AfterFunc(railWait(v.b.opts), cancel)
	defer t.Stop()
	return <-others
}

// ConnectRequest connects v to the bonded VI that accepts it after
// Bond.ConnectWait at peer. Rail 0 asks first, to peer.MACs[0] and
// peer.Discriminator; a rejection (an error matching vi.ErrRejected) or any
// other failure there ends the call with nothing else started, and so does
// ctx ending or Disconnect or Close aborting it before rail 0 is accepted.
// Once rail 0 is accepted the connection is made: every other rail r asks
// peer.MACs[r] at the discriminator derived from peer.Discriminator, v's
// rail-0 MAC and r (see RailBit), which the acceptor is waiting for, for at
// most one and a half rail waits (the rail wait is PeerTimeout clamped to
// [100 ms, 1 s]; the acceptor waits one) or until ctx ends, which then no
// longer fails the call. A rail not accepted by then (its link is down,
// say) is left down, counted as a rail failure, and reconnects in the
// background as a rail that died would; the connection runs on the others.
// A rejection of such a rail means the acceptor's Accept failed as a whole,
// and fails the call. The derived discriminators name the requesting bond,
// not the VI: a bond should not have two requests to one peer and
// discriminator under way at once.
func (v *VI) ConnectRequest(ctx context.Context, peer Peer) error {
	if err := v.checkPeer(peer); err != nil {
		return err
	}
	cctx, err := v.beginConnect(ctx, opConnect)
	if err != nil {
		return err
	}
	return v.endConnect(opConnect, peer, v.request(cctx, peer))
}

// request makes the rail connection requests of ConnectRequest.
func (v *VI) request(ctx context.Context, peer Peer) error {
	disc := peer.Discriminator
	if err := ctx.Err(); err != nil {
		return err // aborted already: send nothing
	}
	if err := v.rails[0].v.ConnectRequest(ctx, vi.Address{MAC: peer.MACs[0], Endpoint: peer.Endpoint, Discriminator: disc}); err != nil {
		return fmt.Errorf("rail 0: %w", err)
	}
	if len(v.rails) == 1 {
		return nil
	}
	// The acceptor waits railWait for the other rails from its rail-0
	// Accept on, which was before ours completed: by the time these
	// requests give up, it has (see requestWait).
	rctx, cancel := context.WithTimeout(ctx, requestWait(v.b.opts))
	defer cancel()
	own := mac48(v.b.macs[0]) ^ epBits(v.b.opts.Endpoint)
	return v.eachRail(rctx, 1, func(ctx context.Context, r int) error {
		err := v.rails[r].v.ConnectRequest(ctx, vi.Address{MAC: peer.MACs[r], Endpoint: peer.Endpoint, Discriminator: railDisc(disc, own, r)})
		if errors.Is(err, vi.ErrRejected) {
			// The acceptor rejects a rail only when its Accept fails.
			return fatal{err}
		}
		return err
	})
}

// checkPeer checks that peer names every rail, each with a 6-byte MAC, and
// a discriminator free of the reserved bits.
func (v *VI) checkPeer(peer Peer) error {
	if len(peer.MACs) != len(v.rails) {
		return fmt.Errorf("bonding: connect: %d peer addresses for %d rails", len(peer.MACs), len(v.rails))
	}
	for r, m := range peer.MACs {
		if _, ok := nic.MAC(m); !ok {
			return fmt.Errorf("bonding: connect: rail %d: bad MAC %v", r, m)
		}
	}
	if err := checkDisc(peer.Discriminator); err != nil {
		return fmt.Errorf("bonding: connect: %w", err)
	}
	return nil
}

func checkDisc(d uint64) error {
	if d&(RailBit|ReconnectBit) != 0 {
		return fmt.Errorf("%w: %#x", ErrDiscriminator, d)
	}
	return nil
}

// mac48 is a MAC address as a number.
// epBits places an endpoint (below 2048) in the bits of a rail
// discriminator that neither the MAC (bits 8 to 55), the rail (0 to 2) nor
// the reserved bits use, so that endpoints sharing a NIC ask for distinct
// rail connections.
func epBits(ep uint16) uint64 { return uint64(ep&0x1f)<<3 | uint64(ep>>5&0x3f)<<56 }

func mac48(m net.HardwareAddr) uint64 {
	var x uint64
	for _, c := range m[:min(len(m), 6)] {
		x = x<<8 | uint64(c)
	}
	return x
}

// railDisc is the discriminator rail r (≥ 1) of a requested connection
// uses: the requester's rail-0 MAC (mac0, as from mac48) makes it differ
// between requesters of one discriminator, so that the acceptor pairs each
// one's rails with its own rail 0 however many connect at once. RailBit
// keeps it apart from user discriminators and from reconnections (which
// flip ReconnectBit instead); the MAC takes bits 8–55 and r the low byte.
func railDisc(disc, mac0 uint64, r int) uint64 {
	return disc ^ RailBit ^ mac0<<8 ^ uint64(r)
}

// railWait bounds how long a new connection waits for its rails after
// rail 0: an acceptor for the requester's requests from its rail-0 Accept
// on, ConnectPeer from its rail 0 connecting on. With every link up this
// is a round trip and a few lost frames (the requester asks at once and
// repeats a request after 5, 10, 20, ... ms), so PeerTimeout, the time
// after which a silent link counts as dead anyway, is plenty; but at most
// a second, so that connecting while a rail is down stays quick (the rail
// reconnects in the background), and at least 100 ms, so that a short
// PeerTimeout does not leave rails of a loaded machine behind.
func railWait(o Options) time.Duration {
	return min(max(o.PeerTimeout, 100*time.Millisecond), time.Second)
}

// requestWait bounds how long a requester's rails after rail 0 ask. It
// starts once the acceptor's rail-0 Accept has reached us, so after the
// acceptor's railWait began, and it is half as long again: the acceptor
// stops waiting first, so that it does not accept a rail the requester
// gave up on, and the margin lets an Accept of the last moment whose frame
// was lost arrive through the requests' repeats. When that still happens
// (or the requester's ctx ended first), the acceptor's Accept reaches a
// rail VI that gave up and is answered with a Disconnect, or failing that
// the acceptor's rail hears nothing for PeerTimeout: either way it fails
// as a rail that died, and reconnects.
func requestWait(o Options) time.Duration {
	w := railWait(o)
	return w + w/2
}

// fatal marks a rail's failure that fails the whole connection attempt;
// other failures of rails after rail 0 only leave the rail down.
type fatal struct{ err error }

func (f fatal) Error() string { return f.err.Error() }

func (f fatal) Unwrap() error { return f.err }

// eachRail runs fn for rails from to k-1 at once, each with a context that
// ends when ctx does or when another rail fails fatally, and returns the
// first fatal failure (an error fn wrapped in fatal), naming its rail. A
// rail whose fn fails otherwise is left as it is, not connected:
// endConnect treats a rail VI that is not connected as down.
func (v *VI) eachRail(ctx context.Context, from int, fn func(ctx context.Context, r int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for r := from; r < len(v.rails); r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A rail request already sent cannot be taken back, so do not
			// send one for an attempt that has ended.
			if ctx.Err() != nil {
				return
			}
			var f fatal
			if err := fn(ctx, r); errors.As(err, &f) {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("rail %d: %w", r, f.err)
				}
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	return first
}

// beginConnect moves an Idle VI to connecting and returns the context of
// the attempt: it ends with ctx or when Disconnect or Close aborts the
// attempt. An accept first aborts a ConnectRequest or ConnectPeer of v
// under way (not another accept), in the same critical section, so that
// no other attempt can start in between.
func (v *VI) beginConnect(ctx context.Context, op string) (context.Context, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for op == opAccept && v.connecting && v.connOp != opAccept && v.state != closedVI {
		v.abortOne(errSuperseded)
	}
	if v.state == closedVI {
		return nil, fmt.Errorf("bonding: %s: %w", op, ErrClosed)
	}
	if v.state != Idle || v.connecting {
		return nil, fmt.Errorf("bonding: %s: %w: %v", op, ErrState, v.state)
	}
	cctx, cancel := context.WithCancel(ctx)
	v.connecting, v.connOp = true, op
	v.connCancel, v.connDone, v.connAbort = cancel, make(chan struct{}), nil
	return cctx, nil
}

// endConnect establishes the bonded connection once the attempt's rails are
// through, or undoes the rails on err or when the attempt was aborted. The
// rails whose VI is connected are live; the others (that did not connect in
// time, or broke meanwhile) start down, each counted as a rail failure, and
// reconnect in the background when the peer's MAC on the rail is known. With
// no rail connected the attempt fails.
func (v *VI) endConnect(op string, peer Peer, err error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.setQuiet(false)
	v.connecting = false
	v.connCancel()
	close(v.connDone)
	if v.connAbort != nil {
		// Every rail may have connected meanwhile: the abort wins.
		err = v.connAbort
	}
	if err == nil && v.state != Idle {
		err = ErrClosed
	}
	if err == nil && !v.anyRailConnected() {
		// Rail 0 connected, then broke while the others were waited for.
		cause := v.rails[0].v.Err()
		if cause == nil {
			cause = errors.New("no rail connected")
		}
		err = fmt.Errorf("rail 0: %w", cause)
	}
	if err != nil {
		for _, rl := range v.rails {
			v.resetRail(rl)
		}
		return fmt.Errorf("bonding: %s: %w", op, err)
	}
	v.peer = Peer{MACs: make([]net.HardwareAddr, len(peer.MACs)), Endpoint: peer.Endpoint, Discriminator: peer.Discriminator}
	for r, m := range peer.MACs {
		v.peer.MACs[r] = append(net.HardwareAddr(nil), m...)
	}
	v.stopCtx, v.stopCancel = context.WithCancel(context.Background())
	for r, rl := range v.rails {
		rl.addr = vi.Address{MAC: v.peer.MACs[r], Endpoint: peer.Endpoint, Discriminator: peer.Discriminator ^ ReconnectBit}
		rl.live, rl.failed, rl.connecting = rl.v.State() == vi.Connected, false, false
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
	for _, rl := range v.rails {
		if !rl.live {
			// Down from the start: as a rail that died.
			rl.stats.Failures++
			v.resetRail(rl)
			v.startReconnect(rl)
		}
	}
	v.maybeCredit()
	v.schedule()
	for r := range v.rails {
		v.wg.Add(1)
		go v.railWaiter(r, v.stopCtx)
	}
	return nil
}

// anyRailConnected reports whether some rail VI is connected.
func (v *VI) anyRailConnected() bool {
	for _, rl := range v.rails {
		if rl.v.State() == vi.Connected {
			return true
		}
	}
	return false
}

// abortConnect ends a connection attempt running in another goroutine
// (ConnectRequest, ConnectPeer, Accept) with cause and waits until it has
// undone its rails, so that v is Idle again when it returns. Cancelling
// the attempt's context ends every rail request, wait and peer request it
// has under way at once, and keeps it from starting more. v.mu is held on
// entry and on return, but not while waiting: the attempt needs it to end.
func (v *VI) abortConnect(cause error) {
	for v.connecting {
		v.abortOne(cause)
	}
}

// abortOne aborts the attempt under way and waits until it has ended (v.mu
// held on entry and return, released while waiting).
func (v *VI) abortOne(cause error) {
	if v.connAbort == nil {
		v.connAbort = cause
	}
	cancel, done := v.connCancel, v.connDone
	v.mu.Unlock()
	cancel()
	<-done
	v.mu.Lock()
}

// The operations of beginConnect, as named in errors.
const (
	opConnect = "connect"
	opPeer    = "connect peer"
	opAccept  = "accept"
)

// Peer returns the connected (or last connected) peer. After a plain
// Accept, a rail whose request did not come in time has no MAC (nil).
func (v *VI) Peer() Peer {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.peer
}

// ConnRequest is a bonded connection request: the request that arrived on
// rail 0. The requester's other rails ask once it is accepted.
type ConnRequest struct {
	b *Bond
	q *vi.ConnRequest
}

// ConnectWait waits until ctx ends for a bonded VI's ConnectRequest to
// discriminator, which arrives on rail 0. It waits on rail 0 only, so with
// a context that has already ended it is a cheap poll: it returns a queued
// request or an error, and rejects nothing. Any number of peers may connect
// to one discriminator at once; each request is answered on its own.
func (b *Bond) ConnectWait(ctx context.Context, discriminator uint64) (*ConnRequest, error) {
	if err := checkDisc(discriminator); err != nil {
		return nil, fmt.Errorf("bonding: connect wait: %w", err)
	}
	q, err := b.rails[0].ConnectWait(ctx, discriminator)
	if err != nil {
		return nil, fmt.Errorf("bonding: connect wait: %w", err)
	}
	return &ConnRequest{b: b, q: q}, nil
}

// PollConnect is ConnectWait that never waits (vi.Provider.PollConnect on
// rail 0).
func (b *Bond) PollConnect(discriminator uint64) (*ConnRequest, bool) {
	if checkDisc(discriminator) != nil {
		return nil, false
	}
	q, ok := b.rails[0].PollConnect(discriminator)
	if !ok {
		return nil, false
	}
	return &ConnRequest{b: b, q: q}, true
}

// Remote is the requesting peer as far as its request tells: its rail-0
// MAC (MACs holds that one address) and the discriminator. Its other
// rails' MACs are known only once Accept has connected them (VI.Peer then
// has them).
func (r *ConnRequest) Remote() Peer {
	a := r.q.Remote()
	return Peer{MACs: []net.HardwareAddr{a.MAC}, Endpoint: a.Endpoint, Discriminator: a.Discriminator}
}

// Accept connects v, which must be Idle, to the requesting bonded VI. It
// accepts rail 0, then waits for the requester's other rails to ask (each
// at its derived discriminator; their requests tell their MACs) and accepts
// them, so it blocks for about a round trip. A rail whose request has not
// come within the rail wait (PeerTimeout clamped to [100 ms, 1 s]) of rail
// 0's accept (its link is down, say) is left down, counted as a rail failure,
// and the connection runs on the others; the requester gives up on that
// rail too. Accept cannot reconnect such a rail, though: it never learnt
// the requester's MAC on it (VI.Peer has none), so the rail stays down for
// the life of the connection. AcceptPeer, told the MACs, reconnects it in
// the background as a rail that died.
//
// On failure v is Idle again and the requester fails too; when it fails
// before answering rail 0 (v is not Idle, say), the request is still open:
// Reject it or accept it on another VI. Disconnect or Close of v aborts
// it.
//
// A ConnectRequest or ConnectPeer of v under way in another goroutine is
// aborted first, as Disconnect would, and fails: when two ends ask each
// other at once and this end gives up its own request for the peer's,
// the goroutine that makes it may not even have started it yet when this
// end calls Disconnect, and Accept must win all the same. An Accept of v
// under way makes this one fail.
func (r *ConnRequest) Accept(v *VI) error {
	return r.accept(v, nil)
}

// AcceptPeer is Accept for a caller that knows the requester's MACs on
// every rail (peer.MACs, in rail order): a rail's request from another MAC
// is rejected and fails the accept (and the request). A rail whose request
// does not come in time is left down and reconnects to peer.MACs[r] in the
// background. peer.MACs[0] must be the request's Remote address; when it
// is not, the request is left unanswered.
func (r *ConnRequest) AcceptPeer(v *VI, peer Peer) error {
	if len(peer.MACs) != len(r.b.rails) {
		return fmt.Errorf("bonding: accept: %d peer addresses for %d rails", len(peer.MACs), len(r.b.rails))
	}
	for i, m := range peer.MACs {
		if _, ok := nic.MAC(m); !ok {
			return fmt.Errorf("bonding: accept: rail %d: bad MAC %v", i, m)
		}
	}
	if got := r.q.Remote(); !bytes.Equal(got.MAC, peer.MACs[0]) || got.Endpoint != peer.Endpoint {
		return fmt.Errorf("bonding: accept: %w: request from %v, peer's rail 0 is %v", ErrState, got, peer.MACs[0])
	}
	return r.accept(v, peer.MACs)
}

// accept is Accept and AcceptPeer; want, when set, holds the MACs the
// rails' requests must come from.
func (r *ConnRequest) accept(v *VI, want []net.HardwareAddr) error {
	if v.b != r.b {
		return fmt.Errorf("bonding: accept: %w: VI of another bond", ErrState)
	}
	// The attempt has no context of its own: the rail waits are bounded
	// by railWait, and Disconnect or Close cancels it.
	ctx, err := v.beginConnect(context.Background(), opAccept)
	if err != nil {
		return err
	}
	a := r.q.Remote()
	peer := Peer{MACs: make([]net.HardwareAddr, len(v.rails)), Endpoint: a.Endpoint, Discriminator: a.Discriminator}
	// A rail left down reconnects to the MAC we were told of; without
	// one, the rail's request is the only way to learn it.
	copy(peer.MACs, want)
	peer.MACs[0] = a.MAC
	err = r.acceptRails(ctx, v, peer, want)
	return v.endConnect(opAccept, peer, err)
}

// acceptRails accepts rail 0, then waits for and accepts the other rails'
// requests, filling in peer.MACs. A rail whose request does not come in
// time is left down; a request from the wrong MAC, or one that cannot be
// accepted, is rejected and fails the accept.
func (r *ConnRequest) acceptRails(ctx context.Context, v *VI, peer Peer, want []net.HardwareAddr) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.q.Accept(v.rails[0].v); err != nil {
		return fmt.Errorf("rail 0: %w", err)
	}
	if len(v.rails) == 1 {
		return nil
	}
	// The requester asks for requestWait from the Accept's arrival on,
	// longer than we wait: a rail we accept in time is one it still asks
	// for (unless its ctx ended; see requestWait for that case).
	wctx, cancel := context.WithTimeout(ctx, railWait(v.b.opts))
	defer cancel()
	mac0 := mac48(peer.MACs[0]) ^ epBits(peer.Endpoint)
	return v.eachRail(wctx, 1, func(ctx context.Context, rr int) error {
		q, err := v.b.rails[rr].ConnectWait(ctx, railDisc(peer.Discriminator, mac0, rr))
		if err != nil {
			return err // none in time: the rail stays down
		}
		got := q.Remote().MAC
		if q.Remote().Endpoint != peer.Endpoint || want != nil && !bytes.Equal(got, want[rr]) {
			// Not the peer we were told of: a misconfigured MAC table.
			q.Reject()
			return fatal{fmt.Errorf("%w: request from %v, want %v", ErrState, got, want[rr])}
		}
		if err := q.Accept(v.rails[rr].v); err != nil {
			// Answer it, so that the requester fails now, not after
			// its own bound.
			q.Reject()
			return fatal{err}
		}
		peer.MACs[rr] = got
		return nil
	})
}

// Reject refuses the request: the requester's ConnectRequest fails with
// an error matching vi.ErrRejected.
func (r *ConnRequest) Reject() error {
	if err := r.q.Reject(); err != nil {
		return fmt.Errorf("bonding: reject: %w", err)
	}
	return nil
}

// Why a connection attempt fails when Disconnect, or an Accept on the same
// VI, aborts it.
var (
	errAborted    = errors.New("connection attempt aborted by Disconnect")
	errSuperseded = errors.New("connection attempt superseded by an Accept on the same VI")
)

// Disconnect ends the connection: every rail disconnects, every pending
// descriptor completes as flushed and the VI returns to Idle, from where it
// may connect again. It also clears the Error state. A ConnectRequest,
// ConnectPeer or Accept of v running in another goroutine fails: Disconnect
// returns once it has, so that v may be used for another connection (say,
// to accept the peer's request that crossed ours) at once.
func (v *VI) Disconnect() error {
	v.mu.Lock()
	v.setQuiet(false)
	if v.state != closedVI {
		v.abortConnect(errAborted)
	}
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
