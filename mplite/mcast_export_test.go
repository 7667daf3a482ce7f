package mplite

import (
	"net"

	"github.com/ethervia/ethervia/nic/memnic"
)

// Hooks for the multicast tests (memnic worlds only).

// PortGroups returns the group addresses c's memnic port has joined.
func PortGroups(c *Comm) []net.HardwareAddr { return c.dev.(*memnic.Port).Multicast() }

// SetPortMaxMulticast sets the group limit of c's memnic port.
func SetPortMaxMulticast(c *Comm, n int) { c.dev.(*memnic.Port).SetMaxMulticast(n) }

// ParseMcastHeader exposes the multicast header parser to the fuzz target:
// it returns whether b parses and, if so, b re-encoded from the parse.
func ParseMcastHeader(b []byte) (bool, []byte) {
	var h mcHdr
	if !parseMcHdr(b, &h) {
		return false, nil
	}
	out := make([]byte, mcHdrLen)
	putMcHdr(out, &h)
	return true, out
}
