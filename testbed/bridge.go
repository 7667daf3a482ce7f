package testbed

import (
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// setBridgeTimers turns STP off and sets the forward delay to 0, so ports
// forward as soon as they are up. netlink.Bridge has no field for either,
// so this is a raw RTM_NEWLINK on a socket inside the bridge's namespace.
func setBridgeTimers(sw *space, index int) error {
	err := sw.run(func() error {
		req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_ACK)
		msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
		msg.Index = int32(index)
		req.AddData(msg)
		info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
		info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("bridge"))
		data := info.AddRtAttr(nl.IFLA_INFO_DATA, nil)
		// The kernel applies STP_STATE after FORWARD_DELAY whatever the
		// order here; STP is off from creation, so 0 is accepted.
		data.AddRtAttr(nl.IFLA_BR_STP_STATE, nl.Uint32Attr(0))
		data.AddRtAttr(nl.IFLA_BR_FORWARD_DELAY, nl.Uint32Attr(0))
		req.AddData(info)
		_, err := req.Execute(unix.NETLINK_ROUTE, 0)
		return err
	})
	if err != nil {
		return fmt.Errorf("testbed %s: bridge STP off, forward delay 0: %w", sw.name, err)
	}
	return nil
}
