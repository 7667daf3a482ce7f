package nic

import (
	"errors"
	"testing"
)

func testFrame() []byte {
	b := make([]byte, 64)
	PutPrefix(b, &Prefix{Dst: [6]byte{1, 2, 3, 4, 5, 6}, Src: [6]byte{2, 3, 4, 5, 6, 7}, EtherType: DefaultEtherType, Version: Version, Kind: 3, Flags: 0x8001, JobKey: 0xdeadbeef})
	return b
}

func TestPrefixRoundTrip(t *testing.T) {
	p, err := ParsePrefix(testFrame())
	if err != nil {
		t.Fatal(err)
	}
	want := Prefix{Dst: [6]byte{1, 2, 3, 4, 5, 6}, Src: [6]byte{2, 3, 4, 5, 6, 7}, EtherType: DefaultEtherType, Version: Version, Kind: 3, Flags: 0x8001, JobKey: 0xdeadbeef}
	if p != want {
		t.Fatalf("got %+v, want %+v", p, want)
	}
}

func TestFilter(t *testing.T) {
	f := Config{JobKey: 0xdeadbeef}.Filter()
	if err := f.Check(testFrame()); err != nil {
		t.Fatalf("own frame refused: %v", err)
	}
	cases := []struct {
		name string
		mod  func([]byte) []byte
		want error
	}{
		{"short", func(b []byte) []byte { return b[:PrefixLen-1] }, ErrShortFrame},
		{"ethertype", func(b []byte) []byte { b[OffEtherType] = 8; b[OffEtherType+1] = 0; return b }, ErrEtherType},
		{"version", func(b []byte) []byte { b[OffVersion] = Version + 1; return b }, ErrVersion},
		{"jobkey", func(b []byte) []byte { b[OffJobKey+3] ^= 1; return b }, ErrJobKey},
	}
	for _, c := range cases {
		if err := f.Check(c.mod(testFrame())); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func FuzzParsePrefix(f *testing.F) {
	f.Add(testFrame())
	f.Add([]byte{})
	f.Add(make([]byte, PrefixLen))
	flt := Filter{EtherType: DefaultEtherType, JobKey: 0xdeadbeef}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePrefix(b)
		if len(b) < PrefixLen {
			if err == nil {
				t.Fatal("short frame parsed")
			}
			if flt.Check(b) == nil {
				t.Fatal("short frame accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		accepted := flt.Check(b) == nil
		want := p.EtherType == flt.EtherType && p.Version == Version && p.JobKey == flt.JobKey &&
			(p.DstEP == flt.Endpoint || p.DstEP == EndpointAll)
		if accepted != want {
			t.Fatalf("Check accepted=%v, prefix says %v", accepted, want)
		}
		out := make([]byte, PrefixLen)
		PutPrefix(out, &p)
		if string(out) != string(b[:PrefixLen]) {
			t.Fatal("PutPrefix(ParsePrefix(b)) != b")
		}
	})
}
