package mplite_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
)

// TestContextIDsReused: communicators freed give their context ids back,
// so a dup-and-free loop runs for ever (it ran out after about 32 000
// cycles when ids only grew), messages on the new communicators still
// match, and a rank holding every id gets ErrContexts until it frees one.
func TestContextIDsReused(t *testing.T) {
	cycles := 10000 // more than the ids there are
	if testing.Short() {
		cycles = 5000
	}
	noErrors(t, runWorld(t, 2, 2*time.Minute, nil, func(c *mplite.Comm) error {
		peer := 1 - c.Rank()
		buf := make([]byte, 1)
		for i := range cycles {
			d, err := c.Dup()
			if err != nil {
				return fmt.Errorf("cycle %d: %w", i, err)
			}
			if i%1000 == 0 {
				if _, err := d.Sendrecv([]byte{byte(i / 1000)}, peer, 0, buf, peer, 0); err != nil {
					return err
				}
				if buf[0] != byte(i/1000) {
					return fmt.Errorf("cycle %d: got %d", i, buf[0])
				}
			}
			if err := d.Free(); err != nil {
				return err
			}
		}
		// Split too, with a rank left out (it holds nothing).
		for i := range cycles / 2 {
			color := 0
			if c.Rank() == 1 && i%2 == 1 {
				color = mplite.Undefined
			}
			s, err := c.Split(color, 0)
			if err != nil {
				return fmt.Errorf("split %d: %w", i, err)
			}
			if s != nil {
				if err := s.Free(); err != nil {
					return err
				}
			}
		}
		// Hold every id: the next Dup fails, and works again after a Free.
		var held []*mplite.Comm
		for {
			d, err := c.Dup()
			if errors.Is(err, mplite.ErrContexts) {
				break
			}
			if err != nil {
				return err
			}
			held = append(held, d)
			if len(held) > 1<<16 {
				return errors.New("context ids never run out")
			}
		}
		if err := held[len(held)/2].Free(); err != nil {
			return err
		}
		d, err := c.Dup()
		if err != nil {
			return fmt.Errorf("after freeing one of %d: %w", len(held), err)
		}
		if _, err := d.Sendrecv([]byte{7}, peer, 0, buf, peer, 0); err != nil || buf[0] != 7 {
			return fmt.Errorf("on the reused id: %v, got %d", err, buf[0])
		}
		return nil
	}))
}

// TestCreateGroup: the odd ranks of six make a communicator among
// themselves, in reverse order, while the even ranks stay out (and run a
// collective of their own meanwhile); its context pair differs from every
// one its members hold, so its messages and collectives stay apart.
func TestCreateGroup(t *testing.T) {
	noErrors(t, runWorld(t, 6, time.Minute, nil, func(c *mplite.Comm) error {
		d, err := c.Dup() // a communicator every rank holds
		if err != nil {
			return err
		}
		defer d.Free()
		if c.Rank()%2 == 0 {
			evens, err := c.CreateGroup([]int{0, 2, 4})
			if err != nil {
				return err
			}
			defer evens.Free()
			var sum [1]int64
			return mplite.Allreduce(evens, []int64{int64(c.Rank())}, sum[:], mplite.Sum[int64]())
		}
		g, err := c.CreateGroup([]int{5, 3, 1})
		if err != nil {
			return err
		}
		defer g.Free()
		if want := (5 - c.Rank()) / 2; g.Rank() != want || g.Size() != 3 {
			return fmt.Errorf("rank %d of %d in the group, want %d of 3", g.Rank(), g.Size(), want)
		}
		var sum [1]int64
		if err := mplite.Allreduce(g, []int64{int64(c.Rank())}, sum[:], mplite.Sum[int64]()); err != nil {
			return err
		}
		if sum[0] != 9 {
			return fmt.Errorf("sum over the group %d, want 9", sum[0])
		}
		// A message on the group does not match a receive on d.
		next := (g.Rank() + 1) % 3
		prev := (g.Rank() + 2) % 3
		buf := make([]byte, 1)
		if _, err := g.Sendrecv([]byte{byte(g.Rank())}, next, 7, buf, prev, 7); err != nil {
			return err
		}
		if buf[0] != byte(prev) {
			return fmt.Errorf("got %d from group rank %d", buf[0], prev)
		}
		return nil
	}))
	// A rank that is not a member, or a repeated member, is refused.
	comms, err := mplite.NewLocalWorld(2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := comms[0].CreateGroup([]int{1}); err == nil {
		t.Error("a non-member made the group")
	}
	if _, err := comms[0].CreateGroup([]int{0, 0}); !errors.Is(err, mplite.ErrRank) {
		t.Errorf("repeated member: %v", err)
	}
}

// TestIntercomm: ranks {0, 2, 4} and {5, 3, 1} of six form an
// intercommunicator; each rank of one group exchanges with the rank of the
// same number in the other, sources come back as remote ranks, and the
// groups' own communicators stay apart.
func TestIntercomm(t *testing.T) {
	evens, odds := []int{0, 2, 4}, []int{5, 3, 1}
	noErrors(t, runWorld(t, 6, time.Minute, nil, func(c *mplite.Comm) error {
		local, remote := evens, odds
		if c.Rank()%2 == 1 {
			local, remote = odds, evens
		}
		ic, err := c.Intercomm(local, remote)
		if err != nil {
			return err
		}
		defer ic.Free()
		if ic.Size() != 3 {
			return fmt.Errorf("intercomm size %d (the remote group's), want 3", ic.Size())
		}
		me := ic.Rank()
		if local[me] != c.Rank() {
			return fmt.Errorf("local rank %d is world rank %d, want %d", me, local[me], c.Rank())
		}
		buf := make([]byte, 1)
		st, err := ic.Sendrecv([]byte{byte(c.Rank())}, me, 3, buf, mplite.AnySource, 3)
		if err != nil {
			return err
		}
		if st.Source != me || int(buf[0]) != remote[me] {
			return fmt.Errorf("got %d from remote rank %d, want %d from %d", buf[0], st.Source, remote[me], me)
		}
		// Merged with the odd group high: the evens come first, each
		// group in its own order.
		m, err := ic.Merge(c.Rank()%2 == 1)
		if err != nil {
			return err
		}
		defer m.Free()
		order := append(append([]int(nil), evens...), odds...)
		if m.Size() != 6 || order[m.Rank()] != c.Rank() {
			return fmt.Errorf("merged rank %d of %d, want world rank %d at it", m.Rank(), m.Size(), c.Rank())
		}
		var sum [1]int64
		if err := mplite.Allreduce(m, []int64{int64(m.Rank())}, sum[:], mplite.Sum[int64]()); err != nil {
			return err
		}
		if sum[0] != 15 {
			return fmt.Errorf("sum over the merged communicator %d", sum[0])
		}
		return nil
	}))
	comms, err := mplite.NewLocalWorld(2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := comms[0].Intercomm([]int{0}, []int{0}); !errors.Is(err, mplite.ErrRank) {
		t.Errorf("a rank in both groups: %v", err)
	}
	if _, err := comms[0].Intercomm([]int{1}, []int{0}); err == nil {
		t.Error("a rank outside its local group made the intercommunicator")
	}
}
