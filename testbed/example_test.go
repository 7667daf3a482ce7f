package testbed_test

import (
	"fmt"
	"log"
	"net"
	"os/exec"

	"github.com/ethervia/ethervia/testbed"
)

// Build a three-host switch with two rails limited to 1 gbit/s per port, talk
// UDP between two hosts, and run a command inside one. Needs root.
func Example() {
	rate, err := testbed.ParseRate("1gbit")
	if err != nil {
		log.Fatal(err)
	}
	tb, err := testbed.New(testbed.Config{Hosts: 3, Rails: 2, Topology: testbed.Switch, Rate: rate})
	if err != nil {
		log.Fatal(err)
	}
	defer tb.Close()

	a, b := tb.Host(0), tb.Host(1)
	var srv *net.UDPConn
	// Sockets opened inside Do belong to the host's namespace for good.
	err = b.Do(func() (err error) {
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: b.IPs[0], Port: 9000})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	err = a.Do(func() error {
		c, err := net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("hello"))
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, 16)
	n, from, err := srv.ReadFromUDP(buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s from %v\n", buf[:n], from.IP)

	// A child process started by Host.Start lives in the host's namespace.
	cmd := exec.Command("cat", "/proc/net/dev")
	if err := a.Start(cmd); err != nil {
		log.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		log.Fatal(err)
	}

	// Flap host 2's port on rail 1, and limit rail 0 towards host 2.
	if err := tb.SetPortUp(2, 1, false); err != nil {
		log.Fatal(err)
	}
	if err := tb.SetPortUp(2, 1, true); err != nil {
		log.Fatal(err)
	}
	if err := tb.SetRate(2, 0, 50_000_000); err != nil {
		log.Fatal(err)
	}
}
