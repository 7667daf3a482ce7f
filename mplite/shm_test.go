package mplite_test

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
)

// TestSharedMemoryPingPong moves messages of every protocol (eager,
// handshake, offered) between two ranks of one host: through shared memory
// only, never a frame on the NIC, with writes read from the sender's
// memory in one step (which both ends share, unless ranks yield their
// CPUs to other processes) or copied through the rings.
func TestSharedMemoryPingPong(t *testing.T) {
	sizes := []int{0, 1, 100, 64 << 10, 64<<10 + 1, 200 << 10, 1 << 20, 5<<20 + 3}
	for _, mode := range []string{"read", "yield", "copies"} {
		t.Run(mode, func(t *testing.T) {
			opts := []mplite.Option{mplite.WithLocalRanksPerHost(2)}
			switch mode {
			case "copies":
				opts = append(opts, mplite.WithSharedMemoryCopies())
			case "yield":
				opts = append(opts, mplite.WithProcessYield(true))
			}
			noErrors(t, runWorld(t, 2, time.Minute, opts, func(c *mplite.Comm) error {
				peer := 1 - c.Rank()
				for round := range 2 { // the second round finds posted receives: offers
					for i, n := range sizes {
						msg := pattern(n, i+round)
						got := make([]byte, n)
						if c.Rank() == 0 {
							if err := c.Send(msg, peer, i); err != nil {
								return err
							}
							if _, err := c.Recv(got, peer, i); err != nil {
								return err
							}
						} else {
							st, err := c.Recv(got, peer, i)
							if err != nil {
								return err
							}
							if st.Count != n {
								return fmt.Errorf("size %d: received %d", n, st.Count)
							}
							if err := c.Send(got, peer, i); err != nil {
								return err
							}
						}
						if !bytes.Equal(got, msg) {
							return fmt.Errorf("size %d: data differs", n)
						}
					}
				}
				st := c.Stats()
				if st.SharedMemory == 0 {
					return fmt.Errorf("rank %d took nothing from shared memory: %+v", c.Rank(), st)
				}
				// 200 KiB, 1 MiB and 5 MiB, both rounds, when shared.
				if want := map[string]uint64{"read": 6}[mode]; st.SharedCopies != want {
					return fmt.Errorf("rank %d: %d shared copies, want %d", c.Rank(), st.SharedCopies, want)
				}
				if tx := mplite.RailTxBytes(c); tx[0] != 0 {
					return fmt.Errorf("rank %d sent %d bytes on the NIC to a rank of its host", c.Rank(), tx[0])
				}
				return nil
			}))
		})
	}
}

// TestSharedCopyHelps: a sender blocked in Send on a long message to a
// rank of its host copies part of it itself, when there is a CPU for each.
func TestSharedCopyHelps(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one CPU: the sender cannot copy while the receiver does")
	}
	const n, rounds = 16 << 20, 8
	noErrors(t, runWorld(t, 2, time.Minute, []mplite.Option{mplite.WithLocalRanksPerHost(2)}, func(c *mplite.Comm) error {
		buf := pattern(n, 1)
		for range rounds {
			var err error
			if c.Rank() == 0 {
				err = c.Send(buf, 1, 0)
			} else {
				_, err = c.Recv(buf, 0, 0)
			}
			if err != nil {
				return err
			}
		}
		if !bytes.Equal(buf, pattern(n, 1)) {
			return errors.New("data differs")
		}
		st := c.Stats()
		switch {
		case c.Rank() == 0 && st.SharedCopyHelps == 0:
			return fmt.Errorf("the sender helped with none of %d shared copies", rounds)
		case c.Rank() == 1 && st.SharedCopies != rounds:
			return fmt.Errorf("the receiver shared %d copies, want %d", st.SharedCopies, rounds)
		}
		return nil
	}))
}

// TestSharedMemoryMatchingOrder checks that a blocking Recv from a rank of
// the host, which takes its message straight from the ring when nothing is
// queued, never overtakes what was queued: a receive posted before it, an
// unexpected message with its tag, a message too long for it.
func TestSharedMemoryMatchingOrder(t *testing.T) {
	noErrors(t, runWorld(t, 2, time.Minute, []mplite.Option{mplite.WithLocalRanksPerHost(2)}, func(c *mplite.Comm) error {
		if c.Rank() == 0 {
			for _, m := range []struct {
				tag  int
				data string
			}{{1, "x"}, {2, "y"}, {9, "go?"}} {
				if err := c.Send([]byte(m.data), 1, m.tag); err != nil {
					return err
				}
			}
			if _, err := c.Recv(make([]byte, 8), 1, 9); err != nil { // the Irecv is posted
				return err
			}
			for _, m := range []struct {
				tag  int
				data string
			}{{1, "z"}, {7, "first"}, {7, "second"}, {3, "much too long"}, {4, "any"}} {
				if err := c.Send([]byte(m.data), 1, m.tag); err != nil {
					return err
				}
			}
			return nil
		}
		recv := func(tag, size int, want string, wantTag int) error {
			b := make([]byte, size)
			st, err := c.Recv(b, 0, tag)
			if err != nil {
				return fmt.Errorf("receive tag %d: %w", tag, err)
			}
			if got := string(b[:st.Count]); got != want || st.Tag != wantTag || st.Source != 0 {
				return fmt.Errorf("receive tag %d: %q (tag %d, source %d), want %q (tag %d)", tag, got, st.Tag, st.Source, want, wantTag)
			}
			return nil
		}
		if err := recv(2, 8, "y", 2); err != nil { // x becomes unexpected
			return err
		}
		if err := recv(9, 8, "go?", 9); err != nil {
			return err
		}
		early := make([]byte, 8)
		r, err := c.Irecv(early, 0, 7)
		if err != nil {
			return err
		}
		if err := c.Send(nil, 0, 9); err != nil {
			return err
		}
		if err := recv(1, 8, "x", 1); err != nil { // the unexpected x, not z from the ring
			return err
		}
		if err := recv(1, 8, "z", 1); err != nil {
			return err
		}
		if err := recv(7, 8, "second", 7); err != nil { // "first" is the Irecv's
			return err
		}
		st, err := r.Wait()
		if err != nil || string(early[:st.Count]) != "first" {
			return fmt.Errorf("the receive posted first got %q, %v", early[:st.Count], err)
		}
		var te *mplite.TruncateError
		if _, err := c.Recv(make([]byte, 4), 0, 3); !errors.As(err, &te) || te.Length != len("much too long") {
			return fmt.Errorf("a long message into a short buffer: %v", err)
		}
		return recv(mplite.AnyTag, 8, "any", 4)
	}))
}

