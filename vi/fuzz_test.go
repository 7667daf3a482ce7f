package vi

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/reliability"
)

// fuzzPeer is the made-up peer of the fuzzed provider's connections.
func fuzzPeerMAC() [6]byte { return [6]byte{0x02, 0xee, 0, 0, 0, 1} }

const (
	fuzzPeerVI    = 7
	fuzzPeerConn  = 0xabcdef01
	fuzzPeerISN   = 1000
	fuzzBystander = 8
)

// fuzzFrame builds a frame for the target VI of the fuzz harness.
func fuzzFrame(kind reliability.Kind, flags reliability.Flags, seq uint32, msg, msgLen, off uint32, payload []byte) []byte {
	at := reliability.PayloadOffset(kind, flags)
	b := make([]byte, at+len(payload))
	copy(b[at:], payload)
	reliability.Put(b, &reliability.Header{Src: fuzzPeerMAC(), EtherType: nic.DefaultEtherType, JobKey: testJob,
		Kind: kind, Flags: flags, DstVI: 1, SrcVI: fuzzPeerVI, Seq: reliability.Seq(seq), Length: len(payload),
		Msg: msg, MsgLen: msgLen, Offset: off})
	return b
}

// FuzzInput feeds a provider with two connected VIs arbitrary frames, as a
// hostile host on the LAN could send them, with valid CRCs and, when the
// input asks, the target connection's identity (MAC, VI numbers, nonce).
// The provider must never panic; the bystander VI, whose identity the
// frames never carry, must never see a completion or leave the Connected
// state; memory under another protection tag must never change; and every
// completed receive of the target must fit its descriptor.
func FuzzInput(f *testing.F) {
	seed := func(frames ...[]byte) []byte {
		var b []byte
		for _, fr := range frames {
			b = append(b, 0xff) // claim the target's identity
			b = binary.BigEndian.AppendUint16(b, uint16(len(fr)))
			b = append(b, fr...)
		}
		return b
	}
	F, L, I := reliability.FlagFirst, reliability.FlagLast, reliability.FlagImm
	f.Add(seed(fuzzFrame(reliability.KindData, F|L, fuzzPeerISN, 0, 5, 0, []byte("hello"))))
	f.Add(seed(fuzzFrame(reliability.KindData, F, fuzzPeerISN, 0, 10, 0, []byte("hello")),
		fuzzFrame(reliability.KindData, L, fuzzPeerISN+1, 0, 10, 5, []byte("world"))))
	f.Add(seed(fuzzFrame(reliability.KindData, F|L, fuzzPeerISN, 0, 5000, 0, []byte("too long"))))
	f.Add(seed(fuzzFrame(reliability.KindWrite, F|L|I, fuzzPeerISN, 0, 3, 0, []byte("abc"))))
	S := reliability.FlagShort
	f.Add(seed(fuzzFrame(reliability.KindData, S|F, fuzzPeerISN, 0, 10, 0, []byte("short")),
		fuzzFrame(reliability.KindData, S|L, fuzzPeerISN+1, 0, 10, 5, []byte("frame"))))
	f.Add(seed(fuzzFrame(reliability.KindWrite, S|F|L|I, fuzzPeerISN, 0, 3, 0, []byte("abc"))))
	f.Add(seed(fuzzFrame(reliability.KindReadReq, F|L, fuzzPeerISN, 0, 16, 0, nil)))
	f.Add(seed(fuzzFrame(reliability.KindAck, reliability.FlagAck|reliability.FlagAckReq, 0, 0, 0, 0, nil)))
	f.Add(seed(fuzzFrame(reliability.KindDisconnect, reliability.FlagErrSeq, 0, 1, 0, 0, nil)))
	f.Add(seed(fuzzFrame(reliability.KindConnReq, 0, 5, 0, 0, 0, nil), fuzzFrame(reliability.KindPeerReq, 0, 5, 0, 0, 0, nil)))
	f.Fuzz(fuzzInput)
}

