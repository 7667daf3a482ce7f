package vi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ethervia/ethervia/internal/wake"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/reliability"
)

// minConnReqs is the least number of connection requests that may wait
// for ConnectWait; a provider with more VIs holds one per VI (see
// connReqLimit).
const minConnReqs = 64

// ConnRequest is a connection request received by ConnectWait. Answer it
// with Accept or Reject; the client repeats its request until then or until
// its own timeout.
type ConnRequest struct {
	p            *Provider
	remote       Address
	remoteAddr   nic.Addr
	remoteVI     uint16
	remoteConnID uint32
	peerISN      reliability.Seq
	peerCredit   uint32
	peerWindow   int
	attrs        RemoteAttributes
	at           reliability.Time
	// taken: handed to ConnectWait. A request stays on the provider's
	// list after that, until it expires, so that a repeat of it (its
	// sender did not hear the answer yet) is not taken for a new request:
	// while unanswered the repeat is ignored, once rejected it is
	// rejected again, and once accepted the VI answers it.
	taken, handled, rejected bool
}

// Remote is the requesting VI's address (its discriminator is the one the
// request was made to).
func (r *ConnRequest) Remote() Address { return r.remote }

// RemoteAttributes are the attributes of the requesting VI.
func (r *ConnRequest) RemoteAttributes() RemoteAttributes { return r.attrs }

func attrBits(a Attributes) uint32 {
	b := uint32(a.Reliability)
	if a.EnableRDMAWrite {
		b |= 1 << 8
	}
	if a.EnableRDMARead {
		b |= 1 << 9
	}
	return b
}

func remoteAttrs(h *reliability.Header) RemoteAttributes {
	return RemoteAttributes{Reliability: Level(h.RKey & 0xff), MaxTransfer: int(h.MsgLen),
		EnableRDMAWrite: h.RKey&(1<<8) != 0, EnableRDMARead: h.RKey&(1<<9) != 0}
}

// connFrame sends a connection management frame of v. p.mu is held.
func (v *VI) connFrame(kind reliability.Kind, dstVI uint16, connID uint32) {
	p := v.p
	v.advCredit = v.recvMsn + uint32(v.rq.Back()-v.rqNext)
	h := reliability.Header{Dst: v.remoteAddr.MAC, Src: p.mac, DstEP: v.remoteAddr.EP, SrcEP: p.ep, EtherType: p.opts.EtherType, JobKey: p.opts.JobKey,
		Kind: kind, DstVI: dstVI, SrcVI: v.id, ConnID: connID, Seq: v.isn, Credit: v.advCredit,
		Imm: v.localConnID, RAddr: v.remote.Discriminator, MsgLen: uint32(v.attrs.MaxTransfer),
		Offset: uint32(p.opts.Window), RKey: attrBits(v.attrs)}
	b := p.mgmtBuf()
	reliability.Put(b, &h)
	p.appendTx(b)
	p.sendTx()
}

// rejectFrame answers a request with a Reject.
func (p *Provider) rejectFrame(to nic.Addr, dstVI uint16, connID uint32) {
	h := reliability.Header{Dst: to.MAC, Src: p.mac, DstEP: to.EP, SrcEP: p.ep, EtherType: p.opts.EtherType, JobKey: p.opts.JobKey,
		Kind: reliability.KindConnReject, DstVI: dstVI, ConnID: connID}
	b := p.mgmtBuf()
	reliability.Put(b, &h)
	p.appendTx(b)
	p.sendTx()
}

// begin prepares v for a new connection to remote. p.mu is held.
func (v *VI) begin(mode connMode, remote Address, to nic.Addr) {
	p := v.p
	v.state, v.mode, v.rejected = Pending, mode, false
	v.remote = Address{MAC: append(net.HardwareAddr(nil), to.MAC[:]...), Endpoint: to.EP, Discriminator: remote.Discriminator}
	v.remoteAddr, v.remoteVI, v.remoteConnID = to, 0, 0
	v.localConnID = p.nonce()
	v.isn = reliability.Seq(p.rng.Uint32())
	v.recvMsn = 0
	v.u = unreliableRx{}
	v.readsOut, v.readyN, v.readyHead = 0, 0, 0
	v.jobs = [maxReads]readJob{}
	v.sqStart, v.sqAcked = v.sq.Back(), v.sq.Back()
}

