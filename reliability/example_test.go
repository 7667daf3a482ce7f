package reliability_test

import (
	"fmt"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/reliability"
)

// Two connections exchange one message over a perfect in-memory wire. The
// state machine is driven by hand: queue, output, input, deliver.
func Example() {
	cfg := reliability.Config{Level: reliability.ReliableDelivery, FrameCap: 1518}
	a := reliability.Endpoint{Local: [6]byte{2, 0, 0, 0, 0, 1}, Remote: [6]byte{2, 0, 0, 0, 0, 2},
		EtherType: nic.DefaultEtherType, LocalVI: 1, RemoteVI: 2, LocalConnID: 10, RemoteConnID: 20,
		ISN: 500, PeerISN: 900, PeerCredit: 1, InitialRecvCred: 1}
	b := a
	b.Local, b.Remote, b.LocalVI, b.RemoteVI = a.Remote, a.Local, 2, 1
	b.LocalConnID, b.RemoteConnID, b.ISN, b.PeerISN = 20, 10, 900, 500
	now := reliability.Time(1)
	ca, _ := reliability.NewConn(cfg, a, now)
	cb, _ := reliability.NewConn(cfg, b, now)

	// a sends "hi" as message 0.
	f := ca.NewFrame()
	n := copy(f[reliability.HeaderLen:], "hi")
	ca.Queue(f, &reliability.Frag{Kind: reliability.KindData, Flags: reliability.FlagFirst | reliability.FlagLast,
		Length: n, Msg: ca.TakeMessage(), MsgLen: uint32(n)})
	out, _ := ca.Output(now, make([][]byte, 0, 8))

	// b receives it, places it and completes it.
	var h reliability.Header
	reliability.Parse(out[0], &h)
	if cb.Input(now, &h)&reliability.Accept != 0 {
		fmt.Printf("payload %q\n", reliability.Payload(out[0], &h))
		cb.Deliver(now, &h)
	}
	c, _ := cb.NextCompletion()
	fmt.Println("completed message", c.Aux)

	// b's acknowledgement (here forced at once) frees a's window.
	now += 1e6
	acks, _ := cb.Output(now, make([][]byte, 0, 8))
	reliability.Parse(acks[0], &h)
	ca.Input(now, &h)
	fmt.Println("all acknowledged:", ca.SndUna() == ca.SndNxt())
	// Output:
	// payload "hi"
	// completed message 0
	// all acknowledged: true
}
