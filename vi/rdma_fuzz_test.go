package vi

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/rdma"
	"github.com/ethervia/ethervia/reliability"
)

// The target's memory for FuzzRDMATarget: one slice laid out as
// guard|r1|guard|r2|guard|r3|guard. r1 allows remote write and read, r2
// only remote read, r3 both but under another protection tag; the guards
// are never registered.
const (
	fzGuard = 256
	fzR1    = 4096
	fzR2    = 2048
	fzR3    = 1024
	fzRecvs = 4
)

// fzRegion is one registered region of the fuzzed target.
type fzRegion struct {
	start, n int // in the memory slice
	h        rdma.Handle
	tag      PTag
	acc      Access
}

// fzRecord is one forged RDMA frame, decoded from the fuzzer's input.
type fzRecord struct {
	kind     reliability.Kind
	flags    reliability.Flags
	rkey     uint32
	raddr    uint64
	msgLen   uint32
	offset   uint32
	msg      uint32
	imm      uint32
	seqDelta int8
	payload  []byte
}

const fzRecordLen = 24

// fzDecode reads one record from data: a 24-byte header and its payload.
// Small offsets and lengths are likely, so that frames often aim inside the
// regions, but every bit pattern is possible.
func fzDecode(data []byte, regions []fzRegion) (fzRecord, []byte, bool) {
	if len(data) < fzRecordLen {
		return fzRecord{}, nil, false
	}
	be := binary.BigEndian
	sel, hsel, mode := data[0], data[1], data[2]
	r := fzRecord{seqDelta: int8(data[3]), msg: uint32(data[4] % 8), imm: be.Uint32(data[5:])}
	switch (sel & 0x0f) % 3 {
	case 0:
		r.kind = reliability.KindWrite
	case 1:
		r.kind, r.flags = reliability.KindWrite, reliability.FlagImm
	default:
		r.kind = reliability.KindReadReq
	}
	if sel&0x10 == 0 {
		r.flags |= reliability.FlagFirst
	}
	if sel&0x20 == 0 {
		r.flags |= reliability.FlagLast
	}
	if int(hsel%4) < len(regions) {
		r.rkey = uint32(regions[hsel%4].h)
	} else {
		r.rkey = be.Uint32(data[9:])
	}
	raw := be.Uint64(data[13:])
	if mode&1 == 0 { // near: inside or just past a region
		r.raddr = raw % (fzR1 + 512)
	} else {
		r.raddr = raw
	}
	r.msgLen = uint32(be.Uint16(data[21:]))
	if mode&2 != 0 {
		r.msgLen = uint32(raw >> 17) // any 32-bit value
	}
	r.offset = uint32(mode>>2) * 64 // fragment offset, often 0
	if mode&0x80 != 0 {
		r.offset = uint32(raw >> 32)
	}
	n := int(data[23]) * 6 // payload up to 1530 bytes
	data = data[fzRecordLen:]
	if r.kind == reliability.KindReadReq {
		n = 0
	}
	n = min(n, len(data))
	r.payload = data[:n]
	return r, data[n:], true
}

