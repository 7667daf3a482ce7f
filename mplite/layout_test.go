package mplite_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
)

// strided is count blocks of block bytes, stride bytes apart in mem: an
// MPI vector type.
type strided struct {
	mem                  []byte
	block, stride, count int
}

func (s *strided) Len() int { return s.block * s.count }

func (s *strided) Gather(dst []byte) {
	for i := 0; len(dst) > 0; i++ {
		n := copy(dst, s.mem[i*s.stride:i*s.stride+s.block])
		dst = dst[n:]
	}
}

func (s *strided) Scatter(src []byte) {
	for i := 0; len(src) > 0; i++ {
		n := copy(s.mem[i*s.stride:i*s.stride+s.block], src)
		src = src[n:]
	}
}

// newStrided makes a layout of count blocks in fresh memory whose gaps hold
// 0xEE, the blocks filled by fill (or 0 if nil).
func newStrided(block, stride, count int, fill func(i int) byte) *strided {
	s := &strided{mem: bytes.Repeat([]byte{0xEE}, stride*count), block: block, stride: stride, count: count}
	for i := range count {
		for j := range block {
			v := byte(0)
			if fill != nil {
				v = fill(i*block + j)
			}
			s.mem[i*s.stride+j] = v
		}
	}
	return s
}

// check reports the first byte of s that is not want's (packed order) in a
// block, or not 0xEE in a gap, for the first n message bytes.
func (s *strided) check(n int, want func(i int) byte) error {
	for i := range s.count {
		for j := range s.stride {
			at := i*s.stride + j
			k := i*s.block + j
			switch {
			case j < s.block && k < n:
				if s.mem[at] != want(k) {
					return fmt.Errorf("message byte %d (memory %d) is %#x, want %#x", k, at, s.mem[at], want(k))
				}
			case j >= s.block && s.mem[at] != 0xEE:
				return fmt.Errorf("gap byte at %d written (%#x)", at, s.mem[at])
			}
		}
	}
	return nil
}

func layoutByte(i int) byte { return byte(i*31 + 7) }

// TestLayoutMessages: layout sends and receives at eager, boundary and
// handshake sizes, with each other and with slices, posted before and after
// the message arrives, to self, and truncated. Eager ones use no staging
// copy; handshake ones one, kept for the next.
func TestLayoutMessages(t *testing.T) {
	limit := mplite.DefaultEagerLimit
	for _, size := range []int{1, 4096, limit, limit + 8, 1 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			block := min(size, 8)
			count := size / block
			noErrors(t, runWorld(t, 2, time.Minute, nil, func(c *mplite.Comm) error {
				if c.Rank() == 0 {
					src := newStrided(block, 3*block, count, layoutByte)
					for tag := range 3 {
						r, err := c.IsendLayout(src, 1, tag)
						if err != nil {
							return err
						}
						if _, err := r.Wait(); err != nil {
							return fmt.Errorf("send %d: %w", tag, err)
						}
					}
					// A slice to a layout receive.
					flat := make([]byte, size)
					for i := range flat {
						flat[i] = layoutByte(i)
					}
					if err := c.Send(flat, 1, 3); err != nil {
						return err
					}
					// To a receive too short for it.
					r, err := c.IsendLayout(src, 1, 4)
					if err == nil {
						_, err = r.Wait()
					}
					if err != nil {
						return fmt.Errorf("send to a short receive: %w", err)
					}
					if got, want := mplite.Stages(c), min(1, size/(limit+1)); got != want {
						return fmt.Errorf("sender keeps %d staging copies, want %d", got, want)
					}
					return c.Barrier()
				}
				// Posted before the message, after it (unexpected), and a
				// layout send into a slice.
				dst := newStrided(block, 2*block, count, nil)
				r, err := c.IrecvLayout(dst, 0, 0)
				if err != nil {
					return err
				}
				st, err := r.Wait()
				if err != nil || st.Count != size {
					return fmt.Errorf("posted receive: count %d, %v", st.Count, err)
				}
				if err := dst.check(size, layoutByte); err != nil {
					return fmt.Errorf("posted receive: %w", err)
				}
				time.Sleep(20 * time.Millisecond) // message 1 arrives first
				dst = newStrided(block, 2*block, count, nil)
				if r, err = c.IrecvLayout(dst, mplite.AnySource, 1); err == nil {
					st, err = r.Wait()
				}
				if err != nil || st.Count != size || st.Source != 0 {
					return fmt.Errorf("late receive: count %d from %d, %v", st.Count, st.Source, err)
				}
				if err := dst.check(size, layoutByte); err != nil {
					return fmt.Errorf("late receive: %w", err)
				}
				flat := make([]byte, size)
				if st, err = c.Recv(flat, 0, 2); err != nil || st.Count != size {
					return fmt.Errorf("slice receive of a layout send: count %d, %v", st.Count, err)
				}
				for i, v := range flat {
					if v != layoutByte(i) {
						return fmt.Errorf("slice receive of a layout send: byte %d", i)
					}
				}
				dst = newStrided(block, 2*block, count, nil)
				if r, err = c.IrecvLayout(dst, 0, 3); err == nil {
					st, err = r.Wait()
				}
				if err != nil || dst.check(size, layoutByte) != nil {
					return fmt.Errorf("layout receive of a slice: %v, %v", err, dst.check(size, layoutByte))
				}
				short := newStrided(block, 2*block, max(count/2, 1), nil)
				var te *mplite.TruncateError
				if r, err = c.IrecvLayout(short, 0, 4); err == nil {
					st, err = r.Wait()
				}
				if size > block && (!errors.As(err, &te) || st.Count != short.Len()) {
					return fmt.Errorf("short receive: count %d, %v; want a truncation at %d", st.Count, err, short.Len())
				}
				if err := short.check(short.Len(), layoutByte); err != nil {
					return fmt.Errorf("short receive: %w", err)
				}
				if got, want := mplite.Stages(c), min(1, size/(limit+1)); got != want {
					return fmt.Errorf("receiver keeps %d staging copies, want %d", got, want)
				}
				// To self.
				src := newStrided(block, 3*block, count, layoutByte)
				self := newStrided(block, 2*block, count, nil)
				rr, err := c.IrecvLayout(self, 1, 9)
				if err != nil {
					return err
				}
				sr, err := c.IsendLayout(src, 1, 9)
				if err != nil {
					return err
				}
				if _, err := sr.Wait(); err != nil {
					return err
				}
				if st, err = rr.Wait(); err != nil || st.Count != size || self.check(size, layoutByte) != nil {
					return fmt.Errorf("to self: count %d, %v, %v", st.Count, err, self.check(size, layoutByte))
				}
				return c.Barrier()
			}))
		})
	}
}

