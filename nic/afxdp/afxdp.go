// Package afxdp is the AF_XDP frame driver, written on golang.org/x/sys/unix
// without cgo or libxdp.
//
// A Device is one AF_XDP socket bound to one queue of one interface. It owns
// a UMEM (an mmapped area cut into equal chunks) and the four rings the kernel
// shares with it: fill and rx for receiving, tx and completion for sending.
// The XDP steering program from package bpf redirects this job's frames (our
// EtherType and job key) into the socket and passes every other frame to the
// kernel's stack, so IP traffic on the same interface keeps working.
//
// Chunks never move between the two directions: the first half of the UMEM
// (at most RingSize chunks) cycles fill -> rx -> fill, the rest cycles
// free list -> tx -> completion -> free list. A chunk is therefore never in
// the fill and the tx ring at once, and no lock is shared between a sender and
// a receiver except the short one around the completion ring, which both
// drain.
//
// The socket uses XDP_USE_NEED_WAKEUP: Send makes a sendto(2) system call only
// when the kernel has set the tx ring's need-wakeup flag, and Recv calls
// poll(2) only when the fill ring's flag is set. Wait blocks in poll(2) on the
// socket and on two eventfds: one that Close writes, so Close wakes it, and
// one that Interrupt writes.
//
// # veth
//
// What the kernel (6.18) does on veth, which the test beds use:
//
//   - The steering program runs in native (driver) mode when the kernel
//     chooses (XDPMode 0). The socket binds in copy mode: veth has no
//     zero-copy, so a ZeroCopy request fails with EOPNOTSUPP.
//   - Native XDP caps the veth MTU at 3506 bytes (a page minus XDP headroom
//     and skb_shared_info; the driver then reports max_mtu 3506): attaching
//     to a veth pair with MTU 3507 fails with ERANGE, and once a program
//     is attached, raising the MTU of either end above 3506 fails with
//     EINVAL. MTU() is also capped by the chunk: ChunkSize - 256 - 14 - 4.
//   - In copy mode the tx ring's need-wakeup flag is always set, so every
//     Send makes a sendto(2), which transmits synchronously: by the time Send
//     returns, the frames sit in the peer socket's rx ring and their
//     completions in ours. One sendto moves at most the socket's budget of
//     frames, 32 by default, and answers EAGAIN while more remain; Open raises
//     the budget to the ring size (XDP_MAX_TX_SKB_BUDGET accepts 32..tx ring
//     size, EPERM otherwise), and Send repeats the call on EAGAIN.
//   - The fill ring's need-wakeup flag stays clear in copy mode: the peer's
//     transmit runs this veth's NAPI poll, which needs no wakeup.
//   - A veth has one active queue unless created with more (the maximum is
//     the CPU count). A copy-mode socket transmits on the queue id it is
//     bound to, and veth delivers to the same queue id of the peer, so
//     sockets on queue q talk to sockets on queue q. Frames of this job that
//     arrive on a queue without a socket go to the kernel stack (counted as
//     Unclaimed by the steering program).
//   - Nothing slows a sender down for a slow receiver: when the receiver does
//     not return chunks to the fill ring in time, the kernel drops frames
//     (XDP_STATISTICS rx_fill_ring_empty_descs, in Stats as RxDropped).
package afxdp

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/bpf"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/internal/wakefd"
)

// Defaults for the zero values of Config.
const (
	DefaultFrames    = 4096
	DefaultChunkSize = 4096
	DefaultRingSize  = 2048
	DefaultBatchSize = 64
)

// ErrTxStalled is returned by Send when the kernel took no frame from the tx
// ring and completed none for TxStallTimeout.
var ErrTxStalled = errors.New("afxdp: transmit stalled")

// TxStallTimeout is how long Send waits for ring space before it gives up
// with ErrTxStalled.
const TxStallTimeout = 2 * time.Second

// VethMaxMTU is the largest MTU native XDP allows on a veth: a frame must
// fit a page beside the XDP headroom and skb_shared_info (see the package
// comment).
const VethMaxMTU = 3506

