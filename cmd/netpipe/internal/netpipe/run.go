package netpipe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Config is one run of NetPIPE's method. The transmitter's Config rules:
// it tells the receiver the mode in the opening handshake.
type Config struct {
	// Start and End bound the base message sizes (NetPIPE -l, -u).
	Start, End int
	// Pert is the perturbation in bytes (NetPIPE -p); 0 disables it.
	Pert int
	// Stream sends in one direction only (-s); Bidir sends both ways at
	// once (-B). They exclude each other.
	Stream, Bidir bool
	// Integrity fills every message with a per-message pattern and checks
	// every byte received (-I). Like NetPIPE's integrity mode it runs one
	// trial per point.
	Integrity bool
	// Trials per point; zero means Trials (1 with Integrity).
	Trials int
	// RunTime is the target length of one trial; zero means RunTime.
	RunTime time.Duration
	// StopTime ends the run once one transfer takes this long; zero means
	// StopTime.
	StopTime time.Duration
	// Repeats, if positive, replaces the calibrated repeat count (NetPIPE -n).
	Repeats int
	// Retries bounds how often one point (or the latency estimate) is
	// re-run after frames were lost, on a Conn that is a Resyncer; zero
	// means DefaultRetries, negative none. Both ends must allow retries.
	Retries int
	// BeforePoint and AfterPoint, if set, observe the transmitter's progress.
	BeforePoint func(n, bytes, repeats int)
	AfterPoint  func(Point)
	// OnRetry, if set, is told on the transmitter of every re-run: the
	// point (-1 for the latency estimate), its size and the error that
	// caused it.
	OnRetry func(n, bytes int, err error)
}

// DefaultRetries is Config.Retries' default.
const DefaultRetries = 5

func (c *Config) retries() int {
	switch {
	case c.Retries < 0:
		return 0
	case c.Retries == 0:
		return DefaultRetries
	}
	return c.Retries
}

func (c *Config) check() error {
	if c.Start < 1 {
		return fmt.Errorf("start %d: need a starting value >= 1", c.Start)
	}
	if c.Start > c.End {
		return fmt.Errorf("start %d must not exceed end %d", c.Start, c.End)
	}
	if c.End > maxMessage {
		return fmt.Errorf("end %d exceeds the %d-byte message limit", c.End, maxMessage)
	}
	if c.Stream && c.Bidir {
		return errors.New("streaming and bidirectional modes exclude each other")
	}
	if c.Pert < 0 {
		c.Pert = 0
	}
	return nil
}

// maxMessage keeps every size (end plus perturbation) within the 32-bit
// fields of the control and frame headers and within memory.
const maxMessage = 1 << 30

// Control messages: a fixed 16-byte message the transmitter and receiver
// exchange over the benchmark connection itself, as NetPIPE's Sync,
// SendRepeat and SendTime do.
const (
	ctlLen   = 16
	ctlMagic = 0x4e50_6331 // "NPc1"
)

// Control operations.
const (
	opHello   = 1 // a = mode flags, b = trials
	opLatency = 2 // a = size, b = round trips
	opPoint   = 3 // a = size, b = repeats
	opSync    = 4
	opTime    = 5 // a:b = float64 bits of the receiver's time
	opDone    = 6
)

// Mode flags in opHello.
const (
	flagStream    = 1
	flagBidir     = 2
	flagIntegrity = 4
)

// Control is a decoded control message.
type Control struct {
	Op   uint8
	A, B uint32
}

// ErrControl reports a control message that is not one.
var ErrControl = errors.New("bad control message")

// PutControl encodes c into b, which must be ctlLen (16) bytes.
func PutControl(b []byte, c Control) {
	_ = b[ctlLen-1]
	binary.BigEndian.PutUint32(b[0:], ctlMagic)
	b[4] = c.Op
	b[5], b[6], b[7] = 0, 0, 0
	binary.BigEndian.PutUint32(b[8:], c.A)
	binary.BigEndian.PutUint32(b[12:], c.B)
}

