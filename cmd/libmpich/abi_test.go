package main

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
)

// abiWorld makes this process's library rank 0 of a two-rank world over
// memnic, with rank 1 an echo server on the Go API in a goroutine: every
// message it receives with tag 0 goes back to rank 0 with tag 0. stop ends
// the echo and finalizes both ranks.
func abiWorld(tb testing.TB, size int) (stop func()) {
	tb.Helper()
	lib = &library{} // a fresh library: the C ABI's state is per process
	// Both ranks spin on a P of their own (the machine has two CPUs),
	// rank 0 from C as MPI_Init makes it (WithLockedCallers).
	comms, err := mplite.NewLocalWorld(2, mplite.WithSpinTime(time.Minute), mplite.WithLockedCallers())
	if err != nil {
		tb.Fatal(err)
	}
	peer := comms[1]
	done := make(chan error, 1)
	go func() {
		// install splits MPI_COMM_SELF off the world: a collective.
		if _, err := peer.Split(1, 0); err != nil {
			done <- err
			return
		}
		buf := make([]byte, size)
		for {
			st, err := peer.Recv(buf, 0, mplite.AnyTag)
			if err == nil && st.Tag == 1 {
				done <- peer.Finalize()
				return
			}
			if err == nil {
				err = peer.Send(buf[:st.Count], 0, 0)
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	lib.mu.Lock()
	lib.worldCalled = true // as MPI_Init would
	lib.mu.Unlock()
	if err := install(comms[0]); err != nil {
		tb.Fatal(err)
	}
	return func() {
		if err := lib.world.Send(nil, 1, 1); err != nil {
			tb.Error(err)
		}
		if rc := PMPI_Finalize(); rc != errSuccess {
			tb.Errorf("MPI_Finalize: %d", rc)
		}
		if err := <-done; err != nil {
			tb.Error(err)
		}
	}
}

// mallocsPerRun runs f warm times (the connections' frame pools grow to
// their windows), then runs times, and returns the allocations per run,
// counting every goroutine's (testing.AllocsPerRun would set GOMAXPROCS to
// 1, where the two polling ranks cannot both run).
func mallocsPerRun(warm, runs int, f func()) uint64 {
	for i := 0; i < warm; i++ {
		f()
	}
	// The least of three windows: a background event (a retransmission
	// timer, the runtime's own work) lands in some windows only, while an
	// allocation of the path itself shows in every one.
	least := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := 0; i < runs; i++ {
			f()
		}
		runtime.ReadMemStats(&after)
		least = min(least, (after.Mallocs-before.Mallocs)/uint64(runs))
	}
	return least
}

var abiSizes = []int{1, 1024, mplite.DefaultEagerLimit + 1, 1 << 20}

// TestCPingPongAllocatesNothing: a round trip of MPI_Send and MPI_Recv
// called from C, eager and handshake (RDMA into the C buffer), allocates
// nothing in steady state, on either side.
func TestCPingPongAllocatesNothing(t *testing.T) {
	for _, size := range abiSizes {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			stop := abiWorld(t, size)
			defer stop()
			buf := cMalloc(size)
			defer cFree(buf)
			rc := 0
			if n := mallocsPerRun(1000, 500, func() { rc |= cPingPong(buf, size, 1) }); n != 0 {
				t.Errorf("%d allocations per round trip", n)
			}
			if rc != 0 {
				t.Fatalf("MPI error %d", rc)
			}
		})
	}
}

// TestCExchangeAllocatesNothing: the same with MPI_Irecv, MPI_Isend and
// MPI_Waitall: request handles and requests are recycled.
func TestCExchangeAllocatesNothing(t *testing.T) {
	for _, size := range abiSizes[:3] {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			stop := abiWorld(t, size)
			defer stop()
			sbuf, rbuf := cMalloc(size), cMalloc(size)
			defer cFree(sbuf)
			defer cFree(rbuf)
			rc := 0
			if n := mallocsPerRun(1000, 500, func() { rc |= cExchange(sbuf, rbuf, size, 1) }); n != 0 {
				t.Errorf("%d allocations per exchange", n)
			}
			if rc != 0 {
				t.Fatalf("MPI error %d", rc)
			}
		})
	}
}

// TestCColumnAllocatesNothing: round trips of a vector datatype with gaps
// (a column of doubles) from C, by MPI_Send and MPI_Recv and by MPI_Irecv,
// MPI_Isend and MPI_Waitall: eager ones are gathered and scattered by
// mplite without a staging copy, handshake ones through a reused one, and
// none allocates in steady state. The gaps stay untouched.
func TestCColumnAllocatesNothing(t *testing.T) {
	for _, doubles := range []int{16, 4096, mplite.DefaultEagerLimit/8 + 1} {
		t.Run(fmt.Sprint(doubles*8), func(t *testing.T) {
			stop := abiWorld(t, doubles*8)
			defer stop()
			col, rc := cColumn(doubles)
			if rc != 0 {
				t.Fatalf("MPI_Type_vector: %d", rc)
			}
			defer cTypeFree(col)
			n := 2 * doubles * 8
			sbuf, rbuf := cMalloc(n), cMalloc(n)
			defer cFree(sbuf)
			defer cFree(rbuf)
			s, r := unsafe.Slice((*float64)(sbuf), 2*doubles), unsafe.Slice((*float64)(rbuf), 2*doubles)
			for i := range s {
				s[i], r[i] = float64(i), -1
			}
			if rc := cTypedExchange(sbuf, rbuf, col, 1); rc != 0 {
				t.Fatalf("MPI error %d", rc)
			}
			for i := range r {
				if want := map[bool]float64{true: float64(i), false: -1}[i%2 == 0]; r[i] != want {
					t.Fatalf("double %d after a round trip: %v, want %v", i, r[i], want)
				}
			}
			rc = 0
			if n := mallocsPerRun(500, 300, func() { rc |= cTypedPingPong(sbuf, col, 1) }); n != 0 {
				t.Errorf("%d allocations per MPI_Send+MPI_Recv round trip", n)
			}
			if n := mallocsPerRun(500, 300, func() { rc |= cTypedExchange(sbuf, rbuf, col, 1) }); n != 0 {
				t.Errorf("%d allocations per MPI_Irecv+MPI_Isend+MPI_Waitall round trip", n)
			}
			if rc != 0 {
				t.Fatalf("MPI error %d", rc)
			}
		})
	}
}

