package testbed

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A port's tbf shapes the direction towards its host only: a host's own
// qdisc cannot shape what it sends, since our drivers bypass it. With
// Config.Duplex the frames a host sends into its port are shaped too, as
// on a full-duplex link of that rate: the port's ingress redirects them to
// an ifb device, whose tbf queues them at the port's rate before they
// reach the bridge (or, in the Pair topology, the peer).

// ingressIfb names the ifb device behind port link (in the port's
// namespace; link names here are short, so the result fits IFNAMSIZ).
func ingressIfb(link string) string { return "q" + link }

// ingressHandle is the ingress qdisc's handle, ffff:.
var ingressHandle = netlink.MakeHandle(0xffff, 0)

// ingressQdisc is the ingress qdisc of link l.
func ingressQdisc(l netlink.Link) *netlink.Ingress {
	return &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: ingressHandle, Parent: netlink.HANDLE_INGRESS}}
}

// setIngressRate shapes the frames entering port l (named link, in sp) to
// bitsPerSec, or removes the shaping when bitsPerSec is 0.
func (tb *Testbed) setIngressRate(sp *space, link string, l netlink.Link, bitsPerSec uint64) error {
	nl := sp.nl
	name := ingressIfb(link)
	if bitsPerSec == 0 {
		if err := nl.QdiscDel(ingressQdisc(l)); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("testbed %s: remove ingress of %s: %w", sp.name, link, err)
		}
		if ifb, err := nl.LinkByName(name); err == nil {
			if err := nl.LinkDel(ifb); err != nil {
				return fmt.Errorf("testbed %s: remove %s: %w", sp.name, name, err)
			}
		}
		return nil
	}
	q, err := tbfParams(bitsPerSec, tb.cfg.MTU)
	if err != nil {
		return err
	}
	ifb, err := nl.LinkByName(name)
	if err != nil {
		if err := nl.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: name, TxQLen: 1000}}); err != nil {
			return fmt.Errorf("testbed %s: add %s: %w", sp.name, name, err)
		}
		if ifb, err = nl.LinkByName(name); err != nil {
			return fmt.Errorf("testbed %s: find %s: %w", sp.name, name, err)
		}
	}
	if err := nl.LinkSetUp(ifb); err != nil {
		return fmt.Errorf("testbed %s: set %s up: %w", sp.name, name, err)
	}
	q.LinkIndex = ifb.Attrs().Index
	if err := nl.QdiscReplace(q); err != nil {
		return fmt.Errorf("testbed %s: rate %s on %s: %w", sp.name, FormatRate(bitsPerSec), name, err)
	}
	if err := nl.QdiscAdd(ingressQdisc(l)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("testbed %s: ingress qdisc on %s: %w", sp.name, link, err)
	}
	// u32 with no selector matches every frame (matchall is not in every
	// kernel; this one lacks it).
	f := &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: l.Attrs().Index, Parent: ingressHandle, Priority: 1, Protocol: unix.ETH_P_ALL},
		Actions:     []netlink.Action{netlink.NewMirredAction(ifb.Attrs().Index)},
	}
	if err := nl.FilterReplace(f); err != nil {
		return fmt.Errorf("testbed %s: redirect %s's ingress to %s: %w", sp.name, link, name, err)
	}
	return nil
}