// ParseControl decodes a control message.
func ParseControl(b []byte) (Control, error) {
	var c Control
	if len(b) != ctlLen {
		return c, fmt.Errorf("%w: %d bytes", ErrControl, len(b))
	}
	if binary.BigEndian.Uint32(b[0:]) != ctlMagic {
		return c, fmt.Errorf("%w: magic %#x", ErrControl, binary.BigEndian.Uint32(b[0:]))
	}
	c.Op = b[4]
	if c.Op < opHello || c.Op > opDone {
		return c, fmt.Errorf("%w: op %d", ErrControl, c.Op)
	}
	c.A = binary.BigEndian.Uint32(b[8:])
	c.B = binary.BigEndian.Uint32(b[12:])
	return c, nil
}

// runner holds one end's state for a run.
type runner struct {
	conn      Conn
	cfg       Config
	ctl, ctlr []byte
	// sbuf and rbuf are one buffer, as in NetPIPE's default (cache) mode,
	// unless both directions are in flight at once (-B): a message is
	// received where the last one was sent from, and the working set that
	// caches must hold is one message per end, as it is for the peers this
	// program is compared with.
	sbuf    []byte
	rbuf    []byte
	pat     pattern
	tx      bool
	txCount uint32 // data messages sent, the integrity pattern's seed
	rxCount uint32 // data messages received
}

// recover decides whether err, from attempt number attempt (from 0) of a
// step of n bytes, is worth re-running: it is when frames were lost, the
// Conn can resynchronize and retries are left. It then resynchronizes
// both ends and returns nil; otherwise it returns err.
func (r *runner) recover(ctx context.Context, err error, attempt, n, bytes int) error {
	rs, ok := r.conn.(Resyncer)
	if !ok || !errors.Is(err, ErrLost) || ctx.Err() != nil {
		return err
	}
	limit := r.cfg.retries()
	if !r.tx && limit > 0 {
		// The receiver may see one loss twice (in a step and then in the
		// next control message); the transmitter's count rules.
		limit = 2*limit + 1
	}
	if attempt >= limit {
		if attempt == 0 {
			return err
		}
		return fmt.Errorf("%w (after %d re-runs)", err, attempt)
	}
	if r.tx && r.cfg.OnRetry != nil {
		r.cfg.OnRetry(n, bytes, err)
	}
	if rerr := rs.Resync(ctx); rerr != nil {
		return fmt.Errorf("%w; then: %w", err, rerr)
	}
	// Both ends dropped the same messages: the integrity patterns restart.
	r.txCount, r.rxCount = 0, 0
	return nil
}

func (r *runner) sendCtl(ctx context.Context, c Control) error {
	PutControl(r.ctl, c)
	if err := r.conn.Send(ctx, r.ctl); err != nil {
		return fmt.Errorf("send control %d: %w", c.Op, err)
	}
	return nil
}

func (r *runner) recvCtl(ctx context.Context, want uint8) (Control, error) {
	if err := r.conn.Recv(ctx, r.ctlr); err != nil {
		return Control{}, fmt.Errorf("receive control %d: %w", want, err)
	}
	c, err := ParseControl(r.ctlr)
	if err != nil {
		return c, err
	}
	if want != 0 && c.Op != want {
		return c, fmt.Errorf("%w: got op %d, want %d", ErrControl, c.Op, want)
	}
	return c, nil
}

// sync lines both ends up before a timed trial.
func (r *runner) sync(ctx context.Context, tx bool) error {
	if tx {
		if err := r.sendCtl(ctx, Control{Op: opSync}); err != nil {
			return err
		}
		_, err := r.recvCtl(ctx, opSync)
		return err
	}
	if _, err := r.recvCtl(ctx, opSync); err != nil {
		return err
	}
	return r.sendCtl(ctx, Control{Op: opSync})
}

// size prepares the buffers for messages of n bytes.
func (r *runner) size(n int) {
	if cap(r.sbuf) < n {
		r.sbuf = make([]byte, n)
		r.rbuf = r.sbuf
		if r.cfg.Bidir {
			r.rbuf = make([]byte, n)
		}
		// NetPIPE fills its buffers with real data before timing.
		for i := range r.sbuf {
			r.sbuf[i] = 'a'
		}
	}
	r.sbuf, r.rbuf = r.sbuf[:n], r.rbuf[:n]
	if r.cfg.Integrity {
		r.pat.grow(n)
	}
}