// FuzzRDMATarget sends arbitrary RDMA write, write-with-immediate and read
// request frames (random handles, including the real ones, offsets,
// lengths, fragment offsets and message lengths, with valid headers and
// CRCs and the identity of a real connection) at a target VI whose regions
// sit between guard buffers. After each frame the target has refused it
// (and counted the refusal) exactly when the region checks fail, and after
// the input no guard byte has changed, region bytes have changed only
// where a permitted write put them, and nothing panicked. A refused frame
// breaks a reliable connection; the harness then connects again.
func FuzzRDMATarget(f *testing.F) {
	rec := func(sel, hsel, mode byte, seqDelta int8, msg byte, raddr uint64, msgLen uint16, plen byte, payload []byte) []byte {
		b := []byte{sel, hsel, mode, byte(seqDelta), msg, 0, 0, 0, 7, 0xde, 0xad, 0xbe, 0xef}
		b = binary.BigEndian.AppendUint64(b, raddr)
		b = binary.BigEndian.AppendUint16(b, msgLen)
		b = append(b, plen)
		return append(b, payload...)
	}
	hello := bytes.Repeat([]byte("hello, target "), 20)
	// level byte: bit 0-1 level, bit 2 disables write, bit 3 disables read
	f.Add(append([]byte{2}, rec(0, 0, 0, 0, 0, 100, 84, 14, hello[:84])...))                                                                 // valid write
	f.Add(append([]byte{1}, rec(1, 0, 0, 0, 0, 4000, 96, 16, hello[:96])...))                                                                // imm write over the end of r1
	f.Add(append([]byte{2}, rec(2, 0, 0, 0, 0, 10, 1000, 0, nil)...))                                                                        // valid read
	f.Add(append([]byte{2}, rec(0, 1, 0, 0, 0, 0, 60, 10, hello[:60])...))                                                                   // write to read-only r2
	f.Add(append([]byte{2}, rec(0, 2, 0, 0, 0, 0, 60, 10, hello[:60])...))                                                                   // write to another tag's r3
	f.Add(append([]byte{2}, rec(0, 3, 1, 0, 0, 1<<63, 60, 10, hello[:60])...))                                                               // bogus handle, far offset
	f.Add(append([]byte{0}, rec(1, 0, 0, 0, 0, 50, 30, 5, hello[:30])...))                                                                   // unreliable imm write
	f.Add(append([]byte{6}, rec(0, 0, 0, 0, 0, 50, 30, 5, hello[:30])...))                                                                   // write not enabled
	f.Add(append([]byte{2}, append(rec(0x20, 0, 0, 0, 0, 0, 200, 14, hello[:84]), rec(0x10, 0, 0x04, 0, 0, 64, 200, 14, hello[:84])...)...)) // two fragments
	f.Add(append([]byte{2}, rec(0, 0, 0x81, 0, 0, 0xffffffffffffff00, 0xffff, 10, hello[:60])...))                                           // wrapping offsets
	f.Fuzz(fuzzRDMATarget)
}

