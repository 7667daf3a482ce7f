// Package afpacket is the AF_PACKET frame driver, built on
// github.com/mdlayher/packet.
//
// The socket is bound to Ethervia's EtherType on one interface with a kernel
// filter (from package bpf) that admits only this job's frames, so the
// kernel drops every other frame before it is queued. The filter is the
// counting eBPF socket filter (bpf.NewCountingSocketFilter), which also
// counts the frames of our EtherType it drops (another job key or wire
// version, too short) for Stats().RxForeign. Where it cannot be loaded (no
// CAP_BPF, an old kernel) or Config.ClassicFilter asks for it, the device
// falls back to the classic BPF filter (bpf.SocketFilter), which drops such
// frames uncounted; FilterFallback says which is in use. Frames arrive in a
// receive ring the process maps (PACKET_RX_RING, TPACKET_V2; recvmmsg(2)
// where it cannot be set up, or with Config.NoRing) and leave in batches
// with sendmmsg(2), one system call per batch, by default bypassing the
// sender's qdisc (PACKET_QDISC_BYPASS). Wait sleeps in ppoll(2)
// on the socket and an eventfd that Close signals.
package afpacket

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/bpf"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/internal/wakefd"
)

// Config configures a Device.
type Config struct {
	nic.Config
	// Iface names the interface, looked up in the calling thread's network
	// namespace.
	Iface string
	// KeepQdisc sends through the interface's qdisc instead of bypassing it.
	// Rate limits and tc hooks on the sending interface need it.
	KeepQdisc bool
	// RecvBuffer and SendBuffer size the socket buffers in bytes; zero means
	// 8 MiB and 4 MiB. A deep receive buffer absorbs bursts that would
	// otherwise be dropped.
	RecvBuffer, SendBuffer int
	// ClassicFilter keeps the classic BPF filter even where the counting
	// eBPF filter could be loaded; other jobs' frames are then dropped in
	// the kernel without being counted.
	ClassicFilter bool
	// MaxMulticast is the number of multicast groups the device joins at
	// most (nic.Multicaster); zero means nic.DefaultMaxMulticast and a
	// negative value none.
	MaxMulticast int
	// NoRing receives with recvmmsg(2) instead of through a receive ring
	// (PACKET_RX_RING), where a poll that finds nothing is a memory read.
	// The device also falls back to recvmmsg(2) where the ring cannot be
	// set up (RingFallback says why).
	NoRing bool
	// RingSize is the receive ring's size in bytes, rounded down to whole
	// 64 KiB blocks (at least one); zero means DefaultRingSize. The kernel
	// zeroes and pins it: endpoints that share an interface, each with a
	// ring of its own, may want less.
	RingSize int
	// Shared is for endpoints that share the interface (nic.Config.Endpoint
	// tells them apart): the socket also sees the frames the others send,
	// which no switch would bring back to this port. It is bound to every
	// protocol, sends through the qdisc (the kernel shows a sent frame to
	// the host's other packet sockets only then), and runs the classic
	// filter bpf.SharedSocketFilter, which keeps this endpoint's frames,
	// from the wire or from a neighbour, and drops its own.
	Shared bool
}

// Device is an AF_PACKET socket on one interface. It implements nic.Device.
type Device struct {
	cfg    Config
	filter nic.Filter
	conn   *packet.Conn
	raw    syscall.RawConn
	mtu    int
	hw     net.HardwareAddr
	batch  int
	closed atomic.Bool

	// Receive side, used by one receiver at a time.
	rmu    sync.Mutex
	rhdrs  []mmsghdr
	riov   []unix.Iovec
	rn     int // frames received by the last recvmmsg
	rerr   syscall.Errno
	recvFn func(fd uintptr)
	ring   *rxRing // nil: recvmmsg(2) (ring.go)
	// ringErr is why there is no ring (nil with one).
	ringErr error

	// Wait sleeps in ppoll(2) on the socket, an eventfd that Close
	// signals and one that Interrupt signals; waitMu keeps Close from
	// freeing the descriptors under it (and under Interrupt).
	waitMu  sync.RWMutex
	fd      int
	efd     wakefd.FD // Close's: ends every Wait for good
	ifd     wakefd.FD // Interrupt's: ends one Wait
	pollFds [4]unix.PollFd
	wakeFD  atomic.Int32 // SetWakeFD's descriptor, or -1
	pollTs  unix.Timespec

	// Send side, used by one sender at a time.
	smu    sync.Mutex
	shdrs  []mmsghdr
	siov   []unix.Iovec
	sn     int // frames to send in shdrs
	sdone  int // frames sent so far
	serr   syscall.Errno
	sendFn func(fd uintptr) bool

	txFrames, txBytes, txErrors atomic.Uint64
	rxFrames, rxBytes           atomic.Uint64
	rxTrunc, rxForeign          atomic.Uint64
	statsMu                     sync.Mutex
	kernelDrops                 uint64
	// sf is the counting eBPF filter, nil with the classic fallback (whose
	// reason is sfErr). kernelForeign is its last count, kept after Close;
	// both are guarded by statsMu once Open has returned.
	sf            *bpf.SocketFilterProg
	sfErr         error
	kernelForeign uint64

	ifindex int
	mc      mcState // multicast.go
}