// Config configures a Device.
type Config struct {
	nic.Config
	// Iface names the interface, looked up in the calling thread's network
	// namespace at Open time.
	Iface string
	// Queue is the interface queue to bind (default 0); one socket per queue.
	Queue int
	// Frames is the number of UMEM chunks (default 4096).
	Frames int
	// ChunkSize is the size of one UMEM chunk: 2048 or 4096 (default).
	ChunkSize int
	// RingSize is the number of entries of each of the four rings, a power
	// of two (default 2048).
	RingSize int
	// ZeroCopy binds with XDP_ZEROCOPY and fails where the driver cannot do
	// it. Otherwise the kernel chooses, and Open falls back to XDP_COPY if
	// that bind fails.
	ZeroCopy bool
	// XDPMode is how the driver's own steering program is attached; zero
	// lets the kernel choose (native where the driver supports it).
	XDPMode link.XDPAttachFlags
	// Steering is a program shared by several queues' devices, attached by
	// the caller. Nil makes the Device create, attach and on Close detach a
	// program of its own.
	Steering *bpf.Steering
	// MaxMulticast is the number of multicast groups the device joins at
	// most (nic.Multicaster); zero means nic.DefaultMaxMulticast and a
	// negative value none.
	MaxMulticast int
	// FlowRule makes Open ask the driver for an ntuple rule that steers
	// every frame of the EtherType to Queue (AddFlowRule), removed again by
	// Close. A driver without such rules (ErrNoFlowRules) is not an error:
	// FlowRuleErr reports it, and frames hashed to other queues are counted
	// as the steering program's Unclaimed.
	FlowRule bool
}

// Device is an AF_XDP socket on one queue of one interface. It implements
// nic.Device and is safe for concurrent use: a sender and a receiver run in
// parallel, concurrent Sends (and concurrent Recvs) take turns, and Wait
// never holds up Recv.
type Device struct {
	iface    string
	queue    int
	filter   nic.Filter
	fd       int
	efd      wakefd.FD // Close's: ends every Wait and Send stall for good
	ifd      wakefd.FD // Interrupt's: ends one Wait
	umem     []byte
	layout   umemLayout
	ringMem  [4][]byte
	maps     int // how many of ringMem are mapped
	mtu      int
	maxFrame int
	hw       net.HardwareAddr
	batch    int
	zc       bool
	maxKicks int
	steer    *bpf.Steering
	ownSteer bool

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	// Receive side.
	rmu      sync.Mutex
	rx       ring[unix.XDPDesc]
	fill     ring[uint64]
	wakeFds  [1]unix.PollFd
	rxChunks uint32 // chunks owned by the fill/rx cycle

	// Waiters hold wmu for reading while they poll, so that Close does not
	// close the socket under them; they never hold rmu while blocked, so a
	// Recv is never held up by a Wait.
	wmu        sync.RWMutex
	errTimeout error // preallocated: an idle spin-then-block loop times out often
	errWaitEnd error

	// Send side.
	smu      sync.Mutex
	tx       ring[unix.XDPDesc]
	stallFds [1]unix.PollFd

	// The completion ring and the free list, drained by both sides.
	pmu  sync.Mutex
	comp ring[uint64]
	free freeList

	txFrames, txBytes, txErrors atomic.Uint64
	rxFrames, rxBytes           atomic.Uint64
	rxDropped, rxForeign        atomic.Uint64

	// statsMu guards the socket against Close while Stats reads it.
	statsMu sync.Mutex
	kstats  unix.XDPStatistics
	// steerForeign is the own steering program's Foreign counter as last
	// read, kept after Close frees the program.
	steerForeign uint64

	mc mcState // multicast.go

	flowRule *FlowRule // Config.FlowRule's, deleted by Close
	flowErr  error
}

// FlowRuleErr says why Config.FlowRule installed no rule (ErrNoFlowRules
// for drivers without them); nil when a rule is in place or none was asked
// for.
func (d *Device) FlowRuleErr() error { return d.flowErr }

var _ nic.Device = (*Device)(nil)

