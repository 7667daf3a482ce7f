// Package localaddr finds the local address the kernel would send from.
package localaddr

import (
	"fmt"
	"net"
)

// Toward returns the local address the kernel's routing table picks for
// packets to ip: the address a host there reaches us at. A connected UDP
// socket sends nothing; it only asks the routing table.
func Toward(ip net.IP) (net.IP, error) {
	c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: ip, Port: 9})
	if err != nil {
		return nil, fmt.Errorf("no route to %v: %w", ip, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP, nil
}
