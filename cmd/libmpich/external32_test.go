package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"
	"unsafe"
)

// TestExternal32MixedStruct: a struct mixing basic types (which MPICH 4's
// external32 cannot pack, so the C tests leave it out) packs each field
// big-endian in the standard's sizes, without the padding, and unpacks
// back; MPI_LONG narrows to 4 bytes and widens again with its sign.
func TestExternal32MixedStruct(t *testing.T) {
	d, i, c, s := basicLayout(0x4c00080b, 8), basicLayout(0x4c000405, 4), basicLayout(0x4c000101, 1), basicLayout(0x4c000203, 2)
	lg := basicLayout(0x4c000807, 8)
	// struct { double x; int id; char tag; short s[2]; long l; } (32 bytes)
	st, err := structOf([]int64{1, 1, 1, 2, 1}, []int64{0, 8, 12, 14, 24}, []*layout{d, i, c, s, lg})
	if err != nil {
		t.Fatal(err)
	}
	if st.extent() != 32 || st.basic != 0 || len(st.spans) != 5 {
		t.Fatalf("struct: %v, spans %v", st, st.spans)
	}
	src := make([]byte, 2*32)
	for e := 0; e < 2; e++ {
		b := src[e*32:]
		binary.LittleEndian.PutUint64(b[0:], math.Float64bits(2.5+float64(e)))
		binary.LittleEndian.PutUint32(b[8:], uint32(0x01020304+e))
		b[12] = 'x'
		binary.LittleEndian.PutUint16(b[14:], 0xfffd) // -3
		binary.LittleEndian.PutUint16(b[16:], 300)
		binary.LittleEndian.PutUint64(b[24:], uint64(int64(-7-e)))
	}
	n, err := st.extSize()
	if err != nil || n != 8+4+1+4+4 {
		t.Fatalf("extSize %d, %v", n, err)
	}
	out := make([]byte, 2*n)
	if err := st.packExternal(out, unsafe.Pointer(&src[0]), 2); err != nil {
		t.Fatal(err)
	}
	want := "4004000000000000" + "01020304" + "78" + "fffd012c" + "fffffff9" +
		"400c000000000000" + "01020305" + "78" + "fffd012c" + "fffffff8"
	if got := hex.EncodeToString(out); got != want {
		t.Fatalf("packed\n%s, want\n%s", got, want)
	}
	back := make([]byte, len(src))
	if err := st.unpackExternal(unsafe.Pointer(&back[0]), out, 2); err != nil {
		t.Fatal(err)
	}
	for e := 0; e < 2; e++ { // the padding is not written
		for _, r := range st.runs {
			a, b := src[int64(e)*32+r.off:][:r.n], back[int64(e)*32+r.off:][:r.n]
			if !bytes.Equal(a, b) {
				t.Fatalf("element %d run %v: %x, want %x", e, r, b, a)
			}
		}
	}
}

// TestExternal32LongDouble: an x87 long double becomes IEEE binary128 and
// comes back.
func TestExternal32LongDouble(t *testing.T) {
	x := make([]byte, 16)
	binary.LittleEndian.PutUint64(x, 0xc000000000000000) // 1.5: integer bit and the first fraction bit
	binary.LittleEndian.PutUint16(x[8:], 0xbfff)         // negative, exponent 0
	l := basicLayout(0x4c00100c, 16)
	q := make([]byte, 16)
	if err := l.packExternal(q, unsafe.Pointer(&x[0]), 1); err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(q), "bfff8000000000000000000000000000"; got != want {
		t.Fatalf("-1.5 as binary128: %s, want %s", got, want)
	}
	back := make([]byte, 16)
	if err := l.unpackExternal(unsafe.Pointer(&back[0]), q, 1); err != nil || !bytes.Equal(back, x) {
		t.Fatalf("back: %x, want %x (%v)", back, x, err)
	}
}

// TestExternal32Pairs: MPI_2INT and MPI_DOUBLE_INT convert each member, a
// complex number each half.
func TestExternal32Pairs(t *testing.T) {
	di, _ := pairLayout(0x8c000001)
	n, err := di.extSize()
	if err != nil || n != 12 {
		t.Fatalf("MPI_DOUBLE_INT: %d bytes, %v", n, err)
	}
	v, _ := hvector(3, 1, 0, di) // a contiguous run of pairs keeps its members' types
	if n, err := v.extSize(); err != nil || n != 36 {
		t.Fatalf("3 MPI_DOUBLE_INT: %d bytes, %v", n, err)
	}
	src := []byte{1, 0, 0, 0, 2, 0, 0, 0}
	l := basicLayout(type2Int, 8)
	l.spans = []span{{8, 0x4c000405}}
	out := make([]byte, 8)
	if err := l.packExternal(out, unsafe.Pointer(&src[0]), 1); err != nil || hex.EncodeToString(out) != "0000000100000002" {
		t.Fatalf("MPI_2INT: %x, %v", out, err)
	}
	c := basicLayout(0x4c00081e, 8) // MPI_COMPLEX: two reals
	src = []byte{1, 2, 3, 4, 5, 6, 7, 8}
	if err := c.packExternal(out, unsafe.Pointer(&src[0]), 1); err != nil || hex.EncodeToString(out) != "0403020108070605" {
		t.Fatalf("MPI_COMPLEX: %x, %v", out, err)
	}
}