var _ nic.Device = (*Device)(nil)

// mmsghdr is struct mmsghdr from <sys/socket.h> on 64-bit Linux.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// Open opens an AF_PACKET socket on cfg.Iface in the calling thread's network
// namespace.
func Open(cfg Config) (*Device, error) {
	ifi, err := net.InterfaceByName(cfg.Iface)
	if err != nil {
		return nil, fmt.Errorf("afpacket %s: %w", cfg.Iface, err)
	}
	filter := cfg.Config.Filter()
	// The classic filter goes on at socket creation, before the bind, so
	// no unfiltered frame is ever queued; the counting filter replaces it
	// afterwards (SO_ATTACH_BPF swaps the socket's filter in one step).
	proto := int(filter.EtherType)
	var local net.HardwareAddr
	if cfg.Shared {
		proto, local = unix.ETH_P_ALL, ifi.HardwareAddr
		cfg.KeepQdisc, cfg.ClassicFilter = true, true
	}
	prog, err := bpf.SharedSocketFilter(filter, local)
	if err != nil {
		return nil, fmt.Errorf("afpacket %s: socket filter: %w", cfg.Iface, err)
	}
	conn, err := packet.Listen(ifi, packet.Raw, proto, &packet.Config{Filter: prog})
	if errors.Is(err, unix.EPERM) {
		return nil, fmt.Errorf("afpacket %s: listen: %w: an AF_PACKET socket needs CAP_NET_RAW (run as root, or grant the capability: docs/cluster.md)", cfg.Iface, err)
	}
	if err != nil {
		return nil, fmt.Errorf("afpacket %s: listen: %w", cfg.Iface, err)
	}
	d := &Device{cfg: cfg, filter: filter, conn: conn, mtu: ifi.MTU, hw: ifi.HardwareAddr, ifindex: ifi.Index}
	d.wakeFD.Store(-1)
	d.mc.init(cfg.MaxMulticast)
	if err := d.setup(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("afpacket %s: %w", cfg.Iface, err)
	}
	if cfg.ClassicFilter {
		d.sfErr = errClassicRequested
	} else {
		d.sf, d.sfErr = attachCounting(d.raw, filter)
	}
	return d, nil
}

// RingFallback reports why the device receives with recvmmsg(2) rather
// than through a receive ring, or nil if it uses the ring.
func (d *Device) RingFallback() error { return d.ringErr }

// ringSize is the receive ring's size Config asks for.
func (d *Device) ringSize() int {
	if d.cfg.RingSize > 0 {
		return d.cfg.RingSize
	}
	return DefaultRingSize
}

// RingBytes is the receive ring's size in bytes (0 without a ring).
func (d *Device) RingBytes() int {
	if d.ring == nil {
		return 0
	}
	return len(d.ring.mem)
}

// errNoRingRequested is RingFallback's answer for Config.NoRing.
var errNoRingRequested = errors.New("afpacket: recvmmsg(2) requested by Config.NoRing")

// errClassicRequested is FilterFallback's answer for Config.ClassicFilter.
var errClassicRequested = errors.New("afpacket: classic BPF filter requested by Config.ClassicFilter")

// attachCounting loads the counting eBPF filter and attaches it to the
// socket in place of the classic one. On error the classic filter stays.
func attachCounting(raw syscall.RawConn, f nic.Filter) (*bpf.SocketFilterProg, error) {
	sf, err := bpf.NewCountingSocketFilter(f)
	if err != nil {
		return nil, err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_BPF, sf.FD())
	}); err != nil {
		serr = err
	}
	if serr != nil {
		sf.Close()
		return nil, fmt.Errorf("afpacket: SO_ATTACH_BPF: %w", serr)
	}
	return sf, nil
}

