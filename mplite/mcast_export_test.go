package mplite

import (
	"net"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/vi"
)

// Hooks for the multicast tests (memnic worlds only).

// PortGroups returns the group addresses c's memnic port has joined.
func PortGroups(c *Comm) []net.HardwareAddr { return memPort(c.dev).Multicast() }

// SetPortMaxMulticast sets the group limit of c's memnic port.
func SetPortMaxMulticast(c *Comm, n int) { memPort(c.dev).SetMaxMulticast(n) }

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

// ForgeMcast sends, from a stranger's port on c's memnic switch, a data
// datagram to c's multicast group for operation op that claims to come
// from rank and to belong to a message of total bytes.
func ForgeMcast(c *Comm, op uint32, rank uint16, total uint32) error {
	p, err := memPort(c.dev).Switch().NewPort(memnic.PortConfig{Config: nic.Config{JobKey: c.cfg.jobKey, EtherType: c.cfg.etherType}})
	if err != nil {
		return err
	}
	defer p.Close()
	id := c.groupID()
	pl := make([]byte, mcHdrLen+64)
	putMcHdr(pl, &mcHdr{typ: mcData, rank: rank, group: id, op: op, total: total})
	src, _ := nic.MAC(p.HardwareAddr())
	frame := make([]byte, vi.DatagramHeaderLen+len(pl))
	n, err := vi.PutDatagram(frame, &vi.Datagram{Dst: nic.GroupMAC(c.cfg.jobKey, id), Src: src, DstEP: nic.EndpointAll,
		EtherType: c.cfg.etherType, Kind: mcastKind, JobKey: c.cfg.jobKey, Payload: pl})
	if err != nil {
		return err
	}
	_, err = p.Send([][]byte{frame[:n]})
	return err
}

// AttackerPort opens a port on the switch of c's first rail that holds no
// job secret and sees every frame (promiscuous): a hostile host on the LAN.
func AttackerPort(c *Comm) (*memnic.Port, error) {
	return memPort(c.dev).Switch().NewPort(memnic.PortConfig{Config: nic.Config{JobKey: c.cfg.jobKey, EtherType: c.cfg.etherType},
		Promiscuous: true, QueueLen: 1 << 16, MTU: memPort(c.dev).MTU()})
}

// JobKey is the job key c's frames carry.
func JobKey(c *Comm) uint32 { return c.cfg.jobKey }

// RankMAC is rank's address on c's first rail.
func RankMAC(c *Comm, rank int) net.HardwareAddr { return c.addrs[rank].MAC[:] }
