package reliability

import (
	"bytes"
	"errors"
	"testing"
)

// TestShortHeaderRoundTrip: every data-bearing kind, with and without
// immediate data, parses back from its short header field for field, in
// fewer bytes than the full header; other kinds refuse the flag.
func TestShortHeaderRoundTrip(t *testing.T) {
	payload := []byte("short header payload")
	for _, k := range []Kind{KindData, KindWrite, KindReadResp} {
		for _, imm := range []bool{false, true} {
			h := Header{Dst: [6]byte{2, 0, 0, 0, 0, 2}, Src: [6]byte{2, 0, 0, 0, 0, 1}, EtherType: 0x88b5, Kind: k,
				Flags: FlagShort | FlagFirst | FlagAck, JobKey: 7, DstEP: 1, SrcEP: 2, DstVI: 3, SrcVI: 4, ConnID: 5, Seq: 6,
				Txn: 7, Ack: 8, Echo: 9, Credit: 10, Length: len(payload), Msg: 11, MsgLen: 12, Offset: 13}
			if imm {
				h.Flags |= FlagImm
				h.Imm = 14
			}
			if k == KindWrite {
				h.RKey, h.RAddr = 15, 1<<40+16
			}
			at := PayloadOffset(k, h.Flags)
			want := ShortHeaderLen
			if imm {
				want += 4
			}
			if k == KindWrite {
				want += 12
			}
			if at != want || at >= HeaderLen {
				t.Fatalf("%v imm=%v: payload at %d, want %d (full header %d)", k, imm, at, want, HeaderLen)
			}
			frame := make([]byte, at+len(payload))
			copy(frame[at:], payload)
			Put(frame, &h)
			var got Header
			if err := Parse(frame, &got); err != nil {
				t.Fatalf("%v imm=%v: %v", k, imm, err)
			}
			if got != h {
				t.Errorf("%v imm=%v: parsed\n%+v\nwant\n%+v", k, imm, got, h)
			}
			if !bytes.Equal(Payload(frame, &got), payload) {
				t.Errorf("%v imm=%v: payload %q", k, imm, Payload(frame, &got))
			}
			if err := Parse(frame[:len(frame)-1], &got); !errors.Is(err, ErrLength) {
				t.Errorf("%v imm=%v: a byte short: %v, want ErrLength", k, imm, err)
			}
			frame[at] ^= 1
			if err := Parse(frame, &got); !errors.Is(err, ErrCRC) {
				t.Errorf("%v imm=%v: a flipped payload bit: %v, want ErrCRC", k, imm, err)
			}
		}
	}
	for _, k := range []Kind{KindReadReq, KindAck, KindConnReq, KindDisconnect} {
		frame := make([]byte, HeaderLen)
		Put(frame, &Header{Kind: k})
		frame[17] |= byte(FlagShort) // the flags' low byte
		var h Header
		if err := Parse(frame, &h); !errors.Is(err, ErrFlags) {
			t.Errorf("%v with FlagShort: %v, want ErrFlags", k, err)
		}
	}
}

// TestShortHeaderLeavesSACKToAck: a receiver holding frames out of order
// sends its own short data frames without an acknowledgement (they have no
// room for the SACK bitmap, and Echo alone would make the peer presume
// those frames lost), and a stand-alone acknowledgement carrying the bitmap
// goes with them.
func TestShortHeaderLeavesSACKToAck(t *testing.T) {
	s := newSim(t, ReliableDelivery, 1, 8, nil)
	s.a.short, s.b.short = true, true
	s.a.sendMsgs = [][]byte{{1}, {2}, {3}}
	s.a.pump(s.now)
	frames, _ := s.a.c.Output(s.now, make([][]byte, 0, 8))
	if len(frames) != 3 {
		t.Fatalf("%d frames out for three one-frame messages", len(frames))
	}
	s.b.input(s.now, frames[0])
	s.b.input(s.now, frames[2]) // the second is lost
	s.b.sendMsgs = [][]byte{{9}}
	s.b.pump(s.now)
	out, _ := s.b.c.Output(s.now, make([][]byte, 0, 8))
	var data, acks int
	for _, f := range out {
		var h Header
		if err := Parse(f, &h); err != nil {
			t.Fatal(err)
		}
		switch h.Kind {
		case KindData:
			data++
			if h.Flags&FlagShort == 0 || h.Flags&FlagAck != 0 {
				t.Errorf("data frame flags %#x: want short, without FlagAck", h.Flags)
			}
		case KindAck:
			acks++
			if h.SACK == 0 || h.Flags&FlagAck == 0 {
				t.Errorf("acknowledgement without the SACK bitmap: %+v", h)
			}
		}
	}
	if data != 1 || acks != 1 {
		t.Errorf("%d data frames and %d acknowledgements out, want 1 and 1", data, acks)
	}
	// In order again, a short frame acknowledges by itself.
	s.b.input(s.now, frames[1])
	s.b.sendMsgs = append(s.b.sendMsgs, []byte{10})
	s.b.pump(s.now)
	out, _ = s.b.c.Output(s.now, make([][]byte, 0, 8))
	var h Header
	if len(out) == 0 || Parse(out[0], &h) != nil || h.Kind != KindData || h.Flags&FlagAck == 0 || h.Ack != 0xfffffff3 {
		t.Errorf("in order: first frame out %+v (of %d), want a short data frame acknowledging 0xfffffff3", h, len(out))
	}
}
