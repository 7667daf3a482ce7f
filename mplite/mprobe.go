package mplite

import "errors"

// Message is a message that Mprobe or Improbe took off the matching queues
// (MPI_Message): no receive can match it any more, and only its own Recv
// or Irecv delivers it. This is how a thread probes and then receives
// exactly the message it probed while other threads receive too.
type Message struct {
	c *Comm
	m *umsg
}

// Improbe is Iprobe that also takes the message it finds.
func (c *Comm) Improbe(src, tag int) (*Message, Status, bool, error) {
	if err := c.checkSrc(src, tag); err != nil {
		return nil, Status{}, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finalized {
		return nil, Status{}, false, ErrFinalized
	}
	c.progressLocked()
	msg, st, err := c.takeMessage(c.worldRank(src), tag)
	return msg, c.commStatus(st), msg != nil, err
}

// Mprobe is Probe that also takes the message it returns.
func (c *Comm) Mprobe(src, tag int) (*Message, Status, error) {
	if err := c.checkSrc(src, tag); err != nil {
		return nil, Status{}, err
	}
	mc := &mprobeCond{c: c, src: c.worldRank(src), tag: tag}
	c.wait(mc)
	return mc.msg, c.commStatus(mc.st), mc.err
}

type mprobeCond struct {
	c        *Comm
	src, tag int
	msg      *Message
	st       Status
	err      error
}

// ready takes the message once: the waiter asks again and again.
func (p *mprobeCond) ready() bool {
	if p.msg != nil || p.err != nil {
		return true
	}
	if p.c.finalized {
		p.err = ErrFinalized
		return true
	}
	p.msg, p.st, p.err = p.c.takeMessage(p.src, p.tag)
	return p.msg != nil || p.err != nil
}

// takeMessage removes the message that a receive of (src, tag) would
// match, if one has arrived. c.mu is held.
func (c *Comm) takeMessage(src, tag int) (*Message, Status, error) {
	ok, st, err := c.iprobeLocked(src, tag, c.pctx)
	if !ok || err != nil {
		return nil, Status{}, err
	}
	m := c.findUnexpected(src, tag, c.pctx, true)
	c.unexp[m.src].remove(m)
	return &Message{c: c, m: m}, st, nil
}

// ErrMessageUsed: the message was already received.
var ErrMessageUsed = errors.New("mplite: message already received")

// Irecv starts receiving the message into buf (MPI_Imrecv).
func (msg *Message) Irecv(buf []byte) (*Request, error) {
	if msg == nil || msg.c == nil {
		return nil, ErrMessageUsed
	}
	c := msg.c
	r := c.getReq()
	c.mu.Lock()
	defer c.mu.Unlock()
	if msg.m == nil {
		c.putReqLocked(r)
		return nil, ErrMessageUsed
	}
	m := msg.m
	msg.m = nil
	r.c, r.send, r.buf, r.peer, r.tag, r.ctx = c, false, buf, m.src, m.tag, m.ctx
	c.matchUnexpected(r, m)
	return r, nil
}

// Recv receives the message into buf (MPI_Mrecv).
func (msg *Message) Recv(buf []byte) (Status, error) {
	r, err := msg.Irecv(buf)
	if err != nil {
		return Status{}, err
	}
	st, err := r.Wait()
	r.Free()
	return st, err
}
