package mplite

// The user buffers of the handshake protocol go through the provider's
// registration cache (rdma.Cache, MP_Lite's dynamic registration): a buffer
// reused for many large messages is registered once, and a slice of a
// registered buffer is found in its region.

import (
	"unsafe"

	"github.com/ethervia/ethervia/rdma"
)

func bufAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// regionOffset returns the offset of b inside r, which contains it.
func regionOffset(r *rdma.Region, b []byte) uint64 {
	return uint64(bufAddr(b) - bufAddr(r.Bytes()))
}
