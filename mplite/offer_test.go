package mplite_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
)

// A receive posted before its large message is offered to the sender, who
// writes the message straight into it: a ping-pong of large messages takes
// offers, and every byte arrives.
func TestOfferPingPong(t *testing.T) {
	const n, rounds = mplite.DefaultEagerLimit + 40<<10, 20
	noErrors(t, runWorld(t, 2, 30*time.Second, nil, func(c *mplite.Comm) error {
		buf := make([]byte, n)
		peer := 1 - c.Rank()
		for i := range rounds {
			if (i%2 == 0) == (c.Rank() == 0) {
				copy(buf, pattern(n, i))
				if err := c.Send(buf, peer, 7); err != nil {
					return err
				}
				continue
			}
			st, err := c.Recv(buf, peer, 7)
			if err != nil {
				return err
			}
			if st.Count != n || st.Source != peer || st.Tag != 7 || !bytes.Equal(buf, pattern(n, i)) {
				return fmt.Errorf("round %d: status %+v or data wrong", i, st)
			}
		}
		if s := c.Stats(); s.OffersTaken == 0 || s.OffersUsed == 0 {
			return fmt.Errorf("no offer taken or used in a ping-pong: %+v", s)
		}
		return nil
	}))
}

// Offers never break MPI's matching order: messages that do not fit an
// offer (another tag, too long, eager) make it lapse, and each message
// still lands in the receive MPI says it matches.
func TestOfferKeepsMatchingOrder(t *testing.T) {
	const big = mplite.DefaultEagerLimit + 1024
	noErrors(t, runWorld(t, 2, 30*time.Second, nil, func(c *mplite.Comm) error {
		if err := c.Barrier(); err != nil { // connected: receives are offered
			return err
		}
		if c.Rank() == 0 {
			// Wait until rank 1 has posted (and offered) its receives.
			if _, err := c.Recv(nil, 1, 99); err != nil {
				return err
			}
			for i, m := range []struct{ n, tag int }{{big, 2}, {10, 1}, {big, 1}, {2 * big, 3}, {big, 3}} {
				if err := c.Send(pattern(m.n, i), 1, m.tag); err != nil {
					return err
				}
			}
			// Then one that the posted receive's offer takes.
			if _, err := c.Recv(nil, 1, 98); err != nil {
				return err
			}
			return c.Send(pattern(big, 5), 1, 6)
		}
		r1 := make([]byte, 2*big) // tag 1: offered first; the 10-byte eager message matches it
		r2 := make([]byte, 2*big) // tag 1: gets the large one
		r3 := make([]byte, big)   // tag 2
		r4 := make([]byte, big)   // tag 3: the 2*big message does not fit (truncated)
		r5 := make([]byte, 2*big) // tag 3
		var reqs []*mplite.Request
		for _, p := range []struct {
			b   []byte
			tag int
		}{{r1, 1}, {r2, 1}, {r3, 2}, {r4, 3}, {r5, 3}} {
			q, err := c.Irecv(p.b, 0, p.tag)
			if err != nil {
				return err
			}
			reqs = append(reqs, q)
		}
		if err := c.Send(nil, 0, 99); err != nil {
			return err
		}
		want := []struct {
			n, sent, seed int
			buf           []byte
		}{{10, 10, 1, r1}, {big, big, 2, r2}, {big, big, 0, r3}, {big, 2 * big, 3, r4}, {big, big, 4, r5}}
		for i, q := range reqs {
			st, err := q.Wait()
			if i == 3 {
				if err == nil {
					return fmt.Errorf("receive %d: a %d-byte message in a %d-byte buffer was not truncated", i, 2*big, big)
				}
			} else if err != nil {
				return fmt.Errorf("receive %d: %w", i, err)
			}
			w := want[i]
			if st.Count != w.n || !bytes.Equal(w.buf[:w.n], pattern(w.sent, w.seed)[:w.n]) {
				return fmt.Errorf("receive %d: count %d, want %d, or wrong data", i, st.Count, w.n)
			}
		}
		q, err := c.Irecv(r5, 0, 6)
		if err != nil {
			return err
		}
		if err := c.Send(nil, 0, 98); err != nil {
			return err
		}
		if st, err := q.Wait(); err != nil || st.Count != big || !bytes.Equal(r5[:big], pattern(big, 5)) {
			return fmt.Errorf("offered receive: %+v, %v, or wrong data", st, err)
		}
		if s := c.Stats(); s.Offered < 2 || s.OffersUsed != 1 {
			return fmt.Errorf("offers made %d, used %d; want at least 2 and 1", s.Offered, s.OffersUsed)
		}
		return nil
	}))
}
