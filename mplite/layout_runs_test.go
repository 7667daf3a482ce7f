package mplite_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/nic/memnic"
)

// runStrided is a strided layout that also names its runs, so that long
// messages can move by RDMA straight from and into its blocks.
type runStrided struct {
	strided
	runs []mplite.Run
}

func newRunStrided(block, stride, count int, fill func(i int) byte) *runStrided {
	s := &runStrided{strided: *newStrided(block, stride, count, fill)}
	for i := range count {
		s.runs = append(s.runs, mplite.Run{Off: i * stride, Len: block})
	}
	return s
}

func (s *runStrided) NumRuns() int                 { return len(s.runs) }
func (s *runStrided) Runs() ([]byte, []mplite.Run) { return s.mem, s.runs }

// TestLayoutRunsMoveDirectly: messages above the eager limit between run
// layouts (blocks of different sizes on each side), slices, and layouts
// whose runs are too short, on one rail, two rails, and with loss. Every
// byte lands in its block, no gap byte is written, and only the layouts
// with short runs (or with WithLayoutRDMA(false)) take a staging copy.
func TestLayoutRunsMoveDirectly(t *testing.T) {
	const size = 512 << 10
	for _, tc := range []struct {
		name string
		opts []mplite.Option
	}{
		{"one-rail", nil},
		{"two-rails", []mplite.Option{mplite.WithLocalRails(2)}},
		{"lossy", []mplite.Option{mplite.WithLocalFaults(21, memnic.Faults{Loss: 0.02, Duplicate: 0.01, Reorder: 0.02})}},
		{"small-chunks", []mplite.Option{mplite.WithMaxTransfer(3000)}},
		{"shared-memory", []mplite.Option{mplite.WithLocalRanksPerHost(2)}},
		{"staged", []mplite.Option{mplite.WithLayoutRDMA(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			staged := tc.name == "staged"
			noErrors(t, runWorld(t, 2, time.Minute, tc.opts, func(c *mplite.Comm) error {
				var err error
				if c.Rank() == 0 {
					err = runsSender(c, size)
				} else {
					err = runsReceiver(c, size)
				}
				if err != nil {
					return err
				}
				// Four messages of each side are layouts; only the
				// sender's last has runs too short to write one by one.
				want := uint64(1 - c.Rank())
				if staged {
					want = 4
				}
				if got := c.Stats().Staged; got != want {
					return fmt.Errorf("rank %d: %d staging copies, want %d", c.Rank(), got, want)
				}
				return c.Barrier()
			}))
		})
	}
}

// runsSender sends the messages runsReceiver expects: run layouts of 8 KiB
// blocks, a slice, and one with 512-byte runs.
func runsSender(c *mplite.Comm, size int) error {
	src := newRunStrided(8<<10, 12<<10, size/(8<<10), layoutByte)
	flat := make([]byte, size)
	for i := range flat {
		flat[i] = layoutByte(i)
	}
	short := newRunStrided(512, 1024, size/512, layoutByte)
	for tag := range 5 {
		var r *mplite.Request
		var err error
		switch tag {
		case 1:
			r, err = c.Isend(flat, 1, tag)
		case 4:
			r, err = c.IsendLayout(short, 1, tag)
		default:
			r, err = c.IsendLayout(src, 1, tag)
		}
		if err == nil {
			_, err = r.Wait()
		}
		if err != nil {
			return fmt.Errorf("send %d: %w", tag, err)
		}
	}
	return nil
}

// runsReceiver takes them: into 6 KiB blocks (runs not aligned with the
// sender's), a run layout from a slice, a slice from a run layout, a run
// layout too short for the message, and long runs from short ones.
func runsReceiver(c *mplite.Comm, size int) error {
	recv := func(tag int, l mplite.Layout, want int) error {
		r, err := c.IrecvLayout(l, 0, tag)
		var st mplite.Status
		if err == nil {
			st, err = r.Wait()
		}
		var te *mplite.TruncateError
		if want < size && errors.As(err, &te) {
			err = nil
		}
		if err != nil || st.Count != want {
			return fmt.Errorf("receive %d: count %d, want %d: %v", tag, st.Count, want, err)
		}
		return nil
	}
	dst := newRunStrided(6<<10, 7<<10, size/(6<<10)+1, nil)
	if err := recv(0, dst, size); err != nil {
		return err
	}
	if err := dst.check(size, layoutByte); err != nil {
		return fmt.Errorf("receive 0: %w", err)
	}
	dst = newRunStrided(6<<10, 7<<10, size/(6<<10)+1, nil)
	if err := recv(1, dst, size); err != nil {
		return err
	}
	if err := dst.check(size, layoutByte); err != nil {
		return fmt.Errorf("receive 1: %w", err)
	}
	flat := make([]byte, size)
	if st, err := c.Recv(flat, 0, 2); err != nil || st.Count != size {
		return fmt.Errorf("receive 2: count %d, %v", st.Count, err)
	}
	for i, v := range flat {
		if v != layoutByte(i) {
			return fmt.Errorf("receive 2: byte %d is %#x", i, v)
		}
	}
	short := newRunStrided(16<<10, 20<<10, 5, nil)
	if err := recv(3, short, short.Len()); err != nil {
		return err
	}
	if err := short.check(short.Len(), layoutByte); err != nil {
		return fmt.Errorf("receive 3: %w", err)
	}
	dst = newRunStrided(8<<10, 9<<10, size/(8<<10), nil)
	if err := recv(4, dst, size); err != nil {
		return err
	}
	if err := dst.check(size, layoutByte); err != nil {
		return fmt.Errorf("receive 4: %w", err)
	}
	return nil
}