// TestLayoutsAllocateNothing: a layout send and receive, their requests
// freed, allocate nothing in steady state: an eager message gathered and
// scattered through the slots, and a long one written run to run.
func TestLayoutsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector (the normal pass runs this)")
	}
	type checked interface {
		mplite.Layout
		check(n int, want func(i int) byte) error
	}
	const eager, long = 16 << 10, 256 << 10
	for _, tc := range []struct {
		name          string
		echo, src, in checked
		size, rounds  int
	}{
		{"eager", newStrided(8, 16, eager/8, nil), newStrided(8, 24, eager/8, layoutByte),
			newStrided(8, 16, eager/8, nil), eager, 300},
		{"runs", newRunStrided(8<<10, 10<<10, long/(8<<10), nil), newRunStrided(8<<10, 16<<10, long/(8<<10), layoutByte),
			newRunStrided(4<<10, 5<<10, long/(4<<10), nil), long, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms, err := mplite.NewLocalWorld(2, mplite.WithSpinTime(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			a, b := comms[0], comms[1]
			echoed := echoLayout(b, tc.echo)
			round := func() {
				s, err := a.IsendLayout(tc.src, 1, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Wait(); err != nil {
					t.Fatal(err)
				}
				s.Free()
				r, err := a.IrecvLayout(tc.in, 1, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.Wait(); err != nil {
					t.Fatal(err)
				}
				r.Free()
			}
			for range 20 {
				round()
			}
			if err := tc.in.check(tc.size, layoutByte); err != nil {
				t.Fatal(err)
			}
			if n := allocsPerRun(tc.rounds, round); n != 0 {
				t.Errorf("a %d-byte layout round trip allocates %v times", tc.size, n)
			}
			if st := a.Stats(); st.Staged != 0 {
				t.Errorf("%d staging copies", st.Staged)
			}
			endEcho(t, a, echoed)
		})
	}
}

// echoLayout has b receive messages from rank 0 into dst and send each
// back from it, until a message with tag 1, then finalize; the channel
// gets the first error or Finalize's.
func echoLayout(b *mplite.Comm, dst mplite.Layout) <-chan error {
	echoed := make(chan error, 1)
	go func() {
		for {
			r, err := b.IrecvLayout(dst, 0, mplite.AnyTag)
			var st mplite.Status
			if err == nil {
				st, err = r.Wait()
				r.Free()
			}
			if err == nil && st.Tag == 1 {
				echoed <- b.Finalize()
				return
			}
			if err == nil {
				s, err2 := b.IsendLayout(dst, 0, 0)
				if err = err2; err == nil {
					_, err = s.Wait()
					s.Free()
				}
			}
			if err != nil {
				echoed <- err
				return
			}
		}
	}()
	return echoed
}
