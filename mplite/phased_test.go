package mplite_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/mplite/cc"
	"github.com/ethervia/ethervia/nic/memnic"
)

// levelCounts is the sparse irregular pattern of the Level tests: rank i
// sends rank j levelCount(i, j, s) bytes; every third pair sends nothing.
func levelCount(i, j, s int) int {
	if (i+2*j)%3 == 0 && i != j {
		return 0
	}
	return vcount(i, j, s)
}

// levelPattern is the whole pattern, as every rank holds it at Level 2.
func levelPattern(n, s int) []cc.Msg {
	var p []cc.Msg
	for i := range n {
		for j := range n {
			p = append(p, cc.Msg{Src: i, Dst: j, Size: levelCount(i, j, s)})
		}
	}
	return p
}

// levelBufs is rank me's send buffer and counts, and the receive buffer's
// layout, for base size s; want is the naive reference of what it must
// receive, computed locally from what every rank sends it.
func levelBufs(n, me, s, seed int) (send []byte, sc, sd []int, rc, rd []int, rtotal int, want []byte) {
	sc, rc = make([]int, n), make([]int, n)
	for j := range n {
		sc[j], rc[j] = levelCount(me, j, s), levelCount(j, me, s)
	}
	sd, stotal := layout(sc)
	rd, rtotal = layout(rc)
	send = bytes.Repeat([]byte{0xEE}, stotal)
	for j := range n {
		copy(send[sd[j]:], gen(sc[j], me*n+j, seed))
	}
	want = bytes.Repeat([]byte{0x55}, rtotal)
	for i := range n {
		copy(want[rd[i]:], gen(rc[i], i*n+me, seed))
	}
	return send, sc, sd, rc, rd, rtotal, want
}

// TestAlltoallvLevels runs CC-MPI's three levels of the phased Alltoallv
// (1: counts gathered at run time; 2: pattern held locally; 3: schedule
// written to a file and loaded, with both schedulers) on 1 to 8 ranks over
// a lossy switch, for sizes 0, 1, odd and past the eager limit, and checks
// every result byte for byte against the naive reference.
func TestAlltoallvLevels(t *testing.T) {
	opts := []mplite.Option{
		mplite.WithLocalFaults(7, memnic.Faults{Loss: 0.02, Duplicate: 0.005, Reorder: 0.01}),
		mplite.WithPhasedThreshold(100, true),
	}
	for _, n := range []int{1, 2, 3, 5, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			// Level 3's files, made "offline" before the job.
			files := map[string][]byte{}
			for _, s := range collSizes {
				for _, sched := range []string{cc.SchedAllToAll, cc.SchedGreedy} {
					sc, err := cc.CompileSchedule(n, levelPattern(n, s), sched, 100)
					if err != nil {
						t.Fatal(err)
					}
					var buf bytes.Buffer
					if err := cc.WriteSchedule(&buf, sc); err != nil {
						t.Fatal(err)
					}
					files[fmt.Sprint(sched, s)] = buf.Bytes()
				}
			}
			noErrors(t, collWorld(t, n, 60*time.Second, opts, func(c *mplite.Comm) error {
				return runLevels(c, files)
			}))
		})
	}
}

