// Package mpitest is the MPI-semantics suite of mplite, written once and
// run by every rank of a job: in process over NewLocalWorld (mplite's unit
// tests) and as separate processes under mprun or MPICH's Hydra (the
// program in ./cmd/mpitest, driven by the end-to-end tests in test/).
//
// Every rank calls Run with the same Config; the checks run in order,
// separated by barriers, and each rank returns the first failure it saw.
package mpitest

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ethervia/ethervia/mplite"
)

// Config shapes the suite. Every rank must use the same values.
type Config struct {
	// EagerLimit is the communicator's eager limit (sizes are tested
	// around it).
	EagerLimit int
	// MaxSize is the largest message of the size sweep (64 MiB in the
	// full suite).
	MaxSize int
	// Isends is the number of outstanding Isends (1000 in the full suite).
	Isends int
	// Only, if set, runs only the named checks.
	Only []string
	// Log, if set, reports progress.
	Log func(format string, args ...any)
}

// Check is one collective check of the suite.
type Check struct {
	Name string
	// MinRanks is the smallest world the check needs; smaller worlds skip
	// it.
	MinRanks int
	Run      func(c *mplite.Comm, cfg Config) error
}

// Checks returns the suite, in the order Run runs it. The early-exit check
// is not part of it: see EarlyExit.
func Checks() []Check {
	return []Check{
		{"order-and-wildcards", 2, orderAndWildcards},
		{"truncation", 2, truncation},
		{"zero-length-and-self", 1, zeroAndSelf},
		{"sizes", 2, sizes},
		{"many-isends", 2, manyIsends},
		{"bidirectional-large", 2, bidirectional},
		{"unexpected-large", 2, unexpectedLarge},
		{"anysource-fairness", 3, fairness},
		{"probe", 2, probe},
	}
}

