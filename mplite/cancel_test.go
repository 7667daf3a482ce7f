package mplite_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
)

// TestCancelReceive: a receive nothing matched is cancelled and completes
// at once; the message it would have matched goes to the next receive; a
// matched receive is not cancelled.
func TestCancelReceive(t *testing.T) {
	noErrors(t, runWorld(t, 2, time.Minute, nil, func(c *mplite.Comm) error {
		buf := make([]byte, 4)
		if c.Rank() == 1 {
			if _, err := c.Recv(buf, 0, 9); err != nil { // rank 0 has cancelled
				return err
			}
			return c.Send([]byte("late"), 0, 5)
		}
		r, err := c.Irecv(buf, 1, 5)
		if err != nil {
			return err
		}
		if !r.Cancel() {
			return errors.New("an unmatched receive was not cancelled")
		}
		if _, err := r.Wait(); err != nil || !r.Cancelled() {
			return errors.New("the cancelled receive did not complete as cancelled")
		}
		if err := c.Send(nil, 1, 9); err != nil {
			return err
		}
		r, err = c.Irecv(buf, 1, 5)
		if err != nil {
			return err
		}
		if _, err := r.Wait(); err != nil || string(buf) != "late" {
			return errors.New("the message went missing after a cancel")
		}
		if r.Cancel() || r.Cancelled() {
			return errors.New("a completed receive was cancelled")
		}
		return nil
	}))
}
