package mplite

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// fakeNet is a host with the given interfaces (name -> IPv4/len, "" for
// none), routing table and route to every destination.
func fakeNet(ifaces map[string]string, route string, via net.IP) netInfo {
	var list []net.Interface
	i := 1
	for name := range ifaces {
		ifc := net.Interface{Index: i, Name: name, Flags: net.FlagUp, HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, byte(i)}}
		if name == "lo" {
			ifc.Flags |= net.FlagLoopback
			ifc.HardwareAddr = nil
		}
		list = append(list, ifc)
		i++
	}
	return netInfo{
		interfaces: func() ([]net.Interface, error) { return list, nil },
		addrs: func(ifc net.Interface) ([]net.Addr, error) {
			if s := ifaces[ifc.Name]; s != "" {
				ip, n, err := net.ParseCIDR(s)
				if err != nil {
					return nil, err
				}
				n.IP = ip
				return []net.Addr{n}, nil
			}
			return nil, nil
		},
		routeTable: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(route)), nil },
		routeTo: func(net.IP) (net.IP, error) {
			if via == nil {
				return nil, errors.New("no route")
			}
			return via, nil
		},
		lookup: func(context.Context, string) ([]net.IP, error) { return nil, errors.New("no resolver") },
	}
}

// noNet is a host with loopback only.
func noNet() netInfo { return fakeNet(map[string]string{"lo": "127.0.0.1/8"}, "", nil) }

const routeHeader = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"

func TestChooseIface(t *testing.T) {
	two := map[string]string{"lo": "127.0.0.1/8", "eth0": "198.18.0.3/24", "eth1": "10.1.0.3/16"}
	defRoute := routeHeader + "eth1\t00000000\t0100010A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t000012C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	for _, tc := range []struct {
		name string
		env  map[string]string
		ni   netInfo
		want string
	}{
		{"hydra's -iface", map[string]string{"MPIR_CVAR_NEMESIS_TCP_NETWORK_IFACE": "eth1", "MPIR_CVAR_CH3_INTERFACE_HOSTNAME": "198.18.0.3"},
			fakeNet(two, defRoute, nil), "eth1"},
		{"hydra's host name", map[string]string{"MPIR_CVAR_CH3_INTERFACE_HOSTNAME": "198.18.0.3"}, fakeNet(two, defRoute, nil), "eth0"},
		{"open mpi's launcher", map[string]string{"OMPI_MCA_orte_hnp_uri": "1301676032.0;tcp://198.18.0.1:41581"},
			fakeNet(two, defRoute, net.ParseIP("198.18.0.3")), "eth0"},
		{"slurm's launch node", map[string]string{"SLURM_LAUNCH_NODE_IPADDR": "10.1.0.1"},
			fakeNet(two, "", net.ParseIP("10.1.0.3")), "eth1"},
		{"default route", map[string]string{"MPIR_CVAR_CH3_INTERFACE_HOSTNAME": "unknown-host"}, fakeNet(two, defRoute, nil), "eth1"},
		{"the only one up", nil, fakeNet(map[string]string{"lo": "127.0.0.1/8", "eth0": ""}, routeHeader, nil), "eth0"},
		{"none", nil, fakeNet(two, routeHeader, nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why, err := chooseIface(context.Background(), envOf(tc.env), nil, tc.ni)
			if got != tc.want || (err != nil) != (tc.want == "") {
				t.Fatalf("chose %q (%s), %v; want %q", got, why, err, tc.want)
			}
			if err != nil && !errors.Is(err, ErrEnvironment) {
				t.Fatalf("error %v is not ErrEnvironment", err)
			}
		})
	}
}

func TestJobKeyOf(t *testing.T) {
	a, b := jobKeyOf("pmi:kvs_1_0"), jobKeyOf("pmi:kvs_2_0")
	if a == b || a == 0 || b == 0 || a != jobKeyOf("pmi:kvs_1_0") {
		t.Fatalf("keys %#x %#x", a, b)
	}
	if got := launcherURIHost("1.0;tcp://192.0.2.2:41581;tcp6://[fd00::2]:46829"); got != "192.0.2.2" {
		t.Fatalf("launcherURIHost: %q", got)
	}
}
