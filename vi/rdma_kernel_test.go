package vi

import (
	"fmt"
	"os"
	"testing"

	"github.com/ethervia/ethervia/bpf"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/afpacket"
	"github.com/ethervia/ethervia/nic/afxdp"
	"github.com/ethervia/ethervia/testbed"
)

// kernelHosts opens a provider with options o on each host of a fresh
// two-host testbed of the given topology through driver drv ("afpacket" or
// "afxdp"); the testbed, devices and providers are closed when the test
// ends.
func kernelHosts(t testing.TB, drv, name string, topo testbed.Topology, o Options) (*testbed.Testbed, [2]*host) {
	t.Helper()
	tb, err := testbed.New(testbed.Config{Hosts: 2, Topology: topo, MTU: 1500, Name: name})
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
		o.Config = cfg
		p, err := Open(dev, o)
		if err != nil {
			dev.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() {
			p.Close()
			dev.Close()
		})
		hosts[i] = &host{dev: dev, p: p, ptag: p.NewPTag()}
	}
	return tb, hosts
}

// TestRDMAKernelDrivers runs the RDMA matrix (sizes up to 16 MiB, 1 MiB
// with -short) and the protection cases on AF_PACKET and AF_XDP over a
// testbed.Pair, and the matrix again through the testbed's switch with
// frames dropped (1%), corrupted (0.5%) and duplicated (1%) towards each
// host: on a Pair the tc fault stage sits at the host's ingress, which
// frames redirected to AF_XDP never reach, while the switch port's egress
// sees every frame.
func TestRDMAKernelDrivers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: the RDMA kernel-driver test needs root (network namespaces, AF_PACKET, AF_XDP, tc); run as root, as CI does")
	}
	max := 16 << 20
	if testing.Short() {
		max = 1 << 20
	}
	levels := []Level{ReliableDelivery, ReliableReception}
	for _, drv := range []string{"afpacket", "afxdp"} {
		t.Run(drv, func(t *testing.T) {
			disc := uint64(100)
			env := func(t *testing.T, hosts [2]*host, level Level) *rdmaEnv {
				disc++
				e := &rdmaEnv{a: hosts[0], b: hosts[1], level: level}
				e.va = e.a.newVI(t, Attributes{Reliability: level})
				e.vb = e.b.newVI(t, Attributes{Reliability: level, EnableRDMAWrite: true, EnableRDMARead: true})
				connectCS(t, e.a, e.b, e.va, e.vb, disc)
				t.Cleanup(func() {
					e.va.Close()
					e.vb.Close()
				})
				return e
			}
			t.Run("pair", func(t *testing.T) {
				_, hosts := kernelHosts(t, drv, "rdmap", testbed.Pair, rdmaOptions)
				for _, level := range levels {
					t.Run(level.String(), func(t *testing.T) {
						e := env(t, hosts, level)
						rdmaMatrix(t, e, rdmaSizes(e.a.p.Attributes().MaxPayload, max))
					})
				}
				for _, level := range levels {
					for _, c := range protCases {
						t.Run(fmt.Sprintf("%v/%s", level, c.name), func(t *testing.T) {
							runProtCase(t, env(t, hosts, level), c)
						})
					}
				}
			})
			t.Run("switch-faulty", func(t *testing.T) {
				tb, hosts := kernelHosts(t, drv, "rdmas", testbed.Switch, rdmaOptions)
				for i := range hosts {
					if err := tb.SetFault(i, 0, bpf.FaultConfig{Drop: 0.01, Corrupt: 0.005, Duplicate: 0.01}); err != nil {
						t.Fatal(err)
					}
				}
				for _, level := range levels {
					t.Run(level.String(), func(t *testing.T) {
						e := env(t, hosts, level)
						rdmaMatrix(t, e, rdmaSizes(e.a.p.Attributes().MaxPayload, max))
						if s := e.va.Stats(); s.Retransmits == 0 {
							t.Errorf("frames dropped but nothing retransmitted: %+v", s.Stats)
						}
					})
				}
				for i := range hosts {
					fc, err := tb.FaultCounters(i, 0)
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("switch port to host %d: %+v", i, fc)
					if fc.Dropped == 0 || fc.Corrupted == 0 || fc.Duplicated == 0 {
						t.Errorf("the fault injector missed a fault towards host %d: %+v", i, fc)
					}
				}
			})
		})
	}
}
