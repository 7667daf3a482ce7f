package mplite_test

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/nic/memnic"
)

// TestSsendWaitsForMatch: Ssend returns only after the receiver has posted
// the matching receive, at every size (eager-sized ones included), while a
// plain eager Send of the same message returns before. Ordering is checked
// with a flag the receiver sets just before it posts the receive.
func TestSsendWaitsForMatch(t *testing.T) {
	limit := mplite.DefaultEagerLimit
	for _, n := range []int{0, 1, limit, limit + 1, 1 << 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var posted, posted5 atomic.Bool
			var returnedEarly atomic.Bool
			noErrors(t, runWorld(t, 2, 30*time.Second, nil, func(c *mplite.Comm) error {
				msg := make([]byte, n)
				for i := range msg {
					msg[i] = byte(i*7 + 1)
				}
				if c.Rank() == 0 {
					if err := c.Ssend(msg, 1, 4); err != nil {
						return err
					}
					if !posted.Load() {
						returnedEarly.Store(true)
					}
					// The contrast: an eager Send completes at once.
					if n <= limit {
						if err := c.Send(msg, 1, 5); err != nil {
							return err
						}
						if posted5.Load() {
							return fmt.Errorf("eager Send of %d bytes waited for its receive", n)
						}
					}
					return c.Barrier()
				}
				time.Sleep(100 * time.Millisecond)
				posted.Store(true)
				got := make([]byte, n)
				st, err := c.Recv(got, 0, 4)
				if err != nil {
					return err
				}
				if st.Count != n || !bytes.Equal(got, msg) {
					return fmt.Errorf("Ssend of %d bytes arrived as %d bytes, equal %v", n, st.Count, bytes.Equal(got, msg))
				}
				if n <= limit {
					time.Sleep(100 * time.Millisecond)
					posted5.Store(true)
					if _, err := c.Recv(got, 0, 5); err != nil {
						return err
					}
				}
				return c.Barrier()
			}))
			if returnedEarly.Load() {
				t.Fatalf("Ssend of %d bytes returned before the receive was posted", n)
			}
		})
	}
}

// TestIssend: an Issend is not done before its receive is posted, to
// another rank or to itself, and many of them keep MPI order under loss.
func TestIssend(t *testing.T) {
	opts := []mplite.Option{mplite.WithLocalFaults(3, memnic.Faults{Loss: 0.02, Reorder: 0.02})}
	noErrors(t, runWorld(t, 2, 60*time.Second, opts, func(c *mplite.Comm) error {
		me, peer := c.Rank(), 1-c.Rank()
		// To itself.
		self, err := c.Issend([]byte("self"), me, 1)
		if err != nil {
			return err
		}
		if done, _, err := self.Test(); done || err != nil {
			return fmt.Errorf("Issend to itself done (%v, %v) before its receive", done, err)
		}
		buf := make([]byte, 8)
		if st, err := c.Recv(buf, me, 1); err != nil || st.Count != 4 || string(buf[:4]) != "self" {
			return fmt.Errorf("self receive %+v %v %q", st, err, buf[:4])
		}
		if _, err := self.Wait(); err != nil {
			return err
		}
		// 200 synchronous sends each way, received in order.
		const k = 200
		reqs := make([]*mplite.Request, 0, k)
		for i := range k {
			r, err := c.Issend([]byte{byte(i), byte(me)}, peer, 2)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		for i := range k {
			b := make([]byte, 2)
			if _, err := c.Recv(b, peer, 2); err != nil {
				return err
			}
			if b[0] != byte(i) || b[1] != byte(peer) {
				return fmt.Errorf("message %d from %d is %v", i, peer, b)
			}
		}
		return mplite.Waitall(reqs...)
	}))
}