func fuzzRDMATarget(t *testing.T, data []byte) {
	if len(data) == 0 {
		return
	}
	level := []Level{Unreliable, ReliableDelivery, ReliableReception, ReliableReception}[data[0]%4]
	enableWrite, enableRead := data[0]&4 == 0, data[0]&8 == 0
	data = data[1:]

	sw := memnic.NewSwitch(1)
	port, err := sw.NewPort(memnic.PortConfig{Config: nic.Config{JobKey: testJob}, MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	p, err := Open(port, Options{Config: nic.Config{JobKey: testJob}, QueueDepth: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ptag, other := p.NewPTag(), p.NewPTag()

	mem := make([]byte, 4*fzGuard+fzR1+fzR2+fzR3)
	for i := range mem {
		mem[i] = byte(0xa5 ^ i)
	}
	orig := append([]byte(nil), mem...)
	regions := []fzRegion{
		{start: fzGuard, n: fzR1, tag: ptag, acc: AccessRDMAWrite | AccessRDMARead},
		{start: 2*fzGuard + fzR1, n: fzR2, tag: ptag, acc: AccessRDMARead},
		{start: 3*fzGuard + fzR1 + fzR2, n: fzR3, tag: other, acc: AccessRDMAWrite | AccessRDMARead},
	}
	for i := range regions {
		r := &regions[i]
		h, err := p.RegisterMemory(mem[r.start:r.start+r.n:r.start+r.n], r.tag, r.acc)
		if err != nil {
			t.Fatal(err)
		}
		r.h = rdma.Handle(h)
	}
	target, err := p.NewVI(Attributes{Reliability: level, PTag: ptag, EnableRDMAWrite: enableWrite, EnableRDMARead: enableRead})
	if err != nil {
		t.Fatal(err)
	}
	peer := fuzzPeerMAC()
	conns := uint32(0)
	var seqBase reliability.Seq
	frames := 0
	connect := func() {
		// Receives for the writes with immediate data; a broken
		// connection flushed the earlier ones.
		p.mu.Lock()
		target.disconnectLocked(p.now(), reliability.ReasonNormal)
		for target.rq.Front() < target.rqNext {
			target.rq.Pop() // completed receives: make room
		}
		p.mu.Unlock()
		for range fzRecvs {
			if err := target.PostRecv(&descriptors.Descriptor{}); err != nil {
				t.Fatal(err)
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		conns++
		target.begin(modeClient, Address{MAC: peer[:]}, nic.Addr{MAC: peer})
		target.advCredit = uint32(target.rq.Back() - target.rqNext)
		seqBase = reliability.Seq(fuzzPeerISN + conns*1000)
		frames = 0
		if err := target.establish(p.now(), fuzzPeerVI, fuzzPeerConn+conns, seqBase, 4, 64); err != nil {
			t.Fatal(err)
		}
	}
	connect()

	type landing struct {
		at      int // in mem
		payload []byte
	}
	var permitted []landing
	reliable := level.Reliable()
	for n := 0; n < 64; n++ {
		r, rest, ok := fzDecode(data, regions)
		if !ok {
			break
		}
		data = rest
		p.mu.Lock()
		if target.state != Connected {
			p.mu.Unlock()
			connect()
			p.mu.Lock()
		}
		frame := make([]byte, reliability.HeaderLen+len(r.payload))
		copy(frame[reliability.HeaderLen:], r.payload)
		seq := seqBase.Add(frames + int(r.seqDelta))
		frames++
		reliability.Put(frame, &reliability.Header{Dst: p.mac, Src: peer, EtherType: nic.DefaultEtherType, JobKey: testJob,
			Kind: r.kind, Flags: r.flags, DstVI: target.id, SrcVI: fuzzPeerVI, ConnID: target.localConnID,
			Seq: seq, Length: len(r.payload), Msg: r.msg, MsgLen: r.msgLen, Offset: r.offset, Imm: r.imm,
			RKey: r.rkey, RAddr: r.raddr})

		// The oracle: what place must do with the frame if it gets there.
		const (
			vPermit = iota
			vRefuse
			vProtocol // dropped or breaks the connection, not a refusal
		)
		verdict := vPermit
		var land landing
		check := func(need Access, base, total uint64) bool {
			for _, g := range regions {
				if uint32(g.h) != r.rkey {
					continue
				}
				if g.tag != ptag || g.acc&need != need || base > uint64(g.n) || total > uint64(g.n)-base {
					return false
				}
				land.at = g.start + int(base)
				return true
			}
			return false
		}
		switch r.kind {
		case reliability.KindWrite:
			_, hasRecv := target.recvPos(r.msg)
			base := r.raddr - uint64(r.offset)
			switch {
			case !enableWrite:
				verdict = vRefuse
			case uint64(r.offset)+uint64(len(r.payload)) > uint64(r.msgLen):
				verdict = vProtocol
			case r.flags&reliability.FlagImm != 0 && reliable && !hasRecv:
				verdict = vProtocol
			case !check(AccessRDMAWrite, base, uint64(r.msgLen)):
				verdict = vRefuse
			default:
				land.at += int(r.offset)
				land.payload = r.payload
			}
		case reliability.KindReadReq:
			if !reliable || !enableRead || !check(AccessRDMARead, r.raddr, uint64(r.msgLen)) {
				verdict = vRefuse
			}
		}

		wasConnected := target.state == Connected
		cs := target.conn.Stats()
		before := p.stats.RDMADisabled + p.mem.Stats().Refused()
		now := p.now()
		p.input(now, frame)
		p.flush(now)
		refused := p.stats.RDMADisabled + p.mem.Stats().Refused() - before
		var dropped bool // the reliability layer kept the frame from place
		if target.conn != nil {
			cs2 := target.conn.Stats()
			dropped = cs2.Duplicates > cs.Duplicates || cs2.OutOfWindow > cs.OutOfWindow
		}
		p.mu.Unlock()

		switch {
		case refused > 1:
			t.Fatalf("frame %d (%+v): %d refusals counted", n, r, refused)
		case refused == 1 && verdict != vRefuse:
			t.Fatalf("frame %d (%+v): refused, but the oracle permits it (verdict %d)", n, r, verdict)
		case refused == 0 && verdict == vRefuse && wasConnected && !dropped:
			t.Fatalf("frame %d (%+v): forbidden and delivered, but no refusal was counted", n, r)
		}
		if verdict == vPermit && r.kind == reliability.KindWrite {
			permitted = append(permitted, land)
		}
	}
	p.Close()

	// Every changed byte lies in a region and was put there by a
	// permitted write.
	for i := range mem {
		if mem[i] == orig[i] {
			continue
		}
		ok := false
		for _, l := range permitted {
			if i >= l.at && i < l.at+len(l.payload) && l.payload[i-l.at] == mem[i] {
				ok = true
				break
			}
		}
		if !ok {
			inGuard := true
			for _, g := range regions {
				if i >= g.start && i < g.start+g.n {
					inGuard = false
				}
			}
			t.Fatalf("byte %d changed from %#x to %#x (guard: %v) without a permitted write there", i, orig[i], mem[i], inGuard)
		}
	}
}