func runLevels(c *mplite.Comm, files map[string][]byte) error {
	n, me := c.Size(), c.Rank()
	if err := c.SetAlgorithm("alltoallv", "phased"); err != nil {
		return err
	}
	seed := 0
	for _, s := range collSizes {
		for _, level := range []string{"1", "2", "3/" + cc.SchedAllToAll, "3/" + cc.SchedGreedy} {
			seed++
			send, sc, sd, rc, rd, rtotal, want := levelBufs(n, me, s, seed)
			recv := bytes.Repeat([]byte{0x55}, rtotal)
			var err error
			switch level {
			case "1":
				err = c.Alltoallv(send, sc, sd, recv, rc, rd)
			case "2":
				err = c.AlltoallvPattern(levelPattern(n, s), send, sc, sd, recv, rc, rd)
			default:
				sched := strings.TrimPrefix(level, "3/")
				var sch *cc.Schedule
				sch, err = cc.ReadSchedule(bytes.NewReader(files[fmt.Sprint(sched, s)]))
				if err != nil {
					return err
				}
				if cerr := checkLoaded(levelPattern(n, s), sch.Phases(), 100); cerr != nil {
					return fmt.Errorf("level %s size %d: loaded schedule: %w", level, s, cerr)
				}
				err = c.AlltoallvSchedule(sch, send, sc, sd, recv, rc, rd)
			}
			if err != nil {
				return fmt.Errorf("level %s size %d: %w", level, s, err)
			}
			if err := mismatch(fmt.Sprintf("level %s size %d", level, s), recv, want); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkLoaded checks a schedule made with threshold th: every phase but a
// last one of messages below th is contention-free (CheckSchedule), and
// the phases hold the pattern's non-empty messages exactly once.
func checkLoaded(pattern []cc.Msg, phases []cc.Phase, th int) error {
	var big, small []cc.Msg
	for _, m := range pattern {
		if m.Size > 0 && m.Src != m.Dst {
			if m.Size >= th {
				big = append(big, m)
			} else {
				small = append(small, m)
			}
		}
	}
	if len(small) > 0 {
		if len(phases) == 0 {
			return fmt.Errorf("no phases for %d messages", len(small))
		}
		last := phases[len(phases)-1]
		phases = phases[:len(phases)-1]
		for _, m := range last {
			if m.Size >= th {
				return fmt.Errorf("the last phase has %d→%d of %d bytes with the small messages", m.Src, m.Dst, m.Size)
			}
		}
		slices.SortFunc(small, cmpMsg)
		slices.SortFunc(last, cmpMsg)
		if !slices.Equal(small, []cc.Msg(last)) {
			return fmt.Errorf("the last phase is %v, want the small messages %v", last, small)
		}
	}
	return cc.CheckSchedule(big, phases)
}

func cmpMsg(a, b cc.Msg) int {
	if a.Src != b.Src {
		return a.Src - b.Src
	}
	return a.Dst - b.Dst
}

// TestAlltoallvScheduleMismatch: counts that disagree with the schedule
// (on every rank) fail before anything is sent, naming the pair; so does a
// schedule for another number of ranks.
func TestAlltoallvScheduleMismatch(t *testing.T) {
	const n = 3
	wrong := levelPattern(n, 13)
	for i := range wrong {
		wrong[i].Size++
	}
	sch, err := cc.CompileSchedule(n, wrong, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := cc.CompileSchedule(n+1, nil, "", 0)
	errs := runWorld(t, n, 30*time.Second, nil, func(c *mplite.Comm) error {
		send, sc, sd, rc, rd, rtotal, _ := levelBufs(n, c.Rank(), 13, 1)
		recv := make([]byte, rtotal)
		e1 := c.AlltoallvSchedule(sch, send, sc, sd, recv, rc, rd)
		e2 := c.AlltoallvSchedule(other, send, sc, sd, recv, rc, rd)
		if e1 == nil || !strings.Contains(e1.Error(), "the schedule says") {
			return fmt.Errorf("mismatched counts: %v", e1)
		}
		if e2 == nil || !strings.Contains(e2.Error(), "schedule for 4 ranks") {
			return fmt.Errorf("wrong size: %v", e2)
		}
		// The communicator still works afterwards.
		s2, err := cc.CompileSchedule(n, levelPattern(n, 13), "", 0)
		if err != nil {
			return err
		}
		send, sc, sd, rc, rd, rtotal, want := levelBufs(n, c.Rank(), 13, 2)
		recv = make([]byte, rtotal)
		copy(recv, bytes.Repeat([]byte{0x55}, rtotal))
		if err := c.AlltoallvSchedule(s2, send, sc, sd, recv, rc, rd); err != nil {
			return err
		}
		return mismatch("after the errors", recv, want)
	})
	noErrors(t, errs)
}

// TestAlltoallvScheduleReceiverReady checks the phases' synchronisation:
// a sender starts a message only after its receiver said it is ready,
// whose receive is then posted, so no data message ever arrives
// unexpected; only the zero-byte ready messages may (at most one per
// message this rank sends). Eager (100 B) and handshake (past the eager
// limit) messages, phased with threshold 0.
func TestAlltoallvScheduleReceiverReady(t *testing.T) {
	const n = 5
	noErrors(t, collWorld(t, n, 30*time.Second, nil, func(c *mplite.Comm) error {
		me := c.Rank()
		for _, s := range []int{100, mplite.DefaultEagerLimit + 1000} {
			sch, err := cc.CompileSchedule(n, uniformPattern(n, s), cc.SchedAllToAll, 0)
			if err != nil {
				return err
			}
			if len(sch.Phases()) != n-1 {
				return fmt.Errorf("%d phases", len(sch.Phases()))
			}
			counts := make([]int, n)
			displs := make([]int, n)
			for j := range n {
				counts[j], displs[j] = s, j*s
			}
			send := make([]byte, n*s)
			for j := range n {
				copy(send[j*s:], gen(s, me*n+j, s))
			}
			for round := range 3 {
				before := c.Stats().Unexpected
				recv := make([]byte, n*s)
				if err := c.AlltoallvSchedule(sch, send, counts, displs, recv, counts, displs); err != nil {
					return err
				}
				if d := c.Stats().Unexpected - before; d > n-1 {
					return fmt.Errorf("size %d round %d: %d unexpected messages; only the %d ready messages may be", s, round, d, n-1)
				}
				for i := range n {
					if err := mismatch(fmt.Sprintf("size %d from %d", s, i), recv[i*s:(i+1)*s], gen(s, i*n+me, s)); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}))
}

// TestAlltoallvScheduleLong: blocks past readyPhasesBelow run with a
// barrier between phases at Levels 2 and 3 (a schedule compiled, and one
// written and read back), over a lossy switch, byte for byte.
func TestAlltoallvScheduleLong(t *testing.T) {
	const n, s = 4, 130 << 10
	pattern := uniformPattern(n, s)
	compiled, err := cc.CompileSchedule(n, pattern, cc.SchedAllToAll, 100)
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if err := cc.WriteSchedule(&file, compiled); err != nil {
		t.Fatal(err)
	}
	loaded, err := cc.ReadSchedule(&file)
	if err != nil {
		t.Fatal(err)
	}
	for _, sch := range []*cc.Schedule{compiled, loaded} {
		if sch.Largest() != s || sch.NumPhases() != n-1 {
			t.Fatalf("schedule: largest %d, %d phases; want %d and %d", sch.Largest(), sch.NumPhases(), s, n-1)
		}
	}
	opts := []mplite.Option{mplite.WithLocalFaults(5, memnic.Faults{Loss: 0.01, Reorder: 0.01})}
	noErrors(t, collWorld(t, n, 60*time.Second, opts, func(c *mplite.Comm) error {
		me := c.Rank()
		counts, displs := make([]int, n), make([]int, n)
		send := make([]byte, n*s)
		for j := range n {
			counts[j], displs[j] = s, j*s
			copy(send[j*s:], gen(s, me*n+j, s))
		}
		for k, run := range []func(recv []byte) error{
			func(recv []byte) error {
				return c.AlltoallvSchedule(compiled, send, counts, displs, recv, counts, displs)
			},
			func(recv []byte) error {
				return c.AlltoallvSchedule(loaded, send, counts, displs, recv, counts, displs)
			},
			func(recv []byte) error {
				return c.AlltoallvPattern(pattern, send, counts, displs, recv, counts, displs)
			},
		} {
			recv := make([]byte, n*s)
			if err := run(recv); err != nil {
				return fmt.Errorf("run %d: %w", k, err)
			}
			for i := range n {
				if err := mismatch(fmt.Sprintf("run %d from %d", k, i), recv[i*s:(i+1)*s], gen(s, i*n+me, s)); err != nil {
					return err
				}
			}
		}
		return nil
	}))
}

// uniformPattern is an all-to-all of s bytes from every rank to every
// rank, self-messages included (schedules leave them out).
func uniformPattern(n, s int) []cc.Msg {
	var p []cc.Msg
	for i := range n {
		for j := range n {
			p = append(p, cc.Msg{Src: i, Dst: j, Size: s})
		}
	}
	return p
}
