package mplite_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
)

// TestMprobeTakesTheMessage: a message taken by Mprobe or Improbe is
// received only by its own Recv; a later receive gets the next message.
// Eager and handshake sizes.
func TestMprobeTakesTheMessage(t *testing.T) {
	for _, size := range []int{8, mplite.DefaultEagerLimit * 3} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			noErrors(t, runWorld(t, 2, time.Minute, nil, func(c *mplite.Comm) error {
				a, b := make([]byte, size), make([]byte, size)
				if c.Rank() == 1 {
					a[0], b[0] = 'a', 'b'
					// Both at once: a handshake send completes only
					// once received, and rank 0 takes b before a.
					ra, err := c.Isend(a, 0, 3)
					if err != nil {
						return err
					}
					rb, err := c.Isend(b, 0, 3)
					if err != nil {
						return err
					}
					return mplite.Waitall(ra, rb)
				}
				msg, st, err := c.Mprobe(1, 3)
				if err != nil || st.Count != size || st.Source != 1 {
					return fmt.Errorf("Mprobe: %v %+v", err, st)
				}
				var ok bool
				var next *mplite.Message
				for !ok {
					if next, _, ok, err = c.Improbe(mplite.AnySource, mplite.AnyTag); err != nil {
						return err
					}
				}
				got := make([]byte, size)
				if _, err := next.Recv(got); err != nil || got[0] != 'b' {
					return fmt.Errorf("the second message: %v %q", err, got[0])
				}
				if _, err := msg.Recv(got); err != nil || got[0] != 'a' {
					return fmt.Errorf("the probed message: %v %q", err, got[0])
				}
				if _, err := msg.Recv(got); !errors.Is(err, mplite.ErrMessageUsed) {
					return fmt.Errorf("a message received twice: %v", err)
				}
				return nil
			}))
		})
	}
}
