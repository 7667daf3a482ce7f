package mplite_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/nic/memnic"
)

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed*13 + i>>8)
	}
	return b
}

// Past the unexpected bound, receive buffers are held and the sender is
// throttled by credits: nothing is lost, and the memory held stays within
// the bound.
func TestUnexpectedBoundThrottles(t *testing.T) {
	const (
		limit = 10000
		n     = 300
		size  = 1000
		depth = 8
	)
	opts := []mplite.Option{mplite.WithUnexpectedLimit(limit), mplite.WithRecvDepth(depth)}
	throttled := make(chan struct{})
	checked := make(chan struct{})
	// Rank 1 finalizes only after rank 0 read its counters: Finalize's
	// barrier message would otherwise arrive first and count as unexpected.
	counted := make(chan struct{})
	var countedOnce sync.Once
	markCounted := func() { countedOnce.Do(func() { close(counted) }) }
	noErrors(t, runWorld(t, 2, 30*time.Second, opts, func(c *mplite.Comm) error {
		switch c.Rank() {
		case 1:
			reqs := make([]*mplite.Request, n)
			for i := range reqs {
				r, err := c.Isend(pattern(size, i), 0, i)
				if err != nil {
					return err
				}
				reqs[i] = r
			}
			<-throttled
			// Room on the way: the bound, the held receive buffers and
			// the send buffers. The last send cannot have gone.
			if done, _, err := reqs[n-1].Test(); done || err != nil {
				return fmt.Errorf("the last of %d sends completed while the receiver held everything (%v)", n, err)
			}
			close(checked)
			err := mplite.Waitall(reqs...)
			<-counted
			return err
		case 0:
			defer markCounted() // also when this rank fails early
			for deadline := time.Now().Add(20 * time.Second); c.Stats().Held < depth; {
				if time.Now().After(deadline) {
					return fmt.Errorf("never held a receive buffer: %+v", c.Stats())
				}
				if _, _, err := c.Iprobe(1, n-1); err != nil {
					return err
				}
				runtime.Gosched()
			}
			close(throttled)
			<-checked
			buf := make([]byte, size)
			for i := 0; i < n; i++ {
				st, err := c.Recv(buf, 1, i)
				if err != nil {
					return err
				}
				if st.Count != size || !bytes.Equal(buf, pattern(size, i)) {
					return fmt.Errorf("message %d: %+v, corrupt", i, st)
				}
			}
			s := c.Stats()
			markCounted()
			if s.UnexpectedPeak > limit+depth*100 {
				return fmt.Errorf("unexpected messages held %d bytes, bound %d", s.UnexpectedPeak, limit)
			}
			if s.UnexpectedBytes != 0 {
				return fmt.Errorf("%d unexpected bytes left after receiving everything", s.UnexpectedBytes)
			}
		}
		return nil
	}))
}

