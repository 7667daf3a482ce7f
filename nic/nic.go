// Package nic defines the batch-first frame interface that every Ethervia
// driver implements, and the fixed prefix that every Ethervia frame carries.
//
// A Device moves whole Ethernet frames (destination, source, EtherType,
// payload) in batches. Receive never blocks; Wait blocks until the device may
// have frames, so a progress engine can spin on Recv for a while and then
// sleep on Wait. Close wakes every waiter.
package nic

import (
	"errors"
	"net"
	"os"
	"time"
)

// ErrClosed is returned by every method of a closed Device. It is net.ErrClosed
// so that callers can test for it with either name.
var ErrClosed = net.ErrClosed

// ErrTimeout is returned by Wait when its deadline passes. It is
// os.ErrDeadlineExceeded so that callers can test for it with either name.
var ErrTimeout = os.ErrDeadlineExceeded

// ErrFrameSize reports a frame longer than the device can carry or shorter than
// an Ethernet header.
var ErrFrameSize = errors.New("nic: frame size out of range")

// Device is one opened NIC (or one queue of it, or one switch port).
//
// Implementations are safe for concurrent use by one sender and one receiver
// at a time; Stats, Close and the accessors may be called from anywhere.
type Device interface {
	// Send transmits frames, each a whole Ethernet frame, in order. It returns
	// how many were handed to the device; on an error the rest were not sent.
	// The caller may reuse the buffers as soon as Send returns.
	Send(frames [][]byte) (int, error)

	// Recv copies up to len(bufs) waiting frames into bufs and stores their
	// lengths in lens (which must be at least as long). It never blocks: with
	// nothing waiting it returns 0, nil. Buffers should hold FrameCap bytes;
	// a longer frame is truncated and counted as an error.
	Recv(bufs [][]byte, lens []int) (int, error)

	// Wait blocks until frames may be waiting, the deadline passes
	// (ErrTimeout) or the device is closed (ErrClosed). A zero deadline waits
	// for ever. A nil return is a hint: Recv may still return nothing.
	// A timeout allocates nothing: it is routine for a progress engine.
	Wait(deadline time.Time) error

	// MTU is the largest payload after the Ethernet header.
	MTU() int
	// HardwareAddr is the device's MAC address.
	HardwareAddr() net.HardwareAddr
	// BatchSize is the number of frames Send and Recv handle best per call.
	BatchSize() int
	// Stats returns the device's counters.
	Stats() Stats
	// Close releases the device and wakes blocked callers. It is idempotent.
	Close() error
}

// Interrupter is implemented by devices whose Wait another goroutine can cut
// short. A caller that drives progress itself can then sleep in the kernel
// on the device it expects frames from, and still be woken when something
// else (another device, another goroutine) has work for it.
type Interrupter interface {
	// Interrupt makes a Wait under way return nil at once, or, when none
	// is, the next Wait. Interrupts do not queue up: several before a Wait
	// end that one Wait only. It never blocks and allocates nothing.
	Interrupt()
}

// WakeFDWaiter is implemented by devices whose Wait can also watch a file
// descriptor of the caller's: a pipe another process writes to when it
// has work for this one (a rank of the same host, through shared memory).
// Wait returns nil once fd is readable; the caller drains it. The
// descriptor must stay open as long as the device may wait on it.
type WakeFDWaiter interface {
	// SetWakeFD makes Wait watch fd too (a negative fd: nothing).
	SetWakeFD(fd int)
}

// ThreadWaiter is implemented by devices that can also wait without telling
// the Go scheduler. Wait blocks in a system call the runtime knows of: after
// 20µs its sysmon thread hands the goroutine's P to another thread, and
// then checks every 20µs for a millisecond before it backs off. That is
// harmless with a rank per CPU, but with many ranks per CPU each block
// costs dozens of wake-ups: 128 ranks on 2 CPUs spent 46 % of their CPU
// time in sysmon, and an 8-byte allreduce took 8 times as long as with
// WaitThread.
type ThreadWaiter interface {
	// WaitThread is Wait as a raw system call: the goroutine keeps its P
	// while it blocks, so no other goroutine of the process runs on that
	// P until it returns. Use it only from the goroutine the program's
	// call waits in, with a short deadline. A signal ends it early (nil).
	WaitThread(deadline time.Time) error
}

// Stats are a device's counters since it was opened.
type Stats struct {
	TxFrames, TxBytes uint64
	TxErrors          uint64 // frames the device refused to send
	RxFrames, RxBytes uint64
	// RxDropped counts frames lost inside the device or kernel: full queues,
	// full rings, truncation.
	RxDropped uint64
	// RxForeign counts frames refused because they carried another
	// EtherType or job key, where the driver can see them.
	RxForeign uint64
	// RxBadTag and RxReplayed count frames an authenticating device
	// (package auth) refused: no valid tag, or a counter seen before.
	RxBadTag, RxReplayed uint64
}

// Sub returns s minus earlier counters, field by field.
func (s Stats) Sub(earlier Stats) Stats {
	return Stats{
		TxFrames:   s.TxFrames - earlier.TxFrames,
		TxBytes:    s.TxBytes - earlier.TxBytes,
		TxErrors:   s.TxErrors - earlier.TxErrors,
		RxFrames:   s.RxFrames - earlier.RxFrames,
		RxBytes:    s.RxBytes - earlier.RxBytes,
		RxDropped:  s.RxDropped - earlier.RxDropped,
		RxForeign:  s.RxForeign - earlier.RxForeign,
		RxBadTag:   s.RxBadTag - earlier.RxBadTag,
		RxReplayed: s.RxReplayed - earlier.RxReplayed,
	}
}

// EthHeaderLen is the length of an untagged Ethernet header.
const EthHeaderLen = 14

// VLANTagLen is the length of one 802.1Q tag.
const VLANTagLen = 4

// FrameCap is the buffer size that holds any frame of a device with the given
// MTU, including a VLAN tag.
func FrameCap(mtu int) int { return mtu + EthHeaderLen + VLANTagLen }

// TrailerRoom is what a receive buffer holds beyond FrameCap: room for a
// trailer that a device wrapper strips before its caller sees the frame
// (package auth adds 24 bytes to every frame and reports an MTU that much
// smaller).
const TrailerRoom = 32

// RecvBufLen is the receive buffer size for a device with the given MTU,
// which may be a wrapper's: FrameCap and TrailerRoom.
func RecvBufLen(mtu int) int { return FrameCap(mtu) + TrailerRoom }
