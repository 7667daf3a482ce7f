package afpacket

import (
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/nic"
)

var _ nic.Multicaster = (*Device)(nil)

// mcState is the device's joined groups. Memberships are the socket's
// (PACKET_ADD_MEMBERSHIP): the kernel drops them when the socket closes, so
// Close needs no clean-up.
type mcState struct {
	mu  sync.Mutex
	set *nic.MulticastSet
}

func (m *mcState) init(max int) {
	if max < 0 {
		max = 0
	} else if max == 0 {
		max = nic.DefaultMaxMulticast
	}
	m.set = nic.NewMulticastSet(max)
}

// JoinMulticast implements nic.Multicaster with PACKET_ADD_MEMBERSHIP
// (PACKET_MR_MULTICAST), which adds mac to the interface's multicast filter
// for as long as the socket holds it.
func (d *Device) JoinMulticast(mac net.HardwareAddr) error {
	d.mc.mu.Lock()
	defer d.mc.mu.Unlock()
	key, first, err := d.mc.set.Join(mac)
	if err != nil {
		return fmt.Errorf("afpacket %s: join %v (%d of %d groups joined): %w",
			d.cfg.Iface, mac, d.mc.set.Len(), d.mc.set.Max(), err)
	}
	if !first {
		return nil
	}
	if err := d.membership(unix.PACKET_ADD_MEMBERSHIP, key); err != nil {
		d.mc.set.Undo(key)
		return d.opErr(fmt.Sprintf("join %v", mac), err)
	}
	return nil
}

// LeaveMulticast implements nic.Multicaster with PACKET_DROP_MEMBERSHIP.
func (d *Device) LeaveMulticast(mac net.HardwareAddr) error {
	d.mc.mu.Lock()
	defer d.mc.mu.Unlock()
	key, last, err := d.mc.set.Leave(mac)
	if err != nil {
		return fmt.Errorf("afpacket %s: leave %v: %w", d.cfg.Iface, mac, err)
	}
	if !last {
		return nil
	}
	if err := d.membership(unix.PACKET_DROP_MEMBERSHIP, key); err != nil {
		return d.opErr(fmt.Sprintf("leave %v", mac), err)
	}
	return nil
}

// MaxMulticast implements nic.Multicaster.
func (d *Device) MaxMulticast() int {
	d.mc.mu.Lock()
	defer d.mc.mu.Unlock()
	return d.mc.set.Max()
}

func (d *Device) membership(opt int, mac [6]byte) error {
	if d.closed.Load() {
		return nic.ErrClosed
	}
	mreq := unix.PacketMreq{Ifindex: int32(d.ifindex), Type: unix.PACKET_MR_MULTICAST, Alen: 6}
	copy(mreq.Address[:], mac[:])
	var serr error
	if err := d.raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptPacketMreq(int(fd), unix.SOL_PACKET, opt, &mreq)
	}); err != nil {
		return err
	}
	return serr
}