// Open creates an AF_XDP socket on cfg.Iface, queue cfg.Queue. It must be
// called on a thread in the interface's network namespace (the caller locks
// its OS thread and calls setns first); the socket and the steering program
// stay in that namespace, and the Device may then be used from any
// goroutine.
func Open(cfg Config) (*Device, error) {
	d, err := open(cfg)
	switch {
	case errors.Is(err, unix.EPERM):
		return nil, fmt.Errorf("afxdp %s: %w: AF_XDP needs CAP_NET_RAW for the socket, CAP_BPF and CAP_NET_ADMIN for the XDP program, "+
			"and CAP_IPC_LOCK or a large RLIMIT_MEMLOCK for the UMEM (docs/cluster.md)", cfg.Iface, err)
	case errors.Is(err, unix.ENOMEM):
		return nil, fmt.Errorf("afxdp %s: %w: the UMEM is locked memory; raise RLIMIT_MEMLOCK (ulimit -l) or grant CAP_IPC_LOCK (docs/cluster.md)", cfg.Iface, err)
	case err != nil:
		return nil, fmt.Errorf("afxdp %s: %w", cfg.Iface, err)
	}
	return d, nil
}

func open(cfg Config) (*Device, error) {
	if cfg.Frames == 0 {
		cfg.Frames = DefaultFrames
	}
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	if cfg.RingSize == 0 {
		cfg.RingSize = DefaultRingSize
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	switch {
	case cfg.ChunkSize != 2048 && cfg.ChunkSize != 4096:
		return nil, fmt.Errorf("chunk size %d: want 2048 or 4096", cfg.ChunkSize)
	case cfg.RingSize < 2 || cfg.RingSize&(cfg.RingSize-1) != 0:
		return nil, fmt.Errorf("ring size %d: want a power of two", cfg.RingSize)
	case cfg.Frames < 2:
		return nil, fmt.Errorf("%d frames: want at least 2", cfg.Frames)
	case cfg.Queue < 0:
		return nil, fmt.Errorf("queue %d: want >= 0", cfg.Queue)
	}
	ifi, err := net.InterfaceByName(cfg.Iface)
	if err != nil {
		return nil, err
	}
	if n, ok := rxQueues(cfg.Iface); ok && cfg.Queue >= n {
		return nil, fmt.Errorf("queue %d: the interface has %d receive queue(s) (ethtool -l %s; MPLITE_XDP_QUEUE)", cfg.Queue, n, cfg.Iface)
	}
	d := &Device{
		iface:  cfg.Iface,
		queue:  cfg.Queue,
		filter: cfg.Config.Filter(),
		fd:     -1,
		layout: umemLayout{chunk: uint64(cfg.ChunkSize), count: uint64(cfg.Frames)},
		hw:     ifi.HardwareAddr,
		batch:  min(cfg.BatchSize, cfg.RingSize),
	}
	d.mtu = min(ifi.MTU, d.layout.maxRxFrame()-nic.EthHeaderLen-nic.VLANTagLen)
	d.maxFrame = nic.FrameCap(d.mtu)
	d.errTimeout = fmt.Errorf("afxdp %s: wait: %w", cfg.Iface, nic.ErrTimeout)
	d.errWaitEnd = fmt.Errorf("afxdp %s: wait: %w", cfg.Iface, nic.ErrClosed)
	d.mc.init(cfg.MaxMulticast, ifi.Name)
	if err := d.setup(cfg, ifi.Index); err != nil {
		d.teardown()
		return nil, err
	}
	return d, nil
}

// setup builds the socket; on error the caller tears down what exists.
func (d *Device) setup(cfg Config, ifindex int) error {
	if err := d.efd.Open(); err != nil {
		return err
	}
	if err := d.ifd.Open(); err != nil {
		return err
	}
	var err error
	d.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	// MAP_POPULATE faults the whole UMEM in now rather than on the first
	// frames.
	d.umem, err = unix.Mmap(-1, 0, int(d.layout.size()), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap umem (%d bytes): %w", d.layout.size(), err)
	}
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(&d.umem[0]))),
		Len:  d.layout.size(),
		Size: uint32(d.layout.chunk),
	}
	if err := setsockoptPtr(d.fd, unix.SOL_XDP, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return fmt.Errorf("XDP_UMEM_REG: %w", err)
	}
	size := uint32(cfg.RingSize)
	for _, o := range []struct {
		opt  int
		name string
	}{
		{unix.XDP_UMEM_FILL_RING, "XDP_UMEM_FILL_RING"},
		{unix.XDP_UMEM_COMPLETION_RING, "XDP_UMEM_COMPLETION_RING"},
		{unix.XDP_RX_RING, "XDP_RX_RING"},
		{unix.XDP_TX_RING, "XDP_TX_RING"},
	} {
		if err := unix.SetsockoptInt(d.fd, unix.SOL_XDP, o.opt, int(size)); err != nil {
			return fmt.Errorf("%s %d: %w", o.name, size, err)
		}
	}
	var off unix.XDPMmapOffsets
	if _, err := getsockoptPtr(d.fd, unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return fmt.Errorf("XDP_MMAP_OFFSETS: %w", err)
	}
	if err := d.mapRings(off, size); err != nil {
		return err
	}

	// The first part of the UMEM feeds the fill ring for good; the rest is
	// for sending.
	d.rxChunks = min(uint32(cfg.Frames/2), size)
	idx, k := d.fill.reserve(d.rxChunks)
	if k != d.rxChunks {
		return fmt.Errorf("fill ring took %d of %d chunks", k, d.rxChunks)
	}
	for i := uint32(0); i < k; i++ {
		*d.fill.at(idx + i) = uint64(i) * d.layout.chunk
	}
	d.fill.submit(k)
	d.free = newFreeList(cfg.Frames - int(d.rxChunks))
	for c := uint64(d.rxChunks); c < d.layout.count; c++ {
		d.free.push(c * d.layout.chunk)
	}

	// In copy mode one sendto moves at most the socket's budget of frames
	// (32 unless raised); ask for a whole ring so one call usually does.
	d.maxKicks = int(size)/32 + 4
	if unix.SetsockoptInt(d.fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, int(size)) == nil {
		d.maxKicks = 8
	}

	if err := d.bind(cfg, ifindex); err != nil {
		return err
	}
	var opts xdpOptions
	if _, err := getsockoptPtr(d.fd, unix.SOL_XDP, unix.XDP_OPTIONS, unsafe.Pointer(&opts), unsafe.Sizeof(opts)); err != nil {
		return fmt.Errorf("XDP_OPTIONS: %w", err)
	}
	d.zc = opts.Flags&unix.XDP_OPTIONS_ZEROCOPY != 0

	if cfg.Steering != nil {
		d.steer = cfg.Steering
	} else {
		s, err := bpf.NewSteering(d.filter, bpf.SteeringOptions{Queues: cfg.Queue + 1})
		if err != nil {
			return fmt.Errorf("steering program: %w", err)
		}
		d.steer, d.ownSteer = s, true
		if err := s.Attach(ifindex, cfg.XDPMode); err != nil {
			if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("attach XDP: another XDP program is already attached to %s (another job's, or one loaded "+
					"with ip or xdp-loader; see ip link show dev %[1]s): %w", cfg.Iface, err)
			}
			if ifi, ierr := net.InterfaceByIndex(ifindex); ierr == nil && errors.Is(err, unix.ERANGE) {
				// The kernel's own word for it is "numerical result out
				// of range", which names neither the MTU nor the limit.
				return fmt.Errorf("attach XDP: interface MTU %d is too large for XDP here (veth allows at most %d; use AF_PACKET for jumbo frames): %w", ifi.MTU, VethMaxMTU, err)
			}
			return fmt.Errorf("attach XDP: %w", err)
		}
	}
	if err := d.steer.Register(cfg.Queue, d.fd); err != nil {
		if !d.ownSteer {
			d.steer = nil // not ours to unregister
		}
		return fmt.Errorf("register queue %d: %w", cfg.Queue, err)
	}
	if cfg.FlowRule {
		d.flowRule, d.flowErr = AddFlowRule(cfg.Iface, d.filter.EtherType, cfg.Queue)
		if d.flowErr != nil && !errors.Is(d.flowErr, ErrNoFlowRules) {
			return d.flowErr
		}
	}

	d.wakeFds = [1]unix.PollFd{{Fd: int32(d.fd), Events: unix.POLLIN}}
	d.stallFds = [1]unix.PollFd{{Fd: d.efd.Fd(), Events: unix.POLLIN}}
	return nil
}