// establish creates the connection once the peer's parameters are known.
// p.mu is held.
func (v *VI) establish(now reliability.Time, remoteVI uint16, remoteConnID uint32, peerISN reliability.Seq, peerCredit uint32, peerWindow int) error {
	p := v.p
	ep := reliability.Endpoint{Local: p.mac, Remote: v.remoteAddr.MAC, LocalEP: p.ep, RemoteEP: v.remoteAddr.EP, EtherType: p.opts.EtherType, JobKey: p.opts.JobKey,
		LocalVI: v.id, RemoteVI: remoteVI, LocalConnID: v.localConnID, RemoteConnID: remoteConnID,
		ISN: v.isn, PeerISN: peerISN, PeerCredit: peerCredit, PeerRecvWindow: peerWindow, InitialRecvCred: v.advCredit}
	cfg := reliability.Config{Level: v.attrs.Reliability, FrameCap: p.frameCap, Window: p.opts.Window,
		RecvWindow: p.opts.Window, RTOInit: p.opts.RTOInit, RTOMin: p.opts.RTOMin, RTOMax: p.opts.RTOMax,
		AckDelay: p.opts.AckDelay, AckReqDelay: p.opts.AckReqDelay, PeerTimeout: p.opts.PeerTimeout}
	override(&cfg.AckDelay, v.attrs.AckDelay)
	override(&cfg.AckReqDelay, v.attrs.AckReqDelay)
	override(&cfg.RTOMin, v.attrs.RTOMin)
	c, err := reliability.NewConn(cfg, ep, now)
	if err != nil {
		return fmt.Errorf("vi %d: connect: %w", v.id, err)
	}
	v.conn = c
	v.remoteVI, v.remoteConnID = remoteVI, remoteConnID
	v.state = Connected
	v.updateLimit(now) // receives posted since the connection frame
	p.noteDeadline(c.Deadline())
	p.markDirty(v)
	wake.Signal(v.stateWake)
	return nil
}

// ConnectRequest connects v to the VI waiting with ConnectWait at remote
// (VipConnectRequest). It repeats the request until it is accepted or
// rejected, or ctx ends (the timeout).
func (v *VI) ConnectRequest(ctx context.Context, remote Address) error {
	mac, ok := nic.MAC(remote.MAC)
	if !ok {
		return fmt.Errorf("vi %d: connect: bad MAC %v", v.id, remote.MAC)
	}
	p := v.p
	p.mu.Lock()
	if v.state != Idle {
		st := v.state
		p.mu.Unlock()
		return fmt.Errorf("vi %d: connect: %w: %v", v.id, ErrState, st)
	}
	v.begin(modeClient, remote, nic.Addr{MAC: mac, EP: remote.Endpoint})
	v.connFrame(reliability.KindConnReq, 0, 0)
	attempt := v.localConnID
	p.mu.Unlock()
	return v.awaitConnect(ctx, reliability.KindConnReq, attempt)
}

// ConnectPeer connects v to a VI at remote that makes the same call with
// v's address, both using the same discriminator (VipConnectPeerRequest
// plus VipConnectPeerWait). It returns once connected, or when ctx ends.
func (v *VI) ConnectPeer(ctx context.Context, remote Address) error {
	mac, ok := nic.MAC(remote.MAC)
	if !ok {
		return fmt.Errorf("vi %d: connect peer: bad MAC %v", v.id, remote.MAC)
	}
	p := v.p
	p.mu.Lock()
	if v.state != Idle {
		st := v.state
		p.mu.Unlock()
		return fmt.Errorf("vi %d: connect peer: %w: %v", v.id, ErrState, st)
	}
	for _, o := range p.vis {
		if o != nil && o != v && o.mode == modePeer && o.remoteAddr == (nic.Addr{MAC: mac, EP: remote.Endpoint}) && o.remote.Discriminator == remote.Discriminator {
			p.mu.Unlock()
			return fmt.Errorf("vi %d: connect peer: %w: VI %d already uses %v", v.id, ErrState, o.id, remote)
		}
	}
	v.begin(modePeer, remote, nic.Addr{MAC: mac, EP: remote.Endpoint})
	v.connFrame(reliability.KindPeerReq, 0, 0)
	attempt := v.localConnID
	p.mu.Unlock()
	return v.awaitConnect(ctx, reliability.KindPeerReq, attempt)
}

