package vi

import (
	"testing"
	"time"
)

// TestAckReqDelayDefaults: zero takes DefaultAckReqDelay, negative means at
// once and stays negative, so that filled-in options keep their meaning
// (bonding.Options embeds these and fills them in the same way).
func TestAckReqDelayDefaults(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{0, DefaultAckReqDelay},
		{-1, -1},
		{5 * time.Microsecond, 5 * time.Microsecond},
	} {
		o, err := Options{AckReqDelay: c.in}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if o.AckReqDelay != c.want {
			t.Errorf("AckReqDelay %v: filled in as %v, want %v", c.in, o.AckReqDelay, c.want)
		}
		again, _ := o.withDefaults()
		if again.AckReqDelay != o.AckReqDelay {
			t.Errorf("AckReqDelay %v: %v, then %v filled in again", c.in, o.AckReqDelay, again.AckReqDelay)
		}
	}
}
