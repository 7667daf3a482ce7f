package mplite_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/nic/memnic"
)

// paperMsgs is CC-MPI's worked example (its Fig. 3).
var paperMsgs = []mplite.Msg{{0, 1, 1 << 20}, {1, 3, 1 << 20}, {0, 2, 10 << 10}, {2, 3, 100}, {1, 5, 100}, {2, 1, 100}}

// TestScheduleFile: both schedules of the paper's example survive a trip
// through the file format exactly, the loaded ones pass CheckSchedule, and
// the text is the documented format.
func TestScheduleFile(t *testing.T) {
	for _, sched := range []string{mplite.SchedAllToAll, mplite.SchedGreedy} {
		s, err := mplite.CompileSchedule(6, paperMsgs, sched, 0)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := mplite.WriteSchedule(&buf, s); err != nil {
			t.Fatal(err)
		}
		text := buf.String()
		back, err := mplite.ReadSchedule(strings.NewReader(text))
		if err != nil {
			t.Fatalf("%s: %v\n%s", sched, err, text)
		}
		if back.Ranks() != 6 || fmt.Sprint(back.Phases()) != fmt.Sprint(s.Phases()) {
			t.Errorf("%s: read back %d ranks %v, wrote %v", sched, back.Ranks(), back.Phases(), s.Phases())
		}
		if err := mplite.CheckSchedule(paperMsgs, back.Phases()); err != nil {
			t.Errorf("%s: loaded schedule: %v", sched, err)
		}
		want := map[string]int{mplite.SchedAllToAll: 2, mplite.SchedGreedy: 3}[sched]
		if len(back.Phases()) != want {
			t.Errorf("%s: %d phases, want %d", sched, len(back.Phases()), want)
		}
	}
	s, _ := mplite.CompileSchedule(6, paperMsgs, mplite.SchedAllToAll, 0)
	var buf bytes.Buffer
	if err := mplite.WriteSchedule(&buf, s); err != nil {
		t.Fatal(err)
	}
	const golden = "mplite-schedule 1\nranks 6\nphase\n0 1 1048576\n2 3 100\n1 5 100\nphase\n1 3 1048576\n0 2 10240\n2 1 100\n"
	if buf.String() != golden {
		t.Errorf("file:\n%s\nwant:\n%s", buf.String(), golden)
	}
	// Comments and blank lines are allowed.
	if _, err := mplite.ReadSchedule(strings.NewReader("# made offline\n\n" + golden + "\n# end\n")); err != nil {
		t.Errorf("comments: %v", err)
	}
	// An empty pattern is a schedule of no phases.
	if s, err := mplite.ReadSchedule(strings.NewReader("mplite-schedule 1\nranks 3\n")); err != nil || len(s.Phases()) != 0 {
		t.Errorf("no phases: %v %v", s, err)
	}
}

// TestReadScheduleRejects: malformed files fail with an error saying what
// and where.
func TestReadScheduleRejects(t *testing.T) {
	const head = "mplite-schedule 1\nranks 4\n"
	for _, tc := range []struct{ in, want string }{
		{"", "empty file"},
		{"# only a comment\n", "empty file"},
		{"ranks 4\n", "line 1: \"ranks 4\" is not a schedule file"},
		{"mplite-schedule 2\nranks 4\n", "line 1: version \"2\""},
		{"mplite-schedule 1\n", "no \"ranks N\" line"},
		{"mplite-schedule 1\nphase\n", "line 2: want \"ranks N\""},
		{"mplite-schedule 1\nranks 0\n", "line 2: ranks \"0\""},
		{"mplite-schedule 1\nranks 99999\n", "line 2: ranks"},
		{"mplite-schedule 1\nranks -3\n", "line 2: ranks"},
		{head + "0 1 5\n", "line 3: message before the first \"phase\""},
		{head + "phase\n0 1\n", "line 4: want \"phase\" or \"SRC DST BYTES\""},
		{head + "phase\n0 1 5 6\n", "line 4: want"},
		{head + "phase\n0 4 5\n", "line 4: destination \"4\""},
		{head + "phase\n-1 2 5\n", "line 4: source \"-1\""},
		{head + "phase\n+1 2 5\n", "line 4: source \"+1\""},
		{head + "phase\n01 2 5\n", "leading zero"},
		{head + "phase\n1 2 0x10\n", "line 4: size"},
		{head + "phase\n1 2 99999999999999999999\n", "line 4: size"},
		{head + "phase\n2 2 5\n", "line 4: self-message"},
		{head + "phase\n1 2 5\nphase\n1 2 7\n", "line 6: message 1→2 already on line 4"},
		{head + "phase\nphase\n1 2 5\n", "line 4: phase 0 is empty"},
		{head + "phase\n1 2 5\nphase\n", "phase 1 is empty"},
		{head + "phase\n1 2 5\nbarrier\n", "line 5: want"},
		{head + "phase\n" + strings.Repeat("1", 300) + "\n", "longer than"},
	} {
		s, err := mplite.ReadSchedule(strings.NewReader(tc.in))
		if err == nil {
			t.Errorf("%q: accepted %v", tc.in, s.Phases())
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q, want it to say %q", tc.in, err, tc.want)
		}
	}
}

