package vi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/reliability"
)

// A client repeats its request while the server holds it unanswered. The
// repeats must not come out of ConnectWait as new requests (a server that
// has already connected to that client would reject the copy, and the
// client, if it missed the Accept, would take the Reject as the answer);
// and a Reject reaches the client.
func TestRepeatedRequestNotRequeued(t *testing.T) {
	sw := memnic.NewSwitch(1)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{ConnectRetry: 2 * time.Millisecond}, 0)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{}, 0)
	client := a.newVI(t, Attributes{Reliability: ReliableDelivery})
	done := make(chan error, 1)
	go func() {
		done <- client.ConnectRequest(ctxT(t, 10*time.Second), Address{MAC: b.p.Attributes().HardwareAddr, Discriminator: 9})
	}()
	req, err := b.p.ConnectWait(ctxT(t, 5*time.Second), 9)
	if err != nil {
		t.Fatal(err)
	}
	// Let the client repeat its request many times.
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if dup, err := b.p.ConnectWait(ctx, 9); err == nil {
		t.Fatalf("a repeat of the held request came out as a new one (%v)", dup.Remote())
	}
	if s := b.p.Stats(); s.RepeatedRequests == 0 {
		t.Errorf("no repeated requests counted: %+v", s)
	}
	if err := req.Reject(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrRejected) {
		t.Fatalf("client: %v, want ErrRejected", err)
	}
}

// Two ends ask each other at once and one accepts the other's request on
// the VI whose own request is still under way: the accept wins, the
// abandoned request fails with ErrState, and the connection works.
func TestAcceptSupersedesOwnRequest(t *testing.T) {
	sw := memnic.NewSwitch(2)
	a := newHost(t, sw, 1500, memnic.Faults{}, Options{ConnectRetry: 2 * time.Millisecond}, 1<<16)
	b := newHost(t, sw, 1500, memnic.Faults{}, Options{ConnectRetry: 2 * time.Millisecond}, 1<<16)
	va := a.newVI(t, Attributes{Reliability: ReliableDelivery})
	vb := b.newVI(t, Attributes{Reliability: ReliableDelivery})
	const disc = 11
	// a asks b, which never answers it.
	aDone := make(chan error, 1)
	go func() {
		aDone <- va.ConnectRequest(ctxT(t, 10*time.Second), Address{MAC: b.p.Attributes().HardwareAddr, Discriminator: disc})
	}()
	for deadline := time.Now().Add(5 * time.Second); va.State() != Pending; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a's request never started: %v", va.State())
		}
	}
	// b asks a; a accepts it on va, whose own request is pending.
	bDone := make(chan error, 1)
	go func() {
		bDone <- vb.ConnectRequest(ctxT(t, 10*time.Second), Address{MAC: a.p.Attributes().HardwareAddr, Discriminator: disc})
	}()
	req, err := a.p.ConnectWait(ctxT(t, 5*time.Second), disc)
	if err != nil {
		t.Fatal(err)
	}
	if err := req.Accept(va); err != nil {
		t.Fatalf("accept on a VI with its own request under way: %v", err)
	}
	if err := <-aDone; !errors.Is(err, ErrState) {
		t.Fatalf("a's own request: %v, want ErrState (superseded)", err)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("b's request: %v", err)
	}
	if va.State() != Connected || vb.State() != Connected {
		t.Fatalf("states %v and %v, want both connected", va.State(), vb.State())
	}
	// The connection carries a message both ways.
	ctx := ctxT(t, 10*time.Second)
	for _, pair := range []struct {
		from, to       *VI
		fromHost, host *host
	}{{va, vb, a, b}, {vb, va, b, a}} {
		src, dst := pair.fromHost.buf(t, 100), pair.host.buf(t, 100)
		for i := range src.Buf {
			src.Buf[i] = byte(i)
		}
		rd := &descriptors.Descriptor{Segments: []descriptors.Segment{dst}}
		if err := pair.to.PostRecv(rd); err != nil {
			t.Fatal(err)
		}
		if err := pair.from.PostSend(&descriptors.Descriptor{Segments: []descriptors.Segment{src}}); err != nil {
			t.Fatal(err)
		}
		d, err := pair.to.RecvWait(ctx)
		if err != nil || d.Length != 100 || !bytes.Equal(dst.Buf, src.Buf) {
			t.Fatalf("message after the crossed connect: %v length %d", err, d.Length)
		}
	}
}

