package bootstrap

import (
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/nic/memnic"
)

// TestStormWithoutSecret: with the ranks behind the job's secret, a
// stranger that claims every rank, and a job of another size, from before
// the first real announcement and all through, changes nothing: every
// rank finds the real addresses, and counts the stranger's frames as
// refused for their tag. (Without the secret, a claim heard before the
// real rank's is believed: TestStrangerAnnouncements.)
func TestStormWithoutSecret(t *testing.T) {
	ps := ports(t, 4, memnic.Faults{}, 11)
	secret, err := auth.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	key, err := auth.NewKey(secret, job)
	if err != nil {
		t.Fatal(err)
	}
	real := make([]nic.Device, 3)
	for i := range real {
		if real[i], err = auth.Wrap(ps[i], key, auth.Config{}); err != nil {
			t.Fatal(err)
		}
	}
	stop, done := make(chan struct{}), make(chan int, 1)
	go stranger(ps[3], len(real), stop, done)
	time.Sleep(20 * time.Millisecond) // the stranger's claims come first
	rs := discoverOn(real, func(int) time.Duration { return 0 }, 10*time.Second)
	close(stop)
	sent := <-done
	checkAll(t, ps[:len(real)], rs)
	for r := range real {
		if s := real[r].Stats(); s.RxBadTag == 0 {
			t.Errorf("rank %d refused none of the stranger's %d announcements", r, sent)
		}
	}
}

// stranger sends announcements without the secret until stop closes.
func stranger(dev nic.Device, size int, stop <-chan struct{}, done chan<- int) {
	self, _ := nic.MAC(dev.HardwareAddr())
	out := make([]byte, msgLen)
	sent := 0
	for i := 0; ; i++ {
		select {
		case <-stop:
			done <- sent
			return
		default:
		}
		claim := size
		if i%2 == 0 {
			claim = 99 // another job's size
		}
		s := &state{cfg: Config{Rank: i % size, Size: claim, JobKey: job, EtherType: nic.DefaultEtherType},
			addrs: make([]nic.Addr, claim), heard: make([]bool, claim), done: make([]bool, claim)}
		s.announce(out, self)
		if n, _ := dev.Send([][]byte{out}); n == 1 {
			sent++
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestPutParse(t *testing.T) {
	want := Announcement{Src: [6]byte{2, 0, 0, 0, 0, 9}, Endpoint: 3, Rank: 5, Size: 8, Rail: 1, Done: true}
	out := make([]byte, FrameLen)
	Put(out, want, nic.DefaultEtherType, job)
	got, err := Parse(out)
	if err != nil || got != want {
		t.Fatalf("Parse(Put(%+v)) = %+v, %v", want, got, err)
	}
}