func (d *Device) mapRings(off unix.XDPMmapOffsets, size uint32) error {
	const descSize, addrSize = uint64(unsafe.Sizeof(unix.XDPDesc{})), 8
	specs := [4]struct {
		off   unix.XDPRingOffset
		pgoff int64
		esize uint64
		name  string
	}{
		{off.Rx, unix.XDP_PGOFF_RX_RING, descSize, "rx"},
		{off.Tx, unix.XDP_PGOFF_TX_RING, descSize, "tx"},
		{off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, addrSize, "fill"},
		{off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, addrSize, "completion"},
	}
	for i, s := range specs {
		n := s.off.Desc + uint64(size)*s.esize
		mem, err := unix.Mmap(d.fd, s.pgoff, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return fmt.Errorf("mmap %s ring: %w", s.name, err)
		}
		d.ringMem[i] = mem
		d.maps = i + 1
	}
	var err error
	if d.rx, err = newRing[unix.XDPDesc](d.ringMem[0], off.Rx, size); err != nil {
		return fmt.Errorf("rx ring: %w", err)
	}
	if d.tx, err = newRing[unix.XDPDesc](d.ringMem[1], off.Tx, size); err != nil {
		return fmt.Errorf("tx ring: %w", err)
	}
	if d.fill, err = newRing[uint64](d.ringMem[2], off.Fr, size); err != nil {
		return fmt.Errorf("fill ring: %w", err)
	}
	if d.comp, err = newRing[uint64](d.ringMem[3], off.Cr, size); err != nil {
		return fmt.Errorf("completion ring: %w", err)
	}
	return nil
}

