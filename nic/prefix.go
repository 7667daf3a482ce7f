package nic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
)

// DefaultEtherType is IEEE 802's local experimental EtherType 1, Ethervia's
// default.
const DefaultEtherType = 0x88B5

// Every Ethervia frame starts with the same 26-byte prefix so that kernel
// filters (classic BPF, XDP) can pick out one endpoint's frames at fixed
// offsets:
//
//	0  6  destination MAC
//	6  6  source MAC
//	12 2  EtherType (DefaultEtherType unless configured)
//	14 1  wire version (Version)
//	15 1  frame kind (meaning owned by the layer above)
//	16 2  flags (meaning owned by the layer above)
//	18 4  job key, big endian
//	22 2  destination endpoint, big endian (EndpointAll: every one)
//	24 2  source endpoint, big endian
//
// An endpoint is one of several users of one NIC (a rank, when several
// ranks share a host): an address is a MAC and an endpoint.
const (
	OffEtherType = 12
	OffVersion   = 14
	OffKind      = 15
	OffFlags     = 16
	OffJobKey    = 18
	OffDstEP     = 22
	OffSrcEP     = 24
	PrefixLen    = 26
)

// Version is the wire version carried at OffVersion. Version 2 added the
// endpoints to version 1's 22-byte prefix.
const Version = 2

// EndpointAll as a destination endpoint reaches every endpoint of the
// destination MAC: broadcast and multicast frames carry it.
const EndpointAll = 0xFFFF

// Prefix is the decoded fixed prefix of an Ethervia frame.
type Prefix struct {
	Dst, Src  [6]byte
	EtherType uint16
	Version   uint8
	Kind      uint8
	Flags     uint16
	JobKey    uint32
	DstEP     uint16
	SrcEP     uint16
}

// Errors returned by ParsePrefix.
var (
	ErrShortFrame = errors.New("nic: frame shorter than the Ethervia prefix")
	ErrEtherType  = errors.New("nic: foreign EtherType")
	ErrVersion    = errors.New("nic: unknown wire version")
	ErrJobKey     = errors.New("nic: foreign job key")
	ErrEndpoint   = errors.New("nic: frame for another endpoint")
)

// PutPrefix writes p into the first PrefixLen bytes of b, which must be long
// enough.
func PutPrefix(b []byte, p *Prefix) {
	_ = b[PrefixLen-1]
	copy(b[0:6], p.Dst[:])
	copy(b[6:12], p.Src[:])
	binary.BigEndian.PutUint16(b[OffEtherType:], p.EtherType)
	b[OffVersion] = p.Version
	b[OffKind] = p.Kind
	binary.BigEndian.PutUint16(b[OffFlags:], p.Flags)
	binary.BigEndian.PutUint32(b[OffJobKey:], p.JobKey)
	binary.BigEndian.PutUint16(b[OffDstEP:], p.DstEP)
	binary.BigEndian.PutUint16(b[OffSrcEP:], p.SrcEP)
}

// ParsePrefix decodes the prefix of frame without checking who it is for.
func ParsePrefix(frame []byte) (Prefix, error) {
	var p Prefix
	if len(frame) < PrefixLen {
		return p, fmt.Errorf("%w: %d bytes", ErrShortFrame, len(frame))
	}
	copy(p.Dst[:], frame[0:6])
	copy(p.Src[:], frame[6:12])
	p.EtherType = binary.BigEndian.Uint16(frame[OffEtherType:])
	p.Version = frame[OffVersion]
	p.Kind = frame[OffKind]
	p.Flags = binary.BigEndian.Uint16(frame[OffFlags:])
	p.JobKey = binary.BigEndian.Uint32(frame[OffJobKey:])
	p.DstEP = binary.BigEndian.Uint16(frame[OffDstEP:])
	p.SrcEP = binary.BigEndian.Uint16(frame[OffSrcEP:])
	return p, nil
}

// Filter is the software form of the kernel filters: it accepts a frame only
// if it has the prefix, the EtherType, the wire version and the job key, and
// is for the endpoint (or for every endpoint).
type Filter struct {
	EtherType uint16
	JobKey    uint32
	Endpoint  uint16
}

// Check reports why frame is not for this job, or nil if it is. It does not
// allocate on the accept path.
func (f Filter) Check(frame []byte) error {
	if len(frame) < PrefixLen {
		return ErrShortFrame
	}
	if binary.BigEndian.Uint16(frame[OffEtherType:]) != f.EtherType {
		return ErrEtherType
	}
	if frame[OffVersion] != Version {
		return ErrVersion
	}
	if binary.BigEndian.Uint32(frame[OffJobKey:]) != f.JobKey {
		return ErrJobKey
	}
	if ep := binary.BigEndian.Uint16(frame[OffDstEP:]); ep != f.Endpoint && ep != EndpointAll {
		return ErrEndpoint
	}
	return nil
}

// Addr is an endpoint's address: a MAC and an endpoint on that NIC.
type Addr struct {
	MAC [6]byte
	EP  uint16
}

func (a Addr) String() string {
	return fmt.Sprintf("%s.%d", net.HardwareAddr(a.MAC[:]), a.EP)
}

// MAC converts a 6-byte hardware address to an array; it returns false for
// any other length.
func MAC(hw net.HardwareAddr) ([6]byte, bool) {
	var m [6]byte
	if len(hw) != 6 {
		return m, false
	}
	copy(m[:], hw)
	return m, true
}

// Config is what every driver needs to pick out this job's frames.
type Config struct {
	// EtherType of Ethervia frames; zero means DefaultEtherType.
	EtherType uint16
	// JobKey separates jobs that share a LAN.
	JobKey uint32
	// Endpoint is this device's endpoint on its NIC: 0 unless several
	// users share the NIC, each with a device of its own.
	Endpoint uint16
	// BatchSize is the preferred frames per call; zero picks the driver's
	// default.
	BatchSize int
}

// Filter returns the software filter for c, with defaults applied.
func (c Config) Filter() Filter {
	et := c.EtherType
	if et == 0 {
		et = DefaultEtherType
	}
	return Filter{EtherType: et, JobKey: c.JobKey, Endpoint: c.Endpoint}
}
