package mplite

import "errors"

// Layout describes where a message's bytes lie when they are not one
// contiguous slice: an MPI derived datatype with gaps, say. The memory it
// names must not move or change (a send) or be read (a receive) until the
// request completes. A message up to the eager limit is gathered straight
// into the send buffer and scattered straight out of the receive buffer; a
// longer one goes through one staging copy that the communicator keeps for
// reuse, which the RDMA writes of the handshake protocol read or fill.
type Layout interface {
	// Len is the message length in bytes.
	Len() int
	// Gather copies the message's first len(dst) bytes into dst.
	Gather(dst []byte)
	// Scatter copies src to the message's first len(src) bytes.
	Scatter(src []byte)
}

// maxStages bounds the staging copies a communicator keeps for reuse.
const maxStages = 8

// IsendLayout starts sending the message that l describes to rank dest
// with tag, as Isend does with a slice.
func (c *Comm) IsendLayout(l Layout, dest, tag int) (*Request, error) {
	if err := c.checkDest(dest, tag); err != nil {
		return nil, err
	}
	r := c.getReq()
	r.lay, r.layLen = l, l.Len()
	if err := c.startSend(r, nil, c.worldRank(dest), tag, c.pctx); err != nil {
		c.putReq(r)
		return nil, err
	}
	return r, nil
}

// IrecvLayout starts receiving a message from rank src (or AnySource) with
// tag (or AnyTag) into the memory l describes, as Irecv does into a slice.
// Status.Count is in bytes.
func (c *Comm) IrecvLayout(l Layout, src, tag int) (*Request, error) {
	if err := c.checkSrc(src, tag); err != nil {
		return nil, err
	}
	r := c.getReq()
	r.lay, r.layLen = l, l.Len()
	if err := c.startRecv(r, nil, c.worldRank(src), tag, c.pctx); err != nil {
		c.putReq(r)
		return nil, err
	}
	return r, nil
}

// size is the length of r's message buffer.
func (r *Request) size() int {
	if r.lay != nil {
		return r.layLen
	}
	return len(r.buf)
}

// stage gives a layout request its staging copy, for the paths that need
// one contiguous buffer (RDMA, a message to self): a send's is filled from
// the layout. c.mu is held.
func (c *Comm) stage(r *Request) {
	if r.lay == nil || r.buf != nil {
		return
	}
	n := r.layLen
	for i, b := range c.stages {
		if cap(b) >= n {
			c.stages = append(c.stages[:i], c.stages[i+1:]...)
			r.buf = b[:n]
			break
		}
	}
	if r.buf == nil {
		r.buf = make([]byte, n)
	}
	if r.send {
		r.lay.Gather(r.buf)
	}
}

// unstage empties a completed layout receive's staging copy into the
// layout (all that arrived, even if truncated) and keeps the copy for
// reuse unless a failure may leave a descriptor still using it. c.mu is
// held.
func (c *Comm) unstage(r *Request) {
	if r.lay == nil || r.buf == nil {
		return
	}
	intact := r.err == nil || isTruncation(r.err) // errors.As only on errors: it allocates
	if !r.send && !r.cancelled && intact {
		r.lay.Scatter(r.buf[:min(r.st.Count, len(r.buf))])
	}
	if r.chunks == 0 && intact && len(c.stages) < maxStages {
		c.stages = append(c.stages, r.buf)
	}
	r.buf = nil
}

func isTruncation(err error) bool {
	var te *TruncateError
	return errors.As(err, &te)
}
