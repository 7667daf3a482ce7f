package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: mprun builds network namespaces and needs root; run as root (CI does)")
	}
}

func mprun(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return o.String(), e.String(), code
}

func namespaces(t *testing.T) []string {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Contains(f[0], "-mprun-") {
			ns = append(ns, f[0])
		}
	}
	sort.Strings(ns)
	return ns
}

func TestRanksGetEnvironmentAndPrefixes(t *testing.T) {
	needRoot(t)
	before := namespaces(t)
	out, errOut, code := mprun(t, "-np", "3", "-nics", "2", "-genv", "MPRUN_G", "seven", "--", "/bin/sh", "-c",
		`echo "g=$MPRUN_G"; echo "r=$MPLITE_RANK s=$MPLITE_SIZE i=$MPLITE_IFACES j=$MPLITE_JOB"; echo err >&2; ip -o link show eth1`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	job := ""
	for r := 0; r < 3; r++ {
		p := "[" + string(rune('0'+r)) + "] "
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, p+"r=") {
				line = l
			}
		}
		if !strings.Contains(line, "r="+string(rune('0'+r))+" s=3 i=eth0,eth1 j=") {
			t.Fatalf("rank %d line %q in\n%s", r, line, out)
		}
		j := line[strings.Index(line, "j=")+2:]
		if job != "" && j != job {
			t.Fatalf("ranks got different job keys %s and %s", job, j)
		}
		job = j
		if !strings.Contains(out, p+"g=seven") {
			t.Fatalf("rank %d did not get -genv's variable: %s", r, out)
		}
		if !strings.Contains(errOut, p+"err") {
			t.Fatalf("rank %d stderr not prefixed: %s", r, errOut)
		}
		if !strings.Contains(out, p+"3: eth1") || !strings.Contains(out, "link/ether 02:45:56:01:00:0"+string(rune('0'+r))) {
			t.Fatalf("rank %d does not see its rail-1 NIC: %s", r, out)
		}
	}
	if after := namespaces(t); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Fatalf("namespaces left behind: %v", after)
	}
}

func TestFailingRankFailsJob(t *testing.T) {
	needRoot(t)
	_, errOut, code := mprun(t, "-np", "2", "--", "/bin/sh", "-c", `[ "$MPLITE_RANK" = 0 ] || exit 3`)
	if code == 0 || !strings.Contains(errOut, "rank 1") {
		t.Fatalf("exit %d, stderr %q: a failed rank must fail the job and be named", code, errOut)
	}
}

func TestGraceKillsSurvivors(t *testing.T) {
	needRoot(t)
	before := namespaces(t)
	_, errOut, code := mprun(t, "-np", "2", "-grace", "200ms", "--", "/bin/sh", "-c",
		`[ "$MPLITE_RANK" = 0 ] && exit 1; exec sleep 600`)
	if code == 0 || !strings.Contains(errOut, "killing") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if after := namespaces(t); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Fatalf("namespaces left behind: %v", after)
	}
}

func TestTimeout(t *testing.T) {
	needRoot(t)
	_, errOut, code := mprun(t, "-np", "2", "-timeout", "300ms", "--", "sleep", "600")
	if code == 0 || !strings.Contains(errOut, "deadline") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestHostfile: every rank gets every rank's MACs, unless -discover.
func TestHostfile(t *testing.T) {
	needRoot(t)
	out, errOut, code := mprun(t, "-np", "2", "--", "/bin/sh", "-c", `cat "$MPLITE_HOSTFILE"`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "[0] 0 02:45:56:00:00:00") || !strings.Contains(out, "[0] 1 02:45:56:00:00:01") {
		t.Fatalf("hostfile content: %s", out)
	}
	out, errOut, code = mprun(t, "-np", "2", "-discover", "--", "/bin/sh", "-c", `echo "hostfile=$MPLITE_HOSTFILE."`)
	if code != 0 || !strings.Contains(out, "[0] hostfile=.") || !strings.Contains(out, "[1] hostfile=.") {
		t.Fatalf("-discover: exit %d, output %q %s", code, out, errOut)
	}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"-np", "2"},
		{"-np", "0", "--", "true"},
		{"-nics", "9", "--", "true"},
		{"-driver", "dpdk", "--", "true"},
		{"-drop", "2", "--", "true"},
		{"-corrupt", "-0.1", "--", "true"},
		{"-dup", "1.5", "--", "true"},
		{"-flap", "2s", "--", "true"},
		{"-flap", "2s+0s", "--", "true"},
		{"-flap", "1s+1s", "-flap-host", "5", "--", "true"},
		{"-rail-down", "1@2s", "--", "true"}, // one rail only
		{"-rail-down", "x@2s", "-nics", "2", "--", "true"},
		{"-rail-down", "1@0MiB", "-nics", "2", "--", "true"},
		{"-rail-down", "1@8XB", "-nics", "2", "--", "true"},
		{"-rail-down", "1@-1s", "-nics", "2", "--", "true"},
	} {
		if _, _, code := mprun(t, args...); code != 2 {
			t.Errorf("mprun %v: exit %d, want 2", args, code)
		}
	}
}

