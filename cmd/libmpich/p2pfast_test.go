package main

import (
	"testing"
	"unsafe"
)

// TestRecvStatusSimpleAndGeneral: MPI_Recv of a predefined datatype (the
// common-case path, recvSimple) and of a derived one with the same bytes
// (the general path) report the same status and code, for a whole message
// with wildcards and for a truncated one.
func TestRecvStatusSimpleAndGeneral(t *testing.T) {
	stop := abiWorld(t, 64)
	defer stop()
	lib.mu.Lock()
	lib.comms[commWorld].eh = errorsReturn // a truncation must return, not end the test
	lib.mu.Unlock()
	two, rc := cBlocks(1, 2, 2) // two doubles, contiguous, but derived
	if rc != 0 {
		t.Fatalf("MPI_Type_vector: %d", rc)
	}
	defer cTypeFree(two)
	one, rc := cBlocks(1, 1, 1)
	if rc != 0 {
		t.Fatalf("MPI_Type_vector: %d", rc)
	}
	defer cTypeFree(one)
	buf := cMalloc(64)
	defer cFree(buf)
	b := unsafe.Slice((*byte)(buf), 64)

	type result struct{ source, tag, bytes, rc int }
	recv := func(simple bool, capacity int) result {
		t.Helper()
		for i := range 16 {
			b[i] = byte(i + 1)
		}
		if err := lib.world.Send(b[:16], 1, 0); err != nil { // echoed back with tag 0
			t.Fatal(err)
		}
		clear(b[:16])
		var r result
		switch {
		case simple:
			r.source, r.tag, r.bytes, r.rc = cRecvStatus(buf, capacity, mpiByte, anySource, anyTag)
		case capacity == 16:
			r.source, r.tag, r.bytes, r.rc = cRecvStatus(buf, 1, two, anySource, anyTag)
		default:
			r.source, r.tag, r.bytes, r.rc = cRecvStatus(buf, 1, one, anySource, anyTag)
		}
		if r.rc == 0 {
			for i := range 16 {
				if b[i] != byte(i+1) {
					t.Fatalf("simple %v: byte %d is %d, want %d", simple, i, b[i], i+1)
				}
			}
		}
		return r
	}
	for _, capacity := range []int{16, 8} {
		simple, general := recv(true, capacity), recv(false, capacity)
		if simple != general {
			t.Errorf("capacity %d: MPI_BYTE receive gives %+v, a derived datatype %+v", capacity, simple, general)
		}
		want := result{source: 1, tag: 0, bytes: capacity}
		if capacity < 16 {
			want.rc = int(errTruncate)
		}
		if simple != want {
			t.Errorf("capacity %d: status and code %+v, want %+v", capacity, simple, want)
		}
	}
}
