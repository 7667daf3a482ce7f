package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethervia/ethervia/cmd/netpipe/internal/netpipe"
)

// runCmd runs the command in process.
// TestMain lets this test binary serve as the receiver process that a
// -procs run starts (os.Executable names the test binary then).
func TestMain(m *testing.M) {
	if os.Getenv(receiverEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = run(args, &o, &e)
	return o.String(), e.String(), err
}

// quick makes a run short: a few repeats, one trial.
func quick(dir string, args ...string) []string {
	return append([]string{"-n", "5", "-trials", "1", "-o", filepath.Join(dir, "np.out"), "-progress", "off"}, args...)
}

var (
	// netpipe.c: "%3d: %7d bytes %6d times --> %8.2lf Mbps in %10.2lf usec"
	stderrLine = regexp.MustCompile(`^ *\d{1,}: +\d{1,} bytes +\d{1,} times --> +\d+\.\d\d Mbps in +\d+\.\d\d usec$`)
	// netpipe.c: "%8d %lf %12.8lf"
	npoutLine = regexp.MustCompile(`^ *\d+ \d+\.\d{6} +\d+\.\d{8}$`)
)

// checkOutputs checks the stderr lines and np.out of a run against
// NetPIPE's layouts and the schedule, and returns the points.
func checkOutputs(t *testing.T, stderr, npout string, lower, upper, pert int) []netpipe.Point {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, " bytes ") {
			if !stderrLine.MatchString(l) {
				t.Errorf("stderr line %q is not NetPIPE's format", l)
			}
			lines = append(lines, l)
		}
	}
	b, err := os.ReadFile(npout)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if !npoutLine.MatchString(sc.Text()) {
			t.Errorf("np.out line %q is not NetPIPE's layout", sc.Text())
		}
	}
	pts, err := netpipe.ParseNPOut(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, p := range pts {
		sizes = append(sizes, p.Bytes)
	}
	if want := netpipe.Schedule(lower, upper, pert); !slices.Equal(sizes, want) {
		t.Errorf("np.out sizes %v, want %v", sizes, want)
	}
	if len(lines) != len(pts) {
		t.Errorf("%d stderr lines for %d np.out points", len(lines), len(pts))
	}
	return pts
}

func lastJSON(t *testing.T, stdout string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("last stdout line %q is not JSON: %v", lines[len(lines)-1], err)
	}
	return m
}

func TestEveryModuleRunsInMemMode(t *testing.T) {
	for _, name := range modules().Names() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			stdout, stderr, err := runCmd(t, quick(dir, "-mem", "-module", name, "-u", "64", "-json")...)
			if _, lerr := modules().Lookup(name); lerr != nil {
				// Not built yet: the command must say so, never fake results.
				want := "module " + name + " is not built yet"
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("-module %s: %v, want %q", name, err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("-mem -module %s: %v\n%s", name, err, stderr)
			}
			checkOutputs(t, stderr, filepath.Join(dir, "np.out"), 1, 64, 3)
			m := lastJSON(t, stdout)
			if m["module"] != name || m["testbed"] != "mem" {
				t.Errorf("summary %v", m)
			}
		})
	}
}

func TestModesInMemMode(t *testing.T) {
	for _, mode := range [][]string{{"-s"}, {"-B"}, {"-I"}, {"-links", "2"}, {"-p", "0", "-l", "100", "-u", "20000"}} {
		for _, mod := range []string{"raw", "tcp"} {
			if mod == "tcp" && mode[0] == "-links" {
				continue // loopback has one link
			}
			t.Run(mod+strings.Join(mode, ""), func(t *testing.T) {
				dir := t.TempDir()
				args := append(quick(dir, "-mem", "-module", mod, "-u", "2000"), mode...)
				_, stderr, err := runCmd(t, args...)
				if err != nil {
					t.Fatalf("%v: %v\n%s", args, err, stderr)
				}
				lo, hi, pert := 1, 2000, 3
				if mode[0] == "-p" {
					lo, hi, pert = 100, 20000, 0
				}
				checkOutputs(t, stderr, filepath.Join(dir, "np.out"), lo, hi, pert)
			})
		}
	}
}

func TestIntegrityReportsCorruptedFrames(t *testing.T) {
	dir := t.TempDir()
	args := quick(dir, "-mem", "-module", "raw", "-I", "-corrupt", "0.05", "-l", "4000", "-u", "9000", "-p", "0", "-n", "30", "-timeout", "2s")
	_, stderr, err := runCmd(t, args...)
	if err == nil {
		t.Fatalf("corrupted frames went unnoticed\n%s", stderr)
	}
	if !strings.Contains(err.Error(), "integrity check failed") {
		t.Fatalf("error %q is not an integrity failure", err)
	}
}

