package pmi

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

func TestWireRoundTrip(t *testing.T) {
	m := msg("put", "kvsname", "kvs_1", "key", "mac-0", "value", "02:45:56:00:00:01,02:45:56:01:00:01")
	b, err := appendV1(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "cmd=put kvsname=kvs_1 key=mac-0 value=02:45:56:00:00:01,02:45:56:01:00:01\n"; got != want {
		t.Fatalf("v1: %q, want %q", got, want)
	}
	back, err := readV1(bufio.NewReader(strings.NewReader(string(b))))
	if err != nil || back.cmd != "put" || len(back.pairs) != 3 {
		t.Fatalf("v1 back: %+v, %v", back, err)
	}
	m2 := msg("kvs-put", "key", "a;b", "value", ";x;;")
	b, err = appendV2(nil, m2)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "35    cmd=kvs-put;key=a;;b;value=;;x;;;;;"; got != want {
		t.Fatalf("v2: %q, want %q", got, want)
	}
	// A key may not hold ';' in PMI-2: appendV2 refuses what it could not
	// parse back unambiguously.
	if _, err := appendV2(nil, msg("x", "a=b", "c")); !errors.Is(err, ErrProtocol) {
		t.Fatalf("key with '=': %v", err)
	}
}

func TestWireV2Escapes(t *testing.T) {
	m := msg("kvs-put", "key", "k", "value", ";x;;")
	b, err := appendV2(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := readV2(bufio.NewReader(strings.NewReader(string(b))))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := back.get("value"); v != ";x;;" {
		t.Fatalf("value %q after the round trip", v)
	}
}

func TestWireRejects(t *testing.T) {
	for _, line := range []string{"", "put key=a", "key=a cmd=put", "cmd=put =x", "cmd=put novalue"} {
		if _, err := parseV1(line); !errors.Is(err, ErrProtocol) {
			t.Errorf("parseV1(%q): %v, want ErrProtocol", line, err)
		}
	}
	for _, body := range []string{"", "cmd=x", "key=a;cmd=x;", "cmd=x;k=v", "cmd=x;=v;", "cmd=;"} {
		if _, err := parseV2(body); !errors.Is(err, ErrProtocol) {
			t.Errorf("parseV2(%q): %v, want ErrProtocol", body, err)
		}
	}
	for _, in := range []string{"abcdef", "-1    ", "999999x"} {
		if _, err := readV2(bufio.NewReader(strings.NewReader(in))); !errors.Is(err, ErrProtocol) {
			t.Errorf("readV2(%q): %v, want ErrProtocol", in, err)
		}
	}
	long := "cmd=put value=" + strings.Repeat("x", maxV1Line) + "\n"
	if _, err := readV1(bufio.NewReaderSize(strings.NewReader(long), maxV1Line)); !errors.Is(err, ErrProtocol) {
		t.Errorf("long line: %v", err)
	}
	if _, err := appendV1(nil, msg("put", "value", "has space")); !errors.Is(err, ErrProtocol) {
		t.Errorf("space in a PMI-1 value: %v", err)
	}
}

// FuzzParseV1 feeds arbitrary lines to the PMI-1 parser: an error or a
// message that encodes back to an equivalent line, never a panic.
func FuzzParseV1(f *testing.F) {
	for _, s := range []string{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=get_result rc=0 value=x",
		"cmd=barrier_out", "mcmd=spawn", "cmd=set size=4", "cmd= a=b", "cmd=x  a=b\tc=d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, err := parseV1(line)
		if err != nil {
			return
		}
		b, err := appendV1(nil, m)
		if err != nil {
			return // parsed but holds bytes PMI-1 does not send (tabs, controls)
		}
		back, err := parseV1(strings.TrimSuffix(string(b), "\n"))
		if err != nil || back.cmd != m.cmd || len(back.pairs) != len(m.pairs) {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", line, m, b, back, err)
		}
	})
}

// FuzzReadV2 feeds arbitrary bytes to the PMI-2 reader: a message that
// survives a round trip, or an error.
func FuzzReadV2(f *testing.F) {
	for _, s := range []string{"22    cmd=kvs-fence-response;", "10    cmd=x;a=;;;", "3     abc", "0     ", "9999999"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := readV2(bufio.NewReader(strings.NewReader(string(in))))
		if err != nil {
			return
		}
		b, err := appendV2(nil, m)
		if err != nil {
			return
		}
		back, err := readV2(bufio.NewReader(strings.NewReader(string(b))))
		if err != nil || back.cmd != m.cmd || len(back.pairs) != len(m.pairs) {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", in, m, b, back, err)
		}
		for i := range m.pairs {
			if m.pairs[i] != back.pairs[i] {
				t.Fatalf("pair %d: %+v then %+v", i, m.pairs[i], back.pairs[i])
			}
		}
	})
}
