package testbed

import (
	"context"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// port says where a port's controls act.
type port struct {
	rateSp   *space // tbf on the egress of rateLink (towards the host)
	rateLink string
	flapSp   *space // link whose admin state SetPortUp changes
	flapLink string
	faultSp  *space // tc fault injector on faultLink in faultIngress direction
	faultLnk string
	faultIn  bool
}

// port returns the port of (host, rail) or an error for a bad index. Call
// with tb.mu held.
func (tb *Testbed) port(host, rail int) (port, error) {
	if tb.closed {
		return port{}, ErrClosed
	}
	if host < 0 || host >= len(tb.hosts) || rail < 0 || rail >= tb.cfg.Rails {
		return port{}, fmt.Errorf("testbed: no port host %d rail %d (have %d hosts, %d rails)", host, rail, len(tb.hosts), tb.cfg.Rails)
	}
	if tb.cfg.Topology == Switch {
		sw := tb.switches[rail]
		p := portIface(host)
		return port{sw, p, sw, p, sw, p, false}, nil
	}
	own := tb.hosts[host].sp
	peer := tb.hosts[1-host].sp
	ifc := hostIface(rail)
	return port{peer, ifc, peer, ifc, own, ifc, true}, nil
}

// SetRate limits the traffic towards host on rail to bitsPerSec with a tbf
// on the port's egress (Switch: the bridge port; Pair: the peer's veth),
// and with Config.Duplex the traffic from host into the port as well. 0
// removes the limit.
func (tb *Testbed) SetRate(host, rail int, bitsPerSec uint64) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.setRate(host, rail, bitsPerSec)
}

func (tb *Testbed) setRate(host, rail int, bitsPerSec uint64) error {
	p, err := tb.port(host, rail)
	if err != nil {
		return err
	}
	nl := p.rateSp.nl
	l, err := nl.LinkByName(p.rateLink)
	if err != nil {
		return fmt.Errorf("testbed %s: find %s: %w", p.rateSp.name, p.rateLink, err)
	}
	if bitsPerSec == 0 {
		q := &netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{
			LinkIndex: l.Attrs().Index,
			Handle:    netlink.MakeHandle(1, 0),
			Parent:    netlink.HANDLE_ROOT,
		}}
		// Removing a tbf that is not there is not an error.
		if err := nl.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("testbed %s: remove rate of %s: %w", p.rateSp.name, p.rateLink, err)
		}
		if tb.cfg.Duplex {
			return tb.setIngressRate(p.rateSp, p.rateLink, l, 0)
		}
		return nil
	}
	q, err := tbfParams(bitsPerSec, tb.cfg.MTU)
	if err != nil {
		return fmt.Errorf("testbed: host %d rail %d: %w", host, rail, err)
	}
	q.LinkIndex = l.Attrs().Index
	if err := nl.QdiscReplace(q); err != nil {
		return fmt.Errorf("testbed %s: rate %s on %s: %w", p.rateSp.name, FormatRate(bitsPerSec), p.rateLink, err)
	}
	if tb.cfg.Duplex {
		if err := tb.setIngressRate(p.rateSp, p.rateLink, l, bitsPerSec); err != nil {
			return fmt.Errorf("testbed: host %d rail %d: %w", host, rail, err)
		}
	}
	return nil
}

// Rate returns the tbf rate in bit/s on the port of (host, rail), or 0 if it
// has none.
func (tb *Testbed) Rate(host, rail int) (uint64, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	p, err := tb.port(host, rail)
	if err != nil {
		return 0, err
	}
	l, err := p.rateSp.nl.LinkByName(p.rateLink)
	if err != nil {
		return 0, fmt.Errorf("testbed %s: find %s: %w", p.rateSp.name, p.rateLink, err)
	}
	qs, err := p.rateSp.nl.QdiscList(l)
	if err != nil {
		return 0, fmt.Errorf("testbed %s: list qdiscs of %s: %w", p.rateSp.name, p.rateLink, err)
	}
	for _, q := range qs {
		if t, ok := q.(*netlink.Tbf); ok && t.Parent == netlink.HANDLE_ROOT {
			return t.Rate * 8, nil
		}
	}
	return 0, nil
}

// SetPortUp sets the port's link administratively up or down: a link flap.
// In the Switch topology it is the bridge port, so the host's own interface
// stays up and loses carrier. In the Pair topology it is the peer host's
// veth, which the peer sees as its own interface going down. Bringing a port
// up returns once it forwards frames again (at most 30 s; see
// SetPortUpContext).
func (tb *Testbed) SetPortUp(host, rail int, up bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	return tb.SetPortUpContext(ctx, host, rail, up)
}

// SetPortUpContext is SetPortUp with a context that bounds the wait for the
// port to forward again.
func (tb *Testbed) SetPortUpContext(ctx context.Context, host, rail int, up bool) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	p, err := tb.port(host, rail)
	if err != nil {
		return err
	}
	nl := p.flapSp.nl
	l, err := nl.LinkByName(p.flapLink)
	if err != nil {
		return fmt.Errorf("testbed %s: find %s: %w", p.flapSp.name, p.flapLink, err)
	}
	if up {
		err = nl.LinkSetUp(l)
	} else {
		err = nl.LinkSetDown(l)
	}
	if err != nil {
		return fmt.Errorf("testbed %s: set %s up=%v: %w", p.flapSp.name, p.flapLink, up, err)
	}
	if up {
		return waitLinks(ctx, tb.links(host, rail))
	}
	return nil
}

// PortBytes returns the bytes the port of (host, rail) has received from the
// host since the testbed was built: the traffic that host sent on the rail.
// It lets a fault wait for a job's data rather than for a time, which a slow
// start-up would move.
func (tb *Testbed) PortBytes(host, rail int) (uint64, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	p, err := tb.port(host, rail)
	if err != nil {
		return 0, err
	}
	// The flap link is the switch's end of the host's cable (Switch) or the
	// peer's veth (Pair): what it receives, the host sent.
	l, err := p.flapSp.nl.LinkByName(p.flapLink)
	if err != nil {
		return 0, fmt.Errorf("testbed %s: find %s: %w", p.flapSp.name, p.flapLink, err)
	}
	st := l.Attrs().Statistics
	if st == nil {
		return 0, fmt.Errorf("testbed %s: %s has no statistics", p.flapSp.name, p.flapLink)
	}
	return st.RxBytes, nil
}