func fuzzInput(t *testing.T, data []byte) {
	{
		sw := memnic.NewSwitch(1)
		port, err := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: testJob}, MTU: 1500})
		if err != nil {
			t.Fatal(err)
		}
		defer port.Close()
		p, err := Open(port, Options{Config: nic.Config{JobKey: testJob}, QueueDepth: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ptag, other := p.NewPTag(), p.NewPTag()
		arena := make([]byte, 1<<16)
		ah, _ := p.RegisterMemory(arena, ptag, AccessRDMAWrite|AccessRDMARead)
		secret := make([]byte, 4096)
		for i := range secret {
			secret[i] = byte(i)
		}
		secretCopy := append([]byte(nil), secret...)
		if _, err := p.RegisterMemory(secret, other, AccessRDMAWrite|AccessRDMARead); err != nil {
			t.Fatal(err)
		}
		target, _ := p.NewVI(Attributes{Reliability: ReliableReception, PTag: ptag, EnableRDMAWrite: true, EnableRDMARead: true})
		bystander, _ := p.NewVI(Attributes{Reliability: ReliableDelivery, PTag: ptag, EnableRDMAWrite: true, EnableRDMARead: true})
		for i, v := range []*VI{target, bystander} {
			for k := 0; k < 4; k++ {
				off := (i*4 + k) * 1000
				d := &descriptors.Descriptor{Segments: []descriptors.Segment{{Buf: arena[off : off+1000 : off+1000], Handle: ah}}}
				if err := v.PostRecv(d); err != nil {
					t.Fatal(err)
				}
			}
		}
		fuzzPeer := fuzzPeerMAC()
		p.mu.Lock()
		defer p.mu.Unlock()
		now := p.now()
		for i, v := range []*VI{target, bystander} {
			v.begin(modeClient, Address{MAC: fuzzPeer[:]}, nic.Addr{MAC: fuzzPeer})
			v.advCredit = 4
			if err := v.establish(now, uint16(fuzzPeerVI+i), fuzzPeerConn+uint32(i), fuzzPeerISN, 4, 64); err != nil {
				t.Fatal(err)
			}
		}
		// Bound the work per input: the fuzzer likes to grow inputs.
		for frames := 0; len(data) >= 3 && frames < 64; frames++ {
			claim := data[0]
			n := int(binary.BigEndian.Uint16(data[1:]))
			data = data[3:]
			n = min(n, len(data), 4000)
			frame := make([]byte, max(n, reliability.HeaderLen))
			copy(frame, data[:n])
			data = data[n:]
			// Always for this host and job; the rest is the input's.
			mac := p.mac
			copy(frame[0:6], mac[:])
			binary.BigEndian.PutUint16(frame[nic.OffEtherType:], nic.DefaultEtherType)
			frame[nic.OffVersion] = nic.Version
			binary.BigEndian.PutUint32(frame[nic.OffJobKey:], testJob)
			if claim&1 != 0 {
				copy(frame[6:12], fuzzPeer[:])
				binary.BigEndian.PutUint16(frame[reliability.OffDstVI:], target.id)
				binary.BigEndian.PutUint16(frame[reliability.OffSrcVI:], fuzzPeerVI)
				binary.BigEndian.PutUint32(frame[reliability.OffConnID:], target.localConnID)
			} else if binary.BigEndian.Uint16(frame[reliability.OffDstVI:]) == bystander.id &&
				binary.BigEndian.Uint32(frame[reliability.OffConnID:]) == bystander.localConnID {
				frame[reliability.OffConnID]++ // never the bystander's identity
			}
			// Where the length and payload are: the full header's places,
			// or the short header's (FlagShort).
			at, lenAt := reliability.HeaderLen, reliability.OffLength
			if fl := reliability.Flags(binary.BigEndian.Uint16(frame[nic.OffFlags:])); fl&reliability.FlagShort != 0 {
				at, lenAt = reliability.PayloadOffset(reliability.Kind(frame[nic.OffKind]), fl), reliability.OffShortLength
			}
			if claim&2 != 0 {
				l := int(binary.BigEndian.Uint16(frame[lenAt:]))
				if at+l > len(frame) {
					binary.BigEndian.PutUint16(frame[lenAt:], uint16(len(frame)-at))
				}
			}
			if at+int(binary.BigEndian.Uint16(frame[lenAt:])) <= len(frame) {
				reliability.Seal(frame)
			}
			now += reliability.Time(claim) * 1000
			p.input(now, frame)
			p.flush(now)
		}
		if bystander.rqNext != bystander.rq.Front() || bystander.state != Connected {
			t.Fatalf("a frame for another connection touched the bystander: %d completions, state %v",
				bystander.rqNext-bystander.rq.Front(), bystander.state)
		}
		if !bytes.Equal(secret, secretCopy) {
			t.Fatal("memory under another protection tag changed")
		}
		for pos := target.rq.Front(); pos < target.rqNext; pos++ {
			d := target.rq.At(pos)
			if d.Status.Done() && !d.Status.Failed() && d.Length > d.TotalLength() {
				t.Fatalf("a %d-byte message completed a %d-byte receive", d.Length, d.TotalLength())
			}
		}
	}
}
