package cc_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ethervia/ethervia/mplite/cc"
)

// paperMsgs is CC-MPI's worked example (its Fig. 3).
var paperMsgs = []cc.Msg{{0, 1, 1 << 20}, {1, 3, 1 << 20}, {0, 2, 10 << 10}, {2, 3, 100}, {1, 5, 100}, {2, 1, 100}}

// TestScheduleFile: both schedules of the paper's example survive a trip
// through the file format exactly, the loaded ones pass CheckSchedule, and
// the text is the documented format.
func TestScheduleFile(t *testing.T) {
	for _, sched := range []string{cc.SchedAllToAll, cc.SchedGreedy} {
		s, err := cc.CompileSchedule(6, paperMsgs, sched, 0)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := cc.WriteSchedule(&buf, s); err != nil {
			t.Fatal(err)
		}
		text := buf.String()
		back, err := cc.ReadSchedule(strings.NewReader(text))
		if err != nil {
			t.Fatalf("%s: %v\n%s", sched, err, text)
		}
		if back.Ranks() != 6 || fmt.Sprint(back.Phases()) != fmt.Sprint(s.Phases()) {
			t.Errorf("%s: read back %d ranks %v, wrote %v", sched, back.Ranks(), back.Phases(), s.Phases())
		}
		if err := cc.CheckSchedule(paperMsgs, back.Phases()); err != nil {
			t.Errorf("%s: loaded schedule: %v", sched, err)
		}
		want := map[string]int{cc.SchedAllToAll: 2, cc.SchedGreedy: 3}[sched]
		if len(back.Phases()) != want {
			t.Errorf("%s: %d phases, want %d", sched, len(back.Phases()), want)
		}
	}
	s, _ := cc.CompileSchedule(6, paperMsgs, cc.SchedAllToAll, 0)
	var buf bytes.Buffer
	if err := cc.WriteSchedule(&buf, s); err != nil {
		t.Fatal(err)
	}
	const golden = "mplite-schedule 1\nranks 6\nphase\n0 1 1048576\n2 3 100\n1 5 100\nphase\n1 3 1048576\n0 2 10240\n2 1 100\n"
	if buf.String() != golden {
		t.Errorf("file:\n%s\nwant:\n%s", buf.String(), golden)
	}
	// Comments and blank lines are allowed.
	if _, err := cc.ReadSchedule(strings.NewReader("# made offline\n\n" + golden + "\n# end\n")); err != nil {
		t.Errorf("comments: %v", err)
	}
	// An empty pattern is a schedule of no phases.
	if s, err := cc.ReadSchedule(strings.NewReader("mplite-schedule 1\nranks 3\n")); err != nil || len(s.Phases()) != 0 {
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
		s, err := cc.ReadSchedule(strings.NewReader(tc.in))
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
		phases []cc.Phase
		want   string
	}{
		{0, nil, "0 ranks"},
		{3, []cc.Phase{{}}, "phase 0 is empty"},
		{3, []cc.Phase{{{0, 3, 1}}}, "outside ranks"},
		{3, []cc.Phase{{{1, 1, 1}}}, "self-message"},
		{3, []cc.Phase{{{0, 1, -1}}}, "-1 bytes"},
		{3, []cc.Phase{{{0, 1, 1}}, {{0, 1, 1}}}, "already sent in phase 0"},
	} {
		if _, err := cc.NewSchedule(tc.n, tc.phases); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d ranks %v: %v, want %q", tc.n, tc.phases, err, tc.want)
		}
	}
	if _, err := cc.CompileSchedule(3, []cc.Msg{{0, 1, 1}, {0, 1, 2}}, "", 0); err == nil {
		t.Error("CompileSchedule accepted a pair twice")
	}
	if _, err := cc.CompileSchedule(3, nil, "random", 0); err == nil || !strings.Contains(err.Error(), "greedy") {
		t.Errorf("unknown scheduler: %v", err)
	}
}

