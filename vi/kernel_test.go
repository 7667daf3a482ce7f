package vi

import (
	"os"
	"testing"
	"time"

	"github.com/ethervia/ethervia/bpf"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/afpacket"
	"github.com/ethervia/ethervia/nic/afxdp"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/testbed"
)

// The stress workload on both kernel drivers: two hosts on the testbed's
// switch (one bridge, a veth per host), the switch ports dropping 5% of our
// frames towards each host.
func TestKernelDrivers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: the kernel-driver test needs root (network namespaces, AF_PACKET, AF_XDP, tc); run as root, as CI does")
	}
	n := 10000
	if testing.Short() {
		n = 1000
	}
	for _, drv := range []string{"afpacket", "afxdp"} {
		t.Run(drv, func(t *testing.T) {
			tb, err := testbed.New(testbed.Config{Hosts: 2, Topology: testbed.Switch, MTU: 1500, Name: "vi"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tb.Close() })
			var hosts [2]*host
			for i := range hosts {
				th := tb.Host(i)
				var dev nic.Device
				cfg := nic.Config{JobKey: testJob}
				err := th.Do(func() (err error) {
					if drv == "afpacket" {
						dev, err = afpacket.Open(afpacket.Config{Config: cfg, Iface: th.Ifaces[0]})
					} else {
						dev, err = afxdp.Open(afxdp.Config{Config: cfg, Iface: th.Ifaces[0]})
					}
					return err
				})
				if err != nil {
					t.Fatalf("host %d: open %s: %v", i, drv, err)
				}
				p, err := Open(dev, Options{Config: cfg, PeerTimeout: 10 * time.Second})
				if err != nil {
					dev.Close()
					t.Fatal(err)
				}
				t.Cleanup(func() {
					p.Close()
					dev.Close()
				})
				hosts[i] = &host{dev: dev, p: p, ptag: p.NewPTag()}
				if err := tb.SetFault(i, 0, bpf.FaultConfig{Drop: 0.05}); err != nil {
					t.Fatal(err)
				}
			}
			runWorkload(t, stressCase{name: drv + "-drop5", level: ReliableReception,
				faults: memnic.Faults{Loss: 0.05}, n: n}, 1, hosts)
			for i := range hosts {
				fc, err := tb.FaultCounters(i, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("switch port to host %d: %+v", i, fc)
				if fc.Dropped == 0 {
					t.Errorf("the fault injector dropped nothing towards host %d", i)
				}
			}
		})
	}
}