func (r *runner) send(ctx context.Context) error {
	if r.cfg.Integrity {
		r.pat.fill(r.sbuf, r.txCount)
	}
	r.txCount++
	return r.conn.Send(ctx, r.sbuf)
}

func (r *runner) recv(ctx context.Context) error {
	if r.cfg.Integrity {
		clear(r.rbuf) // so a message that was never written cannot pass
	}
	if err := r.conn.Recv(ctx, r.rbuf); err != nil {
		return err
	}
	return r.verify()
}

func (r *runner) exchange(ctx context.Context) error {
	if r.cfg.Integrity {
		r.pat.fill(r.sbuf, r.txCount)
		clear(r.rbuf)
	}
	r.txCount++
	if err := r.conn.Exchange(ctx, r.sbuf, r.rbuf); err != nil {
		return err
	}
	return r.verify()
}

func (r *runner) verify() error {
	k := r.rxCount
	r.rxCount++
	if !r.cfg.Integrity {
		return nil
	}
	if off, want, got, bad := r.pat.check(r.rbuf, k); bad {
		return &IntegrityError{Message: k, Bytes: len(r.rbuf), Offset: off, Want: want, Got: got}
	}
	return nil
}

// IntegrityError reports a received byte that differs from what was sent.
type IntegrityError struct {
	Message   uint32 // data message number on this direction, from 0
	Bytes     int    // message size
	Offset    int    // first differing byte
	Want, Got byte
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("integrity check failed: message %d (%d bytes): byte %d is %#02x, want %#02x",
		e.Message, e.Bytes, e.Offset, e.Got, e.Want)
}

// Run runs NetPIPE's method over conn. The transmitter returns the data
// points; the receiver follows the transmitter's schedule and mode and
// returns nil points. Both ends must call Run, each with its own Conn.
func Run(ctx context.Context, conn Conn, role Role, cfg Config) ([]Point, error) {
	r := &runner{conn: conn, cfg: cfg, tx: role == Transmitter, ctl: make([]byte, ctlLen), ctlr: make([]byte, ctlLen)}
	if role == Receiver {
		return nil, r.receive(ctx)
	}
	if err := r.cfg.check(); err != nil {
		return nil, err
	}
	return r.transmit(ctx)
}

func (r *runner) transmit(ctx context.Context) ([]Point, error) {
	cfg := &r.cfg
	trials := cfg.Trials
	if trials <= 0 {
		trials = Trials
		if cfg.Integrity {
			trials = 1
		}
	}
	runtm := cfg.RunTime
	if runtm <= 0 {
		runtm = RunTime
	}
	stoptm := cfg.StopTime
	if stoptm <= 0 {
		stoptm = StopTime
	}
	var flags uint32
	if cfg.Stream {
		flags |= flagStream
	}
	if cfg.Bidir {
		flags |= flagBidir
	}
	if cfg.Integrity {
		flags |= flagIntegrity
	}
	if err := r.sendCtl(ctx, Control{Op: opHello, A: flags, B: uint32(trials)}); err != nil {
		return nil, err
	}
	if _, err := r.recvCtl(ctx, opHello); err != nil {
		return nil, err
	}

	// Estimate the first point's time with ping-pongs, as netpipe.c does
	// even for streaming and bidirectional runs.
	var tlast float64
	for attempt := 0; ; attempt++ {
		t, err := r.latency(ctx, runtm)
		if err == nil {
			tlast = t
			break
		}
		if err := r.recover(ctx, err, attempt, -1, cfg.Start); err != nil {
			return nil, fmt.Errorf("latency estimate: %w", err)
		}
	}
	prev := cfg.Start

	var pts []Point
	sched := NewSched(cfg.Start, cfg.End, cfg.Pert)
	for tlast < stoptm.Seconds() {
		size, inc, ok := sched.Next()
		if !ok {
			break
		}
		nrepeat := cfg.Repeats
		if nrepeat <= 0 {
			nrepeat = Repeats(runtm, tlast, prev, inc, trials)
		}
		prev = size
		n := len(pts)
		if cfg.BeforePoint != nil {
			cfg.BeforePoint(n, size, nrepeat)
		}
		var t float64
		for attempt := 0; ; attempt++ {
			var err error
			t, err = r.point(ctx, size, nrepeat, trials)
			if err == nil {
				break
			}
			if err := r.recover(ctx, err, attempt, n, size); err != nil {
				return pts, fmt.Errorf("point %d (%d bytes): %w", n, size, err)
			}
			if cfg.Repeats <= 0 {
				// Shorter trials are likelier to get through where
				// frames keep getting lost.
				nrepeat = max(trials, nrepeat/2)
			}
		}
		if t == 0 {
			t = 0.000001 // as netpipe.c: a zero time would make infinite Mbps
		}
		tlast = t
		p := Point{N: n, Bytes: size, Repeats: nrepeat, Seconds: t, Mbps: Mbps(size, cfg.Bidir, t)}
		pts = append(pts, p)
		if cfg.AfterPoint != nil {
			cfg.AfterPoint(p)
		}
	}
	if err := r.sendCtl(ctx, Control{Op: opDone}); err != nil {
		return pts, err
	}
	return pts, nil
}

