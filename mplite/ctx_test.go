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