// Small unexpected messages are copied into buffers of their own size,
// and what the bound counts is what they hold: a rank that runs ahead with
// thousands of 8-byte messages costs its peer kilobytes, not a receive
// slot (64 KiB) apiece.
func TestUnexpectedSmallCostTheirSize(t *testing.T) {
	const n = 2000
	var before, during runtime.MemStats
	ready := make(chan struct{})
	// Rank 1 finalizes only after rank 0's last count: its Finalize
	// barrier message would count as unexpected.
	checked := make(chan struct{})
	noErrors(t, runWorld(t, 2, 30*time.Second, nil, func(c *mplite.Comm) error {
		if err := c.Barrier(); err != nil { // the connection is up before the count
			return err
		}
		if c.Rank() == 1 {
			<-ready
			for i := range n {
				if err := c.Send(pattern(8, i), 0, i); err != nil {
					return err
				}
			}
			<-checked
			return nil
		}
		defer close(checked)
		runtime.GC()
		runtime.ReadMemStats(&before)
		close(ready)
		for deadline := time.Now().Add(20 * time.Second); c.Stats().Unexpected < n; {
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d messages arrived: %+v", c.Stats().Unexpected, n, c.Stats())
			}
			if _, _, err := c.Iprobe(1, n-1); err != nil {
				return err
			}
			runtime.Gosched()
		}
		runtime.GC()
		runtime.ReadMemStats(&during)
		s := c.Stats()
		grew := int64(during.HeapAlloc) - int64(before.HeapAlloc)
		if grew > 8<<20 {
			return fmt.Errorf("%d unexpected 8-byte messages grew the heap by %d bytes", n, grew)
		}
		// The count covers the buffers really held (256 bytes each at least).
		if s.UnexpectedBytes < n*256 {
			return fmt.Errorf("%d unexpected messages counted as %d bytes, less than their buffers", n, s.UnexpectedBytes)
		}
		buf := make([]byte, 8)
		for i := range n {
			if _, err := c.Recv(buf, 1, i); err != nil {
				return err
			}
			if !bytes.Equal(buf, pattern(8, i)) {
				return fmt.Errorf("message %d corrupt", i)
			}
		}
		if s := c.Stats(); s.UnexpectedBytes != 0 {
			return fmt.Errorf("%d unexpected bytes left after receiving everything", s.UnexpectedBytes)
		}
		return nil
	}))
}

// An unexpected handshake message costs only its envelope until its
// receive is posted; the data then moves once, into the user's buffer.
func TestUnexpectedLargeNotCopied(t *testing.T) {
	const n = 3 << 20
	noErrors(t, runWorld(t, 2, 30*time.Second, nil, func(c *mplite.Comm) error {
		if c.Rank() == 0 {
			return c.Send(pattern(n, 1), 1, 4)
		}
		st, err := c.Probe(0, 4)
		if err != nil {
			return err
		}
		if st.Count != n {
			return fmt.Errorf("probe: %+v", st)
		}
		if s := c.Stats(); s.UnexpectedBytes > 1000 || s.HandshakeReceived != 1 {
			return fmt.Errorf("an unexpected %d-byte handshake message holds %d bytes (stats %+v)", n, s.UnexpectedBytes, s)
		}
		buf := make([]byte, n)
		if _, err := c.Recv(buf, 0, 4); err != nil {
			return err
		}
		if !bytes.Equal(buf, pattern(n, 1)) {
			return errors.New("data corrupt")
		}
		if s := c.Stats(); s.UnexpectedPeak > 1000 {
			return fmt.Errorf("peak unexpected bytes %d", s.UnexpectedPeak)
		}
		return nil
	}))
}

// Real overlap: rank 1 posts a receive and then computes without calling
// mplite; rank 0's handshake send can only finish if rank 1's progress
// goroutine answers the RTS and takes the data.
func TestProgressWhileComputing(t *testing.T) {
	const n = 2 << 20
	sent := make(chan struct{})
	noErrors(t, runWorld(t, 2, 30*time.Second, nil, func(c *mplite.Comm) error {
		if c.Rank() == 0 {
			r, err := c.Isend(pattern(n, 3), 1, 1)
			if err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
			close(sent)
			return nil
		}
		buf := make([]byte, n)
		r, err := c.Irecv(buf, 0, 1)
		if err != nil {
			return err
		}
		<-sent // "computing": no mplite call until the sender is done
		deadline := time.Now().Add(10 * time.Second)
		for {
			// The data is placed and completed by the progress goroutine,
			// so Test finds it done without blocking.
			done, st, err := r.Test()
			if err != nil {
				return err
			}
			if done {
				if st.Count != n || !bytes.Equal(buf, pattern(n, 3)) {
					return fmt.Errorf("received %+v, corrupt", st)
				}
				return nil
			}
			if time.Now().After(deadline) {
				return errors.New("receive never completed")
			}
			time.Sleep(time.Millisecond)
		}
	}))
}

