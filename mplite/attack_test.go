package mplite_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethervia/ethervia/internal/hostile"
	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
)

// attacker is a host on the job's switch without the secret. It sees every
// frame (a hub, or a mirrored port) and sends a round of hostile frames
// (package hostile) every 300µs.
type attacker struct {
	port *memnic.Port
	h    hostile.Attacker
	sent int64
	stop chan struct{}
	done chan struct{}
}

func newAttacker(port *memnic.Port, job uint32, ranks [][6]byte, replay [][]byte) *attacker {
	self, _ := nic.MAC(port.HardwareAddr())
	return &attacker{port: port, h: hostile.Attacker{Job: job, Self: self, Ranks: ranks, Replay: replay},
		stop: make(chan struct{}), done: make(chan struct{})}
}

func (a *attacker) run(seed uint64) {
	defer close(a.done)
	a.sent = a.h.Run(a.port, seed, false, 300*time.Microsecond, a.stop)
}

// finish stops the attacker; its fields may be read after it.
func (a *attacker) finish() {
	close(a.stop)
	<-a.done
}

// attackedWork is traffic of every kind with every byte checked: a ring
// of eager and handshake messages, multicast Bcasts, Alltoalls, and, last,
// the first contact between ranks 1 and n-1, whose connection the
// attacker has been claiming all along.
func attackedWork(c *mplite.Comm) error {
	n, r := c.Size(), c.Rank()
	for round := range 6 {
		size := []int{100, 5000, 300000}[round%3]
		next, prev := (r+1)%n, (r+n-1)%n
		got := make([]byte, size)
		req, err := c.Irecv(got, prev, round)
		if err != nil {
			return err
		}
		if err := c.Send(gen(size, r, round), next, round); err != nil {
			return err
		}
		if _, err := req.Wait(); err != nil {
			return err
		}
		if !bytes.Equal(got, gen(size, prev, round)) {
			return fmt.Errorf("round %d: the message from rank %d differs", round, prev)
		}
		if err := bcastCheck(c, []int{64 << 10}, []int{round % n}, round); err != nil {
			return err
		}
		blk := 4096
		send, recv := make([]byte, n*blk), make([]byte, n*blk)
		for d := range n {
			copy(send[d*blk:], gen(blk, r*n+d, round))
		}
		if err := c.Alltoall(send, recv); err != nil {
			return err
		}
		for s := range n {
			if !bytes.Equal(recv[s*blk:(s+1)*blk], gen(blk, s*n+r, round)) {
				return fmt.Errorf("round %d: the Alltoall block from rank %d differs", round, s)
			}
		}
	}
	const late = 200000
	switch r {
	case 1:
		if err := c.Send(gen(late, 1, 99), n-1, 99); err != nil {
			return err
		}
	case n - 1:
		got := make([]byte, late)
		if _, err := c.Recv(got, 1, 99); err != nil {
			return err
		}
		if !bytes.Equal(got, gen(late, 1, 99)) {
			return fmt.Errorf("the first message from rank 1 differs")
		}
	}
	return c.Barrier()
}

// TestAttackerWithoutSecret runs a job while a host without its secret
// attacks it, then a later job of the same job key while the same host
// replays the first job's frames. Both complete with every byte right,
// and the ranks' counters show the attacks.
func TestAttackerWithoutSecret(t *testing.T) {
	const n = 4
	opts := []mplite.Option{mplite.WithAlgorithm("bcast", "mcast-ack"), mplite.WithJobKey(0x7a7a)}
	var captured [][]byte
	for job := range 2 {
		t.Run(fmt.Sprintf("job%d", job+1), func(t *testing.T) {
			var (
				once             sync.Once
				atk              *attacker
				ready            = make(chan struct{})
				badTag, replayed atomic.Uint64
			)
			errs := collWorld(t, n, 120*time.Second, opts, func(c *mplite.Comm) error {
				if c.Rank() == 0 {
					once.Do(func() {
						defer close(ready)
						port, err := mplite.AttackerPort(c)
						if err != nil {
							t.Error(err)
							return
						}
						t.Cleanup(func() { port.Close() })
						macs := make([][6]byte, n)
						for i := range macs {
							macs[i], _ = nic.MAC(mplite.RankMAC(c, i))
						}
						// The later job's frames are the earlier job's,
						// readdressed to this job's ranks.
						old := make([][]byte, 0, len(captured))
						for _, f := range captured {
							g := bytes.Clone(f)
							if g[0]&1 == 0 {
								copy(g[0:6], macs[int(g[5])%n][:])
							}
							old = append(old, g)
						}
						atk = newAttacker(port, mplite.JobKey(c), macs, old)
						go atk.run(uint64(job))
					})
				}
				<-ready
				if atk == nil {
					return fmt.Errorf("no attacker")
				}
				err := attackedWork(c)
				as := c.AuthStats()
				badTag.Add(as.BadTag)
				replayed.Add(as.Replayed)
				return err
			})
			if atk != nil {
				atk.finish()
				if job == 0 {
					captured = atk.h.Captured
				}
			}
			noErrors(t, errs)
			t.Logf("attacker sent %d frames; the ranks refused %d for their tag and %d replays", atk.sent, badTag.Load(), replayed.Load())
			if badTag.Load() == 0 || replayed.Load() == 0 && job == 0 {
				t.Errorf("the counters missed the attack: %d bad tags, %d replays", badTag.Load(), replayed.Load())
			}
		})
	}
}