// latency runs the first point's estimate and returns the one-way time:
// LatencyRepeats round trips, or as many as fit in about runtm when the
// first size is large (100 round trips of 8 MiB on a 250 Mbit/s link took
// half a minute before the first point), as one round trip measures first.
func (r *runner) latency(ctx context.Context, runtm time.Duration) (float64, error) {
	t, err := r.roundTrips(ctx, 1)
	if err != nil {
		return 0, err
	}
	n := LatencyRepeats
	if rt := 2 * t; rt > 0 && float64(n)*rt > runtm.Seconds() {
		n = max(1, int(runtm.Seconds()/rt))
	}
	return r.roundTrips(ctx, n)
}

// roundTrips times n ping-pongs of the first size and returns the one-way
// time.
func (r *runner) roundTrips(ctx context.Context, n int) (float64, error) {
	r.size(r.cfg.Start)
	if err := r.sendCtl(ctx, Control{Op: opLatency, A: uint32(r.cfg.Start), B: uint32(n)}); err != nil {
		return 0, err
	}
	t0 := time.Now()
	for range n {
		if err := r.send(ctx); err != nil {
			return 0, err
		}
		if err := r.recv(ctx); err != nil {
			return 0, err
		}
	}
	return time.Since(t0).Seconds() / float64(2*n), nil
}

// point runs one data point on the transmitter and returns its time.
func (r *runner) point(ctx context.Context, size, nrepeat, trials int) (float64, error) {
	cfg := &r.cfg
	r.size(size)
	if err := r.sendCtl(ctx, Control{Op: opPoint, A: uint32(size), B: uint32(nrepeat)}); err != nil {
		return 0, err
	}
	best := math.Inf(1)
	for range trials {
		if err := r.sync(ctx, true); err != nil {
			return 0, err
		}
		t0 := time.Now()
		for range nrepeat {
			var err error
			switch {
			case cfg.Bidir:
				err = r.exchange(ctx)
			case cfg.Stream:
				err = r.send(ctx)
			default:
				if err = r.send(ctx); err == nil {
					err = r.recv(ctx)
				}
			}
			if err != nil {
				return 0, err
			}
		}
		t := time.Since(t0).Seconds() / float64(nrepeat)
		if !cfg.Stream && !cfg.Bidir {
			t /= 2 // ping-pong: one way
		}
		best = min(best, t)
	}
	if cfg.Stream {
		// The receiver's clock is the one that saw the data arrive.
		c, err := r.recvCtl(ctx, opTime)
		if err != nil {
			return 0, err
		}
		best = math.Float64frombits(uint64(c.A)<<32 | uint64(c.B))
		if math.IsNaN(best) || math.IsInf(best, 0) || best < 0 {
			return 0, fmt.Errorf("%w: receiver time %v", ErrControl, best)
		}
	}
	return best, nil
}

