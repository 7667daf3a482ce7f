package memnic_test

import (
	"fmt"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
)

// Two ports on an in-process switch exchange one Ethervia frame.
func Example() {
	sw := memnic.NewSwitch(1)
	cfg := memnic.PortConfig{Config: nic.Config{JobKey: 7}}
	a, _ := sw.NewPort(cfg)
	b, _ := sw.NewPort(cfg)
	defer a.Close()
	defer b.Close()

	f := make([]byte, 64)
	dst, _ := nic.MAC(b.HardwareAddr())
	src, _ := nic.MAC(a.HardwareAddr())
	nic.PutPrefix(f, &nic.Prefix{Dst: dst, Src: src, EtherType: nic.DefaultEtherType, Version: nic.Version, JobKey: 7})
	a.Send([][]byte{f})

	bufs, lens := [][]byte{make([]byte, nic.FrameCap(b.MTU()))}, make([]int, 1)
	b.Wait(time.Now().Add(time.Second))
	n, _ := b.Recv(bufs, lens)
	fmt.Println(n, lens[0])
	// Output: 1 64
}
