package auth

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/ethervia/ethervia/nic"
)

// DefaultMaxSenders bounds the replay windows a device keeps when Config
// leaves MaxSenders zero: one per address of every rank of a large job.
const DefaultMaxSenders = 1 << 16

// Config tunes a wrapped device.
type Config struct {
	// MaxSenders bounds the senders (MAC and endpoint) whose replay
	// windows are kept; frames of further senders are refused and counted
	// as RxReplayed. Only senders with a valid tag get a window. Zero
	// means DefaultMaxSenders.
	MaxSenders int
}

// Device is a nic.Device behind frame authentication. Its MTU is the
// inner device's less TrailerLen. Like every device it serves one sender
// and one receiver at a time.
type Device struct {
	inner      nic.Device
	key        *Key
	maxSenders int
	mtu        int

	// Sending side.
	counter uint64
	txBufs  [][]byte
	txOut   [][]byte
	txNonce [16]byte

	// Receiving side.
	windows map[nic.Addr]*window
	lastSrc nic.Addr // the sender of the last frame taken, and its window:
	lastWin *window  // a ping-pong hears one sender, and skips the map
	rxNonce [16]byte
	rxTag   [0]byte // Open's output: the plaintext is empty

	badTag, replayed atomic.Uint64
}

// ErrMTU reports an inner device too small to carry the trailer.
var ErrMTU = errors.New("auth: device MTU too small for the authentication trailer")

// Wrap returns dev behind authentication with key. The result implements
// nic.Interrupter, nic.ThreadWaiter and nic.WakeFDWaiter where dev does,
// and nic.Multicaster. Closing it closes dev.
func Wrap(dev nic.Device, key *Key, cfg Config) (nic.Device, error) {
	mtu := dev.MTU() - TrailerLen
	if mtu < nic.PrefixLen {
		return nil, fmt.Errorf("%w: %d", ErrMTU, dev.MTU())
	}
	batch := max(1, dev.BatchSize())
	d := &Device{inner: dev, key: key, maxSenders: cfg.MaxSenders, mtu: mtu,
		counter: uint64(time.Now().UnixNano()),
		txBufs:  make([][]byte, batch), txOut: make([][]byte, batch),
		windows: make(map[nic.Addr]*window)}
	if d.maxSenders <= 0 {
		d.maxSenders = DefaultMaxSenders
	}
	for i := range d.txBufs {
		d.txBufs[i] = make([]byte, nic.FrameCap(dev.MTU()))
	}
	return withWaiters(d), nil
}

// Unwrap returns the device under the authentication.
func (d *Device) Unwrap() nic.Device { return d.inner }

// Send seals copies of frames (the caller's buffers are not written) and
// sends them.
func (d *Device) Send(frames [][]byte) (int, error) {
	sent := 0
	for sent < len(frames) {
		chunk := frames[sent:min(len(frames), sent+len(d.txBufs))]
		for i, f := range chunk {
			if len(f) < nic.PrefixLen || len(f)+TrailerLen > len(d.txBufs[i]) {
				if i == 0 {
					return sent, fmt.Errorf("auth: send %d bytes (MTU %d): %w", len(f), d.mtu, nic.ErrFrameSize)
				}
				chunk = chunk[:i] // send what precedes it; the next round reports it
				break
			}
			d.txOut[i] = d.seal(d.txBufs[i], f)
		}
		n, err := d.inner.Send(d.txOut[:len(chunk)])
		sent += n
		if err != nil {
			return sent, err
		}
		if n < len(chunk) {
			return sent, nil
		}
	}
	return sent, nil
}

// seal writes f, the next counter and the tag into buf and returns the
// frame to send.
func (d *Device) seal(buf, f []byte) []byte {
	n := copy(buf, f)
	d.counter++
	binary.BigEndian.PutUint64(buf[n:], d.counter)
	n += CounterLen
	d.key.gcm.Seal(buf[n:n], putNonce(&d.txNonce, f, d.counter), nil, buf[:n])
	return buf[:n+TagLen]
}

// putNonce writes the nonce of frame's counter c: the frame's source MAC
// and endpoint, then c.
func putNonce(nonce *[16]byte, frame []byte, c uint64) []byte {
	copy(nonce[0:6], frame[6:12])
	copy(nonce[6:8], frame[nic.OffSrcEP:nic.OffSrcEP+2])
	binary.BigEndian.PutUint64(nonce[8:], c)
	return nonce[:]
}

