package vi

import (
	"testing"
	"time"

	"github.com/ethervia/ethervia/reliability"
)

// TestBgNap: how long the provider's background goroutine naps while
// callers poll, with the default PollGrace and a raised one.
func TestBgNap(t *testing.T) {
	ms := func(f float64) reliability.Time { return reliability.Time(f * float64(time.Millisecond)) }
	def, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if def.PollGrace != DefaultPollGrace || def.MaxBlock != 2*time.Millisecond {
		t.Fatalf("defaults: PollGrace %v MaxBlock %v", def.PollGrace, def.MaxBlock)
	}
	quiet, err := Options{PollGrace: 10 * time.Millisecond, MaxBlock: 10 * time.Millisecond}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	now := ms(100)
	for _, c := range []struct {
		name       string
		o          Options
		last, next reliability.Time
		spinning   bool
		want       time.Duration
		active     bool
	}{
		// A timer due in 10us while a caller polls: the caller runs it.
		{"default, just polled, timer soon", def, now, now + ms(0.01), false, DefaultPollGrace, true},
		{"default, spinning, timer soon", def, ms(0), now + ms(0.01), true, DefaultPollGrace, true},
		{"default, polled 1ms ago, timer soon", def, now - ms(1), now + ms(0.01), false, 10 * time.Microsecond, true},
		{"default, polled 1ms ago, no timer", def, now - ms(1), now + ms(50), false, 2 * time.Millisecond, true},
		{"default, polled 3ms ago", def, now - ms(3), now + ms(0.01), false, 0, false},
		{"quiet, just polled, timer soon", quiet, now, now + ms(0.01), false, 10 * time.Millisecond, true},
		{"quiet, spinning, no timer", quiet, ms(0), now + ms(50), true, 10 * time.Millisecond, true},
		{"quiet, polled 5ms ago", quiet, now - ms(5), now + ms(0.01), false, 10 * time.Millisecond, true},
		{"quiet, polled 11ms ago", quiet, now - ms(11), now + ms(0.01), false, 0, false},
	} {
		got, active := c.o.bgNap(now, c.last, c.next, c.spinning)
		if active != c.active || (active && got != c.want) {
			t.Errorf("%s: nap %v active %v, want %v %v", c.name, got, active, c.want, c.active)
		}
	}
}
