package testbed

import (
	"fmt"

	"github.com/ethervia/ethervia/bpf"
)

// fault returns the port's fault injector, attaching it on first use. Call
// with tb.mu held.
func (tb *Testbed) fault(host, rail int) (*bpf.TCFault, error) {
	p, err := tb.port(host, rail)
	if err != nil {
		return nil, err
	}
	k := portKey{host, rail}
	if f, ok := tb.faults[k]; ok {
		return f, nil
	}
	dir := bpf.Egress
	if p.faultIn {
		dir = bpf.Ingress
	}
	et := tb.cfg.FaultEtherType
	if et == AllEtherTypes {
		et = 0 // the injector's "every frame"
	}
	var f *bpf.TCFault
	err = p.faultSp.run(func() error {
		// The netlink handle's namespace is the thread's now, but the
		// injector attaches through the thread's own namespace.
		l, err := p.faultSp.nl.LinkByName(p.faultLnk)
		if err != nil {
			return fmt.Errorf("find %s: %w", p.faultLnk, err)
		}
		f, err = bpf.AttachTCFault(l.Attrs().Index, dir, et)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testbed %s: attach fault injector to %s: %w", p.faultSp.name, p.faultLnk, err)
	}
	tb.faults[k] = f
	return f, nil
}

// SetFault sets random drop, corruption and duplication on the port of
// (host, rail), for frames of Config.FaultEtherType: in the Switch topology
// on the bridge port's egress towards the host, in the Pair topology on the
// host's own veth ingress (after XDP: frames an XDP program redirects to
// AF_XDP are not faulted there). The injector is attached on first use and
// stays until Close; a zero FaultConfig makes it pass everything.
func (tb *Testbed) SetFault(host, rail int, c bpf.FaultConfig) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	f, err := tb.fault(host, rail)
	if err != nil {
		return err
	}
	if err := f.Set(c); err != nil {
		return fmt.Errorf("testbed: fault on host %d rail %d: %w", host, rail, err)
	}
	return nil
}

// FaultCounters returns the counters of the port's fault injector; all zero
// if SetFault was never called on the port.
func (tb *Testbed) FaultCounters(host, rail int) (bpf.FaultCounters, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if _, err := tb.port(host, rail); err != nil {
		return bpf.FaultCounters{}, err
	}
	f, ok := tb.faults[portKey{host, rail}]
	if !ok {
		return bpf.FaultCounters{}, nil
	}
	c, err := f.Counters()
	if err != nil {
		return c, fmt.Errorf("testbed: fault counters of host %d rail %d: %w", host, rail, err)
	}
	return c, nil
}
