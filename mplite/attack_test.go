package mplite_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/reliability"
	"github.com/ethervia/ethervia/vi"
)

// attacker is a host on the job's switch without the secret. It sees every
// frame (a hub, or a mirrored port) and sends, in rounds: captured frames
// as they were (replays), captured frames with their tag cut off, a byte
// changed and the CRC made good again, connection requests claiming a
// rank's address to a rank it has not talked to yet (impersonation), a
// flood of connection requests from made-up addresses, and datagrams to
// the job's multicast groups.
type attacker struct {
	port     *memnic.Port
	job      uint32
	ranks    [][6]byte // every rank's MAC
	captured [][]byte
	sent     atomic.Int64
	stop     chan struct{}
	done     chan struct{}
}

func newAttacker(port *memnic.Port, job uint32, ranks [][6]byte, captured [][]byte) *attacker {
	return &attacker{port: port, job: job, ranks: ranks, captured: captured, stop: make(chan struct{}), done: make(chan struct{})}
}

func (a *attacker) run(seed uint64) {
	defer close(a.done)
	rng := rand.New(rand.NewPCG(seed, 1))
	bufs, lens := make([][]byte, 64), make([]int, 64)
	for i := range bufs {
		bufs[i] = make([]byte, nic.RecvBufLen(a.port.MTU()))
	}
	for {
		select {
		case <-a.stop:
			return
		default:
		}
		n, _ := a.port.Recv(bufs, lens)
		for i := range n {
			if len(a.captured) < 4096 {
				a.captured = append(a.captured, bytes.Clone(bufs[i][:lens[i]]))
			}
		}
		a.port.Send(a.round(rng))
		time.Sleep(300 * time.Microsecond)
	}
}

// round builds one round of hostile frames.
func (a *attacker) round(rng *rand.Rand) [][]byte {
	var out [][]byte
	if k := len(a.captured); k > 0 {
		f := a.captured[rng.IntN(k)]
		out = append(out, bytes.Clone(f)) // a replay, byte for byte
		var h reliability.Header
		if len(f) > reliability.HeaderLen+auth.TrailerLen && reliability.Parse(f, &h) == nil {
			g := bytes.Clone(f[:len(f)-auth.TrailerLen])
			g[len(g)-1] ^= 0x5a
			reliability.Seal(g) // a good CRC and job key, no tag
			out = append(out, g)
		}
	}
	me, victim := a.ranks[len(a.ranks)-1], a.ranks[1] // the last rank, to rank 1
	out = append(out, a.request(reliability.KindPeerReq, me, victim))
	var made [6]byte
	made[0] = 0x02
	for i := 1; i < 6; i++ {
		made[i] = byte(rng.IntN(256))
	}
	out = append(out, a.request(reliability.KindConnReq, made, a.ranks[rng.IntN(len(a.ranks))]))
	pl := make([]byte, 64)
	for i := range pl {
		pl[i] = byte(rng.IntN(256))
	}
	dg := make([]byte, vi.DatagramHeaderLen+len(pl))
	group := nic.GroupMAC(a.job, uint32(rng.IntN(4)))
	if n, err := vi.PutDatagram(dg, &vi.Datagram{Dst: group, Src: a.ranks[0], DstEP: nic.EndpointAll, EtherType: nic.DefaultEtherType,
		Kind: vi.MinDatagramKind + uint8(rng.IntN(4)), JobKey: a.job, Payload: pl}); err == nil {
		out = append(out, dg[:n])
	}
	a.sent.Add(int64(len(out)))
	return out
}

// request is a connection request from src to dst with a good CRC.
func (a *attacker) request(kind reliability.Kind, src, dst [6]byte) []byte {
	f := make([]byte, reliability.HeaderLen+16)
	reliability.Put(f, &reliability.Header{Dst: dst, Src: src, EtherType: nic.DefaultEtherType, Kind: kind, JobKey: a.job,
		SrcVI: 1, ConnID: 7, Length: 16})
	return f
}

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
					captured = atk.captured
				}
			}
			noErrors(t, errs)
			t.Logf("attacker sent %d frames; the ranks refused %d for their tag and %d replays", atk.sent.Load(), badTag.Load(), replayed.Load())
			if badTag.Load() == 0 || replayed.Load() == 0 && job == 0 {
				t.Errorf("the counters missed the attack: %d bad tags, %d replays", badTag.Load(), replayed.Load())
			}
		})
	}
}
