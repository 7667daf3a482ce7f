package sgl

import (
	"bytes"
	"testing"

	"github.com/ethervia/ethervia/descriptors"
)

func TestScatter(t *testing.T) {
	a, b, c := make([]byte, 3), make([]byte, 0), make([]byte, 4)
	segs := []descriptors.Segment{{Buf: a}, {Buf: b}, {Buf: c}}
	Scatter(segs, 2, []byte("wxyz"))
	if got := string(bytes.Join([][]byte{a, b, c}, nil)); got != "\x00\x00wxyz\x00" {
		t.Fatalf("scattered %q", got)
	}
	Scatter(segs, 5, []byte("12345")) // the tail beyond the list is dropped
	if got := string(c); got != "xy12" {
		t.Fatalf("last segment %q, want \"xy12\"", got)
	}
	if n := testing.AllocsPerRun(100, func() { Scatter(segs, 1, []byte("ab")) }); n != 0 {
		t.Fatalf("%v allocations per Scatter", n)
	}
}
