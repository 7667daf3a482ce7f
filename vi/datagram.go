package vi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"time"

	"github.com/ethervia/ethervia/internal/ctxdl"
	"github.com/ethervia/ethervia/internal/wake"
	"github.com/ethervia/ethervia/nic"
)

// Datagrams are frames of the kinds reserved for layers above the provider
// (MinDatagramKind and up, docs/wire.md). They use the 26-byte prefix, a
// length and a CRC32C, and no connection: no sequence numbers, no
// acknowledgement, no retransmission. The layer above makes them reliable
// if it needs to (mplite's multicast Bcast does). Layout after the prefix:
//
//	26 2 length   payload bytes
//	28 4 crc      CRC32C of bytes [0, 28) and [32, 32+length)
//	32 - payload
const (
	// MinDatagramKind is the first kind value of the datagram range.
	MinDatagramKind = 0x80
	// DatagramHeaderLen is the prefix plus length and CRC.
	DatagramHeaderLen = nic.PrefixLen + 6

	dgOffLength = nic.PrefixLen
	dgOffCRC    = nic.PrefixLen + 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Datagram errors.
var (
	ErrDatagramKind  = errors.New("vi: datagram kind outside the datagram range")
	ErrDatagramFrame = errors.New("vi: malformed datagram frame")
	ErrDatagramSize  = errors.New("vi: datagram payload too long")
	ErrDatagramInUse = errors.New("vi: datagram kind already open")
)

// Datagram is a decoded datagram frame.
type Datagram struct {
	Dst, Src     [6]byte
	DstEP, SrcEP uint16
	EtherType    uint16
	Kind         uint8
	JobKey       uint32
	// Payload aliases the frame it was parsed from.
	Payload []byte
}

// PutDatagram writes d into b and returns the frame length. b must hold
// DatagramHeaderLen + len(d.Payload) bytes; a payload longer than 65535
// bytes or a kind below MinDatagramKind is refused.
func PutDatagram(b []byte, d *Datagram) (int, error) {
	n := DatagramHeaderLen + len(d.Payload)
	switch {
	case d.Kind < MinDatagramKind:
		return 0, fmt.Errorf("%w: %#x", ErrDatagramKind, d.Kind)
	case len(d.Payload) > 0xffff || len(b) < n:
		return 0, fmt.Errorf("%w: %d bytes", ErrDatagramSize, len(d.Payload))
	}
	copy(b[DatagramHeaderLen:n], d.Payload)
	putDatagramHeader(b[:n], d)
	return n, nil
}

// putDatagramHeader writes the header of frame, whose payload is in place
// (d.Payload is ignored), and its CRC.
func putDatagramHeader(frame []byte, d *Datagram) {
	nic.PutPrefix(frame, &nic.Prefix{Dst: d.Dst, Src: d.Src, EtherType: d.EtherType, Version: nic.Version,
		Kind: d.Kind, JobKey: d.JobKey, DstEP: d.DstEP, SrcEP: d.SrcEP})
	binary.BigEndian.PutUint16(frame[dgOffLength:], uint16(len(frame)-DatagramHeaderLen))
	binary.BigEndian.PutUint32(frame[dgOffCRC:], datagramCRC(frame))
}

func datagramCRC(frame []byte) uint32 {
	c := crc32.Update(0, castagnoli, frame[:dgOffCRC])
	return crc32.Update(c, castagnoli, frame[DatagramHeaderLen:])
}

// ParseDatagram decodes frame into d, checking the version, kind range,
// flags (none are defined: they must be zero), length and CRC. Bytes after
// the payload (Ethernet padding) are ignored. It does not allocate; d's
// payload aliases frame.
func ParseDatagram(frame []byte, d *Datagram) error {
	if len(frame) < DatagramHeaderLen {
		return ErrDatagramFrame
	}
	if frame[nic.OffVersion] != nic.Version || frame[nic.OffKind] < MinDatagramKind ||
		binary.BigEndian.Uint16(frame[nic.OffFlags:]) != 0 {
		return ErrDatagramFrame
	}
	n := DatagramHeaderLen + int(binary.BigEndian.Uint16(frame[dgOffLength:]))
	if n > len(frame) {
		return ErrDatagramFrame
	}
	frame = frame[:n]
	if binary.BigEndian.Uint32(frame[dgOffCRC:]) != datagramCRC(frame) {
		return ErrDatagramFrame
	}
	copy(d.Dst[:], frame[0:6])
	copy(d.Src[:], frame[6:12])
	d.EtherType = binary.BigEndian.Uint16(frame[nic.OffEtherType:])
	d.Kind = frame[nic.OffKind]
	d.JobKey = binary.BigEndian.Uint32(frame[nic.OffJobKey:])
	d.DstEP = binary.BigEndian.Uint16(frame[nic.OffDstEP:])
	d.SrcEP = binary.BigEndian.Uint16(frame[nic.OffSrcEP:])
	d.Payload = frame[DatagramHeaderLen:n]
	return nil
}

// DatagramStats count a port's datagrams.
type DatagramStats struct {
	Sent, Received uint64
	// Dropped counts datagrams that arrived while the ring was full.
	Dropped uint64
	// Bad counts frames of the port's kind that failed ParseDatagram or
	// came for another job or address.
	Bad uint64
}

// DatagramPort sends and receives the datagrams of one kind on a provider.
// Received datagrams wait in a bounded ring; when it is full, newer ones
// are dropped and counted. Sending and receiving allocate nothing.
//
// SendTo is safe for concurrent use. Recv, Next, Release, Wait and
// WaitUntil belong to one consumer at a time.
type DatagramPort struct {
	p      *Provider
	kind   uint8
	maxPay int

	mu     sync.Mutex // guards the ring indices, stats and closed
	slots  [][]byte   // payload copies, maxPay bytes each
	lens   []int
	srcs   []nic.Addr
	head   int
	n      int
	closed bool
	stats  DatagramStats
	wake   chan struct{}
	readyF func() bool
	cq     *CQ // WatchCQ's queue, under the provider lock
	dl     ctxdl.Context

	txMu sync.Mutex
	txb  []byte
	txv  [][]byte

	// The batch sender's frames (BatchBuffer, SendBatch), made on first use.
	bmu   sync.Mutex
	batch [][]byte
	bout  [][]byte
}

// DatagramBatch is the number of datagrams SendBatch sends at most.
const DatagramBatch = 64

// BatchBuffer returns the payload area (MaxPayload bytes) of datagram i
// (0 <= i < DatagramBatch) of the next SendBatch, so the caller can build
// payloads in place: a multicast root copies each chunk once, straight from
// the user's buffer into the frame. BatchBuffer and SendBatch belong to one
// batch sender at a time; SendTo is independent of them.
func (d *DatagramPort) BatchBuffer(i int) []byte {
	d.bmu.Lock()
	defer d.bmu.Unlock()
	if d.batch == nil {
		d.batch = make([][]byte, DatagramBatch)
		d.bout = make([][]byte, 0, DatagramBatch)
		buf := make([]byte, DatagramBatch*(DatagramHeaderLen+d.maxPay))
		for j := range d.batch {
			d.batch[j] = buf[j*(DatagramHeaderLen+d.maxPay) : (j+1)*(DatagramHeaderLen+d.maxPay)]
		}
	}
	return d.batch[i][DatagramHeaderLen:]
}

// SendBatch sends datagrams 0..len(lens)-1 of the batch, datagram i
// carrying the first lens[i] bytes of BatchBuffer(i), to dst, with one
// device send (one system call on the kernel drivers). A group address
// wants nic.EndpointAll as its endpoint.
func (d *DatagramPort) SendBatch(dst nic.Addr, lens []int) error {
	if len(lens) > DatagramBatch {
		return fmt.Errorf("vi: datagram batch of %d (max %d)", len(lens), DatagramBatch)
	}
	if len(lens) > 0 {
		d.BatchBuffer(0) // make the batch
	}
	p := d.p
	g := Datagram{Dst: dst.MAC, Src: p.mac, DstEP: dst.EP, SrcEP: p.ep, EtherType: p.opts.EtherType, Kind: d.kind, JobKey: p.opts.JobKey}
	d.bmu.Lock()
	defer d.bmu.Unlock()
	d.bout = d.bout[:0]
	for i, n := range lens {
		if n < 0 || n > d.maxPay {
			return fmt.Errorf("vi: datagram of %d bytes (max %d): %w", n, d.maxPay, ErrDatagramSize)
		}
		f := d.batch[i][:DatagramHeaderLen+n]
		putDatagramHeader(f, &g)
		d.bout = append(d.bout, f)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return fmt.Errorf("vi: datagram send: %w", ErrClosed)
	case p.devErr != nil:
		return fmt.Errorf("vi: datagram send: %w", p.devErr)
	}
	sent, err := p.dev.Send(d.bout)
	p.stats.FramesOut += uint64(sent)
	d.mu.Lock()
	d.stats.Sent += uint64(sent)
	d.mu.Unlock()
	if err != nil {
		p.stats.SendErrors += uint64(len(d.bout) - sent)
		return fmt.Errorf("vi: datagram send: %w", err)
	}
	return nil
}

// OpenDatagram opens the port of kind (MinDatagramKind..255) with a ring of
// depth datagrams (zero means 256). One port per kind per provider.
func (p *Provider) OpenDatagram(kind uint8, depth int) (*DatagramPort, error) {
	if kind < MinDatagramKind {
		return nil, fmt.Errorf("vi: open datagram %#x: %w", kind, ErrDatagramKind)
	}
	if depth <= 0 {
		depth = 256
	}
	maxPay := min(p.mtu+nic.EthHeaderLen-DatagramHeaderLen, 0xffff)
	d := &DatagramPort{p: p, kind: kind, maxPay: maxPay, slots: make([][]byte, depth), lens: make([]int, depth),
		srcs: make([]nic.Addr, depth), wake: make(chan struct{}, 1), txb: make([]byte, DatagramHeaderLen+maxPay),
		txv: make([][]byte, 1)}
	buf := make([]byte, depth*maxPay)
	for i := range d.slots {
		d.slots[i] = buf[i*maxPay : (i+1)*maxPay : (i+1)*maxPay]
	}
	d.readyF = d.ready
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("vi: open datagram %#x: %w", kind, ErrClosed)
	}
	if p.dgram[kind-MinDatagramKind] != nil {
		return nil, fmt.Errorf("vi: open datagram %#x: %w", kind, ErrDatagramInUse)
	}
	p.dgram[kind-MinDatagramKind] = d
	return d, nil
}

