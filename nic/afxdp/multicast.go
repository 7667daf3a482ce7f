package afxdp

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/nic"
)

var _ nic.Multicaster = (*Device)(nil)

// mcState is the device's joined groups. An AF_XDP socket takes no
// interface ioctls, so the addresses go on the interface with
// SIOCADDMULTI/SIOCDELMULTI on a datagram socket made at Open time, in the
// interface's network namespace (the ioctl names the interface, and names
// are per namespace). Those addresses belong to the interface, not to a
// socket, so Close removes the ones still joined.
//
// The XDP steering program matches our EtherType, version and job key and
// never looks at the destination MAC, so frames to a group address are
// redirected like unicast ones once the NIC's filter lets them in.
type mcState struct {
	mu    sync.Mutex
	set   *nic.MulticastSet
	iface string
	ctl   int // the ioctl socket; -1 once closed
}

func (m *mcState) init(max int, iface string) {
	if max < 0 {
		max = 0
	} else if max == 0 {
		max = nic.DefaultMaxMulticast
	}
	m.set = nic.NewMulticastSet(max)
	m.iface = iface
	m.ctl = -1
	// Made now, in the caller's namespace: a later join may come from
	// any thread. Without it (no socket) joins fail with the reason.
	if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err == nil {
		m.ctl = fd
	}
}

// ifreqHW is struct ifreq with the ifr_hwaddr member of its union.
type ifreqHW struct {
	name   [unix.IFNAMSIZ]byte
	family uint16 // sa_family: AF_UNSPEC for SIOCADDMULTI
	data   [14]byte
	_      [8]byte // the rest of the 24-byte union
}

func (m *mcState) ioctl(req uintptr, mac [6]byte) error {
	if m.ctl < 0 {
		return errors.New("no control socket")
	}
	var r ifreqHW
	copy(r.name[:unix.IFNAMSIZ-1], m.iface)
	r.family = unix.AF_UNSPEC
	copy(r.data[:], mac[:])
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(m.ctl), req, uintptr(unsafe.Pointer(&r))); e != 0 {
		return e
	}
	return nil
}

// close removes the addresses still joined and closes the ioctl socket.
func (m *mcState) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.set == nil || m.ctl < 0 {
		return nil
	}
	var errs []error
	for _, mac := range m.set.Addrs() {
		if err := m.ioctl(unix.SIOCDELMULTI, mac); err != nil {
			errs = append(errs, fmt.Errorf("SIOCDELMULTI %v: %w", net.HardwareAddr(mac[:]), err))
		}
	}
	errs = append(errs, unix.Close(m.ctl))
	m.ctl = -1
	return errors.Join(errs...)
}

// JoinMulticast implements nic.Multicaster: SIOCADDMULTI adds mac to the
// interface's multicast list.
func (d *Device) JoinMulticast(mac net.HardwareAddr) error {
	d.mc.mu.Lock()
	defer d.mc.mu.Unlock()
	if d.closed.Load() {
		return d.errClosed("join")
	}
	key, first, err := d.mc.set.Join(mac)
	if err != nil {
		return fmt.Errorf("afxdp %s: join %v (%d of %d groups joined): %w",
			d.iface, mac, d.mc.set.Len(), d.mc.set.Max(), err)
	}
	if !first {
		return nil
	}
	if err := d.mc.ioctl(unix.SIOCADDMULTI, key); err != nil {
		d.mc.set.Undo(key)
		return fmt.Errorf("afxdp %s: join %v: SIOCADDMULTI: %w", d.iface, mac, err)
	}
	return nil
}

// LeaveMulticast implements nic.Multicaster with SIOCDELMULTI.
func (d *Device) LeaveMulticast(mac net.HardwareAddr) error {
	d.mc.mu.Lock()
	defer d.mc.mu.Unlock()
	key, last, err := d.mc.set.Leave(mac)
	if err != nil {
		return fmt.Errorf("afxdp %s: leave %v: %w", d.iface, mac, err)
	}
	if !last {
		return nil
	}
	if err := d.mc.ioctl(unix.SIOCDELMULTI, key); err != nil {
		return fmt.Errorf("afxdp %s: leave %v: SIOCDELMULTI: %w", d.iface, mac, err)
	}
	return nil
}

// MaxMulticast implements nic.Multicaster.
func (d *Device) MaxMulticast() int {
	d.mc.mu.Lock()
	defer d.mc.mu.Unlock()
	return d.mc.set.Max()
}