// TestConnectFanIn: more clients than the old fixed table (64) ask one
// server at once, and the server answers only after every request is in.
// Each waits in the table (one per VI the server may open) instead of being
// refused and left to retry, and every client connects.
func TestConnectFanIn(t *testing.T) {
	const clients = 100
	sw := memnic.NewSwitch(3)
	server := newHost(t, sw, 1500, memnic.Faults{}, Options{MaxVIs: clients + 8}, 0)
	errc := make(chan error, clients)
	for i := range clients {
		c := newHost(t, sw, 1500, memnic.Faults{}, Options{ConnectRetry: 50 * time.Millisecond}, 0)
		v := c.newVI(t, Attributes{Reliability: ReliableDelivery})
		go func() {
			err := v.ConnectRequest(ctxT(t, 20*time.Second), Address{MAC: server.p.Attributes().HardwareAddr, Discriminator: 7})
			if err != nil {
				err = fmt.Errorf("client %d: %w", i, err)
			}
			errc <- err
		}()
	}
	// Every first request is queued before anyone answers.
	deadline := time.Now().Add(10 * time.Second)
	for server.p.ConnRequests() < clients {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests queued; %+v", server.p.ConnRequests(), clients, server.p.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	for range clients {
		req, err := server.p.ConnectWait(ctxT(t, 5*time.Second), 7)
		if err != nil {
			t.Fatal(err)
		}
		if err := req.Accept(server.newVI(t, Attributes{Reliability: ReliableDelivery})); err != nil {
			t.Fatal(err)
		}
	}
	for range clients {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	if s := server.p.Stats(); s.RefusedRequests != 0 {
		t.Errorf("%d requests refused: %+v", s.RefusedRequests, s)
	}
}

// TestConnRequestFlood: a stranger floods a server with connection
// requests, from its own MAC and from made-up ones, more than the table
// holds. One source keeps at most maxReqsPerSource entries, repeats do not
// keep an entry young, a full table gives way to the newest request, and a
// real client still connects while the flood goes on.
func TestConnRequestFlood(t *testing.T) {
	sw := memnic.NewSwitch(5)
	server := newHost(t, sw, 1500, memnic.Faults{}, Options{MaxVIs: 8}, 0) // a table of minConnReqs
	attacker, err := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: testJob}})
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	dst, _ := nic.MAC(server.p.Attributes().HardwareAddr)
	own, _ := nic.MAC(attacker.HardwareAddr())
	forge := func(src [6]byte, n uint32) {
		b := make([]byte, reliability.HeaderLen)
		reliability.Put(b, &reliability.Header{Dst: dst, Src: src, EtherType: nic.DefaultEtherType, JobKey: testJob,
			Kind: reliability.KindConnReq, SrcVI: uint16(n%60000 + 1), Imm: n + 1, RAddr: 7, MsgLen: 1 << 20,
			RKey: uint32(ReliableDelivery)})
		if _, err := attacker.Send([][]byte{b}); err != nil {
			t.Error(err)
		}
	}
	// From one source: only maxReqsPerSource are kept.
	for i := range uint32(200) {
		forge(own, i)
	}
	deadline := time.Now().Add(5 * time.Second)
	for server.p.ConnRequests()+server.p.Stats().RefusedRequests < 200 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := server.p.ConnRequests(); got != maxReqsPerSource {
		t.Fatalf("%d requests queued from one source, want %d", got, maxReqsPerSource)
	}
	// From made-up sources, beyond the table, again and again while a
	// real client connects.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint32(1000); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			forge([6]byte{0x02, 0xba, 0xd0, byte(i >> 16), byte(i >> 8), byte(i)}, i)
			if i%64 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for server.p.ConnRequests() < maxReqsPerSource+2*minConnReqs {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatalf("the flood did not fill the table: %+v", server.p.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	client := newHost(t, sw, 1500, memnic.Faults{}, Options{ConnectRetry: 5 * time.Millisecond}, 0)
	cv := client.newVI(t, Attributes{Reliability: ReliableDelivery})
	errc := make(chan error, 1)
	go func() {
		errc <- cv.ConnectRequest(ctxT(t, 20*time.Second), Address{MAC: server.p.Attributes().HardwareAddr, Discriminator: 7})
	}()
	want := client.p.Attributes().HardwareAddr.String()
	for end := time.Now().Add(20 * time.Second); ; {
		select {
		case err := <-errc:
			t.Fatalf("the client gave up before it was accepted: %v; server %+v", err, server.p.Stats())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		req, err := server.p.ConnectWait(ctx, 7)
		cancel()
		if err != nil {
			if time.Now().After(end) {
				t.Fatalf("the real client's request never came: %v; %+v", err, server.p.Stats())
			}
			continue
		}
		if req.Remote().MAC.String() != want {
			req.Reject()
			continue
		}
		if err := req.Accept(server.newVI(t, Attributes{Reliability: ReliableDelivery})); err != nil {
			t.Fatal(err)
		}
		break
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if s := server.p.Stats(); s.EvictedRequests == 0 || s.RefusedRequests == 0 {
		t.Errorf("no request evicted or refused under the flood: %+v", s)
	}
}