func TestParseRailDown(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want railDown
	}{
		{"", railDown{rail: -1}},
		{"1@3s", railDown{rail: 1, at: 3 * time.Second}},
		{"0@700ms", railDown{rail: 0, at: 700 * time.Millisecond}},
		{"1@8MiB", railDown{rail: 1, bytes: 8 << 20}},
		{"2@500kB", railDown{rail: 2, bytes: 500_000}},
		{"1@4096B", railDown{rail: 1, bytes: 4096}},
		{"1@1GB", railDown{rail: 1, bytes: 1e9}},
	} {
		got, err := parseRailDown(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseRailDown(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"1", "@3s", "-1@3s", "1@", "1@MiB", "1@1.5MiB", "1@99999999999GiB"} {
		if _, err := parseRailDown(bad); err == nil {
			t.Errorf("parseRailDown(%q): no error", bad)
		}
	}
}

func TestParseHostRates(t *testing.T) {
	got, err := parseHostRates("3=25mbit,0=1gbit")
	if err != nil || len(got) != 2 || got[3] != 25e6 || got[0] != 1e9 {
		t.Errorf("parseHostRates = %v, %v", got, err)
	}
	for _, bad := range []string{"3", "=25mbit", "-1=1mbit", "3=fast", "3=0", "3=25mbit,"} {
		if _, err := parseHostRates(bad); err == nil {
			t.Errorf("parseHostRates(%q): no error", bad)
		}
	}
}

// The ranks get the slowest port's rate as MPLITE_RATE, -host-rate slows
// one host's ports, and a rate the user set is left alone.
func TestRanksGetSlowestRate(t *testing.T) {
	needRoot(t)
	out, errOut, code := mprun(t, "-np", "3", "-rate", "100mbit", "-host-rate", "1=25mbit", "--", "sh", "-c", "echo rate=$MPLITE_RATE")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if n := strings.Count(out, "rate=25mbit"); n != 3 {
		t.Errorf("want MPLITE_RATE=25mbit on 3 ranks:\n%s", out)
	}
	t.Setenv("MPLITE_RATE", "1gbit")
	out, errOut, code = mprun(t, "-np", "2", "-rate", "100mbit", "--", "sh", "-c", "echo rate=$MPLITE_RATE")
	if code != 0 || strings.Count(out, "rate=1gbit") != 2 {
		t.Errorf("user's MPLITE_RATE: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = mprun(t, "-np", "2", "-host-rate", "2=1mbit", "--", "true")
	if code == 0 || !strings.Contains(errOut, "host 2, but only 2 hosts") {
		t.Errorf("-host-rate beyond -np: exit %d\n%s%s", code, out, errOut)
	}
}

// -ppn puts consecutive ranks on one host namespace: they share its NICs,
// each with its own endpoint, and the hostfile says so.
func TestRanksPerHost(t *testing.T) {
	needRoot(t)
	out, errOut, code := mprun(t, "-np", "5", "-ppn", "2", "--", "/bin/sh", "-c",
		`echo "ep=$MPLITE_ENDPOINT local=$MPLITE_LOCAL_SIZE mac=$(ip -o link show eth0 | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2) line=$(grep "^$MPLITE_RANK " $MPLITE_HOSTFILE)"`)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for r, want := range []string{
		"[0] ep=0 local=2 mac=02:45:56:00:00:00 line=0 02:45:56:00:00:00 0",
		"[1] ep=1 local=2 mac=02:45:56:00:00:00 line=1 02:45:56:00:00:00 1",
		"[2] ep=0 local=2 mac=02:45:56:00:00:01 line=2 02:45:56:00:00:01 0",
		"[3] ep=1 local=2 mac=02:45:56:00:00:01 line=3 02:45:56:00:00:01 1",
		"[4] ep=0 local=1 mac=02:45:56:00:00:02 line=4 02:45:56:00:00:02 0",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("rank %d: no line %q in\n%s", r, want, out)
		}
	}
}

// -flap takes the port down and up again, and the faults are reported.
func TestFlapAndFaultReport(t *testing.T) {
	needRoot(t)
	out, errOut, code := mprun(t, "-np", "2", "-corrupt", "0.01", "-dup", "0.01", "-flap", "50ms+200ms", "--", "sh", "-c", "sleep 0.5")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"-flap: switch port of host 1 rail 0 down",
		"-flap: switch port of host 1 rail 0 up",
		"mprun: faults: the switch dropped 0, corrupted ",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestOversubscribedYields(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, tc := range []struct {
		np, cpus int
		kv       map[string]string
		want     string
	}{
		{8, 2, nil, "MPLITE_YIELD=1 MPLITE_CPUS=2"},
		{2, 2, nil, ""},
		{8, 2, map[string]string{"MPLITE_YIELD": "0"}, "MPLITE_CPUS=2"},
		{8, 2, map[string]string{"MPLITE_YIELD": "0", "MPLITE_CPUS": "4"}, ""},
		// A spin time is how long to poll, not whether to yield.
		{8, 2, map[string]string{"MPLITE_SPIN": "5us", "MPLITE_CPUS": "4"}, "MPLITE_YIELD=1"},
	} {
		if got := strings.Join(oversubscribed(tc.np, tc.cpus, env(tc.kv)), " "); got != tc.want {
			t.Errorf("%d ranks on %d CPUs, env %v: %q, want %q", tc.np, tc.cpus, tc.kv, got, tc.want)
		}
	}
}

func TestGoProcsShareTheCPUs(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, tc := range []struct {
		np, cpus int
		kv       map[string]string
		want     string
	}{
		{2, 2, nil, "GOMAXPROCS=1"},
		{1, 2, nil, "GOMAXPROCS=2"},
		{8, 2, nil, "GOMAXPROCS=1"},
		{4, 64, nil, "GOMAXPROCS=16"},
		{2, 2, map[string]string{"GOMAXPROCS": "2"}, ""},
	} {
		if got := strings.Join(goProcs(tc.np, tc.cpus, env(tc.kv)), " "); got != tc.want {
			t.Errorf("%d ranks on %d CPUs, env %v: %q, want %q", tc.np, tc.cpus, tc.kv, got, tc.want)
		}
	}
}

func TestCableOnlyWithoutSwitchFeatures(t *testing.T) {
	for _, tc := range []struct {
		o    options
		want bool
	}{
		{options{np: 2}, true},
		{options{np: 2, rate: "1gbit"}, false},
		{options{np: 2, drop: 0.05}, false},
		{options{np: 2, flap: "1s+1s"}, false},
		{options{np: 2, railDown: "1@1s"}, false},
	} {
		if got := tc.o.cable(); got != tc.want {
			t.Errorf("%+v: cable %v, want %v", tc.o, got, tc.want)
		}
	}
}

// -driver auto takes AF_XDP wherever it can serve and AF_PACKET elsewhere;
// an explicit driver is kept.
func TestAutoDriver(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-np", "2"}, "afxdp"},
		{[]string{"-np", "8", "-nics", "2", "-mtu", "3506"}, "afxdp"},
		{[]string{"-np", "2", "-mtu", "9000"}, "afpacket"},
		{[]string{"-np", "4", "-ppn", "2"}, "afpacket"},
		{[]string{"-np", "2", "-driver", "afpacket"}, "afpacket"},
		{[]string{"-np", "2", "-mtu", "9000", "-driver", "afxdp"}, "afxdp"},
	} {
		o, err := parse(append(tc.args, "--", "true"), new(bytes.Buffer))
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if o.driver != tc.want {
			t.Errorf("%v: driver %s, want %s", tc.args, o.driver, tc.want)
		}
	}
	if _, err := parse([]string{"-np", "2", "-driver", "dpdk", "--", "true"}, new(bytes.Buffer)); err == nil {
		t.Error("-driver dpdk accepted")
	}
}

// -driver auto leaves AF_XDP out when ranks crowd the CPUs.
func TestAutoDriverCrowded(t *testing.T) {
	for _, tc := range []struct {
		np, perHost, mtu, cpus int
		want                   string
	}{
		{2, 1, 1500, 2, "afxdp"}, {16, 1, 1500, 2, "afxdp"}, {17, 1, 1500, 2, "afpacket"},
		{128, 1, 1500, 2, "afpacket"}, {128, 1, 1500, 32, "afxdp"}, {4, 1, 1500, 0, "afxdp"},
		{8, 2, 1500, 64, "afpacket"}, {2, 1, 9000, 64, "afpacket"},
	} {
		if got := autoDriver(tc.np, tc.perHost, tc.mtu, tc.cpus); got != tc.want {
			t.Errorf("%d ranks, %d per host, MTU %d, %d CPUs: %s, want %s", tc.np, tc.perHost, tc.mtu, tc.cpus, got, tc.want)
		}
	}
}
