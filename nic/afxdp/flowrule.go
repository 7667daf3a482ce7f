package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoFlowRules reports a driver without ntuple flow rules (veth and
// virtio_net among them): frames of our EtherType then go wherever the
// NIC's hashing puts them, which for frames that are not IP is queue 0 on
// the common drivers.
var ErrNoFlowRules = errors.New("afxdp: the driver has no ntuple flow rules")

// ethtool's commands and constants (linux/ethtool.h).
const (
	ethtoolSRXCLSRLINS = unix.ETHTOOL_SRXCLSRLINS
	ethtoolSRXCLSRLDEL = unix.ETHTOOL_SRXCLSRLDEL
	etherFlow          = unix.ETHER_FLOW
	rxClsLocAny        = 0xffffffff // RX_CLS_LOC_ANY: the driver picks the slot
)

// Layout of struct ethtool_rxnfc with its ethtool_rx_flow_spec fs, on
// 64-bit Linux (offsetof in a C program against linux/ethtool.h agrees): cmd 0, flow_type 4, data 8, fs 16..184 (fs.flow_type 16,
// h_u 20, h_ext 72, m_u 92, m_ext 144, ring_cookie 168, location 176),
// rule_cnt 184; 192 bytes in all. In h_u and m_u an ether_spec is h_dest
// (6), h_source (6), h_proto (big endian).
const (
	rxnfcLen        = 192
	offFsFlowType   = 16
	offFsHProto     = 20 + 12
	offFsMProto     = 92 + 12
	offFsRingCookie = 168
	offFsLocation   = 176
)

// flowRuleInsert encodes ETHTOOL_SRXCLSRLINS for "frames of etherType go
// to queue", at a location the driver chooses.
func flowRuleInsert(etherType uint16, queue int) [rxnfcLen]byte {
	var b [rxnfcLen]byte
	binary.NativeEndian.PutUint32(b[0:], ethtoolSRXCLSRLINS)
	binary.NativeEndian.PutUint32(b[4:], etherFlow)
	binary.NativeEndian.PutUint32(b[offFsFlowType:], etherFlow)
	binary.BigEndian.PutUint16(b[offFsHProto:], etherType)
	binary.BigEndian.PutUint16(b[offFsMProto:], 0xffff) // match every bit of it
	binary.NativeEndian.PutUint64(b[offFsRingCookie:], uint64(queue))
	binary.NativeEndian.PutUint32(b[offFsLocation:], rxClsLocAny)
	return b
}

// FlowRule is an ntuple rule on one interface that steers one EtherType to
// one receive queue, so that every frame of ours reaches the queue the
// socket is bound to.
type FlowRule struct {
	iface    string
	location uint32
}

// AddFlowRule asks iface's driver (ethtool's SIOCETHTOOL, as in "ethtool
// -N IFACE flow-type ether proto 0x88b5 action QUEUE") to deliver every
// frame of etherType to queue. It needs CAP_NET_ADMIN. Drivers without
// ntuple rules give ErrNoFlowRules.
func AddFlowRule(iface string, etherType uint16, queue int) (*FlowRule, error) {
	req := flowRuleInsert(etherType, queue)
	if err := ethtoolIoctl(iface, req[:]); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return nil, fmt.Errorf("%w (%s: %v)", ErrNoFlowRules, iface, err)
		}
		return nil, fmt.Errorf("afxdp: flow rule on %s: ethertype %#04x to queue %d: %w", iface, etherType, queue, err)
	}
	return &FlowRule{iface: iface, location: binary.NativeEndian.Uint32(req[offFsLocation:])}, nil
}

// Delete removes the rule.
func (r *FlowRule) Delete() error {
	var b [rxnfcLen]byte
	binary.NativeEndian.PutUint32(b[0:], ethtoolSRXCLSRLDEL)
	binary.NativeEndian.PutUint32(b[offFsLocation:], r.location)
	if err := ethtoolIoctl(r.iface, b[:]); err != nil {
		return fmt.Errorf("afxdp: delete flow rule %d on %s: %w", r.location, r.iface, err)
	}
	return nil
}

// ethtoolIoctl runs SIOCETHTOOL on iface with data as the command.
func ethtoolIoctl(iface string, data []byte) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// struct ifreq: the name, then (in its union) a pointer to the command.
	var ifr [40]byte
	if len(iface) >= unix.IFNAMSIZ {
		return fmt.Errorf("interface name %q too long", iface)
	}
	copy(ifr[:], iface)
	binary.NativeEndian.PutUint64(ifr[unix.IFNAMSIZ:], uint64(uintptr(unsafe.Pointer(&data[0]))))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr[0])))
	runtime.KeepAlive(data)
	if errno != 0 {
		return errno
	}
	return nil
}

// rxQueues asks iface's driver how many receive queues it runs (ethtool's
// ETHTOOL_GCHANNELS: rx plus combined channels). ok is false where the
// driver does not say.
func rxQueues(iface string) (n int, ok bool) {
	// struct ethtool_channels: cmd, then max_rx, max_tx, max_other,
	// max_combined, rx_count, tx_count, other_count, combined_count.
	var b [36]byte
	binary.NativeEndian.PutUint32(b[0:], unix.ETHTOOL_GCHANNELS)
	if ethtoolIoctl(iface, b[:]) != nil {
		return 0, false
	}
	rx, combined := binary.NativeEndian.Uint32(b[20:]), binary.NativeEndian.Uint32(b[32:])
	if rx+combined == 0 {
		return 0, false
	}
	return int(rx + combined), true
}
