package testbed

import (
	"context"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// The kernel finishes bringing a veth up in the background (linkwatch): until
// then its qdisc drops every frame, and a bridge port does not forward until
// it sees carrier. So New and SetPortUp(true) wait until every link of a
// port reports operational state up and every bridge port forwards.

const (
	readyPoll    = 2 * time.Millisecond
	readyTimeout = 30 * time.Second // for New and SetPortUp, which take no context
)

// brStateForwarding is BR_STATE_FORWARDING from linux/if_bridge.h.
const brStateForwarding = 3

// link is a link by namespace and name.
type link struct {
	sp     *space
	name   string
	bridge bool // a bridge port: must forward too
}

// links returns the links of the port of (host, rail) that must be up for
// frames to reach the host. Call with tb.mu held or while building.
func (tb *Testbed) links(host, rail int) []link {
	ifc := hostIface(rail)
	if tb.cfg.Topology == Switch {
		return []link{{tb.hosts[host].sp, ifc, false}, {tb.switches[rail], portIface(host), true}}
	}
	return []link{{tb.hosts[host].sp, ifc, false}, {tb.hosts[1-host].sp, ifc, false}}
}

// waitLinks polls until every link is operationally up (and every bridge
// port forwards), then makes sure the kernel has finished with them.
func waitLinks(ctx context.Context, ls []link) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("testbed: waiting for links: %w", context.Cause(ctx))
	}
	for _, l := range ls {
		for {
			ok, err := linkReady(l)
			if err != nil {
				return err
			}
			if ok {
				break
			}
			t := time.NewTimer(readyPoll)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("testbed %s: %s not up: %w", l.sp.name, l.name, context.Cause(ctx))
			case <-t.C:
			}
		}
	}
	// Linkwatch sets the operational state and then activates the qdisc
	// under the RTNL lock; a request that takes the lock after we saw the
	// state runs after the activation. Setting a link up that is up takes
	// the lock and changes nothing.
	for _, l := range ls {
		if err := setUp(l); err != nil {
			return err
		}
	}
	return nil
}

func setUp(l link) error {
	ln, err := l.sp.nl.LinkByName(l.name)
	if err != nil {
		return fmt.Errorf("testbed %s: find %s: %w", l.sp.name, l.name, err)
	}
	if err := l.sp.nl.LinkSetUp(ln); err != nil {
		return fmt.Errorf("testbed %s: %s up: %w", l.sp.name, l.name, err)
	}
	return nil
}

func linkReady(l link) (bool, error) {
	ln, err := l.sp.nl.LinkByName(l.name)
	if err != nil {
		return false, fmt.Errorf("testbed %s: find %s: %w", l.sp.name, l.name, err)
	}
	if ln.Attrs().OperState != netlink.OperUp {
		return false, nil
	}
	if !l.bridge {
		return true, nil
	}
	st, err := bridgePortState(l.sp, ln.Attrs().Index)
	if err != nil {
		return false, err
	}
	return st == brStateForwarding, nil
}

// bridgePortState returns the STP state of a bridge port from an AF_BRIDGE
// link dump (netlink.Protinfo has no state field).
func bridgePortState(sp *space, index int) (uint8, error) {
	var state uint8
	found := false
	err := sp.run(func() error {
		req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_DUMP)
		req.AddData(nl.NewIfInfomsg(unix.AF_BRIDGE))
		msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			ifi := nl.DeserializeIfInfomsg(m)
			if int(ifi.Index) != index {
				continue
			}
			attrs, err := nl.ParseRouteAttr(m[ifi.Len():])
			if err != nil {
				return err
			}
			for _, a := range attrs {
				if a.Attr.Type&^unix.NLA_F_NESTED != unix.IFLA_PROTINFO {
					continue
				}
				infos, err := nl.ParseRouteAttr(a.Value)
				if err != nil {
					return err
				}
				for _, in := range infos {
					if in.Attr.Type == nl.IFLA_BRPORT_STATE && len(in.Value) >= 1 {
						state, found = in.Value[0], true
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("testbed %s: bridge port state of link %d: %w", sp.name, index, err)
	}
	if !found {
		return 0, fmt.Errorf("testbed %s: link %d is not a bridge port", sp.name, index)
	}
	return state, nil
}