// FuzzReadSchedule: the schedule parser never panics; what it accepts is
// a valid schedule that writes back to a file reading the same.
func FuzzReadSchedule(f *testing.F) {
	f.Add("mplite-schedule 1\nranks 6\nphase\n0 1 1048576\n2 3 100\n1 5 100\nphase\n1 3 1048576\n0 2 10240\n2 1 100\n")
	f.Add("mplite-schedule 1\nranks 1\n")
	f.Add("# c\nmplite-schedule 1\n\nranks 3\nphase\n0 1 0\nphase\n1 0 7\n")
	f.Add("mplite-schedule 1\nranks 4\nphase\n1 2 5\nphase\n1 2 7\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := cc.ReadSchedule(strings.NewReader(in))
		if err != nil {
			return
		}
		ph := s.Phases()
		if _, err := cc.NewSchedule(s.Ranks(), ph); err != nil {
			t.Fatalf("accepted an invalid schedule: %v", err)
		}
		var buf bytes.Buffer
		if err := cc.WriteSchedule(&buf, s); err != nil {
			t.Fatal(err)
		}
		back, err := cc.ReadSchedule(&buf)
		if err != nil {
			t.Fatalf("re-reading what was written: %v", err)
		}
		if back.Ranks() != s.Ranks() || !slices.EqualFunc(back.Phases(), ph, func(a, b cc.Phase) bool { return slices.Equal(a, b) }) {
			t.Fatalf("round trip changed the schedule")
		}
	})
}

// TestScheduleOps: each rank's part lists its sends and receives in phase
// order, and a rank outside the schedule has none.
func TestScheduleOps(t *testing.T) {
	s, err := cc.CompileSchedule(6, paperMsgs, cc.SchedGreedy, 0)
	if err != nil {
		t.Fatal(err)
	}
	var sends, recvs int
	for r := range s.Ranks() {
		ops := s.Ops(r)
		if !slices.IsSortedFunc(ops, func(a, b cc.Op) int { return a.Phase - b.Phase }) {
			t.Errorf("rank %d: ops out of phase order: %v", r, ops)
		}
		for _, o := range ops {
			m := cc.Msg{Src: r, Dst: o.Peer, Size: o.Size}
			if !o.Send {
				m.Src, m.Dst = o.Peer, r
				recvs++
			} else {
				sends++
			}
			if !slices.Contains(s.Phases()[o.Phase], m) {
				t.Errorf("rank %d: %+v is not in phase %d", r, o, o.Phase)
			}
		}
	}
	if sends != len(paperMsgs) || recvs != len(paperMsgs) {
		t.Errorf("%d sends and %d receives for %d messages", sends, recvs, len(paperMsgs))
	}
	if s.Ops(-1) != nil || s.Ops(6) != nil {
		t.Error("ops for a rank outside the schedule")
	}
}

// TestSchedulePattern: Pattern lists every message of the schedule,
// phase by phase.
func TestSchedulePattern(t *testing.T) {
	s, err := cc.CompileSchedule(6, paperMsgs, cc.SchedGreedy, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []cc.Msg
	for _, p := range s.Phases() {
		want = append(want, p...)
	}
	got := s.Pattern()
	if !slices.Equal(got, want) {
		t.Errorf("Pattern() = %v, want %v", got, want)
	}
	if err := cc.CheckSchedule(paperMsgs, []cc.Phase{got}); err == nil {
		t.Error("the paper's pattern fits in one contention-free phase")
	}
	slices.SortFunc(got, func(a, b cc.Msg) int { return a.Src*100 + a.Dst - b.Src*100 - b.Dst })
	orig := slices.Clone(paperMsgs)
	slices.SortFunc(orig, func(a, b cc.Msg) int { return a.Src*100 + a.Dst - b.Src*100 - b.Dst })
	if !slices.Equal(got, orig) {
		t.Errorf("Pattern() holds %v, the pattern was %v", got, orig)
	}
}