// TestCBlocksMoveDirectly: a 512 KiB vector of 8 KiB blocks from C, sent
// and received (MPI_Send/MPI_Recv, MPI_Isend/MPI_Irecv/MPI_Waitall) past
// the eager limit, moves by RDMA straight from and into the blocks: no
// staging copy, no allocation in steady state, the gaps untouched.
func TestCBlocksMoveDirectly(t *testing.T) {
	const count, blocklen, stride = 64, 1024, 1536
	stop := abiWorld(t, count*blocklen*8)
	defer stop()
	blocks, rc := cBlocks(count, blocklen, stride)
	if rc != 0 {
		t.Fatalf("MPI_Type_vector: %d", rc)
	}
	defer cTypeFree(blocks)
	n := count * stride * 8
	sbuf, rbuf := cMalloc(n), cMalloc(n)
	defer cFree(sbuf)
	defer cFree(rbuf)
	s, r := unsafe.Slice((*float64)(sbuf), count*stride), unsafe.Slice((*float64)(rbuf), count*stride)
	for i := range s {
		s[i], r[i] = float64(i), -1
	}
	if rc := cTypedExchange(sbuf, rbuf, blocks, 1); rc != 0 {
		t.Fatalf("MPI error %d", rc)
	}
	for i := range r {
		want := -1.0
		if i%stride < blocklen {
			want = float64(i)
		}
		if r[i] != want {
			t.Fatalf("double %d after a round trip: %v, want %v", i, r[i], want)
		}
	}
	rc = 0
	if n := mallocsPerRun(20, 50, func() { rc |= cTypedPingPong(sbuf, blocks, 1) }); n != 0 {
		t.Errorf("%d allocations per MPI_Send+MPI_Recv round trip", n)
	}
	if n := mallocsPerRun(20, 50, func() { rc |= cTypedExchange(sbuf, rbuf, blocks, 1) }); n != 0 {
		t.Errorf("%d allocations per MPI_Irecv+MPI_Isend+MPI_Waitall round trip", n)
	}
	if rc != 0 {
		t.Fatalf("MPI error %d", rc)
	}
	if st := lib.world.Stats(); st.Staged != 0 || st.HandshakeSent == 0 {
		t.Errorf("%d staging copies in %d handshake sends, want none", st.Staged, st.HandshakeSent)
	}
}

// BenchmarkABIPingPong is a round trip of size bytes from C through the
// exported MPI_Send and MPI_Recv (cgo/...), next to the same round trip
// through mplite's Go API (go/...), against the same echoing rank over
// memnic. ns/op is a round trip; -benchmem shows the allocations.
func BenchmarkABIPingPong(b *testing.B) {
	for _, size := range abiSizes {
		b.Run(fmt.Sprintf("cgo/%d", size), func(b *testing.B) {
			stop := abiWorld(b, size)
			defer stop()
			buf := cMalloc(size)
			defer cFree(buf)
			if rc := cPingPong(buf, size, 100); rc != 0 {
				b.Fatalf("MPI error %d", rc)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if rc := cPingPong(buf, size, b.N); rc != 0 {
				b.Fatalf("MPI error %d", rc)
			}
		})
		b.Run(fmt.Sprintf("cgo-nonblocking/%d", size), func(b *testing.B) {
			stop := abiWorld(b, size)
			defer stop()
			sbuf, rbuf := cMalloc(size), cMalloc(size)
			defer cFree(sbuf)
			defer cFree(rbuf)
			if rc := cExchange(sbuf, rbuf, size, 100); rc != 0 {
				b.Fatalf("MPI error %d", rc)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if rc := cExchange(sbuf, rbuf, size, b.N); rc != 0 {
				b.Fatalf("MPI error %d", rc)
			}
		})
		b.Run(fmt.Sprintf("go/%d", size), func(b *testing.B) {
			stop := abiWorld(b, size)
			defer stop()
			w := lib.world
			buf := unsafe.Slice((*byte)(cMalloc(size)), size)
			defer cFree(unsafe.Pointer(&buf[0]))
			round := func() {
				if err := w.Send(buf, 1, 0); err != nil {
					b.Fatal(err)
				}
				if _, err := w.Recv(buf, 1, 0); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; i < 100; i++ {
				round()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				round()
			}
		})
	}
}
