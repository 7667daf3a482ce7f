package bonding

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic/memnic"
)

// railWaitsInCQ counts the rail goroutines asleep in a rail CQ wait (in
// the rail provider's wait loop, where they may sleep in the device), from
// a dump of every goroutine's stack.
func railWaitsInCQ(buf []byte) int {
	n := runtime.Stack(buf, true)
	count := 0
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "bonding.(*VI).railWaiter") && strings.Contains(g, "vi.(*Provider).wait") {
			count++
		}
	}
	return count
}

// untilRailWaits waits up to 5 s for n rail goroutines to be in CQ waits.
func untilRailWaits(t *testing.T, buf []byte, what string, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); railWaitsInCQ(buf) != n; {
		if time.Now().After(end) {
			t.Fatalf("%s: still not so after 5 s (%d rail goroutines in CQ waits, want %d)", what, railWaitsInCQ(buf), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRailGoroutinesStepAside: with nobody polling, each rail goroutine
// waits on its rail's CQ; once a waiter spins, they leave those waits (and
// the devices) and park, rather than staying in them until a frame comes.
// A rail goroutine asleep in a device holds a P in a system call, which a
// spinner locked to its thread, after a preemption, may wait for until the
// runtime takes it back (up to 10 ms: ping-pong stalls of that size over
// several rails).
func TestRailGoroutinesStepAside(t *testing.T) {
	const k = 3
	a, b := memPair(t, k, 1500, memnic.Faults{}, testOptions(), 1<<20)
	va, vb := a.newVI(t, Attributes{}), b.newVI(t, Attributes{})
	connect(t, a, b, va, vb, 41)
	buf := make([]byte, 1<<20)

	// Both VIs idle: every rail goroutine (k per VI) comes to wait on its
	// rail's CQ.
	untilRailWaits(t, buf, "idle VIs' rail goroutines wait on their CQs", 2*k)

	// A waiter on va spins: va's rail goroutines leave their waits (each
	// within one device wait); vb's stay.
	va.pollers.Add(1)
	untilRailWaits(t, buf, "va's rail goroutines step aside for a spinner", k)
	time.Sleep(20 * time.Millisecond)
	if n := railWaitsInCQ(buf); n != k {
		t.Fatalf("%d rail goroutines in CQ waits while va spins, want vb's %d", n, k)
	}

	// The spinner gives up and blocks: they take over again.
	va.doneSpinning(true)
	untilRailWaits(t, buf, "va's rail goroutines return to their CQs", 2*k)
}

// TestRailGoroutinesStepAsideForPolls: a caller that polls in its own
// loop (RecvDone, CQ.Done: mplite's progress engine) is a spinner too.
// While its polls keep coming the rail goroutines leave their CQ waits,
// rather than being woken by every frame to race it for the VI; once it
// stops they return by themselves.
func TestRailGoroutinesStepAsideForPolls(t *testing.T) {
	const k = 2
	a, b := memPair(t, k, 1500, memnic.Faults{}, testOptions(), 1<<20)
	cq, err := a.b.NewCQ(4096)
	if err != nil {
		t.Fatal(err)
	}
	va, vb := a.newVI(t, Attributes{RecvCQ: cq}), b.newVI(t, Attributes{})
	connect(t, a, b, va, vb, 42)
	buf := make([]byte, 1<<20)
	untilRailWaits(t, buf, "idle VIs' rail goroutines wait on their CQs", 2*k)

	for _, poll := range []struct {
		name string
		f    func()
	}{
		{"RecvDone", func() { va.RecvDone() }},
		{"SendDone", func() { va.SendDone() }},
		{"CQ.Done", func() { cq.Done() }},
	} {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				poll.f()
				time.Sleep(50 * time.Microsecond)
			}
		}()
		untilRailWaits(t, buf, poll.name+": va's rail goroutines step aside for a caller that polls", k)
		time.Sleep(30 * time.Millisecond)
		if n := railWaitsInCQ(buf); n != k {
			close(stop)
			<-done
			t.Fatalf("%s: %d rail goroutines in CQ waits while va is polled, want vb's %d", poll.name, n, k)
		}
		close(stop)
		<-done
		untilRailWaits(t, buf, poll.name+": va's rail goroutines return to their CQs once the polls stop", 2*k)
	}
}