// FilterFallback returns nil when the socket runs the counting eBPF filter,
// so that Stats().RxForeign includes the other jobs' frames the kernel
// dropped. Otherwise it runs the classic BPF filter, which drops them
// uncounted, and the error says why (Config.ClassicFilter, or why the eBPF
// filter could not be loaded or attached).
func (d *Device) FilterFallback() error { return d.sfErr }

func (d *Device) setup() error {
	raw, err := d.conn.SyscallConn()
	if err != nil {
		return err
	}
	d.raw = raw
	rbuf, sbuf := d.cfg.RecvBuffer, d.cfg.SendBuffer
	if rbuf == 0 {
		rbuf = 8 << 20
	}
	if sbuf == 0 {
		sbuf = 4 << 20
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		s := int(fd)
		if !d.cfg.KeepQdisc {
			if e := unix.SetsockoptInt(s, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); e != nil {
				serr = fmt.Errorf("PACKET_QDISC_BYPASS: %w", e)
				return
			}
		}
		// The FORCE variants exceed the sysctl caps; they need CAP_NET_ADMIN,
		// so fall back to the capped ones.
		if unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rbuf) != nil {
			_ = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, rbuf)
		}
		if unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sbuf) != nil {
			_ = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUF, sbuf)
		}
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	d.batch = d.cfg.BatchSize
	if d.batch <= 0 {
		d.batch = 64
	}
	d.rhdrs = make([]mmsghdr, d.batch)
	d.riov = make([]unix.Iovec, d.batch)
	d.shdrs = make([]mmsghdr, d.batch)
	d.siov = make([]unix.Iovec, d.batch)
	for i := range d.rhdrs {
		d.rhdrs[i].hdr.Iov = &d.riov[i]
		d.rhdrs[i].hdr.Iovlen = 1
		d.shdrs[i].hdr.Iov = &d.siov[i]
		d.shdrs[i].hdr.Iovlen = 1
	}
	if d.cfg.NoRing {
		d.ringErr = errNoRingRequested
	} else if err := raw.Control(func(fd uintptr) { d.ring, d.ringErr = setupRing(int(fd), nic.FrameCap(d.mtu), d.ringSize()) }); err != nil {
		return err
	}
	// Method values made once, so the hot path does not allocate closures.
	d.recvFn = d.recvOnce
	d.sendFn = d.sendOnce
	if err := raw.Control(func(fd uintptr) { d.fd = int(fd) }); err != nil {
		return err
	}
	if err := d.efd.Open(); err != nil {
		return err
	}
	if err := d.ifd.Open(); err != nil {
		d.efd.Close()
		return err
	}
	return nil
}

// MTU implements nic.Device.
func (d *Device) MTU() int { return d.mtu }

// HardwareAddr implements nic.Device.
func (d *Device) HardwareAddr() net.HardwareAddr { return d.hw }

// BatchSize implements nic.Device.
func (d *Device) BatchSize() int { return d.batch }

// Stats implements nic.Device. RxDropped includes the kernel's drops for this
// socket (PACKET_STATISTICS). RxForeign counts the frames of our EtherType
// that the software check refused plus, with the counting eBPF filter, those
// the kernel filter dropped (another job key or wire version, too short);
// with the classic fallback (see FilterFallback) the kernel's drops of such
// frames are not counted. Frames of other EtherTypes never reach the socket
// and are not counted either way.
func (d *Device) Stats() nic.Stats {
	d.statsMu.Lock()
	if !d.closed.Load() {
		d.readKernelStats()
	}
	drops, kforeign := d.kernelDrops, d.kernelForeign
	d.statsMu.Unlock()
	return nic.Stats{
		TxFrames: d.txFrames.Load(), TxBytes: d.txBytes.Load(), TxErrors: d.txErrors.Load(),
		RxFrames: d.rxFrames.Load(), RxBytes: d.rxBytes.Load(),
		RxDropped: drops + d.rxTrunc.Load(), RxForeign: d.rxForeign.Load() + kforeign,
	}
}

// readKernelStats refreshes the kernel's counters; statsMu is held and the
// socket open.
func (d *Device) readKernelStats() {
	// Reading PACKET_STATISTICS resets them, so accumulate.
	if st, err := d.conn.Stats(); err == nil {
		d.kernelDrops += uint64(st.Drops)
	}
	// The filter's counters only grow: take them as they are.
	if d.sf != nil {
		if c, err := d.sf.Counters(); err == nil {
			d.kernelForeign = c.Foreign()
		}
	}
}

