package reliability

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
)

func sampleFrame(kind Kind, flags Flags, payload []byte) []byte {
	at := PayloadOffset(kind, flags)
	b := make([]byte, at+len(payload))
	copy(b[at:], payload)
	h := Header{Dst: [6]byte{2, 0, 0, 0, 0, 2}, Src: [6]byte{2, 0, 0, 0, 0, 1}, EtherType: nic.DefaultEtherType,
		Kind: kind, Flags: flags, JobKey: 9, DstVI: 2, SrcVI: 1, ConnID: 22, Seq: 100, Ack: 0xfffffff0,
		SACK: 5, Credit: 3, Length: len(payload), Msg: 1, MsgLen: uint32(len(payload)), Imm: 7}
	Put(b, &h)
	return b
}

// sealable reports whether frame holds its header and the payload its
// length field claims, so that Seal can cover it.
func sealable(frame []byte) bool {
	if len(frame) < ShortHeaderLen {
		return false
	}
	l := frameLayout(frame)
	return len(frame) >= l.payload && l.payload+int(binary.BigEndian.Uint16(frame[l.length:])) <= len(frame)
}

func TestHeaderRoundTrip(t *testing.T) {
	f := sampleFrame(KindData, FlagFirst|FlagLast|FlagAck, []byte("hello"))
	f = append(f, make([]byte, 20)...) // Ethernet padding
	var h Header
	if err := Parse(f, &h); err != nil {
		t.Fatal(err)
	}
	if h.Kind != KindData || h.Flags != FlagFirst|FlagLast|FlagAck || h.Seq != 100 || h.Ack != 0xfffffff0 ||
		h.SACK != 5 || h.Credit != 3 || h.Length != 5 || h.ConnID != 22 || h.DstVI != 2 || h.SrcVI != 1 || h.Imm != 7 ||
		string(Payload(f, &h)) != "hello" {
		t.Fatalf("decoded %+v", h)
	}
	g := make([]byte, len(f))
	copy(g[HeaderLen:], Payload(f, &h))
	Put(g, &h)
	if !bytes.Equal(g[:HeaderLen+5], f[:HeaderLen+5]) {
		t.Fatal("Put(Parse(f)) differs from f")
	}
	if n := testing.AllocsPerRun(100, func() { _ = Parse(f, &h) }); n != 0 {
		t.Fatalf("Parse allocates %v", n)
	}
}

