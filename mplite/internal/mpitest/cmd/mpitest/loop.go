package main

import (
	"bytes"
	"fmt"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/mplite/internal/mpitest"
)

// loopResult is what a -loop run did.
type loopResult struct {
	calls int
	bytes int64
	// failedIn is the call (1-based) during which this rank's rail
	// failures first rose, 0 if they never did.
	failedIn int
}

// runLoop repeats one operation back to back for at least d, checking
// every byte: "alltoall" (every rank, size bytes per block) or "pingpong"
// (ranks 0 and 1, size-byte messages; the others wait in the final
// barrier). A fault injected while it runs (mprun -rail-down) therefore
// strikes in the middle of an operation, and the call during which the
// rank's bonded connections first saw a rail fail is reported.
func runLoop(c *mplite.Comm, op string, size int, d time.Duration) (loopResult, error) {
	var res loopResult
	n, me := c.Size(), c.Rank()
	var send, recv, want []byte
	switch op {
	case "alltoall":
		send, recv, want = make([]byte, size*n), make([]byte, size*n), make([]byte, size*n)
	case "pingpong":
		if n < 2 {
			return res, fmt.Errorf("-loop pingpong needs 2 ranks, not %d", n)
		}
		send, recv, want = make([]byte, size), make([]byte, size), make([]byte, size)
	default:
		return res, fmt.Errorf("-loop %q: want alltoall or pingpong", op)
	}
	failures := c.Stats().RailFailures
	end := time.Now().Add(d)
	for call := 1; ; call++ {
		// Every rank must agree when to stop: rank 0 decides and
		// broadcasts it before each call.
		stop := []byte{0}
		if me == 0 && time.Now().After(end) {
			stop[0] = 1
		}
		if err := c.Bcast(stop, 0); err != nil {
			return res, fmt.Errorf("call %d: stop flag: %w", call, err)
		}
		if stop[0] == 1 {
			break
		}
		var err error
		switch op {
		case "alltoall":
			for to := range n {
				fill(send[to*size:(to+1)*size], me, to, call)
				fill(want[to*size:(to+1)*size], to, me, call)
			}
			clear(recv)
			if err = c.Alltoall(send, recv); err == nil && !bytes.Equal(recv, want) {
				err = fmt.Errorf("wrong bytes from rank %d", firstBadBlock(recv, want, size))
			}
			res.bytes += int64(size * (n - 1))
		case "pingpong":
			if me > 1 {
				continue
			}
			err = pingPong(c, me, call, send, recv, want)
			res.bytes += int64(size)
		}
		if err != nil {
			return res, fmt.Errorf("%s call %d: %w", op, call, err)
		}
		res.calls = call
		if res.failedIn == 0 && c.Stats().RailFailures > failures {
			res.failedIn = call
		}
	}
	return res, c.Barrier()
}

// pingPong sends one message from rank 0 to rank 1 and back, each checked.
func pingPong(c *mplite.Comm, me, call int, send, recv, want []byte) error {
	peer := 1 - me
	fill(send, me, peer, call)
	fill(want, peer, me, call)
	clear(recv)
	if me == 0 {
		if err := c.Send(send, peer, call); err != nil {
			return err
		}
	}
	if _, err := c.Recv(recv, peer, call); err != nil {
		return err
	}
	if !bytes.Equal(recv, want) {
		return fmt.Errorf("wrong bytes from rank %d", peer)
	}
	if me == 1 {
		return c.Send(send, peer, call)
	}
	return nil
}

// fill writes the bytes rank from sends rank to in the given call.
func fill(b []byte, from, to, call int) {
	mpitest.Fill(b, (call*seedRanks+from)*seedRanks+to)
}

// seedRanks is how many ranks the seeds of fill tell apart.
const seedRanks = 1 << 10

func firstBadBlock(got, want []byte, size int) int {
	for i := 0; i+size <= len(got); i += size {
		if !bytes.Equal(got[i:i+size], want[i:i+size]) {
			return i / size
		}
	}
	return -1
}