// awaitConnect waits for the attempt that begin started with nonce
// attempt; an Accept on v meanwhile supersedes it.
func (v *VI) awaitConnect(ctx context.Context, kind reliability.Kind, attempt uint32) error {
	p := v.p
	retry := p.opts.ConnectRetry
	for {
		rctx, cancel := context.WithTimeout(ctx, retry)
		err := p.wait(rctx, v.stateWake, func() bool { return v.state != Pending })
		cancel()
		p.mu.Lock()
		if v.localConnID != attempt {
			err := fmt.Errorf("vi %d: connect to %v: %w: superseded by an Accept on the VI", v.id, v.remote, ErrState)
			p.mu.Unlock()
			return err
		}
		switch v.state {
		case Connected:
			p.mu.Unlock()
			return nil
		case Pending:
			if cerr := ctx.Err(); cerr != nil || errors.Is(err, ErrClosed) {
				if cerr == nil {
					cerr = err
				}
				// Built under p.mu: once v is idle again an Accept may reuse it.
				err := fmt.Errorf("vi %d: connect to %v: %w", v.id, v.remote, cerr)
				v.state, v.mode = Idle, modeNone
				p.mu.Unlock()
				return err
			}
			v.connFrame(kind, v.remoteVI, v.remoteConnID)
			retry = min(2*retry, 200*time.Millisecond)
			p.mu.Unlock()
		default:
			cause := v.err
			switch {
			case v.state == closedVI:
				cause = ErrClosed
			case v.rejected:
				cause = ErrRejected
			case cause == nil:
				cause = ErrState
			}
			// Built under p.mu, like the error above.
			err := fmt.Errorf("vi %d: connect to %v: %w", v.id, v.remote, cause)
			p.mu.Unlock()
			return err
		}
	}
}

// ConnectWait waits for a connection request to discriminator on this
// provider (VipConnectWait) until ctx ends.
func (p *Provider) ConnectWait(ctx context.Context, discriminator uint64) (*ConnRequest, error) {
	var r *ConnRequest
	err := p.wait(ctx, p.connWake, func() bool {
		r = p.takeConnReq(discriminator)
		return r != nil
	})
	if err != nil {
		return nil, fmt.Errorf("vi: connect wait %d: %w", discriminator, err)
	}
	return r, nil
}

// PollConnect is ConnectWait that never waits: it takes a request to
// discriminator that has arrived, after one pass over the device if none
// had. For callers that look for requests now and then while they run (an
// MPI layer whose peers connect on first use): an expired ConnectWait
// allocates its error on every look.
func (p *Provider) PollConnect(discriminator uint64) (*ConnRequest, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	r := p.takeConnReq(discriminator)
	if r == nil {
		p.progressLocked()
		r = p.takeConnReq(discriminator)
	}
	return r, r != nil
}

// takeConnReq hands out the oldest request to discriminator not yet taken.
// p.mu is held.
func (p *Provider) takeConnReq(discriminator uint64) *ConnRequest {
	for _, q := range p.connReqs {
		if !q.taken && q.remote.Discriminator == discriminator {
			q.taken = true
			wake.Signal(p.connWake) // others may be waiting for the rest
			return q
		}
	}
	return nil
}

