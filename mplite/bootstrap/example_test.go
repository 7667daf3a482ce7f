package bootstrap_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/ethervia/ethervia/mplite/bootstrap"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
)

// Two ranks on one switch learn each other's MAC addresses.
func ExampleDiscover() {
	sw := memnic.NewSwitch(1)
	a, _ := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: 9}})
	b, _ := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: 9}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go bootstrap.Discover(ctx, b, bootstrap.Config{Rank: 1, Size: 2, JobKey: 9})
	macs, err := bootstrap.Discover(ctx, a, bootstrap.Config{Rank: 0, Size: 2, JobKey: 9})
	fmt.Println(net.HardwareAddr(macs[1].MAC[:]).String() == b.HardwareAddr().String(), err)
	// Output: true <nil>
}
