package test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/internal/hostile"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/afpacket"
	"github.com/ethervia/ethervia/nic/auth"
)

// hubAttacker is a host on the job's bridge, which floods it every frame
// (ageing 0: the bridge learns nothing), without the job's secret. It
// keeps what it sees and sends a round of hostile frames (package
// hostile), bootstrap announcements included, every 500µs.
type hubAttacker struct {
	dev  nic.Device
	h    hostile.Attacker
	sent int64 // read once done is closed
	stop chan struct{}
	done chan struct{}
}

func (a *hubAttacker) run(seed uint64) {
	defer close(a.done)
	a.sent = a.h.Run(a.dev, seed, true, 500*time.Microsecond, a.stop)
}

// TestAttackerOnTheSwitch runs mpitest (every byte checked, multicast
// Bcasts included) on four namespace hosts that find each other by
// broadcast, while a fifth host on the same bridge, without the secret,
// attacks from before the first rank starts to after the last ends. A
// second job with the same job key and a new secret then runs while the
// attacker also replays the first job's frames. Both jobs pass, and every
// rank counts the attacker's frames as refused.
func TestAttackerOnTheSwitch(t *testing.T) {
	needRoot(t)
	const n = 4
	tb := switchTestbed(t, n+1, "atk")
	if out, err := exec.Command("ip", "netns", "exec", tb.SwitchNamespace(0), "ip", "link", "set", "br0", "type", "bridge", "ageing_time", "0").CombinedOutput(); err != nil {
		t.Fatalf("make the bridge a hub: %v: %s", err, out)
	}
	const job = 0xa77ac
	var dev nic.Device
	if err := tb.Host(n).Do(func() (err error) {
		dev, err = afpacket.Open(afpacket.Config{Config: nic.Config{JobKey: job}, Iface: tb.Host(n).Ifaces[0]})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	ranks := make([][6]byte, n)
	for i := range ranks {
		ranks[i], _ = nic.MAC(tb.Host(i).MACs[0])
	}
	mpitest := built.path(t, "mpitest")
	refused := regexp.MustCompile(`mpitest: rank (\d+) of \d+: authenticated, refused (\d+) frames for their tag and (\d+) replays`)
	var former [][]byte
	for round := 1; round <= 2; round++ {
		t.Run(fmt.Sprintf("job%d", round), func(t *testing.T) {
			secret, err := auth.NewSecret()
			if err != nil {
				t.Fatal(err)
			}
			self, _ := nic.MAC(dev.HardwareAddr())
			atk := &hubAttacker{dev: dev, h: hostile.Attacker{Job: job, Self: self, Ranks: ranks, Replay: former},
				stop: make(chan struct{}), done: make(chan struct{})}
			go atk.run(uint64(round))
			stopped := false
			stop := func() {
				if !stopped {
					stopped = true
					close(atk.stop)
					<-atk.done
				}
			}
			defer stop()
			time.Sleep(100 * time.Millisecond) // the storm comes first
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			outs := make([][]byte, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				cmd := exec.CommandContext(ctx, "ip", "netns", "exec", tb.Host(i).Name, mpitest, "-max", "1048576")
				cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "MPLITE_RANK=" + strconv.Itoa(i), "MPLITE_SIZE=" + strconv.Itoa(n),
					"MPLITE_IFACES=" + tb.Host(i).Ifaces[0], "MPLITE_JOB=" + strconv.Itoa(job), "MPLITE_SECRET=" + secret.Hex(),
					"MPLITE_ALGO_BCAST=mcast-ack", "MPLITE_YIELD=1"}
				cmd.WaitDelay = 5 * time.Second
				wg.Add(1)
				go func() { defer wg.Done(); outs[i], errs[i] = cmd.CombinedOutput() }()
			}
			wg.Wait()
			stop()
			all := string(bytes.Join(outs, nil))
			for i, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", i, err)
				}
			}
			wantOK(t, all, n, n, `mpitest: rank %d of %d: ok`)
			var tags, replays int
			for _, m := range refused.FindAllStringSubmatch(all, -1) {
				b, _ := strconv.Atoi(m[2])
				r, _ := strconv.Atoi(m[3])
				if b == 0 {
					t.Errorf("rank %s refused no frame for its tag", m[1])
				}
				tags, replays = tags+b, replays+r
			}
			t.Logf("the attacker sent %d frames; the ranks refused %d for their tag and %d replays", atk.sent, tags, replays)
			if replays == 0 {
				t.Errorf("no replay refused")
			}
			if t.Failed() {
				t.Logf("output:\n%s", all)
			}
			// The next job is replayed this one's frames.
			former = atk.h.Captured
		})
	}
}