// SetWakeFD implements nic.WakeFDWaiter: Wait also returns when fd is
// readable.
func (d *Device) SetWakeFD(fd int) { d.wakeFD.Store(int32(max(fd, -1))) }

// Interrupt implements nic.Interrupter with an eventfd that Wait polls.
func (d *Device) Interrupt() {
	d.waitMu.RLock()
	defer d.waitMu.RUnlock()
	if d.closed.Load() {
		return
	}
	d.ifd.Signal()
}

// Close implements nic.Device.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	// Wake every Wait (the eventfd stays readable), then wait for them to
	// leave ppoll before the descriptors go.
	d.efd.Signal()
	d.waitMu.Lock()
	d.efd.Close()
	d.ifd.Close()
	// Keep the last counts for Stats after Close.
	d.statsMu.Lock()
	d.readKernelStats()
	err := d.conn.Close()
	if d.sf != nil {
		err = errors.Join(err, d.sf.Close())
	}
	d.statsMu.Unlock()
	d.waitMu.Unlock()
	// The ring goes once no receive can be reading it.
	d.rmu.Lock()
	err = errors.Join(err, d.ring.close())
	d.rmu.Unlock()
	if err != nil {
		return fmt.Errorf("afpacket %s: close: %w", d.cfg.Iface, err)
	}
	return nil
}

func (d *Device) opErr(op string, err error) error {
	if d.closed.Load() || errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("afpacket %s: %s: %w", d.cfg.Iface, op, nic.ErrClosed)
	}
	if errors.Is(err, unix.ENETDOWN) || errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("afpacket %s: %s: link down: %w", d.cfg.Iface, op, err)
	}
	return fmt.Errorf("afpacket %s: %s: %w", d.cfg.Iface, op, err)
}

// Recv implements nic.Device: from the receive ring, or with one
// non-blocking recvmmsg(2).
func (d *Device) Recv(bufs [][]byte, lens []int) (int, error) {
	n := len(bufs)
	if n > d.batch {
		n = d.batch
	}
	if n == 0 {
		return 0, nil
	}
	d.rmu.Lock()
	defer d.rmu.Unlock()
	if d.ring != nil {
		if d.ring.mem == nil {
			return 0, d.opErr("recv", nic.ErrClosed)
		}
		return d.recvRing(bufs, lens, n), nil
	}
	for i := 0; i < n; i++ {
		b := bufs[i]
		if len(b) == 0 {
			b = b[:cap(b)]
		}
		d.riov[i].Base = unsafe.SliceData(b)
		d.riov[i].SetLen(len(b))
		d.rhdrs[i].hdr.Flags = 0
	}
	d.rn = n
	// Control, not Read: a receive must not see the read deadline that a
	// concurrent Wait has set on the shared poller descriptor.
	if err := d.raw.Control(d.recvFn); err != nil {
		return 0, d.opErr("recv", err)
	}
	switch d.rerr {
	case 0:
	case unix.EAGAIN, unix.EINTR:
		return 0, nil
	default:
		return 0, d.opErr("recvmmsg", d.rerr)
	}
	got, bytes := 0, 0
	for i := 0; i < d.rn; i++ {
		h := &d.rhdrs[i]
		size := int(h.len)
		if h.hdr.Flags&unix.MSG_TRUNC != 0 {
			d.rxTrunc.Add(1)
			continue
		}
		frame := bufs[i][:size]
		// The kernel filter already refused foreign frames; this check is
		// the last line of defence and costs a few compares.
		if d.filter.Check(frame) != nil {
			d.rxForeign.Add(1)
			continue
		}
		if got != i {
			copy(bufs[got], frame)
		}
		lens[got] = size
		bytes += size
		got++
	}
	d.rxBytes.Add(uint64(bytes))
	d.rxFrames.Add(uint64(got))
	return got, nil
}

func (d *Device) recvOnce(fd uintptr) {
	r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&d.rhdrs[0])), uintptr(d.rn), unix.MSG_DONTWAIT, 0, 0)
	d.rerr = e
	if e == 0 {
		d.rn = int(r)
	} else {
		d.rn = 0
	}
}

// Wait implements nic.Device. It sleeps in ppoll(2) on the socket, so the
// wake-up goes straight to this thread, and allocates nothing.
func (d *Device) Wait(deadline time.Time) error { return d.wait(deadline, false) }

