package bonding

import (
	"bytes"
	"testing"
)

// FuzzHeader: parseHeader never panics, never accepts what its rules
// refuse, and a header it accepts writes back to the same bytes.
func FuzzHeader(f *testing.F) {
	add := func(h header, payload int) {
		b := make([]byte, hdrLen+payload)
		h.length = uint32(payload)
		putHeader(b, &h)
		f.Add(b)
	}
	add(header{kind: kindData, msn: 1, credit: 9, total: 100, offset: 0, aux: 100}, 100)
	add(header{kind: kindData, msn: 2, credit: 9, total: 5000, offset: 2500, aux: 2500}, 2500)
	add(header{kind: kindData, total: 0}, 0)
	add(header{kind: kindNotice, flags: flagImm, imm: 7, msn: 3, total: 1 << 20}, 0)
	add(header{kind: kindCredit, credit: 40}, 0)
	add(header{kind: kindQuery, aux: 0x1234}, 0)
	add(header{kind: kindReply, flags: flagOK, rails: 2, aux: 0x1234}, 8)
	f.Add([]byte{})
	f.Add(make([]byte, hdrLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h header
		if err := parseHeader(b, &h); err != nil {
			return
		}
		if int(h.length) != len(b)-hdrLen {
			t.Fatalf("accepted length %d for %d payload bytes", h.length, len(b)-hdrLen)
		}
		switch h.kind {
		case kindData:
			if uint64(h.offset)+uint64(h.length) > uint64(h.total) {
				t.Fatalf("accepted a block past its message: %+v", h)
			}
			if h.total > 0 && (h.aux == 0 || h.offset%h.aux != 0 || h.length > h.aux) {
				t.Fatalf("accepted a bad block: %+v", h)
			}
		case kindReply:
			if h.rails > maxRails {
				t.Fatalf("accepted %d rails", h.rails)
			}
			for i := range int(h.rails) {
				_ = replyHandle(b[hdrLen:], i)
			}
		case kindNotice, kindCredit, kindQuery:
			if h.length != 0 {
				t.Fatalf("accepted a payload on a %v", h.kind)
			}
		default:
			t.Fatalf("accepted kind %v", h.kind)
		}
		out := make([]byte, hdrLen)
		putHeader(out, &h)
		if !bytes.Equal(out, b[:hdrLen]) {
			t.Fatalf("round trip changed the header: %x -> %x", b[:hdrLen], out)
		}
	})
}
