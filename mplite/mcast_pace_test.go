package mplite

import (
	"testing"
	"time"

	"github.com/ethervia/ethervia/vi"
)

// TestPacerMakesUpLostTime: a paced sender that was off the CPU may send
// what the line could have carried in the last `behind` on top of what it
// may run ahead, and no more however long it was away.
func TestPacerMakesUpLostTime(t *testing.T) {
	// A frame takes 100 ms on this line, so that a test descheduled for
	// a while still sees the same room.
	const frame = 1000 // payload bytes of a full frame
	bt := 100 * time.Microsecond
	p := mcPacer{byteTime: bt, over: 0, full: frame * bt, ahead: 3 * frame * bt, behind: 2 * frame * bt}
	// Never sent: ahead plus behind, 5 frames (a batch at most).
	if got, want := p.room(), min(5, vi.DatagramBatch); got != want {
		t.Fatalf("fresh pacer: room %d frames, want %d", got, want)
	}
	// Away for a long time after sending: the clock lags by behind at
	// most, whatever it was.
	p.due = time.Now().Add(-time.Hour)
	before := time.Now()
	p.sent(frame, 1)
	if lag := before.Sub(p.due); lag > p.behind {
		t.Fatalf("after a long absence the clock lags %v, want at most behind (%v)", lag, p.behind)
	}
	if got := p.room(); got != 4 {
		t.Fatalf("after one frame of five: room %d, want 4", got)
	}
	// Up to the ahead limit: no room, and a wait of about half of it.
	p.sent(5*frame, 5)
	if got := p.room(); got != 0 {
		t.Fatalf("clock %v ahead: room %d, want 0", time.Until(p.due), got)
	}
	if w := p.wait(); w <= 0 || w > p.ahead {
		t.Fatalf("wait %v, want in (0, %v]", w, p.ahead)
	}
	// Unpaced: a whole batch, never a wait.
	var u mcPacer
	u.sent(frame, 1)
	if u.room() != vi.DatagramBatch || u.wait() != 0 {
		t.Fatalf("unpaced pacer: room %d wait %v", u.room(), u.wait())
	}
}