func (d *Device) bind(cfg Config, ifindex int) error {
	sa := &unix.SockaddrXDP{Flags: unix.XDP_USE_NEED_WAKEUP, Ifindex: uint32(ifindex), QueueID: uint32(cfg.Queue)}
	if cfg.ZeroCopy {
		sa.Flags |= unix.XDP_ZEROCOPY
		if err := unix.Bind(d.fd, sa); err != nil {
			return fmt.Errorf("bind queue %d with XDP_ZEROCOPY: %w", cfg.Queue, err)
		}
		return nil
	}
	err := unix.Bind(d.fd, sa)
	if err == nil {
		return nil
	}
	sa.Flags |= unix.XDP_COPY
	if err2 := unix.Bind(d.fd, sa); err2 != nil {
		return fmt.Errorf("bind queue %d: %w (with XDP_COPY: %w)", cfg.Queue, err, err2)
	}
	return nil
}

// Steering returns the XDP program that feeds the socket (the Device's own
// or the shared one from Config), so callers can set faults and read
// counters.
func (d *Device) Steering() *bpf.Steering { return d.steer }

// FD returns the AF_XDP socket's file descriptor, for registering it in an
// XSKMAP or for poll(2). It is invalid after Close.
func (d *Device) FD() int { return d.fd }

// ZeroCopy reports whether the kernel bound the socket in zero-copy mode
// (XDP_OPTIONS).
func (d *Device) ZeroCopy() bool { return d.zc }

// MTU implements nic.Device: the interface MTU, capped so that a frame with a
// VLAN tag fits a chunk after the kernel's XDP headroom.
func (d *Device) MTU() int { return d.mtu }

// HardwareAddr implements nic.Device.
func (d *Device) HardwareAddr() net.HardwareAddr { return d.hw }

// BatchSize implements nic.Device.
func (d *Device) BatchSize() int { return d.batch }

func (d *Device) errClosed(op string) error {
	return fmt.Errorf("afxdp %s: %s: %w", d.iface, op, nic.ErrClosed)
}