// Run runs the checks on c.
func Run(c *mplite.Comm, cfg Config) error {
	for _, ch := range Checks() {
		if len(cfg.Only) > 0 && !contains(cfg.Only, ch.Name) {
			continue
		}
		if c.Size() < ch.MinRanks {
			continue
		}
		if cfg.Log != nil && c.Rank() == 0 {
			cfg.Log("check %s", ch.Name)
		}
		if err := ch.Run(c, cfg); err != nil {
			return fmt.Errorf("rank %d: %s: %w", c.Rank(), ch.Name, err)
		}
		if err := c.Barrier(); err != nil {
			return fmt.Errorf("rank %d: barrier after %s: %w", c.Rank(), ch.Name, err)
		}
	}
	return nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// fill writes a pattern that depends on seed, so that a message delivered
// to the wrong receive, or shifted, is caught.
func fill(b []byte, seed int) {
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

// Fill writes the suite's seeded pattern into b, for programs that check
// their own messages the same way.
func Fill(b []byte, seed int) { fill(b, seed) }

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	fill(b, seed)
	return b
}

func checkData(got []byte, n, seed int) error {
	if want := pattern(n, seed); !bytes.Equal(got[:n], want) {
		for i := range want {
			if got[i] != want[i] {
				return fmt.Errorf("%d-byte message (seed %d): byte %d is %#x, want %#x", n, seed, i, got[i], want[i])
			}
		}
	}
	return nil
}

func wantStatus(st mplite.Status, src, tag, count int) error {
	if st.Source != src || st.Tag != tag || st.Count != count {
		return fmt.Errorf("status %+v, want source %d tag %d count %d", st, src, tag, count)
	}
	return nil
}

// orderAndWildcards: every rank but 0 sends rank 0 a stream of eager and
// handshake messages with tags 0, 1, 2 in turn. Rank 0 first takes each
// source's first tag-2 message by tag, then the rest with AnyTag from each
// source, then from AnySource; per source, messages must come in the order
// they were sent (non-overtaking, across both protocols).
func orderAndWildcards(c *mplite.Comm, cfg Config) error {
	const n = 24
	size := func(i int) int {
		if i%4 == 3 {
			return cfg.EagerLimit + 1 + i // handshake
		}
		return 8 + i
	}
	if c.Rank() != 0 {
		reqs := make([]*mplite.Request, 0, n)
		for i := 0; i < n; i++ {
			b := pattern(size(i), c.Rank()*1000+i)
			b[0], b[1] = byte(c.Rank()), byte(i)
			r, err := c.Isend(b, 0, i%3)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		return mplite.Waitall(reqs...)
	}
	buf := make([]byte, cfg.EagerLimit+1+n)
	check := func(st mplite.Status, src, i int) error {
		if st.Source != src || st.Tag != i%3 || st.Count != size(i) {
			return fmt.Errorf("message %d from %d: status %+v", i, src, st)
		}
		if buf[0] != byte(src) || buf[1] != byte(i) {
			return fmt.Errorf("from %d: got message (%d, %d), want %d", src, buf[0], buf[1], i)
		}
		want := pattern(size(i), src*1000+i)
		want[0], want[1] = byte(src), byte(i)
		if !bytes.Equal(buf[:st.Count], want) {
			return fmt.Errorf("message %d from %d: data corrupt", i, src)
		}
		return nil
	}
	next := make([]int, c.Size()) // per source: next index expected by AnyTag
	for src := 1; src < c.Size(); src++ {
		st, err := c.Recv(buf, src, 2)
		if err != nil {
			return err
		}
		if err := check(st, src, 2); err != nil {
			return fmt.Errorf("first tag-2 message: %w", err)
		}
		// Then the first three others, by AnyTag: 0, 1, 3.
		for _, i := range []int{0, 1, 3} {
			st, err := c.Recv(buf, src, mplite.AnyTag)
			if err != nil {
				return err
			}
			if err := check(st, src, i); err != nil {
				return fmt.Errorf("AnyTag: %w", err)
			}
		}
		next[src] = 4
	}
	for k := 0; k < (c.Size()-1)*(n-4); k++ {
		st, err := c.Recv(buf, mplite.AnySource, mplite.AnyTag)
		if err != nil {
			return err
		}
		src := st.Source
		if src < 1 || src >= c.Size() || next[src] >= n {
			return fmt.Errorf("AnySource: unexpected status %+v", st)
		}
		if err := check(st, src, next[src]); err != nil {
			return fmt.Errorf("AnySource: %w", err)
		}
		next[src]++
	}
	return nil
}

// truncation: messages longer than their buffers fail with ErrTruncate and
// deliver the first bytes; the connection carries on.
func truncation(c *mplite.Comm, cfg Config) error {
	large := cfg.EagerLimit + 4096
	switch c.Rank() {
	case 0:
		for i, n := range []int{100, large, 50, large} {
			if err := c.Send(pattern(n, i), 1, i); err != nil {
				return err
			}
		}
		return c.Send(pattern(33, 9), 1, 9)
	case 1:
		for i, tc := range []struct{ n, capacity int }{{100, 10}, {large, cfg.EagerLimit}, {50, 0}, {large, 0}} {
			buf := make([]byte, tc.capacity)
			st, err := c.Recv(buf, 0, i)
			var te *mplite.TruncateError
			if !errors.Is(err, mplite.ErrTruncate) || !errors.As(err, &te) {
				return fmt.Errorf("%d bytes into %d: err %v, want ErrTruncate", tc.n, tc.capacity, err)
			}
			if te.Length != tc.n || te.Capacity != tc.capacity || te.Source != 0 || te.Tag != i {
				return fmt.Errorf("truncation error %+v", te)
			}
			if err := wantStatus(st, 0, i, tc.capacity); err != nil {
				return err
			}
			if err := checkData(buf, tc.capacity, i); err != nil {
				return err
			}
		}
		buf := make([]byte, 64)
		st, err := c.Recv(buf, 0, 9)
		if err != nil {
			return fmt.Errorf("after truncations: %w", err)
		}
		if err := wantStatus(st, 0, 9, 33); err != nil {
			return err
		}
		return checkData(buf, 33, 9)
	}
	return nil
}

// zeroAndSelf: empty messages between ranks and to self; sends to self of
// every protocol, blocking and not.
func zeroAndSelf(c *mplite.Comm, cfg Config) error {
	me := c.Rank()
	// To self: short (buffered at once), then long (waits for its receive).
	if err := c.Send(pattern(77, me), me, 3); err != nil {
		return err
	}
	buf := make([]byte, 2*cfg.EagerLimit+100)
	st, err := c.Recv(buf, me, 3)
	if err != nil {
		return err
	}
	if err := wantStatus(st, me, 3, 77); err != nil {
		return fmt.Errorf("self: %w", err)
	}
	if err := checkData(buf, 77, me); err != nil {
		return err
	}
	long := cfg.EagerLimit + 100
	r, err := c.Isend(pattern(long, me+1), me, 4)
	if err != nil {
		return err
	}
	if done, _, _ := r.Test(); done {
		return errors.New("a long send to self completed before its receive was posted")
	}
	st, err = c.Recv(buf, mplite.AnySource, 4)
	if err != nil {
		return err
	}
	if _, err := r.Wait(); err != nil {
		return err
	}
	if err := wantStatus(st, me, 4, long); err != nil {
		return fmt.Errorf("long self: %w", err)
	}
	if err := checkData(buf, long, me+1); err != nil {
		return err
	}
	if st, err = c.Sendrecv(pattern(5, 8), me, 5, buf, me, 5); err != nil {
		return err
	}
	if err := wantStatus(st, me, 5, 5); err != nil {
		return fmt.Errorf("sendrecv to self: %w", err)
	}
	// Empty messages to self and to the neighbours.
	if err := c.Send(nil, me, 6); err != nil {
		return err
	}
	if st, err = c.Recv(nil, me, 6); err != nil || st.Count != 0 {
		return fmt.Errorf("empty to self: %+v %v", st, err)
	}
	if c.Size() == 1 {
		return nil
	}
	right, left := (me+1)%c.Size(), (me-1+c.Size())%c.Size()
	st, err = c.Sendrecv(nil, right, 7, buf[:0], left, 7)
	if err != nil {
		return err
	}
	return wantStatus(st, left, 7, 0)
}

// sizes: ping-pong between ranks 0 and 1 at the eager limit -1, the limit,
// +1, across fragment and descriptor boundaries, up to MaxSize; every byte
// checked both ways.
func sizes(c *mplite.Comm, cfg Config) error {
	if c.Rank() > 1 {
		return nil
	}
	e := cfg.EagerLimit
	list := []int{1, max(e-1, 0), e, e + 1, 2*e + 3, 100003, 1<<20 + 5}
	for n := 4 << 20; n <= cfg.MaxSize; n *= 4 {
		list = append(list, n)
	}
	if list[len(list)-1] != cfg.MaxSize && cfg.MaxSize > list[len(list)-1] {
		list = append(list, cfg.MaxSize)
	}
	recv := make([]byte, cfg.MaxSize+1)
	for _, n := range list {
		if n > cfg.MaxSize {
			continue
		}
		if c.Rank() == 0 {
			if err := c.Send(pattern(n, n), 1, 1); err != nil {
				return err
			}
			st, err := c.Recv(recv, 1, 2)
			if err != nil {
				return err
			}
			if err := wantStatus(st, 1, 2, n); err != nil {
				return err
			}
			if err := checkData(recv, n, n+1); err != nil {
				return err
			}
		} else {
			st, err := c.Recv(recv, 0, 1)
			if err != nil {
				return err
			}
			if err := wantStatus(st, 0, 1, n); err != nil {
				return err
			}
			if err := checkData(recv, n, n); err != nil {
				return err
			}
			if err := c.Send(pattern(n, n+1), 0, 2); err != nil {
				return err
			}
		}
	}
	return nil
}

// manyIsends: rank 1 has Isends outstanding to rank 0 (received in reverse
// tag order, so all are unexpected first); then rank 0 posts as many
// Irecvs before rank 1 sends.
func manyIsends(c *mplite.Comm, cfg Config) error {
	n := cfg.Isends
	payload := func(i int) int { return 16 + i%200 }
	switch c.Rank() {
	case 1:
		reqs := make([]*mplite.Request, n)
		for i := range reqs {
			r, err := c.Isend(pattern(payload(i), i), 0, i)
			if err != nil {
				return err
			}
			reqs[i] = r
		}
		if err := mplite.Waitall(reqs...); err != nil {
			return err
		}
		if _, err := c.Recv(nil, 0, 0); err != nil { // rank 0's receives are posted
			return err
		}
		for i := range reqs {
			r, err := c.Isend(pattern(payload(i), -i), 0, i)
			if err != nil {
				return err
			}
			reqs[i] = r
		}
		return mplite.Waitall(reqs...)
	case 0:
		buf := make([]byte, 256)
		for i := n - 1; i >= 0; i-- {
			st, err := c.Recv(buf, 1, i)
			if err != nil {
				return err
			}
			if err := wantStatus(st, 1, i, payload(i)); err != nil {
				return err
			}
			if err := checkData(buf, payload(i), i); err != nil {
				return err
			}
		}
		reqs := make([]*mplite.Request, n)
		bufs := make([][]byte, n)
		for i := range reqs {
			bufs[i] = make([]byte, 256)
			r, err := c.Irecv(bufs[i], 1, i)
			if err != nil {
				return err
			}
			reqs[i] = r
		}
		if err := c.Send(nil, 1, 0); err != nil {
			return err
		}
		for i, r := range reqs {
			st, err := r.Wait()
			if err != nil {
				return err
			}
			if err := wantStatus(st, 1, i, payload(i)); err != nil {
				return err
			}
			if err := checkData(bufs[i], payload(i), -i); err != nil {
				return err
			}
		}
	}
	return nil
}

// bidirectional: every rank Isends a large message to both neighbours and
// receives from both at once; with two ranks both exchange directly. The
// thesis's receiver-first handshake deadlocked here.
func bidirectional(c *mplite.Comm, cfg Config) error {
	n := min(cfg.MaxSize, 8<<20)
	me, size := c.Rank(), c.Size()
	right, left := (me+1)%size, (me-1+size)%size
	out := pattern(n, me)
	in1, in2 := make([]byte, n), make([]byte, n)
	var reqs []*mplite.Request
	for _, op := range []func() (*mplite.Request, error){
		func() (*mplite.Request, error) { return c.Irecv(in1, left, 11) },
		func() (*mplite.Request, error) { return c.Irecv(in2, right, 12) },
		func() (*mplite.Request, error) { return c.Isend(out, right, 11) },
		func() (*mplite.Request, error) { return c.Isend(out, left, 12) },
	} {
		r, err := op()
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	if err := mplite.Waitall(reqs...); err != nil {
		return err
	}
	if err := checkData(in1, n, left); err != nil {
		return err
	}
	return checkData(in2, n, right)
}

// unexpectedLarge: a handshake message arrives long before its receive;
// Probe sees it whole, and the receive gets it intact.
func unexpectedLarge(c *mplite.Comm, cfg Config) error {
	n := min(cfg.MaxSize, 4<<20) + 7
	switch c.Rank() {
	case 0:
		r, err := c.Isend(pattern(n, 42), 1, 21)
		if err != nil {
			return err
		}
		if err := c.Send(pattern(10, 43), 1, 22); err != nil {
			return err
		}
		_, err = r.Wait()
		return err
	case 1:
		// The small message was sent after the large one: once it is here,
		// so is the large one's RTS.
		if _, err := c.Probe(0, 22); err != nil {
			return err
		}
		ok, st, err := c.Iprobe(0, 21)
		if err != nil || !ok {
			return fmt.Errorf("large message not probed: %v %v", ok, err)
		}
		if err := wantStatus(st, 0, 21, n); err != nil {
			return fmt.Errorf("probe: %w", err)
		}
		small := make([]byte, 10)
		if _, err := c.Recv(small, 0, 22); err != nil {
			return err
		}
		buf := make([]byte, n)
		st, err = c.Recv(buf, 0, 21)
		if err != nil {
			return err
		}
		if err := wantStatus(st, 0, 21, n); err != nil {
			return err
		}
		return checkData(buf, n, 42)
	}
	return nil
}

// fairness: every rank but 0 sends k messages to rank 0, which waits until
// all are there and then receives them from AnySource: the sources must
// take turns.
func fairness(c *mplite.Comm, cfg Config) error {
	const k = 20
	if c.Rank() != 0 {
		for i := 0; i < k; i++ {
			if err := c.Send(pattern(32, i), 0, 31); err != nil {
				return err
			}
		}
		return c.Send(nil, 0, 32)
	}
	for src := 1; src < c.Size(); src++ {
		if _, err := c.Probe(src, 32); err != nil { // everything from src is here
			return err
		}
	}
	senders := c.Size() - 1
	count := make([]int, c.Size())
	buf := make([]byte, 32)
	for j := 0; j < senders*k; j++ {
		st, err := c.Recv(buf, mplite.AnySource, 31)
		if err != nil {
			return err
		}
		count[st.Source]++
		round := j/senders + 1 // every source has this many after this round
		for src := 1; src < c.Size(); src++ {
			if count[src] > round || (j%senders == senders-1 && count[src] != round) {
				return fmt.Errorf("after %d AnySource receives the sources have %v: not taking turns", j+1, count[1:])
			}
		}
		if err := checkData(buf, 32, count[st.Source]-1); err != nil {
			return fmt.Errorf("from %d: %w", st.Source, err)
		}
	}
	for src := 1; src < c.Size(); src++ {
		if _, err := c.Recv(nil, src, 32); err != nil {
			return err
		}
	}
	return nil
}

// probe: Iprobe and Probe report a message without taking it, and the
// receive that names its status gets it.
func probe(c *mplite.Comm, cfg Config) error {
	switch c.Rank() {
	case 1:
		if err := c.Send(pattern(777, 5), 0, 5); err != nil {
			return err
		}
		return c.Send(pattern(cfg.EagerLimit+2, 6), 0, 6)
	case 0:
		if ok, _, err := c.Iprobe(1, 99); ok || err != nil {
			return fmt.Errorf("iprobe of a message never sent: %v %v", ok, err)
		}
		st, err := c.Probe(mplite.AnySource, mplite.AnyTag)
		if err != nil {
			return err
		}
		if err := wantStatus(st, 1, 5, 777); err != nil {
			return fmt.Errorf("probe: %w", err)
		}
		// Probing again finds the same message.
		st2, err := c.Probe(1, mplite.AnyTag)
		if err != nil || st2 != st {
			return fmt.Errorf("second probe: %+v %v", st2, err)
		}
		buf := make([]byte, cfg.EagerLimit+2)
		got, err := c.Recv(buf, st.Source, st.Tag)
		if err != nil {
			return err
		}
		if got != st {
			return fmt.Errorf("receive %+v after probe %+v", got, st)
		}
		if err := checkData(buf, 777, 5); err != nil {
			return err
		}
		st, err = c.Probe(1, 6)
		if err != nil {
			return err
		}
		if err := wantStatus(st, 1, 6, cfg.EagerLimit+2); err != nil {
			return fmt.Errorf("probe of a handshake message: %w", err)
		}
		if _, err := c.Recv(buf, 1, 6); err != nil {
			return err
		}
		return checkData(buf, cfg.EagerLimit+2, 6)
	}
	return nil
}

// EarlyExit is the failure check: the last rank calls die (it exits
// without Finalize, or its network goes away) after a barrier; every other
// rank waits for a message from it and must get an error naming it, within
// the peer timeout, instead of hanging. It returns nil on the survivors
// when they saw the right error.
func EarlyExit(c *mplite.Comm, die func()) error {
	last := c.Size() - 1
	if err := c.Barrier(); err != nil {
		return fmt.Errorf("rank %d: barrier before the early exit: %w", c.Rank(), err)
	}
	if c.Rank() == last {
		die()
		return nil
	}
	_, err := c.Recv(make([]byte, 8), last, 77)
	var pe *mplite.PeerError
	if !errors.Is(err, mplite.ErrPeerDead) || !errors.As(err, &pe) || pe.Rank != last {
		return fmt.Errorf("rank %d: receive from the dead rank %d: err %v, want a PeerError naming it", c.Rank(), last, err)
	}
	// Later operations on it fail at once; AnySource receives fail too.
	if err := c.Send([]byte{1}, last, 1); !errors.Is(err, mplite.ErrPeerDead) {
		return fmt.Errorf("rank %d: send to the dead rank: %v", c.Rank(), err)
	}
	if _, err := c.Recv(nil, mplite.AnySource, 1); !errors.Is(err, mplite.ErrPeerDead) {
		return fmt.Errorf("rank %d: AnySource receive after a death: %v", c.Rank(), err)
	}
	return nil
}
