package auth_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/nic/nictest"
)

// TestConformance runs the driver suite on authenticated memnic ports:
// the wrapper is a device like any other.
func TestConformance(t *testing.T) {
	key := newKey(t)
	nictest.Run(t, func(t testing.TB) nictest.Pair { return newBed(t, key, false).Pair })
}

func TestMTUAndOverhead(t *testing.T) {
	b := newBed(t, newKey(t), true)
	if got, want := b.A.MTU(), b.rawA.MTU()-auth.TrailerLen; got != want {
		t.Fatalf("MTU %d, want %d", got, want)
	}
	if auth.Overhead(b.A) != auth.TrailerLen || auth.Overhead(b.rawA) != 0 {
		t.Fatalf("Overhead: %d wrapped, %d raw", auth.Overhead(b.A), auth.Overhead(b.rawA))
	}
	if auth.Unwrap(b.A) != nic.Device(b.rawA) || auth.Unwrap(b.rawA) != nic.Device(b.rawA) {
		t.Fatal("Unwrap does not return the inner device")
	}
}

// TestOptionalInterfaces: the wrapper offers a wait interface exactly when
// the device under it does.
func TestOptionalInterfaces(t *testing.T) {
	b := newBed(t, newKey(t), true)
	_, in := b.A.(nic.Interrupter)
	_, tw := b.A.(nic.ThreadWaiter)
	_, wf := b.A.(nic.WakeFDWaiter)
	_, mc := b.A.(nic.Multicaster)
	_, rin := nic.Device(b.rawA).(nic.Interrupter)
	_, rtw := nic.Device(b.rawA).(nic.ThreadWaiter)
	_, rwf := nic.Device(b.rawA).(nic.WakeFDWaiter)
	if in != rin || tw != rtw || wf != rwf || !mc {
		t.Fatalf("wrapped: interrupt %v thread %v wakefd %v multicast %v; memnic: %v %v %v", in, tw, wf, mc, rin, rtw, rwf)
	}
}

// frameFor builds a 200-byte Ethervia frame from A to B carrying seq.
func frameFor(b *bed, seq uint32) []byte {
	f := make([]byte, 200)
	nictest.Frame(f, b.Pair, b.B, b.A, seq)
	return f
}

// TestForgedFramesDropped: frames with the right prefix and job key but no
// tag, or a tag under another job's secret, or a damaged byte, never reach
// the caller, and are counted.
func TestForgedFramesDropped(t *testing.T) {
	b := newBed(t, newKey(t), true)
	other := newBed(t, newKey(t), true) // another job, its own secret
	// A frame sealed under the other secret, as its wire carries it.
	send(t, other.A, frameFor(b, 99))
	stolen := nictest.NewReceiver(other.rogue).Collect(t, 1, time.Second)
	if len(stolen) != 1 {
		t.Fatalf("the other job's frame was not seen")
	}
	// Readdress it to b.B: same bytes otherwise.
	copy(stolen[0][0:12], frameFor(b, 0)[0:12])
	plain := frameFor(b, 1)                                            // no trailer at all
	short := frameFor(b, 2)[:nic.PrefixLen+3]                          // shorter than a trailer
	padded := append(frameFor(b, 3), make([]byte, auth.TrailerLen)...) // a zero tag
	send(t, b.rogue, plain, short, padded, stolen[0])
	// A genuine frame with one byte flipped on the way.
	if err := b.rawB.SetFaults(memnic.Faults{Corrupt: 1}); err != nil {
		t.Fatal(err)
	}
	send(t, b.A, frameFor(b, 4))
	if extra := nictest.NewReceiver(b.B).Collect(t, 1, 100*time.Millisecond); len(extra) != 0 {
		t.Fatalf("%d forged frames delivered", len(extra))
	}
	if s := b.B.Stats(); s.RxBadTag != 5 {
		t.Fatalf("RxBadTag %d, want 5 (plain, short, zero tag, other job, damaged)", s.RxBadTag)
	}
}

