package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestParseHostfile(t *testing.T) {
	in := "# cluster\nnode1\nnode2:4\nnode3 slots=2 max_slots=8\n\n  node4   # trailing comment\n"
	hosts, err := parseHostfile(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []hostEntry{{"node1", 1}, {"node2", 4}, {"node3", 2}, {"node4", 1}}
	if !slices.Equal(hosts, want) {
		t.Fatalf("got %v, want %v", hosts, want)
	}
	for _, bad := range []string{"", "# nothing\n", "node:0\n", "node:x\n", "node cores=2\n", "node slots=-1\n"} {
		if _, err := parseHostfile(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestPlace(t *testing.T) {
	hosts := []hostEntry{{"a", 2}, {"b", 1}}
	if got := place(hosts, 5, 0); !slices.Equal(got, []string{"a", "a", "b", "a", "a"}) {
		t.Errorf("by slots: %v", got)
	}
	if got := place(hosts, 3, 1); !slices.Equal(got, []string{"a", "b", "a"}) {
		t.Errorf("-ppn 1: %v", got)
	}
}

// What remoteCommand builds must survive a shell unchanged, as ssh runs it.
func TestRemoteCommandQuoting(t *testing.T) {
	args := []string{"/bin/sh", "-c", `printf '%s|' "$A" "$0" "$1"`, "it's", "$HOME"}
	cmd := remoteCommand("/", []string{"A=x y'z"}, args)
	out, err := exec.Command("sh", "-c", cmd).Output()
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	if got, want := string(out), "x y'z|it's|$HOME|"; got != want {
		t.Fatalf("%s printed %q, want %q", cmd, got, want)
	}
}

func TestGenvAndX(t *testing.T) {
	t.Setenv("MPRUN_TEST_X", "from-mprun")
	o, err := parse([]string{"-n", "3", "-genv", "A", "1", "-genv", "B=2", "-x", "MPRUN_TEST_X", "-x", "C=3", "--", "prog", "-genv", "D", "4"}, new(strings.Builder))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"A=1", "B=2", "MPRUN_TEST_X=from-mprun", "C=3"}; !slices.Equal(o.env, want) {
		t.Errorf("env %v, want %v", o.env, want)
	}
	if o.np != 3 || !slices.Equal(o.prog, []string{"prog", "-genv", "D", "4"}) {
		t.Errorf("np %d prog %v", o.np, o.prog)
	}
	for _, args := range [][]string{
		{"-ppn", "2", "-driver", "afxdp", "--", "prog"},
		{"-ppn", "-1", "--", "prog"},
		{"-hostfile", "h", "-nics", "2", "--", "prog"},
		{"-hostfile", "h", "-duplex", "--", "prog"},
		{"-hostfile", "h", "-launcher", " ", "--", "prog"},
		{"-genv", "=x", "--", "prog"},
	} {
		if _, err := parse(args, new(strings.Builder)); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