// Recv receives frames and hands on those with a valid tag and a fresh
// counter, trailer removed. Dropped frames' buffers move to the end of
// bufs: the caller's buffers are kept, their order is not.
func (d *Device) Recv(bufs [][]byte, lens []int) (int, error) {
	n, err := d.inner.Recv(bufs, lens)
	kept := 0
	for i := range n {
		if !d.accept(bufs[i][:lens[i]]) {
			continue
		}
		if i != kept {
			bufs[kept], bufs[i] = bufs[i], bufs[kept]
		}
		lens[kept] = lens[i] - TrailerLen
		kept++
	}
	return kept, err
}

// accept verifies frame and records its counter; false drops it.
func (d *Device) accept(frame []byte) bool {
	if len(frame) < nic.PrefixLen+TrailerLen {
		d.badTag.Add(1)
		return false
	}
	n := len(frame) - TagLen
	c := binary.BigEndian.Uint64(frame[n-CounterLen:])
	var src nic.Addr
	copy(src.MAC[:], frame[6:12])
	src.EP = binary.BigEndian.Uint16(frame[nic.OffSrcEP:])
	w := d.lastWin
	if w == nil || src != d.lastSrc {
		w = d.windows[src]
	}
	if w != nil && w.seen(c) {
		d.replayed.Add(1) // before the tag: a replay costs no GMAC
		return false
	}
	if _, err := d.key.gcm.Open(d.rxTag[:0], putNonce(&d.rxNonce, frame, c), frame[n:], frame[:n]); err != nil {
		d.badTag.Add(1)
		return false
	}
	if w == nil {
		if len(d.windows) >= d.maxSenders {
			d.replayed.Add(1)
			return false
		}
		w = &window{top: c}
		d.windows[src] = w
	}
	w.mark(c)
	d.lastSrc, d.lastWin = src, w
	return true
}

// Wait waits on the inner device.
func (d *Device) Wait(deadline time.Time) error { return d.inner.Wait(deadline) }

// MTU is the inner device's less the trailer.
func (d *Device) MTU() int { return d.mtu }

// HardwareAddr is the inner device's.
func (d *Device) HardwareAddr() net.HardwareAddr { return d.inner.HardwareAddr() }

// BatchSize is the inner device's.
func (d *Device) BatchSize() int { return d.inner.BatchSize() }

// Stats adds the frames refused for their tag or counter to the inner
// device's counters.
func (d *Device) Stats() nic.Stats {
	s := d.inner.Stats()
	s.RxBadTag += d.badTag.Load()
	s.RxReplayed += d.replayed.Load()
	return s
}

// Close closes the inner device.
func (d *Device) Close() error { return d.inner.Close() }

// errNoMulticast: the inner device has no multicast filter.
var errNoMulticast = errors.New("auth: the device cannot join multicast groups")

// JoinMulticast forwards to the inner device.
func (d *Device) JoinMulticast(mac net.HardwareAddr) error {
	if m, ok := d.inner.(nic.Multicaster); ok {
		return m.JoinMulticast(mac)
	}
	return errNoMulticast
}

// LeaveMulticast forwards to the inner device.
func (d *Device) LeaveMulticast(mac net.HardwareAddr) error {
	if m, ok := d.inner.(nic.Multicaster); ok {
		return m.LeaveMulticast(mac)
	}
	return errNoMulticast
}

// MaxMulticast is the inner device's limit, zero without a filter.
func (d *Device) MaxMulticast() int {
	if m, ok := d.inner.(nic.Multicaster); ok {
		return m.MaxMulticast()
	}
	return 0
}

// Unwrap returns the device under dev's authentication, or dev itself.
func Unwrap(dev nic.Device) nic.Device {
	if u, ok := dev.(interface{ Unwrap() nic.Device }); ok {
		return u.Unwrap()
	}
	return dev
}

// Overhead is the bytes dev adds to every frame on the wire: TrailerLen
// behind authentication, else zero.
func Overhead(dev nic.Device) int {
	if _, ok := dev.(interface{ Unwrap() nic.Device }); ok {
		return TrailerLen
	}
	return 0
}
