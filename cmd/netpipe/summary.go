package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/ethervia/ethervia/cmd/netpipe/internal/netpipe"
	"github.com/ethervia/ethervia/testbed"
)

// method describes the trials of every point, for the line before the run.
func (o *options) method() string {
	trials := o.trials
	if trials == 0 {
		trials = 1 // -I
	}
	var s string
	if o.repeats > 0 {
		s = fmt.Sprintf("%d trial(s) of %d repeats per point", trials, o.repeats)
	} else {
		s = fmt.Sprintf("%d trial(s) of about %v per point", trials, o.runtime)
	}
	switch {
	case o.repeats > 0:
	case trials == quickTrials && o.runtime == quickRunTime:
		s += fmt.Sprintf(" (-full: NetPIPE's %d of %v)", netpipe.Trials, netpipe.RunTime)
	case o.full:
		s += "; NetPIPE's full method takes several minutes"
	}
	return s
}

// writeSummary ends a run with what a reader wants first: the latency, the
// peak and, given a TCP curve, where the two cross.
func writeSummary(w io.Writer, s *summary, o *options, pts, tcp []netpipe.Point) {
	fmt.Fprintf(w, "netpipe: summary of %s/%s (%s): %d points in %.1f s\n", s.Module, s.Driver, s.Mode, s.Points, s.Seconds)
	fmt.Fprintf(w, "  latency:  %.2f usec for %d bytes\n", s.LatencyUs, s.LatencySize)
	fmt.Fprintf(w, "  peak:     %.2f Mbps at %d bytes\n", s.PeakMbps, s.PeakBytes)
	if o.module == "raw" {
		fmt.Fprintf(w, "  re-runs:  %d (points re-run after lost frames; -retries %d)\n", s.Reruns, o.retries)
	}
	switch {
	case len(tcp) > 0:
		fmt.Fprintf(w, "  vs tcp:   %s\n", crossing(pts, tcp))
	case o.module != "tcp":
		fmt.Fprintf(w, "  vs tcp:   run `netpipe -module tcp -o tcp.out` (or NPtcp), then add -tcp tcp.out to compare\n")
	}
}

// crossing says where the curve pts crosses the TCP curve tcp, comparing
// at every size of pts within tcp's range (tcp interpolated on log size).
func crossing(pts, tcp []netpipe.Point) string {
	tcp = slices.Clone(tcp)
	slices.SortFunc(tcp, func(a, b netpipe.Point) int { return a.Bytes - b.Bytes })
	type cmp struct {
		bytes  int
		faster bool
	}
	var cs []cmp
	for _, p := range pts {
		t, ok := interpolate(tcp, p.Bytes)
		if !ok {
			continue
		}
		cs = append(cs, cmp{p.Bytes, p.Mbps >= t})
	}
	if len(cs) == 0 {
		return "no sizes in common with the TCP run"
	}
	lo, hi := cs[0].bytes, cs[len(cs)-1].bytes
	var changes []cmp
	for i := 1; i < len(cs); i++ {
		if cs[i].faster != cs[i-1].faster {
			changes = append(changes, cs[i])
		}
	}
	if len(changes) == 0 {
		if cs[0].faster {
			return fmt.Sprintf("faster than TCP at every size from %d to %d bytes", lo, hi)
		}
		return fmt.Sprintf("slower than TCP at every size from %d to %d bytes", lo, hi)
	}
	// The last change decides the large-message end; earlier ones are
	// often noise where the curves run close.
	last := changes[len(changes)-1]
	above, below := "TCP is faster above it", "faster than TCP below it"
	if last.faster {
		above, below = "faster than TCP above it", "TCP is faster below it"
	}
	if len(changes) == 1 {
		return fmt.Sprintf("the curves cross at about %d bytes: %s, %s", last.bytes, below, above)
	}
	return fmt.Sprintf("the curves cross last at about %d bytes: %s (they cross %d more time(s) below it, first at %d bytes)",
		last.bytes, above, len(changes)-1, changes[0].bytes)
}

// interpolate returns the TCP curve's Mbps at size n (sorted tcp), linear
// in log size between the neighbouring points, and false outside its range.
func interpolate(tcp []netpipe.Point, n int) (float64, bool) {
	i, found := slices.BinarySearchFunc(tcp, n, func(p netpipe.Point, n int) int { return p.Bytes - n })
	if found {
		return tcp[i].Mbps, true
	}
	if i == 0 || i == len(tcp) {
		return 0, false
	}
	a, b := tcp[i-1], tcp[i]
	f := (math.Log(float64(n)) - math.Log(float64(a.Bytes))) / (math.Log(float64(b.Bytes)) - math.Log(float64(a.Bytes)))
	return a.Mbps + f*(b.Mbps-a.Mbps), true
}

func readNPOut(path string) ([]netpipe.Point, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pts, err := netpipe.ParseNPOut(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(pts) == 0 {
		return nil, fmt.Errorf("%s: no data points", path)
	}
	return pts, nil
}

// sweep removes what testbeds of dead processes left behind (-sweep) and
// says what went.
func sweep(stdout io.Writer) error {
	if os.Geteuid() != 0 {
		return errors.New("-sweep removes network namespaces and needs root")
	}
	gone, err := testbed.Sweep()
	testbed.ReportSweep(stdout, "netpipe", gone)
	return err // "sweep: testbed: ..."
}
