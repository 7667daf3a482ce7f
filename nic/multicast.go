package nic

import (
	"errors"
	"net"
)

// Multicaster is implemented by devices that can join Ethernet multicast
// groups: they add the group address to the NIC's (or socket's) multicast
// filter, so frames sent to it are received. It is optional: a caller type
// asserts a Device to it and falls back to unicast where it fails.
//
// Joins are counted per address: a second join of an address needs a second
// leave. NICs filter a small number of multicast addresses exactly (the
// CC-MPI paper met a limit of 20 groups), so a device enforces a limit of
// distinct addresses and refuses more with ErrMulticastLimit.
type Multicaster interface {
	// JoinMulticast adds mac, a group address, to the receive filter.
	JoinMulticast(mac net.HardwareAddr) error
	// LeaveMulticast drops one join of mac; the address leaves the filter
	// with its last join. Leaving an address not joined is an error.
	LeaveMulticast(mac net.HardwareAddr) error
	// MaxMulticast is the number of distinct group addresses the device
	// accepts at once.
	MaxMulticast() int
}

// DefaultMaxMulticast is the multicast group limit of drivers whose
// configuration leaves it zero.
const DefaultMaxMulticast = 16

// Multicast errors.
var (
	// ErrMulticastLimit: the device already has its maximum of group
	// addresses.
	ErrMulticastLimit = errors.New("nic: multicast group limit reached")
	// ErrNotMulticast: the address is not a group (multicast) MAC, or is
	// the broadcast address, which is always received.
	ErrNotMulticast = errors.New("nic: not a multicast MAC address")
	// ErrNotJoined: LeaveMulticast of an address that was not joined.
	ErrNotJoined = errors.New("nic: multicast address not joined")
)

// GroupMAC is the Ethernet address of Ethervia multicast group `group` of
// the job with key jobKey (docs/wire.md, "Multicast groups"):
//
//	03 : J1 J0 : G2 G1 G0
//
// The first byte 0x03 sets the group bit (0x01) and the locally
// administered bit (0x02), so the address never clashes with an IEEE
// assigned one (01:00:5e IPv4, 33:33 IPv6, 01:80:c2 bridges). J1 J0 is the
// job key folded to 16 bits (high half XOR low half), so different jobs
// mostly use different filter entries, and G2 G1 G0 are the low 24 bits of
// the group id. The job key in every frame's prefix still separates jobs
// whose addresses collide.
func GroupMAC(jobKey, group uint32) [6]byte {
	j := uint16(jobKey>>16) ^ uint16(jobKey)
	return [6]byte{0x03, byte(j >> 8), byte(j), byte(group >> 16), byte(group >> 8), byte(group)}
}

// IsMulticast reports whether mac is a group address other than broadcast.
func IsMulticast(mac net.HardwareAddr) bool {
	if len(mac) != 6 || mac[0]&1 == 0 {
		return false
	}
	for _, b := range mac {
		if b != 0xff {
			return true
		}
	}
	return false
}

// MulticastSet is a device's bookkeeping of joined group addresses, with
// join counts and a limit. The zero value is unusable; make one with
// NewMulticastSet. It is not safe for concurrent use: drivers guard it.
type MulticastSet struct {
	max    int
	counts map[[6]byte]int
}

// NewMulticastSet returns an empty set that admits at most max distinct
// addresses (max < 0 means DefaultMaxMulticast; 0 admits none).
func NewMulticastSet(max int) *MulticastSet {
	if max < 0 {
		max = DefaultMaxMulticast
	}
	return &MulticastSet{max: max, counts: make(map[[6]byte]int)}
}

// Max is the limit of distinct addresses.
func (s *MulticastSet) Max() int { return s.max }

// Len is the number of distinct addresses joined.
func (s *MulticastSet) Len() int { return len(s.counts) }

// Has reports whether mac is joined.
func (s *MulticastSet) Has(mac [6]byte) bool { return s.counts[mac] > 0 }

// Join counts a join of mac; first reports that mac is new, so the driver
// must add it to the hardware filter. On error nothing changed.
func (s *MulticastSet) Join(mac net.HardwareAddr) (key [6]byte, first bool, err error) {
	if !IsMulticast(mac) {
		return key, false, ErrNotMulticast
	}
	copy(key[:], mac)
	if n := s.counts[key]; n > 0 {
		s.counts[key] = n + 1
		return key, false, nil
	}
	if len(s.counts) >= s.max {
		return key, false, ErrMulticastLimit
	}
	s.counts[key] = 1
	return key, true, nil
}

// Undo reverts a Join whose hardware step failed.
func (s *MulticastSet) Undo(key [6]byte) {
	if n := s.counts[key]; n > 1 {
		s.counts[key] = n - 1
	} else {
		delete(s.counts, key)
	}
}

// Leave counts a leave of mac; last reports that mac left the set, so the
// driver must drop it from the hardware filter.
func (s *MulticastSet) Leave(mac net.HardwareAddr) (key [6]byte, last bool, err error) {
	if !IsMulticast(mac) {
		return key, false, ErrNotMulticast
	}
	copy(key[:], mac)
	n := s.counts[key]
	switch {
	case n == 0:
		return key, false, ErrNotJoined
	case n == 1:
		delete(s.counts, key)
		return key, true, nil
	}
	s.counts[key] = n - 1
	return key, false, nil
}

// SetMax changes the limit; addresses already joined stay, even beyond it.
func (s *MulticastSet) SetMax(max int) {
	if max < 0 {
		max = DefaultMaxMulticast
	}
	s.max = max
}

// Addrs returns the joined addresses, in no particular order.
func (s *MulticastSet) Addrs() [][6]byte {
	out := make([][6]byte, 0, len(s.counts))
	for k := range s.counts {
		out = append(out, k)
	}
	return out
}