func TestParseRejects(t *testing.T) {
	good := sampleFrame(KindData, FlagLast, []byte("payload bytes"))
	var h Header
	if err := Parse(good[:HeaderLen-1], &h); err != ErrShort {
		t.Errorf("short frame: %v", err)
	}
	if err := Parse(good[:len(good)-1], &h); err != ErrLength {
		t.Errorf("truncated payload: %v", err)
	}
	// Every single-bit flip after the MAC addresses is caught.
	for i := 12; i < len(good); i++ {
		for bit := 0; bit < 8; bit++ {
			b := append([]byte(nil), good...)
			b[i] ^= 1 << bit
			if err := Parse(b, &h); err == nil {
				t.Fatalf("flip of byte %d bit %d accepted", i, bit)
			}
		}
	}
	bad := append([]byte(nil), good...)
	bad[nic.OffKind] = 99
	Seal(bad)
	if err := Parse(bad, &h); err != ErrKind {
		t.Errorf("unknown kind: %v", err)
	}
	bad = append([]byte(nil), good...)
	binary.BigEndian.PutUint16(bad[nic.OffFlags:], 0x8000)
	Seal(bad)
	if err := Parse(bad, &h); err != ErrFlags {
		t.Errorf("unknown flag: %v", err)
	}
	bad = append([]byte(nil), good...)
	bad[nic.OffVersion] = nic.Version + 1
	if err := Parse(bad, &h); err != ErrVersion {
		t.Errorf("unknown version: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(sampleFrame(KindData, FlagFirst, []byte("abc")))
	f.Add(sampleFrame(KindAck, FlagAck, nil))
	f.Add(sampleFrame(KindDisconnect, FlagErrSeq, nil))
	f.Add([]byte{1, 2, 3})
	f.Add(sampleFrame(KindData, FlagShort|FlagFirst|FlagAck, []byte("short")))
	f.Add(sampleFrame(KindWrite, FlagShort|FlagImm|FlagLast, []byte("write")))
	f.Add(sampleFrame(KindReadResp, FlagShort, []byte("response")))
	f.Fuzz(func(t *testing.T, frame []byte) {
		var h Header
		if err := Parse(frame, &h); err != nil {
			return
		}
		at := PayloadOffset(h.Kind, h.Flags)
		if h.Length < 0 || at+h.Length > len(frame) {
			t.Fatalf("accepted payload length %d at %d of a %d-byte frame", h.Length, at, len(frame))
		}
		g := make([]byte, at+h.Length)
		copy(g[at:], Payload(frame, &h))
		Put(g, &h)
		if !bytes.Equal(g, frame[:len(g)]) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// FuzzConn feeds a connection in the middle of a transfer arbitrary frames
// (with valid CRCs, as a hostile peer could send). It must never panic and
// never report as complete a message whose frames it was not given, nor
// take an acknowledgement for frames it never sent.
func FuzzConn(f *testing.F) {
	seed := func(frames ...[]byte) []byte {
		var b []byte
		for _, fr := range frames {
			b = binary.BigEndian.AppendUint16(b, uint16(len(fr)))
			b = append(b, fr...)
		}
		return b
	}
	f.Add(byte(2), seed(sampleFrame(KindData, FlagFirst|FlagLast, []byte("x"))))
	f.Add(byte(4), seed(sampleFrame(KindAck, FlagAck, nil), sampleFrame(KindData, FlagLast, nil)))
	f.Add(byte(1), seed(sampleFrame(KindData, 0, []byte("y")), sampleFrame(KindDisconnect, FlagErrSeq|FlagAck, nil)))
	f.Add(byte(2), seed(sampleFrame(KindData, FlagShort|FlagAck|FlagFirst|FlagLast, []byte("z")), sampleFrame(KindData, FlagShort, nil)))
	f.Fuzz(func(t *testing.T, lvl byte, data []byte) {
		level := []Level{Unreliable, ReliableDelivery, ReliableReception}[int(lvl)%3]
		s := newSim(t, level, 1, 4, nil)
		c := s.b.c // b receives the hostile frames
		// b has something in flight so that acknowledgements matter.
		s.b.sendMsgs = [][]byte{make([]byte, 3000), make([]byte, 10)}
		s.b.pump(s.now)
		s.out, _ = c.Output(s.now, s.out[:0])
		delivered := map[Seq]Flags{}
		lastComp := c.RcvNxt() - 1
		for len(data) >= 2 {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				n = len(data)
			}
			frame := append([]byte(nil), data[:n]...)
			data = data[n:]
			if len(frame) >= ShortHeaderLen {
				frame[nic.OffVersion] = nic.Version
				if sealable(frame) {
					Seal(frame)
				}
			}
			var h Header
			if Parse(frame, &h) != nil {
				continue
			}
			s.now += Time(time.Duration(h.Imm%2000) * time.Microsecond)
			una, nxt := c.SndUna(), c.SndNxt()
			v := c.Input(s.now, &h)
			if c.SndUna().Less(una) || nxt.Less(c.SndUna()) {
				t.Fatalf("SndUna moved from %d to %d (next %d)", una, c.SndUna(), nxt)
			}
			if v&Accept != 0 {
				if !h.Kind.Sequenced() {
					t.Fatalf("accepted an unsequenced %v frame", h.Kind)
				}
				if _, dup := delivered[h.Seq]; dup && level.Reliable() {
					t.Fatalf("frame %d accepted twice", h.Seq)
				}
				delivered[h.Seq] = h.Flags
				c.Deliver(s.now, &h)
			}
			for {
				x, ok := c.NextCompletion()
				if !ok {
					break
				}
				fl, ok := delivered[x.Seq]
				if !ok || (fl&FlagLast == 0 && x.Kind != KindReadReq) {
					t.Fatalf("completion of frame %d that was not delivered as a last fragment", x.Seq)
				}
				if !lastComp.Less(x.Seq) {
					t.Fatalf("completion %d after %d: out of order", x.Seq, lastComp)
				}
				for q := lastComp + 1; q != x.Seq; q++ {
					if _, ok := delivered[q]; !ok {
						t.Fatalf("completion %d passed undelivered frame %d", x.Seq, q)
					}
				}
				lastComp = x.Seq
			}
			s.out, _ = c.Output(s.now, s.out[:0])
			for _, o := range s.out {
				var oh Header
				if err := Parse(o, &oh); err != nil {
					t.Fatalf("Output produced a bad frame: %v", err)
				}
			}
		}
	})
}
