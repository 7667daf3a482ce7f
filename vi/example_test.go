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

// A consumer that looks at several completion queues of one provider
// polls the provider once and then takes each queue's completions with
// Ready. The sending VI also asks for acknowledgements at once, its own
// timing in place of the provider's.
func ExampleProvider_Poll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sw := memnic.NewSwitch(1)
	cfg := nic.Config{JobKey: 7}
	portA, _ := sw.NewPort(memnic.PortConfig{Config: cfg})
	portB, _ := sw.NewPort(memnic.PortConfig{Config: cfg})
	defer portA.Close()
	defer portB.Close()
	a, _ := vi.Open(portA, vi.Options{Config: cfg})
	b, _ := vi.Open(portB, vi.Options{Config: cfg})
	defer a.Close()
	defer b.Close()

	bTag := b.NewPTag()
	queues := make([]*vi.CQ, 2)
	for i := range queues {
		queues[i], _ = b.NewCQ(16)
	}
	rbuf := make([]byte, 64)
	rh, _ := b.RegisterMemory(rbuf, bTag, 0)
	bv, _ := b.NewVI(vi.Attributes{Reliability: vi.ReliableReception, PTag: bTag, RecvCQ: queues[1], QueueDepth: 16})
	bv.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{{Buf: rbuf, Handle: rh}}})

	aTag := a.NewPTag()
	sbuf := []byte("polled once")
	sh, _ := a.RegisterMemory(sbuf, aTag, 0)
	av, _ := a.NewVI(vi.Attributes{Reliability: vi.ReliableReception, PTag: aTag, AckReqDelay: -1})
	connected := make(chan error, 1)
	go func() { connected <- bv.ConnectPeer(ctx, vi.Address{MAC: portA.HardwareAddr(), Discriminator: 9}) }()
	if err := av.ConnectPeer(ctx, vi.Address{MAC: portB.HardwareAddr(), Discriminator: 9}); err != nil {
		fmt.Println(err)
		return
	}
	if err := <-connected; err != nil {
		fmt.Println(err)
		return
	}
	av.PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{{Buf: sbuf, Handle: sh}}})

	for ctx.Err() == nil {
		b.Poll()
		for i, q := range queues {
			if c, ok := q.Ready(); ok && c.Recv {
				d, _ := c.VI.RecvDone()
				fmt.Printf("queue %d: %q\n", i, rbuf[:d.Length])
				return
			}
		}
		time.Sleep(100 * time.Microsecond)
	}
	fmt.Println(ctx.Err())
	// Output: queue 1: "polled once"
}
