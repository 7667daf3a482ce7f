// Package nstest helps the end-to-end tests of the commands that build
// testbeds (mprun, netpipe) look for, and remove, what a run left behind.
package nstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ethervia/ethervia/testbed"
)

// Leftovers lists the namespaces, and the links in this namespace, whose
// names carry tag, as `ip netns list` and `ip -o link` show them.
func Leftovers(t testing.TB, tag string) []string {
	t.Helper()
	var out []string
	for _, args := range [][]string{{"netns", "list"}, {"-o", "link"}} {
		b, err := exec.Command("ip", args...).Output()
		if err != nil {
			t.Fatalf("ip %s: %v", strings.Join(args, " "), err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, tag) {
				out = append(out, "ip "+strings.Join(args, " ")+": "+strings.TrimSpace(l))
			}
		}
	}
	return out
}

// Remove deletes the namespaces whose names carry tag, so that a failed
// test leaves nothing behind.
func Remove(tag string) {
	ents, _ := os.ReadDir(testbed.NetnsDir)
	for _, e := range ents {
		if strings.Contains(e.Name(), tag) {
			_ = exec.Command("ip", "netns", "delete", e.Name()).Run()
		}
	}
}
