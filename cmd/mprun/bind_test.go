package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestBindOrder(t *testing.T) {
	set := func(cpus ...int) unix.CPUSet {
		var s unix.CPUSet
		for _, c := range cpus {
			s.Set(c)
		}
		return s
	}
	for _, tc := range []struct {
		set  unix.CPUSet
		np   int
		want []int
	}{
		{set(0, 1), 2, []int{0, 1}},
		{set(0, 1), 1, []int{0}},
		{set(0, 1), 3, nil},
		{set(1, 3, 4), 2, []int{1, 3}},
	} {
		if got := bindOrder(tc.set, tc.np); !slices.Equal(got, tc.want) {
			t.Errorf("%d ranks on %v: %v, want %v", tc.np, tc.set, got, tc.want)
		}
	}
}

// TestRanksBoundToCPUs: with as many CPUs as ranks each rank runs bound to
// a CPU of its own; with -bind none, or more ranks than CPUs, on all.
func TestRanksBoundToCPUs(t *testing.T) {
	needRoot(t)
	cpus := runtime.NumCPU()
	all := fmt.Sprintf("0-%d", cpus-1)
	if cpus == 1 {
		all = "0"
	}
	show := []string{"--", "/bin/sh", "-c", `grep Cpus_allowed_list /proc/self/status`}
	for _, tc := range []struct {
		args []string
		np   int
		want func(r int) string
	}{
		{[]string{"-np", fmt.Sprint(cpus)}, cpus, func(r int) string { return fmt.Sprint(r) }},
		{[]string{"-np", fmt.Sprint(cpus), "-bind", "none"}, cpus, func(int) string { return all }},
		{[]string{"-np", fmt.Sprint(cpus + 1)}, cpus + 1, func(int) string { return all }},
	} {
		out, errOut, code := mprun(t, append(tc.args, show...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut)
		}
		for r := 0; r < tc.np; r++ {
			want := fmt.Sprintf("[%d] Cpus_allowed_list:\t%s", r, tc.want(r))
			if !strings.Contains(out, want+"\n") {
				t.Errorf("%v: no line %q in\n%s", tc.args, want, out)
			}
		}
	}
	if _, errOut, code := mprun(t, "-bind", "cores", "--", "true"); code == 0 || !strings.Contains(errOut, "-bind") {
		t.Errorf("-bind cores: exit %d, %s", code, errOut)
	}
}