// Send implements nic.Device. Frames are copied into free chunks and put on
// the tx ring; when the ring or the chunks run out, Send drains the
// completion ring, kicks the kernel and waits (up to TxStallTimeout without
// progress) until all frames are on the ring.
func (d *Device) Send(frames [][]byte) (int, error) {
	d.smu.Lock()
	defer d.smu.Unlock()
	if d.closed.Load() {
		return 0, d.errClosed("send")
	}
	sent, idle := 0, 0
	var stallSince time.Time
	for sent < len(frames) {
		d.reap()
		want := uint32(min(len(frames)-sent, int(d.tx.size)))
		d.pmu.Lock()
		want = min(want, uint32(d.free.len()))
		idx, k := d.tx.reserve(want)
		var bytes uint64
		var bad error
		i := uint32(0)
		for ; i < k; i++ {
			f := frames[sent+int(i)]
			if len(f) < nic.EthHeaderLen || len(f) > d.maxFrame {
				bad = fmt.Errorf("afxdp %s: send %d bytes (max %d): %w", d.iface, len(f), d.maxFrame, nic.ErrFrameSize)
				break
			}
			addr, _ := d.free.pop()
			copy(d.umem[addr:addr+uint64(len(f))], f)
			*d.tx.at(idx + i) = unix.XDPDesc{Addr: addr, Len: uint32(len(f))}
			bytes += uint64(len(f))
		}
		d.pmu.Unlock()
		// Frame size is checked even when no ring space is left, so an
		// oversize frame is refused at once rather than after a stall.
		if bad == nil && k == 0 {
			if f := frames[sent]; len(f) < nic.EthHeaderLen || len(f) > d.maxFrame {
				bad = fmt.Errorf("afxdp %s: send %d bytes (max %d): %w", d.iface, len(f), d.maxFrame, nic.ErrFrameSize)
			}
		}
		if i > 0 {
			d.tx.submit(i)
			sent += int(i)
			d.txFrames.Add(uint64(i))
			d.txBytes.Add(bytes)
		}
		if err := d.flush(); err != nil {
			return sent, err
		}
		if bad != nil {
			d.txErrors.Add(1)
			return sent, bad
		}
		if i > 0 {
			idle = 0
			stallSince = time.Time{}
			continue
		}
		// No chunk or no ring slot: the kernel still holds them all.
		if err := d.backoff(&idle, &stallSince); err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// backoff waits a little for the kernel to complete frames: first by
// yielding, then by sleeping in poll(2) on the eventfd for a millisecond at a
// time, so that Close still interrupts it.
func (d *Device) backoff(idle *int, since *time.Time) error {
	*idle++
	if *idle < 64 {
		runtime.Gosched()
		return nil
	}
	now := time.Now()
	if since.IsZero() {
		*since = now
	} else if now.Sub(*since) > TxStallTimeout {
		d.txErrors.Add(1)
		return fmt.Errorf("afxdp %s: send: %d frames on the tx ring, none completed for %v: %w",
			d.iface, d.tx.pending(), TxStallTimeout, ErrTxStalled)
	}
	if _, e := pollFds(d.stallFds[:], 1, false); e != 0 && e != unix.EINTR {
		return fmt.Errorf("afxdp %s: send: poll: %w", d.iface, e)
	}
	if d.closed.Load() {
		return d.errClosed("send")
	}
	return nil
}

// flush kicks the kernel while it asks for it and frames wait on the tx
// ring. Transient refusals (EAGAIN: budget used or completion ring full;
// EBUSY; ENOBUFS) are retried a few times and otherwise left to the next
// call: the frames stay on the ring, and Recv kicks too.
func (d *Device) flush() error {
	for i := 0; i < d.maxKicks; i++ {
		if d.tx.pending() == 0 || !d.tx.needWakeup() {
			return nil
		}
		switch e := kick(d.fd); e {
		case 0, unix.EINTR:
		case unix.EAGAIN, unix.EBUSY, unix.ENOBUFS:
			d.reap()
		case unix.ENETDOWN, unix.ENXIO:
			return fmt.Errorf("afxdp %s: send: link down: %w", d.iface, e)
		default:
			return fmt.Errorf("afxdp %s: send: sendto: %w", d.iface, e)
		}
	}
	return nil
}

// reap moves completed tx chunks back to the free list.
func (d *Device) reap() {
	if d.comp.pending() == 0 {
		return
	}
	d.pmu.Lock()
	idx, k := d.comp.peek(d.comp.size)
	for i := uint32(0); i < k; i++ {
		d.free.push(d.layout.base(*d.comp.at(idx + i)))
	}
	d.comp.release(k)
	d.pmu.Unlock()
}

// Recv implements nic.Device. It copies frames out of their chunks and gives
// the chunks straight back to the fill ring.
func (d *Device) Recv(bufs [][]byte, lens []int) (int, error) {
	d.rmu.Lock()
	defer d.rmu.Unlock()
	if d.closed.Load() {
		return 0, d.errClosed("recv")
	}
	d.reap()
	// Frames a sender left on the tx ring after a refused kick.
	if d.tx.pending() != 0 && d.tx.needWakeup() {
		kick(d.fd)
	}
	n := min(len(bufs), len(lens))
	if n == 0 {
		return 0, nil
	}
	idx, k := d.rx.peek(uint32(n))
	if k == 0 {
		d.wakeFill()
		return 0, nil
	}
	fidx, fk := d.fill.reserve(k)
	got := 0
	var bytes uint64
	for i := uint32(0); i < k; i++ {
		desc := *d.rx.at(idx + i)
		// The fill ring has room for every rx chunk, so fk == k; the
		// check keeps a corrupted ring from losing chunks silently.
		if i < fk {
			*d.fill.at(fidx + i) = d.layout.base(desc.Addr)
		}
		off, size, ok := d.layout.frame(desc)
		if !ok {
			d.rxDropped.Add(1)
			continue
		}
		frame := d.umem[off : off+size]
		b := bufs[got]
		if len(b) == 0 {
			b = b[:cap(b)]
		}
		if len(frame) > len(b) {
			d.rxDropped.Add(1)
			continue
		}
		if d.filter.Check(frame) != nil {
			d.rxForeign.Add(1)
			continue
		}
		lens[got] = copy(b, frame)
		bytes += size
		got++
	}
	// Copy out before the chunks go back to the kernel.
	d.fill.submit(fk)
	d.rx.release(k)
	d.wakeFill()
	d.rxFrames.Add(uint64(got))
	d.rxBytes.Add(bytes)
	return got, nil
}

// wakeFill pokes the driver with poll(2) when it has asked to be told about
// new fill-ring entries.
func (d *Device) wakeFill() {
	if d.fill.needWakeup() {
		pollFds(d.wakeFds[:], 0, false)
	}
}

// maxPollMs bounds one poll(2) so that long deadlines loop instead of
// overflowing the timeout.
const maxPollMs = 10_000

// Wait implements nic.Device: poll(2) on the socket and the close and
// interrupt eventfds, with the remaining time rounded up to whole
// milliseconds. Wait does not
// hold up Recv, and it allocates nothing, also when it times out.
func (d *Device) Wait(deadline time.Time) error { return d.wait(deadline, false) }

// WaitThread implements nic.ThreadWaiter: Wait, with poll(2) as a raw system
// call.
func (d *Device) WaitThread(deadline time.Time) error { return d.wait(deadline, true) }

func (d *Device) wait(deadline time.Time, raw bool) error {
	d.wmu.RLock()
	defer d.wmu.RUnlock()
	for {
		if d.closed.Load() {
			return d.errWaitEnd
		}
		if d.rx.pending() > 0 {
			return nil
		}
		ms := maxPollMs
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return d.errTimeout
			}
			ms = int(min((left+time.Millisecond-1)/time.Millisecond, maxPollMs))
		}
		fds := [3]unix.PollFd{{Fd: int32(d.fd), Events: unix.POLLIN}, {Fd: d.efd.Fd(), Events: unix.POLLIN}, {Fd: d.ifd.Fd(), Events: unix.POLLIN}}
		n, e := pollFds(fds[:], ms, raw)
		switch {
		case e == unix.EINTR && raw:
			return nil // most likely the runtime preempting us: let it
		case e == unix.EINTR, e == 0 && n == 0:
			continue
		case e != 0:
			return fmt.Errorf("afxdp %s: wait: poll: %w", d.iface, e)
		}
		if fds[1].Revents != 0 {
			return d.errWaitEnd
		}
		if fds[2].Revents != 0 {
			d.ifd.Drain()
			return nil
		}
		if r := fds[0].Revents; r&(unix.POLLERR|unix.POLLNVAL) != 0 {
			return fmt.Errorf("afxdp %s: wait: socket error (revents %#x)", d.iface, r)
		}
		return nil
	}
}