// datagramInput hands a frame of a datagram kind to its port. p.mu is held.
func (p *Provider) datagramInput(frame []byte) {
	d := p.dgram[frame[nic.OffKind]-MinDatagramKind]
	if d == nil {
		p.stats.BadFrames++
		return
	}
	var g Datagram
	if ParseDatagram(frame, &g) != nil || g.JobKey != p.opts.JobKey || g.EtherType != p.opts.EtherType ||
		(g.Dst[0]&1 == 0 && (g.Dst != p.mac || g.DstEP != p.ep && g.DstEP != nic.EndpointAll)) {
		d.mu.Lock()
		d.stats.Bad++
		d.mu.Unlock()
		return
	}
	d.mu.Lock()
	if d.closed || d.n == len(d.slots) {
		d.stats.Dropped++
		d.mu.Unlock()
		return
	}
	i := (d.head + d.n) % len(d.slots)
	d.lens[i] = copy(d.slots[i], g.Payload)
	d.srcs[i] = nic.Addr{MAC: g.Src, EP: g.SrcEP}
	d.n++
	d.stats.Received++
	d.mu.Unlock()
	wake.Signal(d.wake)
}

// Kind is the port's frame kind.
func (d *DatagramPort) Kind() uint8 { return d.kind }

// MaxPayload is the largest payload one datagram carries: the MTU less
// the 14 bytes the datagram header adds beyond the Ethernet header.
func (d *DatagramPort) MaxPayload() int { return d.maxPay }

