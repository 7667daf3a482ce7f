package bonding

import (
	"testing"
	"time"

	"github.com/ethervia/ethervia/vi"
)

// TestAckReqDelayDefaults: AckReqDelay means in a bond what it means in
// vi.Options (zero: DefaultAckReqDelay, negative: at once), and options
// with their defaults filled in (Bond.Options) keep that meaning.
func TestAckReqDelayDefaults(t *testing.T) {
	if DefaultAckReqDelay < vi.DefaultAckReqDelay {
		t.Fatalf("DefaultAckReqDelay %v below vi's %v", DefaultAckReqDelay, vi.DefaultAckReqDelay)
	}
	for _, c := range []struct{ in, want time.Duration }{
		{0, DefaultAckReqDelay},
		{-1, -1},
		{5 * time.Microsecond, 5 * time.Microsecond},
	} {
		var o Options
		o.AckReqDelay = c.in
		o, err := o.withDefaults(2)
		if err != nil {
			t.Fatal(err)
		}
		if o.AckReqDelay != c.want {
			t.Errorf("AckReqDelay %v: filled in as %v, want %v", c.in, o.AckReqDelay, c.want)
		}
		again, _ := o.withDefaults(2)
		if again.AckReqDelay != o.AckReqDelay {
			t.Errorf("AckReqDelay %v: %v, then %v filled in again", c.in, o.AckReqDelay, again.AckReqDelay)
		}
	}
}
