package netpipe

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/ethervia/ethervia/nic"
)

// RawModule is the "raw" module: messages go straight onto the drivers as
// bare frames, large ones as frame trains striped over the links. It has
// no retransmission and no checksum, only credit-based flow control so a
// train cannot overrun the receiver's queue. A lost frame fails the
// operation after Endpoint.Timeout with an error wrapping ErrLost; its
// connections are Resyncers, so Run then re-runs the point. A corrupted
// frame goes unnoticed unless the run checks integrity.
type RawModule struct{}

// Name implements Module.
func (RawModule) Name() string { return "raw" }

// Frames implements Module.
func (RawModule) Frames() bool { return true }

// Connect implements Module: it opens the end on ep.Devices and completes a
// hello handshake on every link. A receiver without ep.PeerMACs learns them
// from the hellos.
func (RawModule) Connect(ctx context.Context, ep Endpoint) (Conn, error) {
	c, err := newRawConn(ep)
	if err != nil {
		return nil, err
	}
	if err := c.handshake(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

const (
	defaultTimeout = 5 * time.Second
	defaultSpin    = 50 * time.Microsecond
	// blockSlice bounds one blocking wait so cancellation is noticed.
	blockSlice = 50 * time.Millisecond
	// helloEvery paces hello retransmissions during the handshake.
	helloEvery = 20 * time.Millisecond
)

// rawConn is one end of a raw connection.
type rawConn struct {
	devs      []nic.Device
	src, dst  [][6]byte
	haveDst   []bool
	filter    nic.Filter
	role      Role
	fragSize  int
	window    uint32
	creditAt  uint32
	spin      time.Duration
	yield     bool
	timeout   time.Duration
	integrity bool
	nonce     uint32

	// transmit state
	txBufs   [][]byte   // frame buffers, batch*links
	perLink  [][][]byte // per-link batches pointing into txBufs
	txSeq    uint32     // data frames sent
	acked    uint32     // credit: frames the peer has drained
	txMsg    uint32     // messages sent
	ctlBuf   []byte
	ctlBatch [][]byte // one-frame batch for ctlBuf, so sending it does not allocate

	// send progress of the current message
	out      []byte
	outFrag  int
	outFrags int
	sending  bool

	// receive state
	rxBufs    [][]byte
	rxLens    []int
	drained   uint32 // data frames taken off the devices
	credited  uint32 // last credit sent
	rxMsg     uint32 // next message expected
	in        []byte
	inFrags   int
	inGot     int
	bitmap    []uint64
	receiving bool
	stash     []stashed
	spare     [][]byte
	stashCap  int

	// resynchronization after lost frames (Resync)
	epoch      uint32 // current reset epoch; the transmitter leads it
	resyncing  bool   // inside Resync: data frames are dropped, no credit sent
	ackGot     bool   // transmitter: the receiver acknowledged epoch
	peerSeq    uint32 // transmitter: the receiver's frames sent, from its ack
	peerMsg    uint32 // transmitter: the receiver's messages sent, from its ack
	ackSeq     uint32 // receiver: its counters when it applied epoch, re-sent
	ackMsg     uint32 //   with every duplicate reset
	peerLost   bool   // transmitter: the receiver asked for a reset
	wasReset   bool   // receiver: a reset was applied that Resync has not seen
	staleFloor uint32 // first message after the last reset

	// handshake
	acks   []bool
	hellos []bool
	stale  uint64
	dups   uint64
	badRx  uint64
	closed atomic.Bool
}

type stashed struct {
	buf []byte
	n   int
	msg uint32
}

func newRawConn(ep Endpoint) (*rawConn, error) {
	L := len(ep.Devices)
	if L == 0 {
		return nil, errors.New("raw: no devices")
	}
	if L > 1<<15 {
		return nil, fmt.Errorf("raw: %d links", L)
	}
	if ep.Role == Transmitter && len(ep.PeerMACs) != L {
		return nil, fmt.Errorf("raw: transmitter has %d links but %d peer MACs", L, len(ep.PeerMACs))
	}
	if len(ep.PeerMACs) != 0 && len(ep.PeerMACs) != L {
		return nil, fmt.Errorf("raw: %d links but %d peer MACs", L, len(ep.PeerMACs))
	}
	mtu, batch := ep.Devices[0].MTU(), 0
	for _, d := range ep.Devices {
		mtu = min(mtu, d.MTU())
		batch = max(batch, d.BatchSize())
	}
	batch = max(1, min(batch, 256))
	fragSize := min(mtu-rawOverhead, 0xffff)
	if fragSize < 16 {
		return nil, fmt.Errorf("raw: MTU %d too small", mtu)
	}
	c := &rawConn{
		devs:      ep.Devices,
		src:       make([][6]byte, L),
		dst:       make([][6]byte, L),
		haveDst:   make([]bool, L),
		filter:    ep.Filter,
		role:      ep.Role,
		fragSize:  fragSize,
		spin:      ep.Spin,
		yield:     ep.Yield,
		timeout:   ep.Timeout,
		integrity: ep.Integrity,
		acks:      make([]bool, L),
		hellos:    make([]bool, L),
	}
	if c.filter.EtherType == 0 {
		c.filter.EtherType = nic.DefaultEtherType
	}
	if c.spin == 0 {
		c.spin = defaultSpin
	}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	for i, d := range ep.Devices {
		m, ok := nic.MAC(d.HardwareAddr())
		if !ok {
			return nil, fmt.Errorf("raw: link %d: hardware address %v is not a MAC", i, d.HardwareAddr())
		}
		c.src[i] = m
	}
	for i, hw := range ep.PeerMACs {
		m, ok := nic.MAC(hw)
		if !ok {
			return nil, fmt.Errorf("raw: link %d: peer address %v is not a MAC", i, hw)
		}
		c.dst[i], c.haveDst[i] = m, true
	}
	// The window keeps a train within what the receiving socket or ring
	// absorbs: about 1 MiB per link, between 16 and 512 frames.
	w := ep.Window
	if w <= 0 {
		w = max(16, min(512, (1<<20)/(mtu+nic.EthHeaderLen))) * L
	}
	c.window = uint32(w)
	c.creditAt = max(1, c.window/4)
	c.stashCap = 2*w + batch*L

	capb := nic.FrameCap(mtu)
	c.txBufs = make([][]byte, batch*L)
	for i := range c.txBufs {
		c.txBufs[i] = make([]byte, capb)
	}
	c.perLink = make([][][]byte, L)
	for i := range c.perLink {
		c.perLink[i] = make([][]byte, 0, batch*L)
	}
	c.rxBufs = make([][]byte, batch)
	c.rxLens = make([]int, batch)
	for i := range c.rxBufs {
		c.rxBufs[i] = make([]byte, capb)
	}
	c.ctlBuf = make([]byte, rawCtlFrameLen)
	c.ctlBatch = make([][]byte, 1)
	c.stash = make([]stashed, 0, c.stashCap)
	var nb [4]byte
	_, _ = rand.Read(nb[:])
	c.nonce = binary.BigEndian.Uint32(nb[:])
	return c, nil
}

// Close implements Conn. The devices stay open: they belong to the caller.
func (c *rawConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return nil
}

func (c *rawConn) prefix(f []byte, link int, kind uint8) {
	nic.PutPrefix(f, &nic.Prefix{
		Dst: c.dst[link], Src: c.src[link], EtherType: c.filter.EtherType,
		Version: nic.Version, Kind: kind, JobKey: c.filter.JobKey,
	})
}

func (c *rawConn) sendCtl(link int, kind uint8, a uint32, b, n uint16) error {
	f := c.ctlBuf
	clear(f)
	c.prefix(f, link, kind)
	binary.BigEndian.PutUint32(f[rawOffFrameSeq:], a)
	binary.BigEndian.PutUint16(f[rawOffFrameSeq+4:], b)
	binary.BigEndian.PutUint16(f[rawOffFrameSeq+6:], n)
	c.ctlBatch[0] = f
	if _, err := c.devs[link].Send(c.ctlBatch); err != nil {
		return fmt.Errorf("raw: link %d: send control frame: %w", link, err)
	}
	return nil
}

// handshake makes sure every link carries frames both ways before any
// data moves, and lets a receiver learn the transmitter's MACs.
func (c *rawConn) handshake(ctx context.Context) error {
	L := len(c.devs)
	limit := time.Now().Add(6 * c.timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(limit) {
		limit = dl
	}
	var lastHello time.Time
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("raw: handshake: %w", err)
		}
		if c.closed.Load() {
			return fmt.Errorf("raw: handshake: %w", net.ErrClosed)
		}
		now := time.Now()
		if now.After(limit) {
			return fmt.Errorf("raw: handshake: no %s answered on all %d links within %v", c.peerName(), L, 6*c.timeout)
		}
		if c.role == Transmitter && now.Sub(lastHello) >= helloEvery {
			for i := range c.devs {
				if !c.acks[i] {
					if err := c.sendCtl(i, kindHello, c.nonce, uint16(i), uint16(L)); err != nil {
						return err
					}
				}
			}
			lastHello = now
		}
		if _, err := c.poll(); err != nil {
			return fmt.Errorf("raw: handshake: %w", err)
		}
		done := true
		for i := range c.devs {
			if c.role == Transmitter && !c.acks[i] || c.role == Receiver && !c.hellos[i] {
				done = false
			}
		}
		if done {
			return nil
		}
		if err := c.block(time.Now().Add(helloEvery / 2)); err != nil {
			return fmt.Errorf("raw: handshake: %w", err)
		}
	}
}

func (c *rawConn) peerName() string {
	if c.role == Transmitter {
		return "receiver"
	}
	return "transmitter"
}

// Send implements Conn.
func (c *rawConn) Send(ctx context.Context, msg []byte) error {
	return c.exchange(ctx, msg, nil, true, false)
}

// Recv implements Conn.
func (c *rawConn) Recv(ctx context.Context, msg []byte) error {
	return c.exchange(ctx, nil, msg, false, true)
}

// Exchange implements Conn: it sends out while it receives in, in one
// progress loop. A nil out or in skips that direction.
func (c *rawConn) Exchange(ctx context.Context, out, in []byte) error {
	return c.exchange(ctx, out, in, out != nil, in != nil)
}

func (c *rawConn) exchange(ctx context.Context, out, in []byte, doSend, doRecv bool) error {
	if c.closed.Load() {
		return fmt.Errorf("raw: %w", net.ErrClosed)
	}
	if len(out) > maxMessage || len(in) > maxMessage {
		return fmt.Errorf("raw: message of %d/%d bytes exceeds %d", len(out), len(in), maxMessage)
	}
	if doSend {
		c.out, c.outFrag, c.outFrags, c.sending = out, 0, fragments(len(out), c.fragSize), true
	}
	if doRecv {
		if err := c.beginRecv(in); err != nil {
			return err
		}
	}
	epoch0 := c.epoch
	start := time.Now()
	last := start // last progress
	for {
		progressed := false
		if c.sending {
			k, err := c.push()
			if err != nil {
				return err
			}
			progressed = k > 0
		}
		k, err := c.poll()
		if err != nil {
			return err
		}
		if k > 0 {
			progressed = true
		}
		if err := c.resetErr(epoch0); err != nil {
			return err
		}
		if !c.sending && !c.receiving {
			return nil
		}
		now := time.Now()
		if progressed {
			last = now
			continue
		}
		idle := now.Sub(last)
		if idle >= c.timeout {
			return c.stalled(idle)
		}
		if idle < c.spin {
			// Spin. With Yield, let a peer in this process (memnic) run: it
			// may be the goroutine we are waiting for, readied onto this P
			// by our own send.
			if c.yield {
				runtime.Gosched()
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("raw: %w", err)
		}
		if c.closed.Load() {
			return fmt.Errorf("raw: %w", net.ErrClosed)
		}
		if err := c.block(now.Add(min(blockSlice, c.timeout-idle))); err != nil {
			return err
		}
	}
}

// stalled builds the error for an operation that made no progress.
func (c *rawConn) stalled(idle time.Duration) error {
	var st nic.Stats
	for _, d := range c.devs {
		s := d.Stats()
		st.RxDropped += s.RxDropped
		st.RxForeign += s.RxForeign
	}
	if c.receiving {
		return fmt.Errorf("raw: receive message %d (%d bytes): %d of %d frames after %v without progress: %w, and raw frames have no retransmission (devices dropped %d, refused %d; %d malformed frames)",
			c.rxMsg, len(c.in), c.inGot, c.inFrags, idle.Round(time.Millisecond), ErrLost, st.RxDropped, st.RxForeign, c.badRx)
	}
	if c.sending {
		return fmt.Errorf("raw: send message %d (%d bytes): no credit from the %s for %v (%d frames in flight, window %d): credit %w or the peer stopped",
			c.txMsg, len(c.out), c.peerName(), idle.Round(time.Millisecond), c.txSeq-c.acked, c.window, ErrLost)
	}
	return fmt.Errorf("raw: no progress for %v: %w", idle.Round(time.Millisecond), ErrLost)
}

// block waits until a device may have frames, or until deadline.
//
// A device has one receiver at a time, so Wait must not run beside Recv
// on another goroutine; with several links block therefore waits on the
// one link where the next frame is due (frames are striped by frame
// sequence; credit comes on the first link) for at most multiLinkSlice,
// and the caller's next poll looks at every link.
func (c *rawConn) block(deadline time.Time) error {
	link := 0
	if len(c.devs) > 1 {
		if c.receiving {
			link = int(c.drained % uint32(len(c.devs)))
		}
		deadline = minTime(deadline, time.Now().Add(multiLinkSlice))
	}
	err := c.devs[link].Wait(deadline)
	if err == nil || errors.Is(err, nic.ErrTimeout) {
		return nil
	}
	return fmt.Errorf("raw: link %d: wait: %w", link, err)
}

// multiLinkSlice bounds a wait on one of several links, which is how late
// a frame on another link can be noticed once spinning has stopped.
const multiLinkSlice = time.Millisecond

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// push sends as many frames of the current message as credit allows, at
// most one batch per link. It returns the frames sent.
func (c *rawConn) push() (int, error) {
	inflight := c.txSeq - c.acked
	if inflight >= c.window {
		return 0, nil
	}
	L := len(c.devs)
	k := min(int(c.window-inflight), c.outFrags-c.outFrag, len(c.txBufs))
	for i := range c.perLink {
		c.perLink[i] = c.perLink[i][:0]
	}
	for j := range k {
		frag := c.outFrag + j
		link := int(c.txSeq+uint32(j)) % L
		f := c.txBufs[j]
		c.prefix(f, link, kindData)
		off := frag * c.fragSize
		end := min(off+c.fragSize, len(c.out))
		h := dataHdr{
			frameSeq: c.txSeq + uint32(j), msgSeq: c.txMsg, msgLen: uint32(len(c.out)),
			frag: uint32(frag), fragSize: uint16(c.fragSize), payLen: uint16(end - off),
		}
		putData(f, &h)
		n := copy(f[rawHdrLen:], c.out[off:end])
		c.perLink[link] = append(c.perLink[link], f[:rawHdrLen+n])
	}
	for i, batch := range c.perLink {
		if len(batch) == 0 {
			continue
		}
		if _, err := c.devs[i].Send(batch); err != nil {
			return 0, fmt.Errorf("raw: link %d: send %d frames: %w", i, len(batch), err)
		}
	}
	c.txSeq += uint32(k)
	c.outFrag += k
	if c.outFrag == c.outFrags {
		c.sending = false
		c.txMsg++
	}
	return k, nil
}

// beginRecv starts receiving message c.rxMsg into in, first from frames
// stashed while another message was in progress.
func (c *rawConn) beginRecv(in []byte) error {
	c.in, c.inFrags, c.inGot, c.receiving = in, fragments(len(in), c.fragSize), 0, true
	words := (c.inFrags + 63) / 64
	if cap(c.bitmap) < words {
		c.bitmap = make([]uint64, words)
	}
	c.bitmap = c.bitmap[:words]
	clear(c.bitmap)
	kept := c.stash[:0]
	var err error
	for _, s := range c.stash {
		// Compare with the current rxMsg: placing a frame may complete the
		// message and move on, and the next message's frames stay stashed.
		switch d := int32(s.msg - c.rxMsg); {
		case d == 0 && c.receiving && err == nil:
			err = c.place(s.buf[:s.n])
			c.spare = append(c.spare, s.buf)
		case d >= 0:
			kept = append(kept, s)
		default:
			c.stale++
			c.spare = append(c.spare, s.buf)
		}
	}
	clear(c.stash[len(kept):])
	c.stash = kept
	return err
}

// poll takes one batch off every device and handles it. It returns the
// number of frames that made progress.
func (c *rawConn) poll() (int, error) {
	progress := 0
	for link, d := range c.devs {
		n, err := d.Recv(c.rxBufs, c.rxLens)
		if err != nil {
			return progress, fmt.Errorf("raw: link %d: receive: %w", link, err)
		}
		for i := range n {
			p, err := c.frame(link, i)
			if err != nil {
				return progress, err
			}
			progress += p
		}
	}
	if !c.resyncing && c.consumed()-c.credited >= c.creditAt {
		if err := c.credit(); err != nil {
			return progress, err
		}
	}
	return progress, nil
}

// consumed counts the data frames drained and not waiting in the stash.
// Credit covers only these: crediting stashed frames would let a sender run
// ahead without bound while this end is between receives.
func (c *rawConn) consumed() uint32 { return c.drained - uint32(len(c.stash)) }

// credit tells the sender how many data frames this end has consumed.
func (c *rawConn) credit() error {
	link := 0
	for !c.haveDst[link] {
		link++
		if link == len(c.devs) {
			return nil // no peer known yet
		}
	}
	n := c.consumed()
	if err := c.sendCtl(link, kindCredit, n, 0, 0); err != nil {
		return err
	}
	c.credited = n
	return nil
}

// frame handles received frame i from link. It returns 1 if the frame made
// progress.
func (c *rawConn) frame(link, i int) (int, error) {
	f := c.rxBufs[i][:c.rxLens[i]]
	if c.filter.Check(f) != nil {
		c.badRx++ // the device's filter should have caught it
		return 0, nil
	}
	switch f[nic.OffKind] {
	case kindData:
		if c.resyncing {
			c.stale++ // sent before the reset; Resync sets the counters
			return 0, nil
		}
		c.drained++
		h, err := parseData(f)
		if err != nil {
			return 0, c.malformed(link, err)
		}
		switch d := int32(h.msgSeq - c.rxMsg); {
		case d == 0 && c.receiving:
			if err := c.placeHdr(f, &h); err != nil {
				return 0, err
			}
			return 1, nil
		case d > int32(c.window)+1:
			// More messages ahead than the window allows: a damaged header.
			return 0, c.malformed(link, fmt.Errorf("%w: message %d while expecting %d", errMalformed, h.msgSeq, c.rxMsg))
		case d >= 0:
			// A later message (or this one before Recv): keep it.
			if len(c.stash) == c.stashCap {
				return 0, fmt.Errorf("raw: %d frames of later messages waiting: the peer runs ahead of the protocol", len(c.stash))
			}
			var spare []byte
			if n := len(c.spare); n > 0 {
				spare, c.spare = c.spare[n-1], c.spare[:n-1]
			} else {
				spare = make([]byte, len(c.rxBufs[i]))
			}
			c.stash = append(c.stash, stashed{buf: c.rxBufs[i], n: c.rxLens[i], msg: h.msgSeq})
			c.rxBufs[i] = spare[:cap(spare)]
			return 1, nil
		default:
			c.stale++
			if int32(h.msgSeq-c.staleFloor) < 0 {
				c.drained-- // sent before the last reset, which counted it
			}
			return 0, nil
		}
	case kindReset, kindResetAck, kindResetReq:
		if len(f) < rawOffFrameSeq+12 {
			return 0, c.malformed(link, fmt.Errorf("%w: %d-byte reset", errMalformed, len(f)))
		}
		return c.resetFrame(f)
	case kindCredit:
		if len(f) < rawOffFrameSeq+4 {
			return 0, c.malformed(link, fmt.Errorf("%w: %d-byte credit", errMalformed, len(f)))
		}
		v := binary.BigEndian.Uint32(f[rawOffFrameSeq:])
		if int32(v-c.acked) > 0 {
			c.acked = v
			if int32(c.acked-c.txSeq) > 0 {
				c.acked = c.txSeq // duplicated frames may over-count
			}
			return 1, nil
		}
		return 0, nil
	case kindHello, kindHelloAck:
		if len(f) < rawOffFrameSeq+8 {
			return 0, c.malformed(link, fmt.Errorf("%w: %d-byte hello", errMalformed, len(f)))
		}
		nonce := binary.BigEndian.Uint32(f[rawOffFrameSeq:])
		idx := int(binary.BigEndian.Uint16(f[rawOffFrameSeq+4:]))
		if f[nic.OffKind] == kindHelloAck {
			if c.role == Transmitter && nonce == c.nonce && idx == link {
				c.acks[link] = true
			}
			return 0, nil
		}
		if c.role != Receiver {
			return 0, nil
		}
		if idx != link {
			return 0, fmt.Errorf("raw: hello for link %d arrived on link %d: the links are cabled differently on the two ends", idx, link)
		}
		if n := int(binary.BigEndian.Uint16(f[rawOffFrameSeq+6:])); n != len(c.devs) {
			return 0, fmt.Errorf("raw: transmitter has %d links, this end %d", n, len(c.devs))
		}
		var from [6]byte
		copy(from[:], f[6:12])
		c.dst[link], c.haveDst[link], c.hellos[link] = from, true, true
		if err := c.sendCtl(link, kindHelloAck, nonce, uint16(link), uint16(len(c.devs))); err != nil {
			return 0, err
		}
		return 0, nil
	default:
		return 0, c.malformed(link, fmt.Errorf("%w: kind %#x", errMalformed, f[nic.OffKind]))
	}
}

// resetErr reports, once, that the peer has started a resynchronization:
// the operation in progress is abandoned and the caller must Resync.
func (c *rawConn) resetErr(epoch0 uint32) error {
	switch {
	case c.role == Transmitter && c.peerLost:
		return fmt.Errorf("raw: the receiver asked for a reset: %w", ErrLost)
	case c.role == Receiver && c.epoch != epoch0:
		return fmt.Errorf("raw: the transmitter reset the connection: %w", ErrLost)
	}
	return nil
}

// resetFrame handles the three frames of Resync.
func (c *rawConn) resetFrame(f []byte) (int, error) {
	epoch := binary.BigEndian.Uint32(f[rawOffFrameSeq:])
	seq := binary.BigEndian.Uint32(f[rawOffFrameSeq+4:])
	msg := binary.BigEndian.Uint32(f[rawOffFrameSeq+8:])
	switch kind := f[nic.OffKind]; {
	case kind == kindResetReq && c.role == Transmitter:
		// Requests for an epoch already left behind are stale.
		if epoch == c.epoch && !c.resyncing {
			c.peerLost = true
			return 1, nil
		}
	case kind == kindResetAck && c.role == Transmitter:
		if c.resyncing && epoch == c.epoch && !c.ackGot {
			c.ackGot, c.peerSeq, c.peerMsg = true, seq, msg
			return 1, nil
		}
	case kind == kindReset && c.role == Receiver:
		if d := int32(epoch - c.epoch); d > 0 {
			c.epoch = epoch
			c.restart(seq, msg)
			c.ackSeq, c.ackMsg = c.txSeq, c.txMsg
			c.wasReset = true
		} else if d < 0 {
			return 0, nil
		}
		// Acknowledge every copy: the first acknowledgement may be lost.
		return 1, c.sendReset(kindResetAck, c.epoch, c.ackSeq, c.ackMsg)
	}
	return 0, nil
}

// restart forgets every message in flight both ways: the peer has sent
// peerSeq frames and peerMsg messages, and this end's next message takes a
// fresh number, so no frame of an abandoned one can land in it.
func (c *rawConn) restart(peerSeq, peerMsg uint32) {
	c.sending, c.receiving = false, false
	c.txMsg++
	c.acked = c.txSeq
	c.rxMsg, c.staleFloor = peerMsg, peerMsg
	for _, s := range c.stash {
		c.spare = append(c.spare, s.buf)
	}
	clear(c.stash)
	c.stash = c.stash[:0]
	c.drained, c.credited = peerSeq, peerSeq
}

func (c *rawConn) sendReset(kind uint8, epoch, seq, msg uint32) error {
	f := c.ctlBuf
	clear(f)
	c.prefix(f, 0, kind)
	binary.BigEndian.PutUint32(f[rawOffFrameSeq:], epoch)
	binary.BigEndian.PutUint32(f[rawOffFrameSeq+4:], seq)
	binary.BigEndian.PutUint32(f[rawOffFrameSeq+8:], msg)
	c.ctlBatch[0] = f
	if _, err := c.devs[0].Send(c.ctlBatch); err != nil {
		return fmt.Errorf("raw: link 0: send reset frame: %w", err)
	}
	return nil
}

// Resync implements Resyncer. After an operation failed with ErrLost on
// either end, both ends call it: the transmitter starts a new epoch and
// repeats a reset frame until the receiver acknowledges it; the receiver
// asks for one (if the transmitter has not noticed the loss yet) and waits
// for it. Both then drop whatever was in flight and go on with fresh
// message numbers.
func (c *rawConn) Resync(ctx context.Context) error {
	if c.closed.Load() {
		return fmt.Errorf("raw: resync: %w", net.ErrClosed)
	}
	c.resyncing = true
	defer func() { c.resyncing = false }()
	if c.role == Transmitter {
		c.epoch++
		c.peerLost, c.ackGot = false, false
		c.restart(c.drained, c.rxMsg) // provisional; the ack sets them
	}
	limit := time.Now().Add(6 * c.timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(limit) {
		limit = dl
	}
	var last time.Time
	for {
		if c.role == Transmitter && c.ackGot {
			c.restart(c.peerSeq, c.peerMsg)
			c.txMsg-- // restart above already took a fresh number
			return nil
		}
		if c.role == Receiver && c.wasReset {
			c.wasReset = false
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("raw: resync: %w", err)
		}
		if c.closed.Load() {
			return fmt.Errorf("raw: resync: %w", net.ErrClosed)
		}
		now := time.Now()
		if now.After(limit) {
			return fmt.Errorf("raw: resync: no answer from the %s within %v", c.peerName(), 6*c.timeout)
		}
		if now.Sub(last) >= helloEvery {
			kind := kindReset
			if c.role == Receiver {
				kind = kindResetReq
			}
			if err := c.sendReset(uint8(kind), c.epoch, c.txSeq, c.txMsg); err != nil {
				return err
			}
			last = now
		}
		if _, err := c.poll(); err != nil {
			return fmt.Errorf("raw: resync: %w", err)
		}
		if c.role == Transmitter && c.ackGot || c.role == Receiver && c.wasReset {
			continue
		}
		if err := c.block(now.Add(helloEvery / 2)); err != nil {
			return fmt.Errorf("raw: resync: %w", err)
		}
	}
}

// malformed drops a bad frame, or fails the run when integrity is checked.
func (c *rawConn) malformed(link int, err error) error {
	c.badRx++
	if c.integrity {
		return fmt.Errorf("raw: link %d: integrity check failed: %w (raw frames carry no checksum)", link, err)
	}
	return nil
}

func (c *rawConn) place(f []byte) error {
	h, err := parseData(f)
	if err != nil {
		return c.malformed(0, err)
	}
	return c.placeHdr(f, &h)
}

// placeHdr copies a data frame of the current message into place.
func (c *rawConn) placeHdr(f []byte, h *dataHdr) error {
	if int(h.msgLen) != len(c.in) {
		err := fmt.Errorf("raw: message %d is %d bytes, this end expects %d", h.msgSeq, h.msgLen, len(c.in))
		if c.integrity {
			return fmt.Errorf("integrity check failed: %w", err)
		}
		return err
	}
	if int(h.frag) >= c.inFrags {
		return c.malformed(0, fmt.Errorf("%w: fragment %d of %d", errMalformed, h.frag, c.inFrags))
	}
	w, bit := h.frag/64, uint64(1)<<(h.frag%64)
	if c.bitmap[w]&bit != 0 {
		c.dups++
		return nil
	}
	c.bitmap[w] |= bit
	copy(c.in[int(h.frag)*int(h.fragSize):], f[rawHdrLen:rawHdrLen+int(h.payLen)])
	c.inGot++
	if c.inGot == c.inFrags {
		c.receiving = false
		c.rxMsg++
	}
	return nil
}
