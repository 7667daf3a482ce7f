package test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
)

// collbenchLine is one of collbench's result lines as mprun prints it.
var collbenchLine = regexp.MustCompile(`^\[0\] coll=([\w-]+) algo=([\w-]+) bytes=(\d+) ranks=(\d+) us=(\d+\.\d\d)( chosen=([\w-]+))?$`)

// TestCollbenchMprun runs collbench -check as 8 processes under mprun on
// the switch testbed, on a clean switch and on one that drops 5 % of the
// frames: every collective and every algorithm (and the selector's choice)
// at sizes 0, 1, odd and past the eager limit must match the naive
// reference on every rank, and rank 0's output must hold one parseable
// line for each of them.
func TestCollbenchMprun(t *testing.T) {
	needRoot(t)
	const np = 8
	sizes := []int{0, 1, 1001, mplite.DefaultEagerLimit + 1000}
	var sz []string
	for _, s := range sizes {
		sz = append(sz, strconv.Itoa(s))
	}
	for _, drop := range []string{"0", "0.05"} {
		t.Run("drop="+drop, func(t *testing.T) {
			out, err := run(t, 3*time.Minute, built.path(t, "mprun"), "-np", strconv.Itoa(np), "-drop", drop,
				"-timeout", "150s", "--", built.path(t, "collbench"), "-check", "-iters", "2", "-sizes", strings.Join(sz, ","))
			if err != nil {
				t.Fatalf("mprun failed: %v\n%s", err, out)
			}
			if strings.Contains(out, "MISMATCH") || !strings.Contains(out, "[0] collbench: check: every result matches the reference") {
				t.Errorf("the check did not pass")
			}
			seen := map[string]int{}
			for _, line := range strings.Split(out, "\n") {
				if !strings.HasPrefix(line, "[0] coll=") {
					continue
				}
				m := collbenchLine.FindStringSubmatch(line)
				if m == nil {
					t.Errorf("line %q does not parse", line)
					continue
				}
				if m[4] != strconv.Itoa(np) {
					t.Errorf("line %q: want ranks=%d", line, np)
				}
				if us, err := strconv.ParseFloat(m[5], 64); err != nil || us <= 0 {
					t.Errorf("line %q: time %q", line, m[5])
				}
				if (m[2] == "auto") != (m[7] != "") || m[7] != "" && !slices.Contains(mplite.Algorithms(m[1]), m[7]) {
					t.Errorf("line %q: chosen= must follow algo=auto and name one of %s's algorithms", line, m[1])
				}
				seen[m[1]+"/"+m[2]+"/"+m[3]]++
			}
			for _, coll := range mplite.Collectives() {
				for _, algo := range append(mplite.Algorithms(coll), "auto") {
					for _, s := range sizes {
						b := s
						switch coll {
						case "barrier":
							b = 0
						case "reduce", "allreduce", "scan", "exscan":
							b = 8 * max(1, s/8) // float64 elements, at least one
							if s == 0 {
								b = 0
							}
						}
						if seen[fmt.Sprint(coll, "/", algo, "/", b)] == 0 {
							t.Errorf("no line for coll=%s algo=%s bytes=%d", coll, algo, b)
						}
					}
				}
			}
			for _, a := range []string{"phased_l2", "phased_l3"} {
				if seen[fmt.Sprintf("alltoallv/%s/%d", a, sizes[3])] != 1 {
					t.Errorf("no line for CC-MPI level alltoallv/%s", a)
				}
			}
			if drop != "0" {
				dropped, frames, ok := droppedFrames(out)
				if !ok {
					t.Fatalf("no fault report in mprun's output")
				}
				t.Logf("switch dropped %d of %d frames", dropped, frames)
				if dropped == 0 || float64(dropped) < 0.02*float64(frames) {
					t.Errorf("-drop %s dropped %d of %d frames: the faults did not happen", drop, dropped, frames)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// mcastStatsLine is collbench -mcast-stats' line of a rank.
var mcastStatsLine = regexp.MustCompile(`^\[(\d+)\] mcast stats: \{.*DataSent:(\d+) Resent:(\d+) .*Duplicates:(\d+) `)

// TestMulticastAtLineRate runs the multicast collectives (both Bcast
// protocols, the concurrent Allgather, Scatter, and the selector's choice,
// which takes multicast for the 300 KB Bcast and the 64 KiB Allgather)
// under collbench -check on a 100 Mbit/s switch: with 5 % of the frames dropped, where the root must repair each
// loss with about one retransmission, and with one receiver's port at a
// quarter of the rate, which the root must pace to (MPLITE_RATE is the
// slowest port's) so that it overruns nothing and resends next to nothing.
func TestMulticastAtLineRate(t *testing.T) {
	needRoot(t)
	const np = 8
	for _, tc := range []struct {
		name string
		args []string
		// most retransmissions (and polls) per first transmission
		maxResent float64
	}{
		// A chunk is lost by at least one of 7 receivers with
		// probability 1-0.95^7 = 30 %; twice that allows for polls.
		{"drop=0.05", []string{"-drop", "0.05"}, 0.6},
		{"slow-port", []string{"-host-rate", "3=25mbit"}, 0.05},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-np", strconv.Itoa(np), "-rate", "100mbit", "-timeout", "150s"}, tc.args...)
			args = append(args, "--", built.path(t, "collbench"), "-check", "-iters", "3", "-warmup", "0s", "-mcast-stats",
				"-colls", "bcast,allgather,scatter", "-algos", "mcast-ack,mcast-nak,mcast,auto", "-sizes", "1000,65536,300000")
			out, err := run(t, 3*time.Minute, built.path(t, "mprun"), args...)
			if err != nil {
				t.Fatalf("mprun failed: %v\n%s", err, out)
			}
			if strings.Contains(out, "MISMATCH") || !strings.Contains(out, "[0] collbench: check: every result matches the reference") {
				t.Errorf("the check did not pass")
			}
			for _, want := range []string{`coll=bcast algo=auto bytes=300000 ranks=8 us=[\d.]+ chosen=mcast-nak`,
				`coll=allgather algo=auto bytes=65536 ranks=8 us=[\d.]+ chosen=mcast`} {
				if !regexp.MustCompile(`(?m)^\[0\] ` + want + `$`).MatchString(out) {
					t.Errorf("no line %q: the selector did not take multicast at a known line rate", want)
				}
			}
			var sent, resent int
			ranks := 0
			for _, line := range strings.Split(out, "\n") {
				if m := mcastStatsLine.FindStringSubmatch(line); m != nil {
					ranks++
					s, _ := strconv.Atoi(m[2])
					r, _ := strconv.Atoi(m[3])
					sent, resent = sent+s, resent+r
				}
			}
			if ranks != np || sent == 0 {
				t.Fatalf("multicast counters of %d ranks, %d chunks sent", ranks, sent)
			}
			t.Logf("%d chunks multicast, %d resent (%.1f %%)", sent, resent, 100*float64(resent)/float64(sent))
			if float64(resent) > tc.maxResent*float64(sent) {
				t.Errorf("%d resent for %d sent: more than %.0f %%", resent, sent, 100*tc.maxResent)
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// TestMeasuredPortRate: with MPLITE_TUNING=measure and no rate given, the
// ranks find their ports' rate at start-up: about the payload rate of a
// 100 Mbit/s port, and none on an unlimited link (where the CPUs, not a
// line, bound a stream).
func TestMeasuredPortRate(t *testing.T) {
	needRoot(t)
	measured := regexp.MustCompile(`\[0\] collbench: measured ts=\S+ tc=\S+ rate=(\d+) bit/s`)
	for _, tc := range []struct {
		rate     []string
		min, max float64
	}{
		{[]string{"-rate", "100mbit"}, 60e6, 100e6},
		{nil, 0, 0},
	} {
		args := append(append([]string{"-np", "2"}, tc.rate...), "-genv", "MPLITE_RATE", "", "-timeout", "60s", "--",
			built.path(t, "collbench"), "-tune", "measure", "-colls", "barrier", "-secs", "0.05")
		out, err := run(t, 2*time.Minute, built.path(t, "mprun"), args...)
		if err != nil {
			t.Fatalf("mprun failed: %v\n%s", err, out)
		}
		m := measured.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%v: no measured tuning in\n%s", tc.rate, out)
		}
		got, _ := strconv.ParseFloat(m[1], 64)
		if got < tc.min || got > tc.max {
			t.Errorf("%v: measured rate %.0f bit/s, want [%.0f, %.0f]", tc.rate, got, tc.min, tc.max)
		}
	}
}