// Accept connects v, which must be Idle and have the requested reliability
// level, to the requesting VI (VipConnectAccept). On ErrAttributes the
// request is still open: Reject it or Accept with another VI.
//
// A ConnectRequest or ConnectPeer still under way on v is abandoned: that
// call fails with ErrState and the VI serves the accepted request. This
// settles two requests that cross (each end asked the other, one accepts)
// even when the accepting end's own request started just before, as in
// package bonding.
func (r *ConnRequest) Accept(v *VI) error {
	p := r.p
	if v.p != p {
		return fmt.Errorf("vi %d: accept: %w: VI of another provider", v.id, ErrState)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("vi %d: accept: %w", v.id, ErrClosed)
	}
	if r.handled {
		return fmt.Errorf("vi %d: accept: %w: request already answered", v.id, ErrState)
	}
	if v.state == Pending && (v.mode == modeClient || v.mode == modePeer) {
		v.state, v.mode = Idle, modeNone
		wake.Signal(v.stateWake)
	}
	if v.state != Idle {
		return fmt.Errorf("vi %d: accept: %w: %v", v.id, ErrState, v.state)
	}
	if v.attrs.Reliability != r.attrs.Reliability {
		return fmt.Errorf("vi %d: accept: %w: reliability %v, requested %v", v.id, ErrAttributes, v.attrs.Reliability, r.attrs.Reliability)
	}
	r.handled = true
	v.begin(modeServer, r.remote, r.remoteAddr)
	v.advCredit = v.recvMsn + uint32(v.rq.Back()-v.rqNext)
	if err := v.establish(p.now(), r.remoteVI, r.remoteConnID, r.peerISN, r.peerCredit, r.peerWindow); err != nil {
		v.state, v.mode = Idle, modeNone
		return err
	}
	v.connFrame(reliability.KindConnAccept, r.remoteVI, r.remoteConnID)
	return nil
}

// Reject refuses the request (VipConnectReject).
func (r *ConnRequest) Reject() error {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.handled {
		return fmt.Errorf("vi: reject: %w: request already answered", ErrState)
	}
	r.handled, r.rejected = true, true
	if !p.closed {
		p.rejectFrame(r.remoteAddr, r.remoteVI, r.remoteConnID)
	}
	return nil
}

// maxReqsPerSource bounds the requests one source (MAC and endpoint) may
// have waiting for ConnectWait at once: a rank asks a rank once (mplite),
// and a test or program that opens many VIs to one server from one
// provider is still far from it.
const maxReqsPerSource = 16

// evictOldestRequest makes room in a full table by dropping the oldest
// entry that is not in the consumer's hands: one answered already (kept
// only to answer its repeats the same way) or one nobody has taken yet
// (its sender repeats it, and is queued again once there is room). It
// returns false if every entry is taken and unanswered. p.mu is held.
func (p *Provider) evictOldestRequest() bool {
	oldest := -1
	for i, q := range p.connReqs {
		if (!q.taken || q.handled) && (oldest < 0 || q.at < p.connReqs[oldest].at) {
			oldest = i
		}
	}
	if oldest < 0 {
		return false
	}
	last := len(p.connReqs) - 1
	copy(p.connReqs[oldest:], p.connReqs[oldest+1:])
	p.connReqs[last] = nil
	p.connReqs = p.connReqs[:last]
	p.stats.EvictedRequests++
	return true
}

// connReqLimit bounds the requests waiting for ConnectWait: one per VI the
// provider may open, so that a server can hold a first request from every
// client it could accept at once (127 ranks asking one rank of a 128-rank job
// overflowed a fixed 64 and the rest waited out their retries), and never
// fewer than minConnReqs.
func (p *Provider) connReqLimit() int { return max(minConnReqs, p.opts.MaxVIs) }

// ConnRequests counts the connection requests the provider has queued for
// ConnectWait since it opened. A caller that polls for them (PollConnect)
// while it waits on a CQ can end that wait when the count moves (CQ.WaitOr)
// instead of waking up now and then to look.
func (p *Provider) ConnRequests() uint64 { return p.connQueued.Load() }