// TestSharedMemoryOverflowOrder sends more eager messages to a rank of the
// host than its ring holds before it receives any: the sends that find the
// ring full queue on the descriptor path, and the ones after them must not
// pass them by the direct path. The receiver takes them by tag, out of
// order, then in order.
func TestSharedMemoryOverflowOrder(t *testing.T) {
	const n = 40
	noErrors(t, runWorld(t, 2, time.Minute, []mplite.Option{mplite.WithLocalRanksPerHost(2)}, func(c *mplite.Comm) error {
		if c.Rank() == 0 {
			for i := range n {
				if err := c.Send(pattern(1+i%50, i), 1, i%3); err != nil {
					return err
				}
			}
			return c.Send(nil, 1, 9)
		}
		if _, err := c.Recv(nil, 0, 9); err != nil { // everything is queued by now
			return err
		}
		for _, tag := range []int{2, 0, 1} {
			for i := tag; i < n; i += 3 {
				b := make([]byte, 64)
				st, err := c.Recv(b, 0, tag)
				if err != nil {
					return err
				}
				if want := pattern(1+i%50, i); !bytes.Equal(b[:st.Count], want) {
					return fmt.Errorf("tag %d, message %d: got %d bytes %x, want %x", tag, i, st.Count, b[:st.Count], want)
				}
			}
		}
		return nil
	}))
}

// TestSharedMemoryLateSender: a Recv from a rank of the host that spins out
// its time on the ring blocks, and the message that comes later wakes it.
func TestSharedMemoryLateSender(t *testing.T) {
	noErrors(t, runWorld(t, 2, time.Minute, []mplite.Option{mplite.WithLocalRanksPerHost(2), mplite.WithSpinTime(20 * time.Microsecond)},
		func(c *mplite.Comm) error {
			for round := range 3 {
				if c.Rank() == 0 {
					time.Sleep(30 * time.Millisecond)
					if err := c.Send([]byte{byte(round)}, 1, round); err != nil {
						return err
					}
					continue
				}
				b := make([]byte, 1)
				st, err := c.Recv(b, 0, round) // runWorld's limit catches a receive never woken
				if err != nil {
					return err
				}
				if st.Count != 1 || b[0] != byte(round) {
					return fmt.Errorf("round %d: %d bytes %v", round, st.Count, b)
				}
			}
			return nil
		}))
}

// TestSharedMemoryOff: WithSharedMemory(false) sends between ranks of one
// host through the NIC.
func TestSharedMemoryOff(t *testing.T) {
	noErrors(t, runWorld(t, 2, time.Minute, []mplite.Option{mplite.WithLocalRanksPerHost(2), mplite.WithSharedMemory(false)},
		func(c *mplite.Comm) error {
			buf := make([]byte, 1000)
			if _, err := c.Sendrecv(buf, 1-c.Rank(), 0, make([]byte, 1000), 1-c.Rank(), 0); err != nil {
				return err
			}
			if st := c.Stats(); st.SharedMemory != 0 || mplite.RailTxBytes(c)[0] == 0 {
				return fmt.Errorf("rank %d: %d shared-memory entries, %d bytes on the NIC", c.Rank(), st.SharedMemory, mplite.RailTxBytes(c)[0])
			}
			return nil
		}))
}

// TestLocalPeerGone: a rank of the same host that closes without
// Finalize fails a receive from it with a PeerError, not a hang.
func TestLocalPeerGone(t *testing.T) {
	comms, err := mplite.NewLocalWorld(2, mplite.WithLocalRanksPerHost(2))
	if err != nil {
		t.Fatal(err)
	}
	defer comms[0].Close()
	if err := comms[1].Send([]byte("hello"), 0, 0); err != nil {
		t.Fatal(err)
	}
	mplite.Abandon(comms[1])
	buf := make([]byte, 8)
	if _, err := comms[0].Recv(buf, 1, 0); err != nil || string(buf[:5]) != "hello" {
		t.Fatalf("the message sent before the peer left: %q, %v", buf, err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := comms[0].Recv(buf, 1, 1)
		errc <- err
	}()
	select {
	case err := <-errc:
		var pe *mplite.PeerError
		if !errors.As(err, &pe) || pe.Rank != 1 {
			t.Fatalf("receive from a rank that left: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a receive from a rank that left still waits after 10 s")
	}
}

// TestHost: ranks that share a NIC share a Host number, the lowest of
// their world ranks; others differ.
func TestHost(t *testing.T) {
	noErrors(t, runWorld(t, 7, time.Minute, []mplite.Option{mplite.WithLocalRanksPerHost(3)}, func(c *mplite.Comm) error {
		if want := c.Rank() / 3 * 3; c.Host() != want {
			return fmt.Errorf("rank %d: host %d, want %d", c.Rank(), c.Host(), want)
		}
		return nil
	}))
}