// Every rank sends to every other as its first operation: simultaneous
// first connections must resolve to one connection per pair, over a lossy
// switch, for several seeds.
func TestSimultaneousFirstSends(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		opts := []mplite.Option{mplite.WithLocalFaults(seed, memnic.Faults{Loss: 0.05, Reorder: 0.02})}
		noErrors(t, runWorld(t, 6, 30*time.Second, opts, func(c *mplite.Comm) error {
			var reqs []*mplite.Request
			bufs := make([][]byte, c.Size())
			for p := 0; p < c.Size(); p++ {
				if p == c.Rank() {
					continue
				}
				bufs[p] = make([]byte, 100)
				r, err := c.Irecv(bufs[p], p, 9)
				if err != nil {
					return err
				}
				s, err := c.Isend(pattern(100, c.Rank()), p, 9)
				if err != nil {
					return err
				}
				reqs = append(reqs, r, s)
			}
			if err := mplite.Waitall(reqs...); err != nil {
				return err
			}
			for p, b := range bufs {
				if b != nil && !bytes.Equal(b, pattern(100, p)) {
					return fmt.Errorf("from %d: corrupt", p)
				}
			}
			return nil
		}))
	}
}

// Operations after Finalize, and a second Finalize, fail with
// ErrFinalized; bad ranks and tags are refused.
func TestArgumentsAndFinalized(t *testing.T) {
	comms, err := mplite.NewLocalWorld(1)
	if err != nil {
		t.Fatal(err)
	}
	c := comms[0]
	if err := c.Send(nil, 1, 0); !errors.Is(err, mplite.ErrRank) {
		t.Errorf("send to rank 1 of 1: %v", err)
	}
	if err := c.Send(nil, 0, -1); !errors.Is(err, mplite.ErrTag) {
		t.Errorf("send with tag -1: %v", err)
	}
	if _, err := c.Recv(nil, -2, 0); !errors.Is(err, mplite.ErrRank) {
		t.Errorf("receive from -2: %v", err)
	}
	if _, err := c.Irecv(nil, 0, -5); !errors.Is(err, mplite.ErrTag) {
		t.Errorf("receive with tag -5: %v", err)
	}
	r, err := c.Irecv(make([]byte, 4), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(); !errors.Is(err, mplite.ErrFinalized) {
		t.Errorf("receive pending at Finalize: %v", err)
	}
	if err := c.Finalize(); !errors.Is(err, mplite.ErrFinalized) {
		t.Errorf("second Finalize: %v", err)
	}
	if err := c.Send(nil, 0, 0); !errors.Is(err, mplite.ErrFinalized) {
		t.Errorf("send after Finalize: %v", err)
	}
}

// allocsPerRun is testing.AllocsPerRun without its GOMAXPROCS(1): with one
// P the two ranks could not poll at once and would block.
// allocsPerRun is the allocations per run of f, the least of three
// measured windows: an allocation of f's own recurs in every window, while
// a background event of a loaded machine (a retransmission after a late
// acknowledgement, a timer of a wait that blocked) lands in some only. f's
// peer must keep answering for up to 1 + 3·runs calls.
func allocsPerRun(runs int, f func()) float64 {
	least := uint64(math.MaxUint64)
	for range 3 {
		mallocs, _ := memPerRun(runs, f)
		if least = min(least, mallocs); least == 0 {
			break
		}
	}
	return float64(least)
}

// memPerRun runs f once, then runs times, and returns the allocations and
// bytes allocated per run, counting every goroutine's.
func memPerRun(runs int, f func()) (mallocs, bytes uint64) {
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < runs; i++ {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.Mallocs - before.Mallocs) / uint64(runs), (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// The eager hot path (Send, Recv, Sendrecv of short messages, and Isend,
// Irecv and Wait apart from the Request itself) allocates nothing.
func TestEagerHotPathAllocatesNothing(t *testing.T) {
	if raceEnabled {
		// Under -race beside other packages' tests, a 64 KiB round counted
		// 10-15 allocations per round in every window (not in isolation,
		// not without -race): the instrumented runtime's, not the path's.
		t.Skip("allocation counts mean nothing under the race detector (the normal pass runs this)")
	}
	// A minute of spin keeps both ends polling; a negative spin time has
	// every wait block on the fabric at once.
	// ppn 2: both ranks on one host, over shared memory; rails 2: bonded,
	// short messages on the lanes, 64 KiB ones through the bond.
	for _, c := range []struct {
		size       int
		spin       time.Duration
		ppn, rails int
	}{{1, time.Minute, 1, 1}, {mplite.DefaultEagerLimit, time.Minute, 1, 1}, {1, -1, 1, 1},
		{1, time.Minute, 2, 1}, {mplite.DefaultEagerLimit, time.Minute, 2, 1}, {1, -1, 2, 1},
		{1, time.Minute, 1, 2}, {mplite.DefaultEagerLimit, time.Minute, 1, 2}} {
		size := c.size
		t.Run(fmt.Sprintf("%d/spin=%v/ppn=%d/rails=%d", size, c.spin, c.ppn, c.rails), func(t *testing.T) {
			comms, err := mplite.NewLocalWorld(2, mplite.WithSpinTime(c.spin), mplite.WithLocalRanksPerHost(c.ppn),
				mplite.WithLocalRails(c.rails))
			if err != nil {
				t.Fatal(err)
			}
			a, b := comms[0], comms[1]
			echoed := make(chan error, 1)
			go func() {
				buf := make([]byte, size)
				for {
					st, err := b.Recv(buf, 0, mplite.AnyTag)
					if err == nil && st.Tag == 1 {
						echoed <- b.Finalize()
						return
					}
					if err == nil {
						err = b.Send(buf[:st.Count], 0, 0)
					}
					if err != nil {
						echoed <- err
						return
					}
				}
			}()
			out, in := make([]byte, size), make([]byte, size)
			round := func() {
				if err := a.Send(out, 1, 0); err != nil {
					t.Fatal(err)
				}
				if _, err := a.Recv(in, 1, 0); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 200; i++ {
				round()
			}
			if n := allocsPerRun(500, round); n != 0 {
				t.Errorf("a %d-byte Send+Recv round allocates %v times", size, n)
			}
			if n := allocsPerRun(500, func() {
				if _, err := a.Sendrecv(out, 1, 0, in, 1, 0); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("a %d-byte Sendrecv allocates %v times", size, n)
			}
			if n := allocsPerRun(500, func() {
				r, _ := a.Irecv(in, 1, 0)
				s, _ := a.Isend(out, 1, 0)
				if _, err := s.Wait(); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Wait(); err != nil {
					t.Fatal(err)
				}
			}); n > 2 {
				t.Errorf("a %d-byte Isend+Irecv+Wait round allocates %v times, want the two Requests only", size, n)
			}
			endEcho(t, a, echoed)
		})
	}
}

// The handshake registers a user buffer once: reused buffers (and slices
// of them) hit the registration cache, and the data stays exact.
func TestHandshakeBuffersRegisteredOnce(t *testing.T) {
	const n, rounds = 100 << 10, 10
	noErrors(t, runWorld(t, 2, 30*time.Second, nil, func(c *mplite.Comm) error {
		buf := make([]byte, n)
		for i := range rounds {
			msg := buf
			if i%2 == 1 {
				msg = buf[100+i : n-i] // a slice inside the registered buffer
			}
			if c.Rank() == 0 {
				copy(msg, pattern(len(msg), i))
				if err := c.Send(msg, 1, i); err != nil {
					return err
				}
				continue
			}
			if _, err := c.Recv(msg, 0, i); err != nil {
				return err
			}
			if !bytes.Equal(msg, pattern(len(msg), i)) {
				return fmt.Errorf("round %d: data corrupt", i)
			}
		}
		s := c.Stats()
		if s.HandshakeSent+s.HandshakeReceived != rounds {
			return fmt.Errorf("%d handshakes, want %d (stats %+v)", s.HandshakeSent+s.HandshakeReceived, rounds, s)
		}
		if s.CacheMisses != 1 || s.CacheHits < rounds-1 {
			return fmt.Errorf("registration cache: %d misses and %d hits, want 1 and at least %d", s.CacheMisses, s.CacheHits, rounds-1)
		}
		return nil
	}))
}

// Collectives keep their temporary buffers (a reduction's partner buffer,
// a Bruck exchange's blocks) and their request sets across calls: a call
// with 16 KiB blocks allocates less than one block, in at most one
// allocation, over all ranks, where it allocated several times the data
// and a dozen objects per rank on every call. (What remains is amortised
// growth: now and then a new peak of unexpected messages takes another
// 64 KiB buffer into the pool, hence the hundred calls; and the warm-up is
// long enough for every slot of the reliability windows to get its frame
// buffer.)
func TestCollectivesKeepScratch(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector (the normal pass runs this)")
	}
	const n, block, warm, runs, windows = 4, 16 << 10, 400, 100, 3
	sum := mplite.Sum[float64]().Reducer()
	for _, tc := range []struct {
		coll, algo string
		call       func(c *mplite.Comm, send, recv []byte) error
	}{
		{"alltoall", "bruck", func(c *mplite.Comm, s, r []byte) error { return c.Alltoall(s, r) }},
		{"allgather", "bruck", func(c *mplite.Comm, s, r []byte) error { return c.Allgather(s[:block], r) }},
		{"allreduce", "recursive_doubling", func(c *mplite.Comm, s, r []byte) error { return c.Allreduce(s[:block], r[:block], sum) }},
		{"allreduce", "rabenseifner", func(c *mplite.Comm, s, r []byte) error { return c.Allreduce(s[:block], r[:block], sum) }},
		{"allreduce", "ring", func(c *mplite.Comm, s, r []byte) error { return c.Allreduce(s[:block], r[:block], sum) }},
		{"reduce", "binomial", func(c *mplite.Comm, s, r []byte) error { return c.Reduce(s[:block], r[:block], sum, 0) }},
		{"scan", "recursive_doubling", func(c *mplite.Comm, s, r []byte) error { return c.Scan(s[:block], r[:block], sum) }},
		{"gather", "binomial", func(c *mplite.Comm, s, r []byte) error { return c.Gather(s[:block], r, 0) }},
		{"alltoall", "linear", func(c *mplite.Comm, s, r []byte) error { return c.Alltoall(s, r) }},
		{"alltoall", "pairwise", func(c *mplite.Comm, s, r []byte) error { return c.Alltoall(s, r) }},
		{"allgather", "ring", func(c *mplite.Comm, s, r []byte) error { return c.Allgather(s[:block], r) }},
		{"allgather", "recursive_doubling", func(c *mplite.Comm, s, r []byte) error { return c.Allgather(s[:block], r) }},
		{"bcast", "scatter_allgather", func(c *mplite.Comm, s, r []byte) error { return c.Bcast(s[:block], 0) }},
		{"barrier", "dissemination", func(c *mplite.Comm, s, r []byte) error { return c.Barrier() }},
		{"bcast", "mcast-nak", func(c *mplite.Comm, s, r []byte) error { return c.Bcast(s[:block], 0) }},
		{"bcast", "mcast-ack", func(c *mplite.Comm, s, r []byte) error { return c.Bcast(s[:block], 0) }},
		// The typed helper, whose operator is a closure made per call: it
		// must stay on the stack (the algorithm dispatch must not leak it).
		{"allreduce", "ring", func(c *mplite.Comm, s, r []byte) error {
			fs := unsafe.Slice((*float64)(unsafe.Pointer(&s[0])), block/8)
			fr := unsafe.Slice((*float64)(unsafe.Pointer(&r[0])), block/8)
			return mplite.Allreduce(c, fs, fr, mplite.Sum[float64]())
		}},
	} {
		t.Run(tc.coll+"/"+tc.algo, func(t *testing.T) {
			comms, err := mplite.NewLocalWorld(n, mplite.WithAlgorithm(tc.coll, tc.algo))
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make([]error, n)
			bufs := make([][2][]byte, n)
			for r := range bufs {
				bufs[r] = [2][]byte{make([]byte, n*block), make([]byte, n*block)}
			}
			call := func(r int) error { return tc.call(comms[r], bufs[r][0], bufs[r][1]) }
			for r := 1; r < n; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range warm + windows*(1+runs) {
						if errs[r] = call(r); errs[r] != nil {
							return
						}
					}
				}()
			}
			// Warm-up: connections open, the scratch grows once, and every
			// slot of the reliability windows gets its frame buffer.
			for range warm {
				if err := call(0); err != nil {
					t.Fatal(err)
				}
			}
			// The least of three windows, as allocsPerRun: on a loaded
			// machine a background event (a timer of a wait that blocked,
			// a retransmission) lands in some windows, the path's own
			// allocations in every one.
			mallocs, per := uint64(math.MaxUint64), uint64(math.MaxUint64)
			for range windows {
				m, b := memPerRun(runs, func() {
					if err := call(0); err != nil {
						t.Fatal(err)
					}
				})
				mallocs, per = min(mallocs, m), min(per, b)
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if per > block || mallocs > 1 {
				t.Errorf("a call with %d-byte blocks allocates %d bytes in %d allocations (all ranks)", block, per, mallocs)
			}
			for _, c := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := c.Finalize(); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
		})
	}
}

// endEcho stops an echoing peer (rank 1, which returns on tag 1 and sends
// the result of its Finalize on echoed) and finalizes a.
func endEcho(tb testing.TB, a *mplite.Comm, echoed <-chan error) {
	tb.Helper()
	if err := a.Send(nil, 1, 1); err != nil {
		tb.Fatal(err)
	}
	if err := a.Finalize(); err != nil {
		tb.Fatal(err)
	}
	if err := <-echoed; err != nil {
		tb.Fatal(err)
	}
}

// Frames a rank's NIC dropped (here a memnic port whose queue holds eight)
// show in Stats.DeviceDropped, and reliable delivery still brings every
// message.
func TestDeviceDroppedCounted(t *testing.T) {
	const n, size = 200, 1000
	sw := memnic.NewSwitch(7)
	small, err := sw.NewPort(memnic.PortConfig{QueueLen: 8})
	if err != nil {
		t.Fatal(err)
	}
	other, err := sw.NewPort(memnic.PortConfig{})
	if err != nil {
		t.Fatal(err)
	}
	macs := []net.HardwareAddr{small.HardwareAddr(), other.HardwareAddr()}
	errc := make(chan error, 2)
	var dropped uint64
	for rank, dev := range []*memnic.Port{small, other} {
		go func() {
			c, err := mplite.NewComm(dev, rank, macs)
			if err != nil {
				errc <- err
				return
			}
			defer c.Finalize()
			if rank == 1 {
				for i := range n {
					if err := c.Send(pattern(size, i), 0, i); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
				return
			}
			buf := make([]byte, size)
			for i := range n {
				if _, err := c.Recv(buf, 1, i); err != nil {
					errc <- err
					return
				}
				if !bytes.Equal(buf, pattern(size, i)) {
					errc <- fmt.Errorf("message %d corrupt", i)
					return
				}
			}
			dropped = c.Stats().DeviceDropped
			errc <- nil
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if want := small.Stats().RxDropped; dropped == 0 || dropped > want {
		t.Fatalf("Stats.DeviceDropped %d; the port dropped %d", dropped, want)
	}
}
