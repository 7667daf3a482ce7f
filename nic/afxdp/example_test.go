package afxdp_test

import (
	"log"
	"runtime"
	"time"

	"github.com/vishvananda/netns"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/afxdp"
)

// Open a Device on an interface inside a named network namespace, send a
// frame and receive with spin-then-block.
func Example() {
	type result struct {
		dev *afxdp.Device
		err error
	}
	opened := make(chan result)
	go func() {
		// Open binds the socket and attaches the steering program in the
		// calling thread's namespace. The thread stays locked, so the
		// runtime discards it when the goroutine ends.
		runtime.LockOSThread()
		ns, err := netns.GetFromName("ev-host0")
		if err != nil {
			opened <- result{err: err}
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			opened <- result{err: err}
			return
		}
		dev, err := afxdp.Open(afxdp.Config{Config: nic.Config{JobKey: 42}, Iface: "veth0"})
		opened <- result{dev, err}
	}()
	r := <-opened
	if r.err != nil {
		log.Fatal(r.err)
	}
	dev := r.dev
	defer dev.Close()

	frame := make([]byte, 64)
	nic.PutPrefix(frame, &nic.Prefix{
		Dst:       [6]byte{0x02, 0, 0, 0, 0, 2},
		EtherType: nic.DefaultEtherType, Version: nic.Version, JobKey: 42,
	})
	copy(frame[6:12], dev.HardwareAddr())
	if _, err := dev.Send([][]byte{frame}); err != nil {
		log.Fatal(err)
	}

	bufs := [][]byte{make([]byte, nic.FrameCap(dev.MTU()))}
	lens := []int{0}
	for spins := 0; ; spins++ {
		n, err := dev.Recv(bufs, lens)
		if err != nil {
			log.Fatal(err)
		}
		if n > 0 {
			log.Printf("got %d bytes", lens[0])
			return
		}
		if spins > 1000 {
			if err := dev.Wait(time.Now().Add(time.Second)); err != nil {
				log.Fatal(err)
			}
		}
	}
}
