package afpacket_test

import (
	"testing"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/nic/nictest"
)

// authPair is makePair behind frame authentication: what a job runs on.
func authPair(t testing.TB) nictest.Pair {
	p := makePair(t)
	key, err := auth.NewKey(auth.Secret{7}, jobKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*nic.Device{&p.A, &p.B} {
		if *d, err = auth.Wrap(*d, key, auth.Config{}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestConformanceAuthenticated runs the driver suite through the
// authentication wrapper: waits, interrupts, wake descriptors and thread
// waits must still reach the socket.
func TestConformanceAuthenticated(t *testing.T) { nictest.Run(t, authPair) }

// mpliteFrame is the frame of a 1-byte mplite message: the transport
// header (96 bytes), the envelope (40) and the byte.
const mpliteFrame = 137

// The ping-pongs of an mplite 1-byte message's frame, plain and
// authenticated (24 bytes more on the wire, sealed and verified): the
// difference is what authentication adds to the wire's half round trip.
func BenchmarkPingPongMPLite(b *testing.B) { nictest.BenchPingPong(b, makePair(b), mpliteFrame) }
func BenchmarkPingPongMPLiteAuth(b *testing.B) {
	nictest.BenchPingPong(b, authPair(b), mpliteFrame)
}
func BenchmarkStream64Auth(b *testing.B) { nictest.BenchStream(b, authPair(b), 64) }