// Stats returns the port's counters.
func (d *DatagramPort) Stats() DatagramStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// SendTo sends payload to dst (a unicast, multicast or broadcast MAC, the
// last two with nic.EndpointAll) at once, unreliably.
func (d *DatagramPort) SendTo(dst nic.Addr, payload []byte) error {
	if len(payload) > d.maxPay {
		return fmt.Errorf("vi: datagram of %d bytes (max %d): %w", len(payload), d.maxPay, ErrDatagramSize)
	}
	p := d.p
	d.txMu.Lock()
	defer d.txMu.Unlock()
	g := Datagram{Dst: dst.MAC, Src: p.mac, DstEP: dst.EP, SrcEP: p.ep, EtherType: p.opts.EtherType, Kind: d.kind,
		JobKey: p.opts.JobKey, Payload: payload}
	n, err := PutDatagram(d.txb, &g) // copies the payload: the caller may reuse it at once
	if err != nil {
		return err
	}
	d.txv[0] = d.txb[:n]
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return fmt.Errorf("vi: datagram send: %w", ErrClosed)
	case p.devErr != nil:
		return fmt.Errorf("vi: datagram send: %w", p.devErr)
	}
	sent, err := p.dev.Send(d.txv)
	p.stats.FramesOut += uint64(sent)
	if err != nil {
		p.stats.SendErrors++
		return fmt.Errorf("vi: datagram send: %w", err)
	}
	d.mu.Lock()
	d.stats.Sent++
	d.mu.Unlock()
	return nil
}

