package test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// guideBlock is a shell block of docs/cluster.md marked to run on a host:
// "```sh host1", "```sh host2", "```sh host2 background".
type guideBlock struct {
	host       int // 0 for host1
	background bool
	script     string
	line       int
}

func readGuide(t *testing.T, path string) []guideBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []guideBlock
	var cur *guideBlock
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case cur != nil && l == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.script += l + "\n"
		case strings.HasPrefix(l, "```sh host"):
			f := strings.Fields(strings.TrimPrefix(l, "```sh "))
			b := &guideBlock{line: n}
			switch f[0] {
			case "host1":
			case "host2":
				b.host = 1
			default:
				t.Fatalf("%s:%d: unknown host %q", path, n, f[0])
			}
			b.background = len(f) > 1 && f[1] == "background"
			cur = b
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// TestClusterGuide follows docs/cluster.md's "Two hosts from nothing" on two
// namespace hosts that look like the guide's (198.18.0.1 and .2, eth0,
// host2's MAC 02:45:56:00:00:01): every block marked for a host runs as
// written, in that host's namespace, with the programs the guide builds on
// PATH and an ssh that enters the other namespace. Each must succeed, and
// every run of hello must print what the guide shows.
func TestClusterGuide(t *testing.T) {
	needRoot(t)
	needTools(t, "mpiexec.mpich", "mpirun.openmpi")
	blocks := readGuide(t, "../docs/cluster.md")
	if len(blocks) < 5 {
		t.Fatalf("docs/cluster.md has %d runnable blocks; the walkthrough lost its markers", len(blocks))
	}
	tb := switchTestbed(t, 2, "guide")
	if got := tb.Host(1).MACs[0].String(); got != "02:45:56:00:00:01" || tb.Host(0).IPs[0].String() != "198.18.0.1" {
		t.Fatalf("testbed host2 MAC %s, host1 %s: no longer what the guide shows", got, tb.Host(0).IPs[0])
	}
	bin := t.TempDir()
	for _, p := range []string{"netpipe", "mprun"} {
		if err := os.Symlink(built.path(t, p), filepath.Join(bin, p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(sshLike(t, tb), filepath.Join(bin, "ssh")); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.Symlink(built.path(t, "hello"), filepath.Join(work, "hello")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"),
		// The test runs as root, which Open MPI refuses unless told.
		"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	type bg struct {
		b   guideBlock
		cmd *exec.Cmd
		out *strings.Builder
	}
	var background []bg
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, b := range blocks {
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", tb.Host(b.host).Name, "sh", "-ec", b.script)
		cmd.Dir, cmd.Env, cmd.WaitDelay = work, env, 5*time.Second
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if b.background {
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			background = append(background, bg{b, cmd, out})
			time.Sleep(500 * time.Millisecond) // as a reader would, before the next host's step
			continue
		}
		err := cmd.Run()
		t.Logf("docs/cluster.md:%d on host%d:\n%s%s", b.line, b.host+1, b.script, out)
		if err != nil {
			t.Fatalf("docs/cluster.md:%d failed on host%d: %v", b.line, b.host+1, err)
		}
		if strings.Contains(b.script, "./hello") && !strings.Contains(out.String(), `rank 0 got "hello from rank 1 of 2"`) {
			t.Errorf("docs/cluster.md:%d: hello printed no greeting", b.line)
		}
	}
	for _, g := range background {
		err := g.cmd.Wait()
		t.Logf("docs/cluster.md:%d on host%d (background):\n%s%s", g.b.line, g.b.host+1, g.b.script, g.out)
		if err != nil {
			t.Errorf("docs/cluster.md:%d failed on host%d: %v", g.b.line, g.b.host+1, err)
		}
	}
}
