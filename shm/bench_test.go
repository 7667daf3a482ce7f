package shm

import (
	"os"
	"testing"
)

// BenchmarkReadRemote is the single copy of a large write between ranks
// of a host (process_vm_readv, here from this process itself), next to a
// plain copy of the same bytes.
func BenchmarkReadRemote(b *testing.B) {
	src, dst := make([]byte, 4<<20), make([]byte, 4<<20)
	for i := range src {
		src[i] = byte(i)
	}
	b.Run("process_vm_readv", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if err := ReadRemote(os.Getpid(), Address(src), dst); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			copy(dst, src)
		}
	})
}

// BenchmarkRing is one entry through a ring, committed and taken in the
// same goroutine: the software cost of the path without the cache-line
// transfers between two cores.
func BenchmarkRing(b *testing.B) {
	in, err := Create(b.TempDir()+"/inbox", Config{Rings: 1, Slots: 8, SlotData: 64})
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	o, err := Attach(in.Path(), 1)
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	r := &in.Rings()[0]
	b.ReportAllocs()
	for b.Loop() {
		s, _ := o.Reserve()
		s[0] = 1
		o.Commit(&Entry{Kind: Send, Length: 1})
		if _, ok, err := r.Peek(); !ok || err != nil {
			b.Fatal(ok, err)
		}
		r.Release()
	}
}