// Next returns the oldest waiting datagram without copying it: payload is
// valid until Release. With nothing waiting it makes progress once (receives
// what the device holds) and looks again; ok is false if still nothing.
func (d *DatagramPort) Next() (payload []byte, src nic.Addr, ok bool) {
	if !d.waiting() {
		p := d.p
		p.mu.Lock()
		if !p.closed {
			p.pollLocked()
		}
		p.mu.Unlock()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == 0 {
		return nil, src, false
	}
	return d.slots[d.head][:d.lens[d.head]], d.srcs[d.head], true
}

// Release drops the datagram Next returned.
func (d *DatagramPort) Release() {
	d.mu.Lock()
	if d.n > 0 {
		d.head = (d.head + 1) % len(d.slots)
		d.n--
	}
	d.mu.Unlock()
}

// Recv copies the oldest waiting datagram into buf (truncating it to
// len(buf)) and returns its length as copied and its source. It never
// blocks; ok is false when nothing waits.
func (d *DatagramPort) Recv(buf []byte) (n int, src nic.Addr, ok bool) {
	pl, src, ok := d.Next()
	if !ok {
		return 0, src, false
	}
	n = copy(buf, pl)
	d.Release()
	return n, src, true
}

func (d *DatagramPort) waiting() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n > 0
}

// ready is the wait condition; the provider lock is held.
func (d *DatagramPort) ready() bool {
	if d.cq != nil && d.cq.n > 0 {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n > 0 || d.closed
}

// WatchCQ makes Wait and WaitUntil also return when cq holds a completion,
// so a consumer that waits for datagrams and for its VIs' completions
// (mplite's multicast protocols) sleeps in one place. Nil stops watching.
func (d *DatagramPort) WatchCQ(cq *CQ) {
	d.p.mu.Lock()
	if d.cq != nil && d.cq.watcher == d.wake {
		d.cq.watcher = nil
	}
	d.cq = cq
	if cq != nil {
		cq.watcher = d.wake
	}
	d.p.mu.Unlock()
}

// Wait blocks until a datagram waits, making progress meanwhile, or ctx
// ends, or the port or provider closes.
func (d *DatagramPort) Wait(ctx context.Context) error {
	if err := d.p.wait(ctx, d.wake, d.readyF); err != nil {
		return fmt.Errorf("vi: datagram wait: %w", err)
	}
	if d.isClosed() {
		return fmt.Errorf("vi: datagram wait: %w", ErrClosed)
	}
	return nil
}

// WaitUntil is Wait with a deadline instead of a context; it allocates
// nothing when it times out, so a polling loop can call it often. It returns
// false when the deadline passed (or the port closed) with no datagram
// waiting (a watched CQ's completion also ends the wait, reported as false).
func (d *DatagramPort) WaitUntil(deadline time.Time) bool {
	d.dl.Reset(deadline)
	_ = d.p.wait(&d.dl, d.wake, d.readyF)
	return d.waiting()
}

func (d *DatagramPort) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// Close removes the port; datagrams of its kind are dropped again and its
// waiters return. It is idempotent.
func (d *DatagramPort) Close() error {
	p := d.p
	p.mu.Lock()
	if p.dgram[d.kind-MinDatagramKind] == d {
		p.dgram[d.kind-MinDatagramKind] = nil
	}
	p.mu.Unlock()
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	wake.Signal(d.wake)
	return nil
}