// TestReplayDropped: a frame captured off the wire and sent again is
// refused, however often, and the sender's later frames still pass.
func TestReplayDropped(t *testing.T) {
	b := newBed(t, newKey(t), true)
	for seq := range uint32(3) {
		send(t, b.A, frameFor(b, seq))
	}
	if got := nictest.NewReceiver(b.B).Collect(t, 3, time.Second); len(got) != 3 {
		t.Fatalf("%d of 3 genuine frames", len(got))
	}
	captured := nictest.NewReceiver(b.rogue).Collect(t, 3, 100*time.Millisecond)
	if len(captured) != 3 {
		t.Fatalf("the rogue captured %d frames", len(captured))
	}
	for range 4 {
		send(t, b.rogue, captured...)
	}
	if got := nictest.NewReceiver(b.B).Collect(t, 1, 100*time.Millisecond); len(got) != 0 {
		t.Fatalf("%d replayed frames delivered", len(got))
	}
	if s := b.B.Stats(); s.RxReplayed != 12 || s.RxBadTag != 0 {
		t.Fatalf("RxReplayed %d RxBadTag %d, want 12 and 0", s.RxReplayed, s.RxBadTag)
	}
	// The sender goes on as before.
	for seq := range uint32(5) {
		send(t, b.A, frameFor(b, 10+seq))
	}
	if got := nictest.NewReceiver(b.B).Collect(t, 5, time.Second); len(got) != 5 {
		t.Fatalf("%d of 5 frames", len(got))
	}
}

// TestPayloadIntact: what the receiver gets is the sender's frame, byte
// for byte, at every size the MTU allows.
func TestPayloadIntact(t *testing.T) {
	b := newBed(t, newKey(t), true)
	r := nictest.NewReceiver(b.B)
	for size := nic.PrefixLen + 4; size <= nic.EthHeaderLen+b.A.MTU(); size += 97 {
		f := make([]byte, size)
		nictest.Frame(f, b.Pair, b.B, b.A, uint32(size))
		send(t, b.A, f)
		got := r.Collect(t, 1, time.Second)
		if len(got) != 1 {
			t.Fatalf("size %d: no frame", size)
		}
		if err := nictest.Check(got[0], b.Pair, b.B, b.A, uint32(size)); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
	}
	too := make([]byte, nic.EthHeaderLen+b.A.MTU()+nic.VLANTagLen+1)
	nictest.Frame(too, b.Pair, b.B, b.A, 1)
	if _, err := b.A.Send([][]byte{too}); !errors.Is(err, nic.ErrFrameSize) {
		t.Fatalf("a frame beyond the MTU: %v, want ErrFrameSize", err)
	}
}

// TestMaxSenders: windows are kept for at most MaxSenders senders; the
// next sender's frames are refused, not a window allocated.
func TestMaxSenders(t *testing.T) {
	key := newKey(t)
	b := newBed(t, key, true)
	recv, err := auth.Wrap(b.rawB, key, auth.Config{MaxSenders: 1})
	if err != nil {
		t.Fatal(err)
	}
	send(t, b.A, frameFor(b, 1))
	if got := nictest.NewReceiver(recv).Collect(t, 1, time.Second); len(got) != 1 {
		t.Fatal("the first sender was refused")
	}
	// A second authenticated sender: the rogue's port, wrapped with the key.
	second, err := auth.Wrap(b.rogue, key, auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := frameFor(b, 2)
	copy(f[6:12], b.rogue.HardwareAddr())
	send(t, second, f)
	if got := nictest.NewReceiver(recv).Collect(t, 1, 100*time.Millisecond); len(got) != 0 {
		t.Fatal("a sender beyond MaxSenders was taken")
	}
	if s := recv.Stats(); s.RxReplayed != 1 {
		t.Fatalf("RxReplayed %d, want 1", s.RxReplayed)
	}
}

func TestSecretText(t *testing.T) {
	s, err := auth.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if p, err := auth.ParseSecret(s.Hex()); err != nil || p != s {
		t.Fatalf("ParseSecret(Hex()) = %v, %v", p, err)
	}
	if strings.Contains(fmt.Sprint(s), s.Hex()[:8]) || strings.Contains(fmt.Sprintf("%v", s), s.Hex()[:8]) {
		t.Fatal("printing a secret shows it")
	}
	for _, bad := range []string{"", "zz", s.Hex()[:62], s.Hex() + "00"} {
		if _, err := auth.ParseSecret(bad); !errors.Is(err, auth.ErrSecret) {
			t.Errorf("ParseSecret(%q) = %v, want ErrSecret", bad, err)
		}
	}
}
