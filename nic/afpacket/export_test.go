package afpacket

// SoftwareForeign returns the frames refused by the software check alone,
// so tests can tell the kernel filter's drops from the driver's.
func SoftwareForeign(d *Device) uint64 { return d.rxForeign.Load() }