// WaitThread implements nic.ThreadWaiter: Wait, with ppoll(2) as a raw
// system call.
func (d *Device) WaitThread(deadline time.Time) error { return d.wait(deadline, true) }

func (d *Device) wait(deadline time.Time, raw bool) error {
	d.waitMu.RLock()
	defer d.waitMu.RUnlock()
	if d.closed.Load() {
		return d.opErr("wait", nic.ErrClosed)
	}
	d.pollFds[0] = unix.PollFd{Fd: int32(d.fd), Events: unix.POLLIN}
	d.pollFds[1] = unix.PollFd{Fd: d.efd.Fd(), Events: unix.POLLIN}
	d.pollFds[2] = unix.PollFd{Fd: d.ifd.Fd(), Events: unix.POLLIN}
	d.pollFds[3] = unix.PollFd{Fd: d.wakeFD.Load(), Events: unix.POLLIN} // ppoll skips a negative one
	for {
		var ts *unix.Timespec
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return nic.ErrTimeout
			}
			d.pollTs = unix.NsecToTimespec(int64(left))
			ts = &d.pollTs
		}
		var n int
		var err error
		if raw {
			r, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&d.pollFds[0])),
				uintptr(len(d.pollFds)), uintptr(unsafe.Pointer(ts)), 0, 0, 0)
			if n = int(r); e != 0 {
				err = e
			}
		} else {
			n, err = unix.Ppoll(d.pollFds[:], ts, nil)
		}
		switch {
		case err == unix.EINTR && raw:
			// Most likely the runtime preempting this goroutine: let
			// it reach a safe point.
			return nil
		case err == unix.EINTR:
			continue
		case err != nil:
			return d.opErr("ppoll", err)
		case d.closed.Load() || d.pollFds[1].Revents != 0:
			return d.opErr("wait", nic.ErrClosed)
		case d.pollFds[2].Revents != 0:
			d.ifd.Drain()
			return nil
		case n > 0:
			return nil
		}
	}
}

// Send implements nic.Device with sendmmsg(2), waiting for socket buffer
// space when the kernel pushes back.
func (d *Device) Send(frames [][]byte) (int, error) {
	d.smu.Lock()
	defer d.smu.Unlock()
	limit := d.mtu + nic.EthHeaderLen + nic.VLANTagLen
	sent := 0
	for sent < len(frames) {
		n := len(frames) - sent
		if n > d.batch {
			n = d.batch
		}
		for i := 0; i < n; i++ {
			f := frames[sent+i]
			if len(f) < nic.EthHeaderLen || len(f) > limit {
				if i == 0 {
					d.txErrors.Add(1)
					return sent, fmt.Errorf("afpacket %s: send %d bytes: %w", d.cfg.Iface, len(f), nic.ErrFrameSize)
				}
				n = i
				break
			}
			d.siov[i].Base = unsafe.SliceData(f)
			d.siov[i].SetLen(len(f))
		}
		d.sn, d.sdone = n, 0
		err := d.raw.Write(d.sendFn)
		d.account(frames[sent : sent+d.sdone])
		sent += d.sdone
		if err != nil {
			return sent, d.opErr("send", err)
		}
		switch d.serr {
		case 0:
		case unix.ENOBUFS:
			// The kernel consumed and dropped the frame (a full device
			// queue with the qdisc bypassed, or a tc drop): it is lost on
			// the wire like any other, and the layer above repairs it.
			d.txErrors.Add(1)
			d.account(frames[sent : sent+1])
			sent++
			runtime.Gosched()
		default:
			d.txErrors.Add(1)
			return sent, d.opErr("sendmmsg", d.serr)
		}
	}
	return sent, nil
}

func (d *Device) account(frames [][]byte) {
	var bytes uint64
	for _, f := range frames {
		bytes += uint64(len(f))
	}
	d.txFrames.Add(uint64(len(frames)))
	d.txBytes.Add(bytes)
}

// sendOnce sends what is left of the batch; it returns false to wait for
// buffer space on EAGAIN.
func (d *Device) sendOnce(fd uintptr) bool {
	for d.sdone < d.sn {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&d.shdrs[d.sdone])), uintptr(d.sn-d.sdone), 0, 0, 0)
		switch e {
		case 0:
			d.sdone += int(r)
		case unix.EINTR:
		case unix.EAGAIN:
			d.serr = 0
			return false
		default:
			d.serr = e
			return true
		}
	}
	d.serr = 0
	return true
}