// TestNewScheduleRejects: schedules that cannot be run are refused.
func TestNewScheduleRejects(t *testing.T) {
	for _, tc := range []struct {
		n      int
		phases []mplite.Phase
		want   string
	}{
		{0, nil, "0 ranks"},
		{3, []mplite.Phase{{}}, "phase 0 is empty"},
		{3, []mplite.Phase{{{0, 3, 1}}}, "outside ranks"},
		{3, []mplite.Phase{{{1, 1, 1}}}, "self-message"},
		{3, []mplite.Phase{{{0, 1, -1}}}, "-1 bytes"},
		{3, []mplite.Phase{{{0, 1, 1}}, {{0, 1, 1}}}, "already sent in phase 0"},
	} {
		if _, err := mplite.NewSchedule(tc.n, tc.phases); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d ranks %v: %v, want %q", tc.n, tc.phases, err, tc.want)
		}
	}
	if _, err := mplite.CompileSchedule(3, []mplite.Msg{{0, 1, 1}, {0, 1, 2}}, "", 0); err == nil {
		t.Error("CompileSchedule accepted a pair twice")
	}
	if _, err := mplite.CompileSchedule(3, nil, "random", 0); err == nil || !strings.Contains(err.Error(), "greedy") {
		t.Errorf("unknown scheduler: %v", err)
	}
}

// levelCounts is the sparse irregular pattern of the Level tests: rank i
// sends rank j levelCount(i, j, s) bytes; every third pair sends nothing.
func levelCount(i, j, s int) int {
	if (i+2*j)%3 == 0 && i != j {
		return 0
	}
	return vcount(i, j, s)
}

// levelPattern is the whole pattern, as every rank holds it at Level 2.
func levelPattern(n, s int) []mplite.Msg {
	var p []mplite.Msg
	for i := range n {
		for j := range n {
			p = append(p, mplite.Msg{Src: i, Dst: j, Size: levelCount(i, j, s)})
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
				for _, sched := range []string{mplite.SchedAllToAll, mplite.SchedGreedy} {
					sc, err := mplite.CompileSchedule(n, levelPattern(n, s), sched, 100)
					if err != nil {
						t.Fatal(err)
					}
					var buf bytes.Buffer
					if err := mplite.WriteSchedule(&buf, sc); err != nil {
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
		for _, level := range []string{"1", "2", "3/" + mplite.SchedAllToAll, "3/" + mplite.SchedGreedy} {
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
				var sch *mplite.Schedule
				sch, err = mplite.ReadSchedule(bytes.NewReader(files[fmt.Sprint(sched, s)]))
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
func checkLoaded(pattern []mplite.Msg, phases []mplite.Phase, th int) error {
	var big, small []mplite.Msg
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
		if !slices.Equal(small, []mplite.Msg(last)) {
			return fmt.Errorf("the last phase is %v, want the small messages %v", last, small)
		}
	}
	return mplite.CheckSchedule(big, phases)
}

func cmpMsg(a, b mplite.Msg) int {
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
	sch, err := mplite.CompileSchedule(n, wrong, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := mplite.CompileSchedule(n+1, nil, "", 0)
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
		s2, err := mplite.CompileSchedule(n, levelPattern(n, 13), "", 0)
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

// FuzzReadSchedule: the schedule parser never panics; what it accepts is
// a valid schedule that writes back to a file reading the same.
func FuzzReadSchedule(f *testing.F) {
	f.Add("mplite-schedule 1\nranks 6\nphase\n0 1 1048576\n2 3 100\n1 5 100\nphase\n1 3 1048576\n0 2 10240\n2 1 100\n")
	f.Add("mplite-schedule 1\nranks 1\n")
	f.Add("# c\nmplite-schedule 1\n\nranks 3\nphase\n0 1 0\nphase\n1 0 7\n")
	f.Add("mplite-schedule 1\nranks 4\nphase\n1 2 5\nphase\n1 2 7\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := mplite.ReadSchedule(strings.NewReader(in))
		if err != nil {
			return
		}
		ph := s.Phases()
		if _, err := mplite.NewSchedule(s.Ranks(), ph); err != nil {
			t.Fatalf("accepted an invalid schedule: %v", err)
		}
		var buf bytes.Buffer
		if err := mplite.WriteSchedule(&buf, s); err != nil {
			t.Fatal(err)
		}
		back, err := mplite.ReadSchedule(&buf)
		if err != nil {
			t.Fatalf("re-reading what was written: %v", err)
		}
		if back.Ranks() != s.Ranks() || !slices.EqualFunc(back.Phases(), ph, func(a, b mplite.Phase) bool { return slices.Equal(a, b) }) {
			t.Fatalf("round trip changed the schedule")
		}
	})
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
			var pattern []mplite.Msg
			for i := range n {
				for j := range n {
					pattern = append(pattern, mplite.Msg{Src: i, Dst: j, Size: s})
				}
			}
			sch, err := mplite.CompileSchedule(n, pattern, mplite.SchedAllToAll, 0)
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