func TestJSONSummary(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, err := runCmd(t, quick(dir, "-mem", "-u", "3000", "-json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	pts := checkOutputs(t, stderr, filepath.Join(dir, "np.out"), 1, 3000, 3)
	m := lastJSON(t, stdout)
	for _, k := range []string{"module", "driver", "links", "latency_us", "peak_mbps", "peak_bytes", "reruns"} {
		if _, ok := m[k]; !ok {
			t.Errorf("summary lacks %q: %v", k, m)
		}
	}
	if m["module"] != defaultModule || m["driver"] != "memnic" || m["links"] != 1.0 || m["bonded"] != false {
		t.Errorf("summary %v", m)
	}
	// The peak is the np.out maximum and the latency the 1-byte time.
	best := pts[0]
	for _, p := range pts {
		if p.Mbps > best.Mbps {
			best = p
		}
	}
	if m["peak_bytes"] != float64(best.Bytes) {
		t.Errorf("peak_bytes %v, np.out peaks at %d", m["peak_bytes"], best.Bytes)
	}
	// np.out keeps seconds to 8 decimals: 0.01 µs of rounding either way.
	if lat := m["latency_us"].(float64); lat <= 0 || math.Abs(lat-pts[0].Usec()) > pts[0].Usec()*0.001+0.01 {
		t.Errorf("latency_us %v, np.out's first point %v µs", lat, pts[0].Usec())
	}
}

func isSVG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			t.Fatalf("%s has no elements", path)
		}
		if err != nil {
			t.Fatalf("%s is not XML: %v", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local != "svg" {
				t.Fatalf("%s: root element %s", path, se.Name.Local)
			}
			return
		}
	}
}

func isPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestPlots(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "raw.out"), filepath.Join(dir, "tcp.out")
	svg, pngf := filepath.Join(dir, "run.svg"), filepath.Join(dir, "run.png")
	if _, stderr, err := runCmd(t, "-mem", "-n", "5", "-trials", "1", "-u", "5000", "-o", a, "-plot", svg); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	isSVG(t, svg)
	if _, stderr, err := runCmd(t, "-mem", "-module", "tcp", "-n", "5", "-trials", "1", "-u", "5000", "-o", b, "-plot", pngf); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	isPNG(t, pngf)
	cmp := filepath.Join(dir, "cmp.svg")
	stdout, _, err := runCmd(t, "plot", a, b, "-o", cmp)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "2 runs") {
		t.Errorf("plot said %q", stdout)
	}
	isSVG(t, cmp)
	svgText, _ := os.ReadFile(cmp)
	for _, name := range []string{"raw", "tcp"} {
		if !bytes.Contains(svgText, []byte(">"+name+"<")) {
			t.Errorf("overlay lacks a legend entry for %s", name)
		}
	}
	cmpPNG := filepath.Join(dir, "cmp.png")
	if _, _, err := runCmd(t, "plot", "-o", cmpPNG, a, b); err != nil {
		t.Fatal(err)
	}
	isPNG(t, cmpPNG)
	if _, _, err := runCmd(t, "plot", a); err == nil {
		t.Error("plot without -o accepted")
	}
	bad := filepath.Join(dir, "bad.out")
	os.WriteFile(bad, []byte("1 2\n"), 0o644)
	if _, _, err := runCmd(t, "plot", bad, "-o", cmp); err == nil {
		t.Error("plot of a malformed np.out accepted")
	}
}

func TestRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-mem", "-s", "-B"},
		{"-mem", "-l", "0"},
		{"-mem", "-l", "100", "-u", "10"},
		{"-mem", "-rate", "1gbit"},
		{"-local", "-links", "2", "-rate", "1gbit,1gbit,1gbit"},
		{"-local", "-rate", "1gbit,"},
		{"-mem", "-drop", "1.5"},
		{"-mem", "-module", "nope"},
		{"-mem", "-local"},
		{"-mem", "-r"},
		{"-iface", "eth0"}, // a transmitter without -peer
		{"-mem", "-driver", "dpdk"},
		{"-mem", "-mtu", "10"},
		{"-mem", "-module", "raw", "-bond"},
		{"-mem", "-same-host"},
		{"-local", "-same-host", "-module", "vi"},
		{"-local", "-same-host", "-driver", "afxdp"},
		{"-local", "-procs"},
		{"-local", "-endpoint", "1"},
		{"stray"},
	} {
		if _, _, err := runCmd(t, append(args, "-o", "")...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestNotRootDefaultsToMemAndSaysSo(t *testing.T) {
	for _, root := range []bool{false, true} {
		var e bytes.Buffer
		o, err := parseFlags(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		o.stderr, o.modules, o.isRoot = &e, modules(), root
		if err := o.validate(); err != nil {
			t.Fatal(err)
		}
		if root {
			if !o.local || o.mem || e.Len() != 0 {
				t.Errorf("as root: local %v, mem %v, stderr %q", o.local, o.mem, e.String())
			}
			continue
		}
		if !o.mem || o.local {
			t.Errorf("without root: mem %v local %v", o.mem, o.local)
		}
		if !strings.Contains(e.String(), "not root") || !strings.Contains(e.String(), "-mem") {
			t.Errorf("no note on stderr: %q", e.String())
		}
	}
}

func TestProgressBarOnlyWhenAsked(t *testing.T) {
	dir := t.TempDir()
	_, stderr, err := runCmd(t, "-mem", "-n", "3", "-trials", "1", "-u", "100", "-o", filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stderr, "\r") {
		t.Error("progress bar drawn on a non-terminal")
	}
	_, stderr, err = runCmd(t, "-mem", "-n", "3", "-trials", "1", "-u", "100", "-o", filepath.Join(dir, "b"), "-progress", "on")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "\r\x1b[K[") {
		t.Error("-progress on drew no bar")
	}
}

// TestBondOverOneLink: -bond runs the vi module through the bonding layer
// over a single link, and the summary says the run was bonded.
func TestBondOverOneLink(t *testing.T) {
	for _, args := range [][]string{{"-bond"}, {"-links", "2"}, {}} {
		dir := t.TempDir()
		stdout, stderr, err := runCmd(t, append(quick(dir, "-mem", "-module", "vi", "-u", "3000", "-json", "-I"), args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		checkOutputs(t, stderr, filepath.Join(dir, "np.out"), 1, 3000, 3)
		if m, want := lastJSON(t, stdout), len(args) > 0; m["bonded"] != want {
			t.Errorf("%v: summary says bonded=%v, want %v", args, m["bonded"], want)
		}
	}
}

func TestErrorsCarryOnePrefix(t *testing.T) {
	// A lost frame with no retries: the message names the end and the
	// point once each; main adds the only "netpipe:".
	dir := t.TempDir()
	_, _, err := runCmd(t, quick(dir, "-mem", "-module", "raw", "-drop", "0.3", "-retries", "0",
		"-timeout", "200ms", "-l", "20000", "-u", "20000", "-p", "0")...)
	if err == nil {
		t.Fatal("30% loss without retries succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, "netpipe:") || strings.Count(msg, "raw:") != 1 ||
		!(strings.HasPrefix(msg, "transmitter: ") || strings.HasPrefix(msg, "receiver: ")) {
		t.Fatalf("error %q: want one prefix per layer (end, point, module) and no netpipe:", msg)
	}
}

func TestRawLossIsRerunAndCounted(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, err := runCmd(t, quick(dir, "-mem", "-module", "raw", "-drop", "0.002",
		"-timeout", "100ms", "-u", "16000", "-retries", "50", "-json")...)
	if err != nil {
		t.Fatalf("raw with 0.2%% loss: %v\n%s", err, stderr)
	}
	reruns := strings.Count(stderr, "re-running it")
	if got := lastJSON(t, stdout)["reruns"]; got != float64(reruns) {
		t.Errorf("-json reruns %v, stderr reports %d re-runs", got, reruns)
	}
	if want := fmt.Sprintf("  re-runs:  %d ", reruns); !strings.Contains(stdout, want) {
		t.Errorf("summary lacks %q:\n%s", want, stdout)
	}
	checkOutputs(t, stderr, filepath.Join(dir, "np.out"), 1, 16000, netpipe.DefaultPerturbation)
}

func TestSummaryComparesWithTCP(t *testing.T) {
	dir := t.TempDir()
	tcp := filepath.Join(dir, "tcp.out")
	// A made-up TCP curve that the memnic run crosses once, whatever its
	// noise: far faster than any run up to 100 bytes, far slower from 101
	// on (a slope between the two was crossed again by a noisy run).
	if err := os.WriteFile(tcp, []byte("1 1e9 1e-9\n100 1e9 1e-9\n101 0.001 1\n100000 0.001 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCmd(t, quick(dir, "-mem", "-u", "3000", "-tcp", tcp)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"netpipe: summary of mplite/memnic", "latency:", "peak:", "vs tcp:   the curves cross at about", "faster than TCP above it"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
}

func TestDefaultsAreQuickAndFullIsNetPIPE(t *testing.T) {
	for _, c := range []struct {
		args    []string
		trials  int
		runtime time.Duration
	}{
		{nil, quickTrials, quickRunTime},
		{[]string{"-full"}, netpipe.Trials, netpipe.RunTime},
		{[]string{"-full", "-trials", "2", "-runtime", "10ms"}, 2, 10 * time.Millisecond},
		{[]string{"-I"}, 0, quickRunTime}, // -I: one trial, chosen by the library
	} {
		o, err := parseFlags(c.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if o.module != "mplite" || o.trials != c.trials || o.runtime != c.runtime {
			t.Errorf("%v: module %s, %d trials of %v; want mplite, %d of %v", c.args, o.module, o.trials, o.runtime, c.trials, c.runtime)
		}
	}
}