// onConnReq records a client's request, or answers a repeated one.
func (p *Provider) onConnReq(now reliability.Time, h *reliability.Header) {
	for _, v := range p.vis {
		if v != nil && v.mode == modeServer && v.conn != nil && v.remoteAddr == h.Source() && v.remoteVI == h.SrcVI && v.remoteConnID == h.Imm {
			v.connFrame(reliability.KindConnAccept, v.remoteVI, v.remoteConnID) // our Accept was lost
			p.stats.RepeatedRequests++
			return
		}
	}
	keep := p.connReqs[:0]
	for _, q := range p.connReqs {
		if now-q.at < reliability.Time(p.opts.PeerTimeout) {
			keep = append(keep, q)
		}
	}
	clear(p.connReqs[len(keep):])
	p.connReqs = keep
	fromSource, src := 0, h.Source()
	for _, q := range p.connReqs {
		if q.remoteAddr == src && q.remoteVI == h.SrcVI && q.remoteConnID == h.Imm {
			// A repeat. It keeps a request the consumer holds alive, but
			// does not make a waiting one younger: a host that repeats
			// a request cannot keep its entry in the table for ever.
			if q.taken {
				q.at = now
			}
			p.stats.RepeatedRequests++
			if q.rejected {
				p.rejectFrame(q.remoteAddr, q.remoteVI, q.remoteConnID) // our Reject was lost
			}
			return
		}
		if q.remoteAddr == src && !q.taken {
			fromSource++
		}
	}
	if h.Imm == 0 || fromSource >= maxReqsPerSource {
		// One host (MAC and endpoint) holds at most maxReqsPerSource
		// waiting entries, so it cannot fill the table alone.
		p.stats.RefusedRequests++
		return
	}
	if len(p.connReqs) >= p.connReqLimit() && !p.evictOldestRequest() {
		p.stats.RefusedRequests++
		return
	}
	p.connReqs = append(p.connReqs, &ConnRequest{p: p,
		remote:     Address{MAC: append(net.HardwareAddr(nil), h.Src[:]...), Endpoint: h.SrcEP, Discriminator: h.RAddr},
		remoteAddr: src, remoteVI: h.SrcVI, remoteConnID: h.Imm, peerISN: h.Seq, peerCredit: h.Credit,
		peerWindow: int(h.Offset), attrs: remoteAttrs(h), at: now})
	p.connQueued.Add(1)
	wake.Signal(p.connWake)
}

// onPeerReq matches a peer's request with our pending peer VI, or answers
// a repeated one.
func (p *Provider) onPeerReq(now reliability.Time, h *reliability.Header) {
	if h.Imm == 0 {
		return
	}
	for _, v := range p.vis {
		if v == nil || v.mode != modePeer || v.remoteAddr != h.Source() || v.remote.Discriminator != h.RAddr {
			continue
		}
		switch v.state {
		case Pending:
			if remoteAttrs(h).Reliability != v.attrs.Reliability {
				// The pair can never connect: tell the peer, and end our
				// own attempt the same way, or whichever side hears the
				// other first would give up while the other waits on.
				p.rejectFrame(h.Source(), h.SrcVI, h.Imm)
				v.state, v.mode, v.rejected = Idle, modeNone, true
				wake.Signal(v.stateWake)
				return
			}
			if err := v.establish(now, h.SrcVI, h.Imm, h.Seq, h.Credit, int(h.Offset)); err != nil {
				return
			}
			v.connFrame(reliability.KindPeerReq, h.SrcVI, h.Imm)
		case Connected, Error:
			if v.remoteVI == h.SrcVI && v.remoteConnID == h.Imm && h.ConnID != v.localConnID {
				v.connFrame(reliability.KindPeerReq, h.SrcVI, h.Imm) // our answer was lost
			}
		}
		return
	}
}

// onConnReply handles an Accept or Reject sent to v.
func (v *VI) onConnReply(now reliability.Time, h *reliability.Header) {
	if v.state == Pending && (v.mode == modeClient || v.mode == modePeer) && h.ConnID == v.localConnID && h.Source() == v.remoteAddr {
		if h.Kind == reliability.KindConnReject {
			v.state, v.mode, v.rejected = Idle, modeNone, true
			wake.Signal(v.stateWake)
			return
		}
		if v.mode == modeClient {
			_ = v.establish(now, h.SrcVI, h.Imm, h.Seq, h.Credit, int(h.Offset))
		}
		return
	}
	if h.Kind == reliability.KindConnAccept {
		if v.conn != nil && h.Source() == v.remoteAddr && h.SrcVI == v.remoteVI && h.Imm == v.remoteConnID {
			return // a repeated Accept of our connection
		}
		v.p.noConnection(now, h, v)
	}
}

// override replaces *d with a VI's own timing where that is set.
func override(d *time.Duration, own time.Duration) {
	if own != 0 {
		*d = own
	}
}