// Stats implements nic.Device. RxDropped adds the kernel's drops for the
// socket (XDP_STATISTICS: no fill chunk, rx ring full) to frames the driver
// itself discarded; TxErrors adds the kernel's invalid tx descriptors.
//
// RxForeign adds, when the Device runs its own steering program, the
// program's Foreign counter: frames of our EtherType that failed the
// version, job-key or length check and went to the kernel stack instead of
// the socket. The program sees every queue of the interface, so with a
// shared Config.Steering that count belongs to no single Device and is left
// out; read it from Steering().Counters().
func (d *Device) Stats() nic.Stats {
	d.statsMu.Lock()
	if !d.closed.Load() {
		d.readKernelStats()
	}
	ks, sf := d.kstats, d.steerForeign
	d.statsMu.Unlock()
	return nic.Stats{
		TxFrames:  d.txFrames.Load(),
		TxBytes:   d.txBytes.Load(),
		TxErrors:  d.txErrors.Load() + ks.Tx_invalid_descs,
		RxFrames:  d.rxFrames.Load(),
		RxBytes:   d.rxBytes.Load(),
		RxDropped: d.rxDropped.Load() + ks.Rx_dropped + ks.Rx_ring_full + ks.Rx_invalid_descs,
		RxForeign: d.rxForeign.Load() + sf,
	}
}

