package memnic

import (
	"fmt"
	"net"

	"github.com/ethervia/ethervia/nic"
)

var _ nic.Multicaster = (*Port)(nil)

// maxMulticast maps PortConfig.MaxMulticast to a MulticastSet limit.
func maxMulticast(n int) int {
	switch {
	case n == 0:
		return nic.DefaultMaxMulticast
	case n < 0:
		return 0
	}
	return n
}

func isBroadcast(f []byte) bool {
	return f[0]&f[1]&f[2]&f[3]&f[4]&f[5] == 0xff
}

// joined reports whether the port joined the group f is sent to.
func (p *Port) joined(f []byte) bool {
	var dst [6]byte
	copy(dst[:], f[:6])
	p.mcMu.Lock()
	ok := p.mcast.Has(dst)
	p.mcMu.Unlock()
	return ok
}

// JoinMulticast implements nic.Multicaster: the port receives frames sent to
// mac from now on.
func (p *Port) JoinMulticast(mac net.HardwareAddr) error {
	if p.isClosed() {
		return fmt.Errorf("memnic port %d: join %v: %w", p.index, mac, nic.ErrClosed)
	}
	p.mcMu.Lock()
	defer p.mcMu.Unlock()
	if _, _, err := p.mcast.Join(mac); err != nil {
		return fmt.Errorf("memnic port %d: join %v (%d of %d groups joined): %w",
			p.index, mac, p.mcast.Len(), p.mcast.Max(), err)
	}
	return nil
}

// LeaveMulticast implements nic.Multicaster.
func (p *Port) LeaveMulticast(mac net.HardwareAddr) error {
	p.mcMu.Lock()
	defer p.mcMu.Unlock()
	if _, _, err := p.mcast.Leave(mac); err != nil {
		return fmt.Errorf("memnic port %d: leave %v: %w", p.index, mac, err)
	}
	return nil
}

// MaxMulticast implements nic.Multicaster.
func (p *Port) MaxMulticast() int {
	p.mcMu.Lock()
	defer p.mcMu.Unlock()
	return p.mcast.Max()
}

// SetMaxMulticast changes the port's group limit (same meaning as
// PortConfig.MaxMulticast). Groups already joined stay joined, even beyond
// the new limit.
func (p *Port) SetMaxMulticast(n int) {
	p.mcMu.Lock()
	defer p.mcMu.Unlock()
	p.mcast.SetMax(maxMulticast(n))
}

// Multicast returns the group addresses the port has joined.
func (p *Port) Multicast() []net.HardwareAddr {
	p.mcMu.Lock()
	defer p.mcMu.Unlock()
	var out []net.HardwareAddr
	for _, k := range p.mcast.Addrs() {
		out = append(out, net.HardwareAddr(append([]byte(nil), k[:]...)))
	}
	return out
}
