package vi

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/reliability"
)

// A peer killed in mid-transfer (link down, or its device closed) gives an
// error on the survivor within the configured PeerTimeout, every pending
// descriptor completes with an error, and no Wait hangs.
func TestPeerKilledMidTransfer(t *testing.T) {
	const peerTimeout = 300 * time.Millisecond
	for _, level := range allLevels {
		for _, mode := range []string{"link-down", "device-closed"} {
			t.Run(level.String()+"/"+mode, func(t *testing.T) {
				l := newLink(t, level, memnic.Faults{}, Options{PeerTimeout: peerTimeout})
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()

				// a also waits for messages from b that will never come.
				for i := 0; i < 4; i++ {
					mustf(t, l.va.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{l.a.buf(t, 1000)}}), "post")
				}
				var wg sync.WaitGroup
				var aRecv error
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						d, err := l.va.RecvWait(ctx)
						if err != nil {
							aRecv = err
							return
						}
						if !d.Status.Failed() {
							aRecv = errors.New("a received a message nobody sent")
							return
						}
					}
				}()

				// b receives until it dies.
				received := make(chan int, 1000)
				wg.Add(1)
				go func() {
					defer wg.Done()
					rds := l.recvs(t, 8, 100000)
					_ = rds
					for n := 0; ; n++ {
						d, err := l.vb.RecvWait(ctx)
						if err != nil || d.Status.Failed() {
							return
						}
						received <- n
						d.Reset()
						if l.vb.PostRecv(d) != nil {
							return
						}
					}
				}()

				// a streams until its sends fail.
				var killed time.Time
				var sendFail descriptors.Status
				var sendErr error
				var failedAt time.Time
				sds := make([]*descriptors.Descriptor, 8)
				for i := range sds {
					sds[i] = l.msg(t, i, 100000)
				}
				outstanding := 0
			stream:
				for i := 0; ; i++ {
					if killed.IsZero() && len(received) >= 20 {
						killed = time.Now()
						if mode == "link-down" {
							l.b.port.SetUp(false)
						} else {
							l.b.port.Close()
						}
					}
					if outstanding == len(sds) {
						d, err := l.va.SendWait(ctx)
						if err != nil {
							sendErr, failedAt = err, time.Now()
							break stream
						}
						outstanding--
						if d.Status.Failed() {
							sendFail, failedAt = d.Status, time.Now()
							break stream
						}
					}
					if err := l.va.PostSend(sds[i%len(sds)]); err != nil {
						sendErr, failedAt = err, time.Now()
						break
					}
					outstanding++
				}
				if killed.IsZero() {
					t.Fatalf("the sender failed before the peer was killed: %v %v", sendFail, sendErr)
				}
				// Every other pending send completes with an error too.
				for {
					d, ok := l.va.SendDone()
					if !ok {
						break
					}
					if !d.Status.Failed() {
						t.Errorf("a send completed without error after the failure")
					}
				}
				took := failedAt.Sub(killed)
				t.Logf("send failed %v after the kill: %v %v; a: %v", took.Round(time.Millisecond), sendFail, sendErr, l.va.Err())
				if took > peerTimeout+time.Second {
					t.Errorf("failure took %v, peer timeout is %v", took, peerTimeout)
				}
				if sendErr == nil && sendFail&(descriptors.StatusTransport|descriptors.StatusFlushed) == 0 {
					t.Errorf("send status %v, want a transport error or flushed", sendFail)
				}
				if l.va.State() != Error {
					t.Errorf("survivor state %v, want error", l.va.State())
				}
				if !errors.Is(l.va.Err(), reliability.ErrPeerTimeout) || !errors.Is(l.va.Err(), ErrBroken) {
					t.Errorf("survivor error %v, want a broken connection from a peer timeout", l.va.Err())
				}
				wg.Wait() // no Wait hangs: both receivers returned
				if aRecv == nil || ctx.Err() != nil {
					t.Errorf("a's receive wait ended with %v (context %v)", aRecv, ctx.Err())
				}
				if _, err := l.va.SendWait(ctx); err == nil || ctx.Err() != nil {
					t.Errorf("SendWait on an empty queue of a broken VI: %v", err)
				}
			})
		}
	}
}

// Waits blocked in every way return when the provider closes.
func TestCloseWakesWaiters(t *testing.T) {
	sw := memnic.NewSwitch(3)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 1<<20)
	v := a.newVI(t, Attributes{})
	cq, err := a.p.NewCQ(16)
	mustf(t, err, "cq")
	mustf(t, v.PostRecv(&descriptors.Descriptor{Segments: []descriptors.Segment{a.buf(t, 10)}}), "post")
	ctx := ctxT(t, 10*time.Second)
	errs := make(chan error, 3)
	go func() { _, err := v.RecvWait(ctx); errs <- err }()
	go func() { _, err := cq.Wait(ctx); errs <- err }()
	go func() { _, err := a.p.ConnectWait(ctx, 9); errs <- err }()
	time.Sleep(10 * time.Millisecond)
	a.p.Close()
	for i := 0; i < 3; i++ {
		if err := <-errs; ctx.Err() != nil {
			t.Fatalf("a wait ended only with its context: %v", err)
		}
	}
}

// A connection request to nobody times out with its context.
func TestConnectTimeout(t *testing.T) {
	sw := memnic.NewSwitch(3)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	v := a.newVI(t, Attributes{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := v.ConnectRequest(ctx, b.addr(5))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("connect to nobody: %v", err)
	}
	if v.State() != Idle {
		t.Fatalf("state %v after a failed connect", v.State())
	}
}
