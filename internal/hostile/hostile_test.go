package hostile

import (
	"math/rand/v2"
	"testing"

	"github.com/ethervia/ethervia/mplite/bootstrap"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/reliability"
)

// TestRound: a round replays a captured frame byte for byte, resends it
// without its tag under a good CRC, claims a rank's address, floods from a
// made-up one, sends a datagram and, if asked, an announcement; the
// attacker never keeps its own frames.
func TestRound(t *testing.T) {
	a := &Attacker{Job: 9, Self: [6]byte{2, 0, 0, 0, 0, 99}, Ranks: [][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {2, 0, 0, 0, 0, 3}}}
	genuine := make([]byte, reliability.HeaderLen+10+auth.TrailerLen)
	reliability.Put(genuine, &reliability.Header{Dst: a.Ranks[1], Src: a.Ranks[0], EtherType: nic.DefaultEtherType,
		Kind: reliability.KindData, JobKey: 9, Length: 10})
	a.Capture(genuine)
	own := make([]byte, 64)
	copy(own[6:12], a.Self[:])
	a.Capture(own)
	if len(a.Captured) != 1 {
		t.Fatalf("%d frames kept, want the genuine one only", len(a.Captured))
	}
	out := a.Round(rand.New(rand.NewPCG(1, 1)), true)
	if len(out) != 6 {
		t.Fatalf("%d frames in a round, want 6", len(out))
	}
	if string(out[0]) != string(genuine) {
		t.Error("the replay differs from the captured frame")
	}
	var h reliability.Header
	if err := reliability.Parse(out[1], &h); err != nil || len(out[1]) != len(genuine)-auth.TrailerLen {
		t.Errorf("the frame without its tag: %d bytes, parse %v", len(out[1]), err)
	}
	if err := reliability.Parse(out[2], &h); err != nil || h.Kind != reliability.KindPeerReq || h.Src != a.Ranks[2] || h.Dst != a.Ranks[1] {
		t.Errorf("impersonation: %+v, %v", h, err)
	}
	if err := reliability.Parse(out[3], &h); err != nil || h.Kind != reliability.KindConnReq {
		t.Errorf("flood: %+v, %v", h, err)
	}
	if ann, err := bootstrap.Parse(out[5]); err != nil || ann.Src != a.Self {
		t.Errorf("announcement: %+v, %v", ann, err)
	}
}
