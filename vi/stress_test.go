package vi

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/nic/memnic"
)

// workload is the message sequence of one VI: sizes drawn log-uniformly
// from [0, max] and the offset of each message in the sender's pattern.
type workload struct {
	sizes, offs []int
}

func newWorkload(seed uint64, n, maxSize int) workload {
	rng := rand.New(rand.NewPCG(seed, 77))
	w := workload{sizes: make([]int, n), offs: make([]int, n)}
	for i := range w.sizes {
		// log-uniform over [1, maxSize+1), minus one: 0 is possible.
		s := int(math.Exp(rng.Float64()*math.Log(float64(maxSize+1)))) - 1
		w.sizes[i] = min(max(s, 0), maxSize)
		w.offs[i] = rng.IntN(maxSize + 1)
	}
	return w
}

func (w workload) total() int {
	t := 0
	for _, s := range w.sizes {
		t += s
	}
	return t
}

type streamResult struct {
	got     []int // message indices received, in order
	errs    []error
	sendErr error
}

// stream sends w from vs to vr: up to depth sends outstanding, depth
// receives of maxSize posted. Every message carries its index as immediate
// data; the receiver checks every byte against the sender's pattern.
// With exact set, it demands every message exactly once and in order.
func stream(t testing.TB, ctx context.Context, w workload, pat []byte, patH descriptors.MemHandle,
	vs, vr *VI, rbufs []descriptors.Segment, exact bool) streamResult {
	depth := len(rbufs)
	var res streamResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // receiver
		defer wg.Done()
		rds := make([]descriptors.Descriptor, depth)
		for i := range rds {
			rds[i].Segments = rbufs[i : i+1]
			if err := vr.PostRecv(&rds[i]); err != nil {
				res.errs = append(res.errs, err)
				return
			}
		}
		next := 0
		for next < len(w.sizes) {
			d, err := vr.RecvWait(ctx)
			if err != nil {
				if exact {
					res.errs = append(res.errs, fmt.Errorf("after %d messages: %w", next, err))
				}
				return
			}
			if d.Status.Failed() {
				if exact || d.Status&descriptors.StatusFlushed == 0 {
					res.errs = append(res.errs, fmt.Errorf("receive %d: %v", next, d.Status))
				}
				return
			}
			idx := int(d.ImmData)
			if d.Status&descriptors.StatusImmediate == 0 || idx >= len(w.sizes) || idx < next || (exact && idx != next) {
				res.errs = append(res.errs, fmt.Errorf("message %d arrived when %d was next (status %v)", idx, next, d.Status))
				return
			}
			sz, off := w.sizes[idx], w.offs[idx]
			if d.Length != sz || !bytes.Equal(d.Segments[0].Buf[:sz], pat[off:off+sz]) {
				res.errs = append(res.errs, fmt.Errorf("message %d (%d bytes) arrived damaged or %d bytes long", idx, sz, d.Length))
				return
			}
			res.got = append(res.got, idx)
			next = idx + 1
			if err := vr.PostRecv(d); err != nil {
				res.errs = append(res.errs, err)
				return
			}
		}
	}()
	sds := make([]descriptors.Descriptor, depth)
	segs := make([]descriptors.Segment, depth)
	free := make([]*descriptors.Descriptor, 0, depth)
	for i := range sds {
		sds[i].Segments = segs[i : i+1]
		free = append(free, &sds[i])
	}
	for i := 0; i < len(w.sizes); i++ {
		if len(free) == 0 {
			d, err := vs.SendWait(ctx)
			if err != nil {
				res.sendErr = err
				break
			}
			if d.Status.Failed() {
				res.sendErr = fmt.Errorf("send: %v", d.Status)
				break
			}
			free = append(free, d)
		}
		d := free[len(free)-1]
		free = free[:len(free)-1]
		d.Segments[0] = descriptors.Segment{Buf: pat[w.offs[i] : w.offs[i]+w.sizes[i]], Handle: patH}
		d.Control = descriptors.Control{Immediate: true, ImmData: uint32(i)}
		if err := vs.PostSend(d); err != nil {
			res.sendErr = err
			break
		}
	}
	for res.sendErr == nil && len(free) < depth {
		d, err := vs.SendWait(ctx)
		if err != nil {
			res.sendErr = err
			break
		}
		if d.Status.Failed() && exact {
			res.sendErr = fmt.Errorf("send: %v", d.Status)
		}
		free = append(free, d)
	}
	if !exact {
		// Let the last frames land, then end the connection so the
		// receiver stops waiting for messages that were lost.
		time.Sleep(20 * time.Millisecond)
		vs.Disconnect()
	}
	wg.Wait()
	return res
}

type stressCase struct {
	name   string
	level  Level
	faults memnic.Faults
	n      int
	mtu    int
}

// runStress runs the workload on two memnic hosts.
func runStress(t *testing.T, c stressCase, seed uint64) {
	sw := memnic.NewSwitch(seed)
	o := Options{PeerTimeout: 10 * time.Second}
	mtu := c.mtu
	if mtu == 0 {
		mtu = 9000
	}
	hosts := [2]*host{
		newHost(t, sw, mtu, c.faults, o, 0),
		newHost(t, sw, mtu, c.faults, o, 0),
	}
	runWorkload(t, c, seed, hosts)
}

