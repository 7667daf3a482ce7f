package bonding_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ethervia/ethervia/bonding"
	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/vi"
)

// Two hosts bonded over two in-process rails: a 100 KB message is striped
// over both and arrives whole.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const rails = 2
	var devs [2][]nic.Device
	for r := range rails {
		sw := memnic.NewSwitch(uint64(r))
		for h := range 2 {
			p, err := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: 1}, MTU: 9000})
			if err != nil {
				panic(err)
			}
			defer p.Close()
			devs[h] = append(devs[h], p)
		}
	}
	type host struct {
		b   *bonding.Bond
		v   *bonding.VI
		buf []byte
		h   descriptors.MemHandle
	}
	var hosts [2]host
	for i := range hosts {
		b, err := bonding.Open(devs[i], bonding.Options{Options: vi.Options{Config: nic.Config{JobKey: 1}}})
		if err != nil {
			panic(err)
		}
		defer b.Close()
		tag := b.NewPTag()
		buf := make([]byte, 100_000)
		h, err := b.RegisterMemory(buf, tag, 0)
		if err != nil {
			panic(err)
		}
		v, err := b.NewVI(bonding.Attributes{PTag: tag})
		if err != nil {
			panic(err)
		}
		hosts[i] = host{b: b, v: v, buf: buf, h: h}
	}
	// The receiver posts its buffer before connecting: a credit.
	rd := &descriptors.Descriptor{Segments: []descriptors.Segment{{Buf: hosts[1].buf, Handle: hosts[1].h}}}
	if err := hosts[1].v.PostRecv(rd); err != nil {
		panic(err)
	}
	errc := make(chan error, 1)
	go func() {
		errc <- hosts[1].v.ConnectPeer(ctx, bonding.Peer{MACs: hosts[0].b.HardwareAddrs(), Discriminator: 42})
	}()
	if err := hosts[0].v.ConnectPeer(ctx, bonding.Peer{MACs: hosts[1].b.HardwareAddrs(), Discriminator: 42}); err != nil {
		panic(err)
	}
	if err := <-errc; err != nil {
		panic(err)
	}
	for i := range hosts[0].buf {
		hosts[0].buf[i] = byte(i % 251)
	}
	sd := &descriptors.Descriptor{Segments: []descriptors.Segment{{Buf: hosts[0].buf, Handle: hosts[0].h}}}
	if err := hosts[0].v.PostSend(sd); err != nil {
		panic(err)
	}
	if _, err := hosts[0].v.SendWait(ctx); err != nil {
		panic(err)
	}
	d, err := hosts[1].v.RecvWait(ctx)
	if err != nil {
		panic(err)
	}
	ok := true
	for i, c := range hosts[1].buf {
		ok = ok && c == byte(i%251)
	}
	used := 0
	for _, r := range hosts[0].v.Stats().Rails {
		if r.SentBytes > 0 {
			used++
		}
	}
	fmt.Println(d.Status, d.Length, ok, "rails used:", used)
	// Output: done 100000 true rails used: 2
}
