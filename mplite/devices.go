package mplite

import (
	"fmt"
	"path/filepath"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/afpacket"
	"github.com/ethervia/ethervia/nic/afxdp"
)

// Frame drivers Init knows. Auto, the default, takes AF_XDP where it can
// serve and AF_PACKET elsewhere (driverOrder).
const (
	driverAuto     = "auto"
	driverAFPacket = "afpacket"
	driverAFXDP    = "afxdp"
)

func knownDriver(name string) bool {
	return name == driverAuto || name == driverAFPacket || name == driverAFXDP
}

// driverOrder is the drivers Init tries, in order, for a rank's NICs. AF_XDP
// copies a frame once where AF_PACKET's receive ring copies it twice
// (a 1-byte message of an MPICH-linked program at 1 Gbit/s took 0.75-0.86x
// MPICH over TCP's time on AF_XDP and 1.13x on AF_PACKET), but it serves one
// endpoint on one receive queue. Auto takes it only for a rank alone on its
// host whose NICs have one receive queue each, or whose queue the user
// named (MPLITE_XDP_QUEUE, MPLITE_XDP_FLOWRULE): on a NIC with several, RSS
// may steer our frames to a queue no socket reads, and the job would hang
// where AF_PACKET, which sees every queue, works. It falls back to
// AF_PACKET wherever AF_XDP does not open (no XDP on the NIC, an MTU too
// large for it, another program attached, no privilege).
func driverOrder(driver string, sharesNIC, queueKnown bool) []string {
	switch {
	case driver != driverAuto:
		return []string{driver}
	case sharesNIC || !queueKnown:
		return []string{driverAFPacket}
	}
	return []string{driverAFXDP, driverAFPacket}
}

// oneRxQueue reports whether every interface has exactly one receive queue,
// as sysfs of the process's network namespace lists them; false when it
// cannot tell.
func oneRxQueue(sysClassNet string, ifaces []string) bool {
	for _, iface := range ifaces {
		q, err := filepath.Glob(filepath.Join(sysClassNet, iface, "queues", "rx-*"))
		if err != nil || len(q) != 1 {
			return false
		}
	}
	return len(ifaces) > 0
}

// xdpQueueKnown reports whether AF_XDP's socket will see this rank's
// frames: the user chose the queue (or a flow rule), or there is one.
func (e *envConfig) xdpQueueKnown() bool {
	return e.xdpQueueSet || e.xdpFlowRule || oneRxQueue("/sys/class/net", e.ifaces)
}

// openFunc opens one interface with one driver.
type openFunc func(driver, iface string) (nic.Device, error)

// openDevices opens every interface with the first driver of order that
// opens them all (the rails of a bond use one driver), and returns the
// devices and that driver. A driver that fails on any interface is given up
// for all of them; the error is the last driver's.
func openDevices(ifaces, order []string, open openFunc) ([]nic.Device, string, error) {
	var err error
	for _, driver := range order {
		devs := make([]nic.Device, 0, len(ifaces))
		for _, iface := range ifaces {
			var dev nic.Device
			if dev, err = open(driver, iface); err != nil {
				err = fmt.Errorf("%s: %s: %w", iface, driver, err)
				break
			}
			devs = append(devs, dev)
		}
		if err == nil {
			return devs, driver, nil
		}
		for _, d := range devs {
			d.Close()
		}
	}
	return nil, "", err
}

// deviceOpener opens interfaces as Init's environment and options ask.
func deviceOpener(e envConfig, ncfg nic.Config, cfg *config) openFunc {
	return func(driver, iface string) (nic.Device, error) {
		if driver == driverAFXDP {
			return afxdp.Open(afxdp.Config{Config: ncfg, Iface: iface, Queue: e.xdpQueue, FlowRule: e.xdpFlowRule})
		}
		return afpacket.Open(afpacket.Config{Config: ncfg, Iface: iface, Shared: e.sharesNIC(), NoRing: e.noRing,
			RingSize: ringSize(max(e.local, ranksPerCPU(e.size, cfg.sharedCPUs)))})
	}
}
