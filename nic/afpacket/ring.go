package afpacket

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The receive ring (PACKET_RX_RING, TPACKET_V2): the kernel writes each
// frame into a slot of memory this process maps, and hands the slot over
// by setting its status word, so a receive that finds nothing reads one
// word instead of making a recvmmsg(2) call. A spinning waiter polls the
// device over and over; with the system call, one poll cost about 1 µs
// here, which every half round trip paid on average at least once.

// rxRing is the mapped ring; slots are frameSize bytes, in order.
type rxRing struct {
	mem       []byte
	frameSize int
	frames    int
	next      int // the slot the next frame lands in
}

// DefaultRingSize is the ring's total size unless Config.RingSize says
// otherwise: like the socket buffer it replaces, deep enough to absorb
// bursts.
const DefaultRingSize = 8 << 20

// setupRing turns fd's receive path into a ring of about size bytes (at
// least one block) for frames of up to maxFrame bytes. On error the
// socket keeps recvmmsg(2).
func setupRing(fd int, maxFrame, size int) (*rxRing, error) {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return nil, fmt.Errorf("PACKET_VERSION: %w", err)
	}
	// A slot holds the TPACKET_V2 header, the sockaddr_ll the kernel puts
	// after it, alignment, and the frame: round to a power of two.
	need := unix.SizeofTpacket2Hdr + unix.SizeofSockaddrLinklayer + 2*unix.TPACKET_ALIGNMENT + maxFrame
	frameSize := 1 << 11
	for frameSize < need {
		frameSize <<= 1
	}
	blockSize := max(frameSize, 1<<16)
	// Whole blocks: the kernel wants as many frames as the blocks hold.
	ringSize := max(1, size/blockSize) * blockSize
	req := unix.TpacketReq{
		Block_size: uint32(blockSize),
		Block_nr:   uint32(ringSize / blockSize),
		Frame_size: uint32(frameSize),
		Frame_nr:   uint32(ringSize / frameSize),
	}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, fmt.Errorf("PACKET_RX_RING: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, ringSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_LOCKED)
	if err != nil {
		mem, err = unix.Mmap(fd, 0, ringSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	if err != nil {
		return nil, fmt.Errorf("mmap ring: %w", err)
	}
	return &rxRing{mem: mem, frameSize: frameSize, frames: ringSize / frameSize}, nil
}

// status is slot i's status word, which the kernel and we hand over.
func (r *rxRing) status(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.mem[i*r.frameSize]))
}

// recvRing moves up to n frames out of the ring into bufs, as Recv does,
// and counts them.
func (d *Device) recvRing(bufs [][]byte, lens []int, n int) int {
	r := d.ring
	got, bytes := 0, 0
	for got < n {
		st := r.status(r.next)
		if atomic.LoadUint32(st)&unix.TP_STATUS_USER == 0 {
			break
		}
		slot := r.mem[r.next*r.frameSize : (r.next+1)*r.frameSize]
		h := (*unix.Tpacket2Hdr)(unsafe.Pointer(&slot[0]))
		size, snap, mac := int(h.Len), int(h.Snaplen), int(h.Mac)
		buf := bufs[got]
		if len(buf) == 0 {
			buf = buf[:cap(buf)]
		}
		switch {
		case snap < size || size > len(buf) || mac+snap > len(slot):
			d.rxTrunc.Add(1)
		case d.filter.Check(slot[mac:mac+size]) != nil:
			// The kernel filter already refused foreign frames; this
			// check is the last line of defence.
			d.rxForeign.Add(1)
		default:
			copy(buf, slot[mac:mac+size])
			lens[got] = size
			bytes += size
			got++
		}
		atomic.StoreUint32(st, unix.TP_STATUS_KERNEL)
		r.next = (r.next + 1) % r.frames
	}
	d.rxBytes.Add(uint64(bytes))
	d.rxFrames.Add(uint64(got))
	return got
}

// close unmaps the ring; the caller holds rmu, so no receive is using it.
func (r *rxRing) close() error {
	if r == nil || r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}