// runWorkload runs four VIs at once between two hosts, two in each
// direction, c.n messages in all, and checks every byte.
func runWorkload(t *testing.T, c stressCase, seed uint64, hosts [2]*host) {
	const maxSize = 1 << 20
	const depth = 8
	const nvi = 4
	type side struct {
		pat  []byte
		patH descriptors.MemHandle
		recv []byte
		rH   descriptors.MemHandle
	}
	var sides [2]side
	for i, h := range hosts {
		s := &sides[i]
		s.pat = make([]byte, 2*maxSize+1)
		pattern(seed+uint64(i), s.pat)
		var err error
		s.patH, err = h.p.RegisterMemory(s.pat, h.ptag, 0)
		mustf(t, err, "register")
		s.recv = make([]byte, nvi/2*depth*maxSize)
		s.rH, err = h.p.RegisterMemory(s.recv, h.ptag, 0)
		mustf(t, err, "register")
	}
	var vis [nvi][2]*VI
	for i := range vis {
		vis[i][0] = hosts[0].newVI(t, Attributes{Reliability: c.level})
		vis[i][1] = hosts[1].newVI(t, Attributes{Reliability: c.level})
		connectCS(t, hosts[0], hosts[1], vis[i][0], vis[i][1], uint64(100+i))
	}
	ctx := ctxT(t, 120*time.Second)
	start := time.Now()
	var wg sync.WaitGroup
	results := make([]streamResult, nvi)
	wls := make([]workload, nvi)
	bytesTotal := 0
	for i := 0; i < nvi; i++ {
		wls[i] = newWorkload(seed*31+uint64(i), c.n/nvi, maxSize)
		bytesTotal += wls[i].total()
		snd, rcv := i%2, 1-i%2
		rbufs := make([]descriptors.Segment, depth)
		for k := range rbufs {
			off := (i/2*depth + k) * maxSize
			rbufs[k] = descriptors.Segment{Buf: sides[rcv].recv[off : off+maxSize], Handle: sides[rcv].rH}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = stream(t, ctx, wls[i], sides[snd].pat, sides[snd].patH, vis[i][snd], vis[i][rcv], rbufs, c.level.Reliable())
		}()
	}
	wg.Wait()
	el := time.Since(start)
	var st VIStats
	for i := range vis {
		s := vis[i][0].Stats()
		st.Stats = st.Stats.Add(s.Stats)
		st.MessagesLost += s.MessagesLost
		s = vis[i][1].Stats()
		st.Stats = st.Stats.Add(s.Stats)
		st.MessagesLost += s.MessagesLost
	}
	got := 0
	for i, r := range results {
		for _, err := range r.errs {
			t.Errorf("VI %d: %v", i, err)
		}
		if r.sendErr != nil {
			t.Errorf("VI %d: sender: %v", i, r.sendErr)
		}
		got += len(r.got)
		if c.level.Reliable() && len(r.got) != len(wls[i].sizes) {
			t.Errorf("VI %d: %d of %d messages", i, len(r.got), len(wls[i].sizes))
		}
	}
	t.Logf("%s: %d messages, %d MB in %v (%.0f MB/s); received %d; retransmits %d (timeouts %d, fast %d), duplicates %d, lost %d; bad frames %d/%d; rx dropped %d/%d",
		c.name, c.n, bytesTotal>>20, el.Round(time.Millisecond), float64(bytesTotal)/el.Seconds()/1e6, got,
		st.Retransmits, st.Timeouts, st.FastRetransmits, st.Duplicates, st.MessagesLost, hosts[0].p.Stats().BadFrames, hosts[1].p.Stats().BadFrames,
		hosts[0].dev.Stats().RxDropped, hosts[1].dev.Stats().RxDropped)
	if c.faults.Loss > 0 && c.level.Reliable() && st.Retransmits == 0 {
		t.Errorf("no retransmissions under %v loss", c.faults.Loss)
	}
	if c.faults.Corrupt > 0 && hosts[0].p.Stats().BadFrames+hosts[1].p.Stats().BadFrames == 0 {
		t.Errorf("corruption was never detected")
	}
}

func TestStress(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	cases := []stressCase{
		{"loss0", ReliableDelivery, memnic.Faults{}, n, 0},
		{"loss1", ReliableReception, memnic.Faults{Loss: 0.01}, n, 0},
		{"loss10", ReliableDelivery, memnic.Faults{Loss: 0.10}, n, 0},
		{"loss30", ReliableReception, memnic.Faults{Loss: 0.30}, n, 0},
		{"loss30-delivery", ReliableDelivery, memnic.Faults{Loss: 0.30}, n / 4, 0},
		{"duplicate", ReliableDelivery, memnic.Faults{Duplicate: 0.1}, n, 0},
		{"reorder", ReliableReception, memnic.Faults{Reorder: 0.1, Jitter: 20 * time.Microsecond}, n, 0},
		{"corrupt", ReliableDelivery, memnic.Faults{Corrupt: 0.05}, n, 0},
		{"everything-mtu1500", ReliableReception, memnic.Faults{Loss: 0.02, Duplicate: 0.02, Reorder: 0.02, Corrupt: 0.02}, n / 4, 1500},
		{"unreliable", Unreliable, memnic.Faults{Loss: 0.001, Duplicate: 0.05, Reorder: 0.05, Corrupt: 0.01}, n, 0},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) { runStress(t, c, uint64(i+1)) })
	}
}
