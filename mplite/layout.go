package mplite

import "errors"

// Layout describes where a message's bytes lie when they are not one
// contiguous slice: an MPI derived datatype with gaps, say. The memory it
// names must not move or change (a send) or be read (a receive) until the
// request completes. A message up to the eager limit is gathered straight
// into the send buffer and scattered straight out of the receive buffer; a
// longer one goes through one staging copy that the communicator keeps for
// reuse, which the RDMA writes of the handshake protocol read or fill,
// unless it is a RunLayout whose runs the writes can use directly.
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

// A Run is Len bytes at offset Off of a RunLayout's span.
type Run struct{ Off, Len int }

// A RunLayout is a Layout that can say where its bytes lie: in runs of one
// span of memory. A message longer than the eager limit then moves by RDMA
// straight out of the sender's runs and into the receiver's, without the
// staging copy, when the runs are few and long enough to be worth a write
// each (at most 1 024 runs averaging at least 4 KiB); otherwise it is
// staged as for any Layout.
type RunLayout interface {
	Layout
	// NumRuns is at most the number of runs Runs returns, and cheap.
	NumRuns() int
	// Runs returns the span and the runs of the message in message
	// order: run i holds the message's next runs[i].Len bytes at
	// span[runs[i].Off:]. The lengths add up to Len. The runs of a
	// receive must not overlap. Neither slice may change, nor the span's
	// memory move, until the request completes.
	Runs() (span []byte, runs []Run)
}

const (
	maxRuns   = 1024    // most runs a message moves by RDMA directly
	minRunAvg = 4 << 10 // fewest bytes per run, on average, to do so
)

// directRuns returns the span and runs that handshake request r moves
// straight from or into, or ok false when its layout must be staged: not a
// RunLayout, too many or too short runs, runs that would not fit a CTS, or
// runs that do not describe the message. c.mu is held.
func (c *Comm) directRuns(r *Request) (span []byte, runs []Run, ok bool) {
	rl, is := r.lay.(RunLayout)
	if !is || r.buf != nil || c.cfg.layoutStaged {
		return nil, nil, false
	}
	n := rl.NumRuns()
	if n <= 0 || n > maxRuns || n*runLen > c.cfg.eagerLimit || r.layLen/n < minRunAvg {
		return nil, nil, false
	}
	span, runs = rl.Runs()
	total := 0
	for _, run := range runs {
		if run.Len <= 0 || run.Off < 0 || run.Off > len(span)-run.Len {
			return nil, nil, false
		}
		total += run.Len
	}
	if len(runs) > n || total != r.layLen {
		return nil, nil, false
	}
	return span, runs, true
}

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
	c.stats.Staged++
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
