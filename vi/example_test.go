package vi_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/vi"
)

// Two providers on an in-process switch: a server accepts a connection,
// a client sends one message with immediate data.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sw := memnic.NewSwitch(1)
	cfg := nic.Config{JobKey: 7}
	portA, _ := sw.NewPort(memnic.PortConfig{Config: cfg})
	portB, _ := sw.NewPort(memnic.PortConfig{Config: cfg})
	defer portA.Close()
	defer portB.Close()
	client, _ := vi.Open(portA, vi.Options{Config: cfg})
	server, _ := vi.Open(portB, vi.Options{Config: cfg})
	defer client.Close()
	defer server.Close()

	// The server registers a buffer, pre-posts a receive and waits.
	sTag := server.NewPTag()
	rbuf := make([]byte, 64)
	rh, _ := server.RegisterMemory(rbuf, sTag, 0)
	sv, _ := server.NewVI(vi.Attributes{Reliability: vi.ReliableReception, PTag: sTag})
	recv := &descriptors.Descriptor{Segments: []descriptors.Segment{{Buf: rbuf, Handle: rh}}}
	sv.PostRecv(recv)
	accepted := make(chan error, 1)
	go func() {
		req, err := server.ConnectWait(ctx, 42)
		if err == nil {
			err = req.Accept(sv)
		}
		accepted <- err
	}()

	// The client connects and sends.
	cTag := client.NewPTag()
	sbuf := []byte("hello, VI")
	sh, _ := client.RegisterMemory(sbuf, cTag, 0)
	cv, _ := client.NewVI(vi.Attributes{Reliability: vi.ReliableReception, PTag: cTag})
	if err := cv.ConnectRequest(ctx, vi.Address{MAC: portB.HardwareAddr(), Discriminator: 42}); err != nil {
		fmt.Println(err)
		return
	}
	<-accepted
	send := &descriptors.Descriptor{
		Control:  descriptors.Control{Immediate: true, ImmData: 7},
		Segments: []descriptors.Segment{{Buf: sbuf, Handle: sh}},
	}
	cv.PostSend(send)
	d, _ := cv.SendWait(ctx) // reliable reception: the data is placed
	fmt.Println("send:", d.Status)

	r, _ := sv.RecvWait(ctx)
	fmt.Printf("recv: %v %q imm=%d\n", r.Status, r.Segments[0].Buf[:r.Length], r.ImmData)
	// Output:
	// send: done
	// recv: done|immediate "hello, VI" imm=7
}

// A helper goroutine waits on a completion queue until a completion comes
// or someone else starts polling (here: a flag), whichever is first.
func ExampleCQ_WaitOr() {
	sw := memnic.NewSwitch(1)
	port, _ := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: 7}})
	defer port.Close()
	p, _ := vi.Open(port, vi.Options{Config: nic.Config{JobKey: 7}})
	defer p.Close()
	cq, _ := p.NewCQ(16)

	var polling atomic.Bool
	time.AfterFunc(10*time.Millisecond, func() { polling.Store(true) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, ok, err := cq.WaitOr(ctx, polling.Load)
	fmt.Println("completion:", ok, "error:", err)
	// Output:
	// completion: false error: <nil>
}
