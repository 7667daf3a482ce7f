package mpitest

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"

	"github.com/ethervia/ethervia/mplite"
)

// ChaosConfig shapes a chaos run. Every rank must use the same values: the
// ranks derive the same sequence of operations from Seed, so they agree on
// every collective and every pairing without talking about it.
type ChaosConfig struct {
	Seed uint64
	Ops  int
	// MaxSize bounds a message (a few above the eager limit exercise the
	// handshake).
	MaxSize int
	Log     func(format string, args ...any)
}

// ChaosSummary is what one rank did.
type ChaosSummary struct {
	Ops, Messages int
	Bytes         int64
	ByKind        map[string]int
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// payload fills b with the bytes message (op, src, dst) carries, and ends it
// with the CRC32C of the rest when it has room: the receiver checks both.
func payload(b []byte, op, src, dst int) {
	x := uint32(op)*2654435761 ^ uint32(src)<<20 ^ uint32(dst)<<8
	n := len(b)
	if n >= 8 {
		n -= 4
	}
	for i := 0; i < n; i++ {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	if n < len(b) {
		binary.LittleEndian.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
	}
}

// checkPayload verifies a received message end to end.
func checkPayload(got []byte, op, src, dst int, what string) error {
	want := make([]byte, len(got))
	payload(want, op, src, dst)
	n := len(got)
	if n >= 8 {
		n -= 4
		if crc32.Checksum(got[:n], castagnoli) != binary.LittleEndian.Uint32(got[n:]) {
			return fmt.Errorf("op %d %s: %d bytes from rank %d: CRC32C mismatch", op, what, len(got), src)
		}
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("op %d %s: %d bytes from rank %d: byte %d is %#x, want %#x", op, what, len(got), src, i, got[i], want[i])
		}
	}
	return nil
}

// Chaos runs a seeded random mix of point-to-point and collective
// operations on c and checks every byte every rank receives.
func Chaos(c *mplite.Comm, cfg ChaosConfig) (ChaosSummary, error) {
	n, me := c.Size(), c.Rank()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x63686173))
	sum := ChaosSummary{ByKind: map[string]int{}}
	size := func() int {
		switch rng.IntN(10) {
		case 0:
			return 0
		case 1:
			return cfg.MaxSize/2 + rng.IntN(cfg.MaxSize/2+1) // handshake sizes
		default:
			return rng.IntN(4096)
		}
	}
	got := func(b []byte) { sum.Messages++; sum.Bytes += int64(len(b)) }
	kinds := []string{"ring", "pairs", "anysource", "barrier", "bcast", "allreduce", "allgather", "alltoall", "gather", "scatter"}
	for op := 0; op < cfg.Ops; op++ {
		kind := kinds[rng.IntN(len(kinds))]
		sum.ByKind[kind]++
		sum.Ops++
		if cfg.Log != nil && op%100 == 0 {
			cfg.Log("op %d: %s", op, kind)
		}
		var err error
		switch kind {
		case "ring":
			d := 1 + rng.IntN(max(n-1, 1))
			m := size()
			to, from := (me+d)%n, (me-d+n)%n
			out, in := make([]byte, m), make([]byte, m)
			payload(out, op, me, to)
			var st mplite.Status
			if st, err = c.Sendrecv(out, to, op%1000, in, from, op%1000); err == nil {
				if st.Count != m || st.Source != from {
					err = fmt.Errorf("op %d ring: status %+v, want %d bytes from %d", op, st, m, from)
				} else if err = checkPayload(in, op, from, me, kind); err == nil {
					got(in)
				}
			}
		case "pairs":
			// A random perfect matching (the odd one out talks to itself),
			// several messages each way, all non-blocking.
			perm := rng.Perm(n)
			k := 1 + rng.IntN(4)
			sizes := make([]int, k)
			for i := range sizes {
				sizes[i] = size()
			}
			partner := me
			for i := 0; i+1 < n; i += 2 {
				if perm[i] == me {
					partner = perm[i+1]
				} else if perm[i+1] == me {
					partner = perm[i]
				}
			}
			var reqs []*mplite.Request
			ins := make([][]byte, k)
			for i := range k {
				ins[i] = make([]byte, sizes[i])
				r, e := c.Irecv(ins[i], partner, i)
				if e != nil {
					err = e
					break
				}
				reqs = append(reqs, r)
			}
			for i := 0; i < k && err == nil; i++ {
				out := make([]byte, sizes[i])
				payload(out, op*8+i, me, partner)
				r, e := c.Isend(out, partner, i)
				if e != nil {
					err = e
					break
				}
				reqs = append(reqs, r)
			}
			if err == nil {
				err = mplite.Waitall(reqs...)
			}
			for i := 0; i < k && err == nil; i++ {
				if err = checkPayload(ins[i], op*8+i, partner, me, kind); err == nil {
					got(ins[i])
				}
			}
		case "anysource":
			// The tag names the op: a fast rank may already send for a
			// later anysource op to the same root.
			root, tag := rng.IntN(n), 100+op%30000
			m := size() % 8192
			if me != root {
				out := make([]byte, m)
				payload(out, op, me, root)
				err = c.Send(out, root, tag)
				break
			}
			seen := make([]bool, n)
			for i := 0; i < n-1 && err == nil; i++ {
				in := make([]byte, m)
				var st mplite.Status
				if st, err = c.Recv(in, mplite.AnySource, tag); err != nil {
					break
				}
				if st.Source == root || seen[st.Source] || st.Count != m {
					err = fmt.Errorf("op %d anysource: status %+v (seen %v)", op, st, seen)
					break
				}
				seen[st.Source] = true
				if err = checkPayload(in, op, st.Source, root, kind); err == nil {
					got(in)
				}
			}
		case "barrier":
			err = c.Barrier()
		case "bcast":
			root, m := rng.IntN(n), size()
			buf := make([]byte, m)
			if me == root {
				payload(buf, op, root, -1)
			}
			if err = c.Bcast(buf, root); err == nil {
				if err = checkPayload(buf, op, root, -1, kind); err == nil {
					got(buf)
				}
			}
		case "allreduce":
			m := 1 + rng.IntN(2048)
			send, recv := make([]int64, m), make([]int64, m)
			for i := range send {
				send[i] = int64(op*131 + me*7 + i)
			}
			if err = mplite.Allreduce(c, send, recv, mplite.Sum[int64]()); err == nil {
				for i := range recv {
					want := int64(n)*int64(op*131+i) + int64(7*n*(n-1)/2)
					if recv[i] != want {
						err = fmt.Errorf("op %d allreduce: element %d is %d, want %d", op, i, recv[i], want)
						break
					}
				}
				sum.Messages++
			}
		case "allgather":
			m := size() % 16384
			send, recv := make([]byte, m), make([]byte, m*n)
			payload(send, op, me, -1)
			if err = c.Allgather(send, recv); err == nil {
				for r := 0; r < n && err == nil; r++ {
					err = checkPayload(recv[r*m:(r+1)*m], op, r, -1, kind)
				}
				got(recv)
			}
		case "alltoall":
			m := size() % 8192
			send, recv := make([]byte, m*n), make([]byte, m*n)
			for r := range n {
				payload(send[r*m:(r+1)*m], op, me, r)
			}
			if err = c.Alltoall(send, recv); err == nil {
				for r := 0; r < n && err == nil; r++ {
					err = checkPayload(recv[r*m:(r+1)*m], op, r, me, kind)
				}
				got(recv)
			}
		case "gather":
			root, m := rng.IntN(n), size()%16384
			send := make([]byte, m)
			payload(send, op, me, root)
			var recv []byte
			if me == root {
				recv = make([]byte, m*n)
			}
			if err = c.Gather(send, recv, root); err == nil && me == root {
				for r := 0; r < n && err == nil; r++ {
					err = checkPayload(recv[r*m:(r+1)*m], op, r, root, kind)
				}
				got(recv)
			}
		case "scatter":
			root, m := rng.IntN(n), size()%16384
			var send []byte
			if me == root {
				send = make([]byte, m*n)
				for r := range n {
					payload(send[r*m:(r+1)*m], op, root, r)
				}
			}
			recv := make([]byte, m)
			if err = c.Scatter(send, recv, root); err == nil {
				if err = checkPayload(recv, op, root, me, kind); err == nil {
					got(recv)
				}
			}
		}
		if err != nil {
			return sum, fmt.Errorf("rank %d: op %d (%s): %w", me, op, kind, err)
		}
	}
	return sum, nil
}