func (r *runner) receive(ctx context.Context) error {
	c, err := r.recvCtl(ctx, opHello)
	if err != nil {
		return err
	}
	r.cfg.Stream = c.A&flagStream != 0
	r.cfg.Bidir = c.A&flagBidir != 0
	r.cfg.Integrity = c.A&flagIntegrity != 0
	trials := int(c.B)
	if trials < 1 || trials > 1<<16 {
		return fmt.Errorf("%w: %d trials", ErrControl, trials)
	}
	if err := r.sendCtl(ctx, Control{Op: opHello}); err != nil {
		return err
	}
	// The receiver follows: after lost frames it resynchronizes and waits
	// for the transmitter to say again what to run. Its re-runs are
	// counted per step (control message) as on the transmitter.
	attempt, size := 0, 0
	for {
		c, err := r.recvCtl(ctx, 0)
		if err == nil {
			size = int(c.A)
			err = r.step(ctx, c, trials)
		}
		if err == nil {
			if c.Op == opDone {
				return nil
			}
			attempt = 0
			continue
		}
		if err := r.recover(ctx, err, attempt, -1, size); err != nil {
			return err
		}
		attempt++
	}
}

// step runs one control message's work on the receiver.
func (r *runner) step(ctx context.Context, c Control, trials int) error {
	switch c.Op {
	case opDone:
		return nil
	case opLatency:
		if c.A < 1 || c.A > maxMessage {
			return fmt.Errorf("%w: size %d", ErrControl, c.A)
		}
		r.size(int(c.A))
		for range c.B {
			if err := r.recv(ctx); err != nil {
				return fmt.Errorf("latency estimate: %w", err)
			}
			if err := r.send(ctx); err != nil {
				return fmt.Errorf("latency estimate: %w", err)
			}
		}
		return nil
	case opPoint:
		if c.A < 1 || c.A > maxMessage+1024 || c.B < 1 {
			return fmt.Errorf("%w: point of %d bytes, %d repeats", ErrControl, c.A, c.B)
		}
		if err := r.recvPoint(ctx, int(c.A), int(c.B), trials); err != nil {
			return fmt.Errorf("point of %d bytes: %w", c.A, err)
		}
		return nil
	}
	return fmt.Errorf("%w: unexpected op %d", ErrControl, c.Op)
}

func (r *runner) recvPoint(ctx context.Context, size, nrepeat, trials int) error {
	cfg := &r.cfg
	r.size(size)
	best := math.Inf(1)
	for range trials {
		if err := r.sync(ctx, false); err != nil {
			return err
		}
		t0 := time.Now()
		for range nrepeat {
			var err error
			switch {
			case cfg.Bidir:
				err = r.exchange(ctx)
			case cfg.Stream:
				err = r.recv(ctx)
			default:
				if err = r.recv(ctx); err == nil {
					err = r.send(ctx)
				}
			}
			if err != nil {
				return err
			}
		}
		best = min(best, time.Since(t0).Seconds()/float64(nrepeat))
	}
	if cfg.Stream {
		bits := math.Float64bits(best)
		return r.sendCtl(ctx, Control{Op: opTime, A: uint32(bits >> 32), B: uint32(bits)})
	}
	return nil
}

// pattern is the integrity data: message k of n bytes is pat[k%251:][:n],
// so consecutive messages differ and a stale or shifted message fails.
type pattern struct{ b []byte }

const patternPeriod = 251

func (p *pattern) grow(n int) {
	need := n + patternPeriod
	if len(p.b) >= need {
		return
	}
	old := len(p.b)
	p.b = append(p.b, make([]byte, need-old)...)
	for i := old; i < need; i++ {
		// A multiplicative hash of the offset: no short period, so a frame
		// landing at the wrong offset is caught.
		p.b[i] = byte((uint32(i) * 0x9E3779B1) >> 24)
	}
}

func (p *pattern) fill(dst []byte, k uint32) {
	copy(dst, p.b[k%patternPeriod:])
}

func (p *pattern) check(got []byte, k uint32) (off int, want, have byte, bad bool) {
	ref := p.b[k%patternPeriod:][:len(got)]
	if string(ref) == string(got) { // compiles to a memequal, no allocation
		return 0, 0, 0, false
	}
	for i := range got {
		if got[i] != ref[i] {
			return i, ref[i], got[i], true
		}
	}
	return 0, 0, 0, false
}
