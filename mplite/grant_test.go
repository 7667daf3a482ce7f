package mplite_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
)

// TestReceiveRegionsClosedBetweenMessages: a receive buffer stays
// registered (cached) after a handshake message, but is open to remote
// writes only while a transfer into it is granted: after each message,
// with one rail and with a bond, it is closed again.
func TestReceiveRegionsClosedBetweenMessages(t *testing.T) {
	for _, rails := range []int{1, 2} {
		t.Run(fmt.Sprintf("rails=%d", rails), func(t *testing.T) {
			const size = 1 << 20
			buf := make([]byte, size)
			errs := runWorldFinal(t, 2, 60*time.Second, []mplite.Option{mplite.WithLocalRails(rails)}, func(c *mplite.Comm) error {
				for i := range 3 {
					switch c.Rank() {
					case 0:
						if err := c.Send(gen(size, 0, i), 1, i); err != nil {
							return err
						}
					case 1:
						if _, err := c.Recv(buf, 0, i); err != nil {
							return err
						}
						if !bytes.Equal(buf, gen(size, 0, i)) {
							return fmt.Errorf("message %d differs", i)
						}
						open, err := mplite.RecvGranted(c, buf)
						if err != nil {
							return err
						}
						if open {
							return fmt.Errorf("after message %d its receive region is still open to remote writes", i)
						}
					}
				}
				return c.Barrier()
			}, nil)
			noErrors(t, errs)
		})
	}
}