// KernelStats returns the socket's XDP_STATISTICS counters.
func (d *Device) KernelStats() unix.XDPStatistics {
	d.statsMu.Lock()
	defer d.statsMu.Unlock()
	if !d.closed.Load() {
		d.readKernelStats()
	}
	return d.kstats
}

// readKernelStats refreshes d.kstats and d.steerForeign; statsMu is held and
// the socket open.
func (d *Device) readKernelStats() {
	var st unix.XDPStatistics
	if _, err := getsockoptPtr(d.fd, unix.SOL_XDP, unix.XDP_STATISTICS, unsafe.Pointer(&st), unsafe.Sizeof(st)); err == nil {
		d.kstats = st
	}
	if d.ownSteer && d.steer != nil {
		if c, err := d.steer.Counters(); err == nil {
			d.steerForeign = c.Foreign
		}
	}
}

// Interrupt implements nic.Interrupter with an eventfd that Wait polls.
func (d *Device) Interrupt() {
	d.wmu.RLock()
	defer d.wmu.RUnlock()
	if d.closed.Load() {
		return
	}
	d.ifd.Signal()
}

// Close implements nic.Device. It wakes a blocked Wait and a waiting Send,
// waits for them to leave, unregisters the socket from the steering program
// (and detaches the program if the Device attached it), and frees the rings
// and the UMEM.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		d.efd.Signal()
		d.wmu.Lock()
		d.rmu.Lock()
		d.smu.Lock()
		d.statsMu.Lock()
		d.readKernelStats()
		d.closeErr = d.teardown()
		d.statsMu.Unlock()
		d.smu.Unlock()
		d.rmu.Unlock()
		d.wmu.Unlock()
	})
	if d.closeErr != nil {
		return fmt.Errorf("afxdp %s: close: %w", d.iface, d.closeErr)
	}
	return nil
}

// teardown releases whatever exists, in reverse order of setup.
func (d *Device) teardown() error {
	errs := []error{d.mc.close()}
	if d.flowRule != nil {
		errs = append(errs, d.flowRule.Delete())
		d.flowRule = nil
	}
	if d.steer != nil {
		if d.ownSteer {
			errs = append(errs, d.steer.Close())
		} else if err := d.steer.Unregister(d.queue); err != nil {
			errs = append(errs, fmt.Errorf("unregister queue %d: %w", d.queue, err))
		}
	}
	for i := d.maps - 1; i >= 0; i-- {
		errs = append(errs, unix.Munmap(d.ringMem[i]))
		d.ringMem[i] = nil
	}
	d.maps = 0
	if d.fd >= 0 {
		errs = append(errs, unix.Close(d.fd))
	}
	if d.umem != nil {
		errs = append(errs, unix.Munmap(d.umem))
		d.umem = nil
	}
	errs = append(errs, d.efd.Close(), d.ifd.Close())
	return errors.Join(errs...)
}
