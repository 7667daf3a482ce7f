package reliability

import (
	"errors"
	"testing"
)

// TestConnAccessors covers Conn.Config, Conn.Endpoint and Conn.Window, which
// no other package calls.
func TestConnAccessors(t *testing.T) {
	ep := Endpoint{Local: [6]byte{2, 0, 0, 0, 0, 1}, Remote: [6]byte{2, 0, 0, 0, 0, 2}, EtherType: 0x88b5,
		JobKey: 9, LocalVI: 3, RemoteVI: 4, LocalConnID: 11, RemoteConnID: 12, ISN: 100, PeerISN: 200, PeerRecvWindow: 48}
	c, err := NewConn(Config{Level: ReliableDelivery, FrameCap: 1500, Window: 100}, ep, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Endpoint(); got != ep {
		t.Fatalf("Endpoint = %+v, want %+v", got, ep)
	}
	cfg := c.Config()
	if cfg != (Config{Level: ReliableDelivery, FrameCap: 1500, Window: 100}).WithDefaults() {
		t.Fatalf("Config = %+v, want the defaults applied", cfg)
	}
	if cfg.Window != 128 || cfg.RecvWindow != 256 || cfg.TxPool != 64 || cfg.ReorderThreshold != 3 || cfg.AckEvery != 32 {
		t.Fatalf("Config defaults: %+v", cfg)
	}
	// Window 100 rounds up to 128; the peer's window of 48 cuts it to the
	// largest power of two not above 48.
	if c.Window() != 32 {
		t.Fatalf("Window = %d, want 32", c.Window())
	}
	c2, err := NewConn(Config{Level: ReliableDelivery, FrameCap: 1500, Window: 100}, Endpoint{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Window() != 128 {
		t.Fatalf("Window without a peer limit = %d, want 128", c2.Window())
	}
}

func TestDisconnectErrorText(t *testing.T) {
	for _, tc := range []struct {
		e       DisconnectError
		text    string
		timeout bool
	}{
		{DisconnectError{Reason: ReasonTransport}, ErrPeerTimeout.Error(), true},
		{DisconnectError{Reason: ReasonTransport, Remote: true}, "reliability: remote disconnect: transport failure", false},
		{DisconnectError{Reason: ReasonNormal, Remote: true}, "reliability: remote disconnect: disconnected", false},
		{DisconnectError{Reason: ReasonProtocol, Seq: 17, HasSeq: true}, "reliability: local disconnect: protocol violation (frame 17)", false},
		{DisconnectError{Reason: 99}, "reliability: local disconnect: reason(99)", false},
	} {
		var err error = &tc.e
		if got := err.Error(); got != tc.text {
			t.Errorf("%+v: Error = %q, want %q", tc.e, got, tc.text)
		}
		if got := errors.Is(err, ErrPeerTimeout); got != tc.timeout {
			t.Errorf("%+v: errors.Is(ErrPeerTimeout) = %v", tc.e, got)
		}
		var de *DisconnectError
		if !errors.As(err, &de) || de.Reason != tc.e.Reason {
			t.Errorf("%+v: errors.As failed", tc.e)
		}
	}
}

func TestKindAndReasonString(t *testing.T) {
	kinds := map[Kind]string{KindData: "data", KindWrite: "write", KindReadReq: "read-req", KindReadResp: "read-resp",
		KindAck: "ack", KindConnReq: "conn-req", KindConnAccept: "conn-accept", KindConnReject: "conn-reject",
		KindPeerReq: "peer-req", KindDisconnect: "disconnect", 0: "kind(0)", 11: "kind(11)"}
	for k, want := range kinds {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String = %q, want %q", uint8(k), got, want)
		}
	}
	reasons := map[Reason]string{ReasonNormal: "disconnected", ReasonLength: "receive descriptor too small",
		ReasonRDMAProtection: "RDMA protection", ReasonTransport: "transport failure", ReasonProtocol: "protocol violation",
		ReasonNoDescriptor: "no receive descriptor", ReasonClosed: "provider closed", ReasonNoConnection: "no such connection",
		8: "reason(8)"}
	for r, want := range reasons {
		if got := r.String(); got != want {
			t.Errorf("Reason(%d).String = %q, want %q", uint32(r), got, want)
		}
	}
}

// TestFrameLen checks FrameLen against Put and Parse: a frame of exactly
// FrameLen(n) bytes parses with its n-byte payload, one byte less does not.
func TestFrameLen(t *testing.T) {
	for _, n := range []int{0, 1, 100, 1400} {
		frame := make([]byte, FrameLen(n)+8)
		for i := range n {
			frame[HeaderLen+i] = byte(i*3 + 1)
		}
		Put(frame, &Header{Kind: KindData, Length: n, Seq: 5})
		var h Header
		if err := Parse(frame[:FrameLen(n)], &h); err != nil {
			t.Fatalf("payload %d: frame of FrameLen bytes: %v", n, err)
		}
		if p := Payload(frame, &h); len(p) != n || (n > 0 && p[n-1] != byte((n-1)*3+1)) {
			t.Fatalf("payload %d: got %d bytes", n, len(p))
		}
		if err := Parse(frame[:FrameLen(n)-1], &h); err == nil {
			t.Fatalf("payload %d: frame one byte short of FrameLen parsed", n)
		}
	}
}
