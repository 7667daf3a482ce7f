package netpipe

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ethervia/ethervia/nic"
)

func TestNPOutLayout(t *testing.T) {
	p := Point{N: 7, Bytes: 131, Repeats: 4567, Mbps: 123.456789, Seconds: 0.0000081}
	got := string(AppendNPOut(nil, p))
	// C printf("%8d %lf %12.8lf\n", 131, 123.456789, 0.0000081)
	want := "     131 123.456789   0.00000810\n"
	if got != want {
		t.Errorf("np.out line %q, want %q", got, want)
	}
	line := string(AppendStderrLine(nil, p))
	// C printf("%3d: %7d bytes %6d times --> %8.2lf Mbps in %10.2lf usec")
	wantLine := "  7:     131 bytes   4567 times -->   123.46 Mbps in       8.10 usec"
	if line != wantLine {
		t.Errorf("stderr line %q, want %q", line, wantLine)
	}
}

func TestParseNPOut(t *testing.T) {
	// Lines as NetPIPE 3.7's NPtcp writes them.
	in := "       1 0.397926   0.00001917\n" +
		"       2 0.795852   0.00001917\n" +
		"\n" +
		" 8388611 9718.329004   0.00658546\n"
	pts, err := ParseNPOut(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 3 {
		t.Fatalf("%d points, want 3", len(pts))
	}
	if pts[2].N != 2 || pts[2].Bytes != 8388611 || pts[2].Mbps != 9718.329004 || pts[2].Seconds != 0.00658546 {
		t.Errorf("last point %+v", pts[2])
	}
	for _, bad := range []string{
		"1 2\n", "1 2 3 4\n", "x 1 1\n", "1 nan 1\n", "1 1 -1\n", "-5 1 1\n",
		"  1024  0.095  0.100  0.090 85.00\n", // NetPIPE 5's five columns
	} {
		if _, err := ParseNPOut(strings.NewReader(bad)); !errors.Is(err, ErrNPOut) {
			t.Errorf("ParseNPOut(%q) = %v, want ErrNPOut", bad, err)
		}
	}
}

func TestNPOutRoundTrip(t *testing.T) {
	var b []byte
	var want []Point
	for i, n := range Schedule(1, 1<<16, 3) {
		p := Point{N: i, Bytes: n, Seconds: float64(n)*1e-9 + 1e-6}
		p.Mbps = Mbps(n, false, p.Seconds)
		want = append(want, p)
		b = AppendNPOut(b, p)
	}
	got, err := ParseNPOut(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d points, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.N != w.N || g.Bytes != w.Bytes || math.Abs(g.Mbps-w.Mbps) > 1e-6 || math.Abs(g.Seconds-w.Seconds) > 1e-8 {
			t.Fatalf("point %d: %+v, want %+v", i, g, w)
		}
	}
}

func FuzzParseNPOutLine(f *testing.F) {
	f.Add("       1 0.397926   0.00001917")
	f.Add(" 8388611 9718.329004   0.00658546")
	f.Add("1 2")
	f.Add("1e3 1 1")
	f.Fuzz(func(t *testing.T, line string) {
		p, err := ParseNPOutLine(line)
		if err != nil {
			return
		}
		// Whatever parses must survive a round trip through the writer.
		q, err := ParseNPOutLine(string(AppendNPOut(nil, p)))
		if err != nil {
			t.Fatalf("re-parse of %+v: %v", p, err)
		}
		if q.Bytes != p.Bytes {
			t.Fatalf("bytes %d became %d", p.Bytes, q.Bytes)
		}
		if p.Mbps < 1e12 && math.Abs(q.Mbps-p.Mbps) > 1e-6*math.Max(1, p.Mbps) {
			t.Fatalf("Mbps %v became %v", p.Mbps, q.Mbps)
		}
	})
}

func TestControlRoundTrip(t *testing.T) {
	b := make([]byte, ctlLen)
	for op := uint8(opHello); op <= opDone; op++ {
		c := Control{Op: op, A: 0xdeadbeef, B: uint32(op) * 1000}
		PutControl(b, c)
		got, err := ParseControl(b)
		if err != nil || got != c {
			t.Errorf("round trip of %+v: %+v, %v", c, got, err)
		}
	}
	PutControl(b, Control{Op: opSync})
	b[0] ^= 1
	if _, err := ParseControl(b); !errors.Is(err, ErrControl) {
		t.Errorf("bad magic accepted: %v", err)
	}
	PutControl(b, Control{Op: 99})
	if _, err := ParseControl(b); !errors.Is(err, ErrControl) {
		t.Errorf("bad op accepted: %v", err)
	}
	if _, err := ParseControl(b[:15]); !errors.Is(err, ErrControl) {
		t.Errorf("short message accepted: %v", err)
	}
}

func FuzzParseControl(f *testing.F) {
	b := make([]byte, ctlLen)
	PutControl(b, Control{Op: opPoint, A: 131, B: 1000})
	f.Add(append([]byte(nil), b...))
	PutControl(b, Control{Op: opDone})
	f.Add(append([]byte(nil), b...))
	f.Add([]byte("NPc1"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := ParseControl(in)
		if err != nil {
			return
		}
		out := make([]byte, ctlLen)
		PutControl(out, c)
		c2, err := ParseControl(out)
		if err != nil || c2 != c {
			t.Fatalf("round trip of %+v: %+v, %v", c, c2, err)
		}
	})
}

func dataFrame(h dataHdr, payload []byte) []byte {
	f := make([]byte, rawHdrLen+len(payload))
	nic.PutPrefix(f, &nic.Prefix{EtherType: nic.DefaultEtherType, Version: nic.Version, Kind: kindData})
	putData(f, &h)
	copy(f[rawHdrLen:], payload)
	return f
}

func TestParseData(t *testing.T) {
	good := []struct {
		h   dataHdr
		pay int
	}{
		{dataHdr{frameSeq: 1, msgSeq: 2, msgLen: 3000, frag: 0, fragSize: 1472, payLen: 1472}, 1472},
		{dataHdr{msgLen: 3000, frag: 2, fragSize: 1472, payLen: 56}, 56},
		{dataHdr{msgLen: 0, frag: 0, fragSize: 1472, payLen: 0}, 0},
	}
	for _, g := range good {
		f := dataFrame(g.h, make([]byte, g.pay))
		h, err := parseData(f)
		if err != nil || h != g.h {
			t.Errorf("parseData(%+v) = %+v, %v", g.h, h, err)
		}
		// Ethernet padding after the payload is allowed.
		if _, err := parseData(append(f, 0, 0, 0)); err != nil {
			t.Errorf("padded frame refused: %v", err)
		}
	}
	bad := []struct {
		h   dataHdr
		pay int
	}{
		{dataHdr{msgLen: 3000, frag: 3, fragSize: 1472, payLen: 0}, 0},      // beyond the message
		{dataHdr{msgLen: 3000, frag: 2, fragSize: 1472, payLen: 57}, 57},    // wrong last payload
		{dataHdr{msgLen: 3000, frag: 0, fragSize: 0, payLen: 0}, 0},         // no fragment size
		{dataHdr{msgLen: 3000, frag: 0, fragSize: 1472, payLen: 1472}, 100}, // truncated
		{dataHdr{msgLen: maxMessage + 5000, fragSize: 1000, payLen: 1000}, 1000},
	}
	for _, b := range bad {
		f := dataFrame(b.h, make([]byte, b.pay))
		if _, err := parseData(f); !errors.Is(err, errMalformed) {
			t.Errorf("parseData(%+v, %d-byte payload) = %v, want errMalformed", b.h, b.pay, err)
		}
	}
	if _, err := parseData(make([]byte, rawHdrLen-1)); !errors.Is(err, errMalformed) {
		t.Errorf("short frame: %v", err)
	}
}

func FuzzParseRawFrame(f *testing.F) {
	f.Add(dataFrame(dataHdr{msgLen: 3000, frag: 2, fragSize: 1472, payLen: 56}, make([]byte, 56)))
	f.Add(dataFrame(dataHdr{msgLen: 0, fragSize: 1472}, nil))
	f.Add(make([]byte, 10))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := parseData(in)
		if err != nil {
			return
		}
		// An accepted header must describe a payload inside the frame and
		// inside the message, so placing it cannot write out of bounds.
		end := uint64(h.frag)*uint64(h.fragSize) + uint64(h.payLen)
		if end > uint64(h.msgLen) || len(in) < rawHdrLen+int(h.payLen) || h.payLen > h.fragSize {
			t.Fatalf("accepted inconsistent header %+v for %d bytes", h, len(in))
		}
		if h.frag >= uint32(fragments(int(h.msgLen), int(h.fragSize))) {
			t.Fatalf("fragment %d of a %d-fragment message", h.frag, fragments(int(h.msgLen), int(h.fragSize)))
		}
	})
}

func ExampleSchedule() {
	fmt.Println(Schedule(1, 40, DefaultPerturbation))
	// Output: [1 2 3 4 6 8 12 13 16 19 21 24 27 29 32 35]
}
