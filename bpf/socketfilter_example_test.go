package bpf_test

import (
	"fmt"
	"net"

	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/bpf"
	"github.com/ethervia/ethervia/nic"
)

// NewCountingSocketFilter loads the eBPF filter (root only); SO_ATTACH_BPF
// puts it on an AF_PACKET socket in place of the classic filter, which
// guards the socket until then. Counters then tell how many frames of other
// jobs the kernel refused.
func ExampleNewCountingSocketFilter() {
	f := nic.Config{JobKey: 42}.Filter()
	classic, err := bpf.SocketFilter(f)
	if err != nil {
		panic(err)
	}
	ifi, err := net.InterfaceByName("eth0")
	if err != nil {
		panic(err)
	}
	conn, err := packet.Listen(ifi, packet.Raw, int(f.EtherType), &packet.Config{Filter: classic})
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	sf, err := bpf.NewCountingSocketFilter(f)
	if err != nil {
		panic(err) // or keep the classic filter
	}
	defer sf.Close()
	rc, err := conn.SyscallConn()
	if err != nil {
		panic(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_BPF, sf.FD())
	}); err != nil {
		panic(err)
	}
	if serr != nil {
		panic(serr)
	}

	// ... receive ...

	c, err := sf.Counters()
	if err != nil {
		panic(err)
	}
	fmt.Println("other jobs' frames dropped in the kernel:", c.Foreign())
}
