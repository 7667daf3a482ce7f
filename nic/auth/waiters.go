package auth

import "github.com/ethervia/ethervia/nic"

// withWaiters returns d with exactly the optional wait interfaces of its
// inner device: a caller that type-asserts for one must find it only
// where it works. The methods are the inner device's own, since waiting
// involves no frame.
func withWaiters(d *Device) nic.Device {
	in, isIn := d.inner.(nic.Interrupter)
	tw, isTW := d.inner.(nic.ThreadWaiter)
	wf, isWF := d.inner.(nic.WakeFDWaiter)
	switch {
	case isIn && isTW && isWF:
		return struct {
			*Device
			nic.Interrupter
			nic.ThreadWaiter
			nic.WakeFDWaiter
		}{d, in, tw, wf}
	case isIn && isTW:
		return struct {
			*Device
			nic.Interrupter
			nic.ThreadWaiter
		}{d, in, tw}
	case isIn && isWF:
		return struct {
			*Device
			nic.Interrupter
			nic.WakeFDWaiter
		}{d, in, wf}
	case isTW && isWF:
		return struct {
			*Device
			nic.ThreadWaiter
			nic.WakeFDWaiter
		}{d, tw, wf}
	case isIn:
		return struct {
			*Device
			nic.Interrupter
		}{d, in}
	case isTW:
		return struct {
			*Device
			nic.ThreadWaiter
		}{d, tw}
	case isWF:
		return struct {
			*Device
			nic.WakeFDWaiter
		}{d, wf}
	}
	return d
}
