// Package nictest is the conformance suite and the benchmarks that every
// nic.Device driver runs, so all drivers are held to the same contract.
package nictest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"runtime"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
)

// Pair is two devices of one driver that can reach each other, opened with
// the same EtherType and job key.
type Pair struct {
	A, B      nic.Device
	EtherType uint16
	JobKey    uint32
}

// Maker builds a fresh Pair for one test and registers its cleanup with t.
type Maker func(t testing.TB) Pair

// Run runs the conformance suite.
func Run(t *testing.T, mk Maker) {
	t.Run("BatchesBothWays", func(t *testing.T) { testBatches(t, mk(t)) })
	t.Run("EverySize", func(t *testing.T) { testEverySize(t, mk(t)) })
	t.Run("ForeignFramesRefused", func(t *testing.T) { testForeign(t, mk(t)) })
	t.Run("CloseUnblocksWait", func(t *testing.T) { testCloseUnblocks(t, mk(t)) })
	t.Run("WaitDeadline", func(t *testing.T) { testWaitDeadline(t, mk(t)) })
	t.Run("RecvBesideWait", func(t *testing.T) { testRecvBesideWait(t, mk(t)) })
	t.Run("OversizeRefused", func(t *testing.T) { testOversize(t, mk(t)) })
	t.Run("NoAllocations", func(t *testing.T) { testAllocs(t, mk(t)) })
	t.Run("InterruptEndsWait", func(t *testing.T) { testInterrupt(t, mk(t)) })
	t.Run("WaitThread", func(t *testing.T) { testWaitThread(t, mk(t)) })
	t.Run("WakeFDEndsWait", func(t *testing.T) { testWakeFD(t, mk(t)) })
}

// Frame writes an Ethervia frame from src to dst into b: the prefix, then
// seq, then a pattern derived from seq, so any damaged byte is detectable.
func Frame(b []byte, p Pair, dst, src nic.Device, seq uint32) {
	d, _ := nic.MAC(dst.HardwareAddr())
	s, _ := nic.MAC(src.HardwareAddr())
	nic.PutPrefix(b, &nic.Prefix{Dst: d, Src: s, EtherType: p.EtherType, Version: nic.Version, JobKey: p.JobKey})
	if len(b) >= nic.PrefixLen+4 {
		binary.BigEndian.PutUint32(b[nic.PrefixLen:], seq)
	}
	for i := nic.PrefixLen + 4; i < len(b); i++ {
		b[i] = byte(uint32(i)*7 + seq)
	}
}

// Check reports whether b is exactly the frame Frame wrote for seq.
func Check(b []byte, p Pair, dst, src nic.Device, seq uint32) error {
	want := make([]byte, len(b))
	Frame(want, p, dst, src, seq)
	if !bytes.Equal(b, want) {
		return fmt.Errorf("frame %d (%d bytes) damaged", seq, len(b))
	}
	return nil
}

// Receiver gathers frames from a device with spin-then-block.
type Receiver struct {
	Dev  nic.Device
	bufs [][]byte
	lens []int
}

// NewReceiver allocates batch buffers for d.
func NewReceiver(d nic.Device) *Receiver {
	r := &Receiver{Dev: d, bufs: make([][]byte, d.BatchSize()), lens: make([]int, d.BatchSize())}
	for i := range r.bufs {
		r.bufs[i] = make([]byte, nic.RecvBufLen(d.MTU()))
	}
	return r
}

// Collect receives until want frames have arrived or nothing arrives for
// idle, and returns copies of them.
func (r *Receiver) Collect(t testing.TB, want int, idle time.Duration) [][]byte {
	t.Helper()
	var got [][]byte
	for len(got) < want {
		n, err := r.Dev.Recv(r.bufs, r.lens)
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		for i := 0; i < n; i++ {
			got = append(got, append([]byte(nil), r.bufs[i][:r.lens[i]]...))
		}
		if n == 0 {
			if err := r.Dev.Wait(time.Now().Add(idle)); err != nil {
				if errors.Is(err, nic.ErrTimeout) {
					if n, _ := r.Dev.Recv(r.bufs, r.lens); n == 0 {
						return got
					} else {
						for i := 0; i < n; i++ {
							got = append(got, append([]byte(nil), r.bufs[i][:r.lens[i]]...))
						}
					}
					continue
				}
				t.Fatalf("wait: %v", err)
			}
		}
	}
	return got
}

// SendAll sends every frame of frames from d, failing t on an error.
func SendAll(t testing.TB, d nic.Device, frames [][]byte) {
	t.Helper()
	for len(frames) > 0 {
		n, err := d.Send(frames)
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		frames = frames[n:]
	}
}

func testBatches(t *testing.T, p Pair) {
	for _, dir := range []struct {
		name     string
		src, dst nic.Device
	}{{"AtoB", p.A, p.B}, {"BtoA", p.B, p.A}} {
		const n = 256
		frames := make([][]byte, n)
		for i := range frames {
			frames[i] = make([]byte, 64+i)
			Frame(frames[i], p, dir.dst, dir.src, uint32(i))
		}
		before := dir.dst.Stats()
		SendAll(t, dir.src, frames)
		got := NewReceiver(dir.dst).Collect(t, n, time.Second)
		if len(got) != n {
			t.Fatalf("%s: %d of %d frames arrived", dir.name, len(got), n)
		}
		for i, f := range got {
			if err := Check(f, p, dir.dst, dir.src, uint32(i)); err != nil {
				t.Fatalf("%s: %v", dir.name, err)
			}
		}
		st := dir.dst.Stats().Sub(before)
		if st.RxFrames != n {
			t.Fatalf("%s: RxFrames counted %d, want %d", dir.name, st.RxFrames, n)
		}
	}
}

func testEverySize(t *testing.T, p Pair) {
	lo, hi := nic.PrefixLen+4, p.A.MTU()+nic.EthHeaderLen
	if hb := p.B.MTU() + nic.EthHeaderLen; hb < hi {
		hi = hb
	}
	r := NewReceiver(p.B)

	seq := uint32(0)
	// Send in small groups so that no queue on the way can overflow.
	for size := lo; size <= hi; size += 16 {
		var batch [][]byte
		for s := size; s < size+16 && s <= hi; s++ {
			f := make([]byte, s)
			Frame(f, p, p.B, p.A, seq+uint32(len(batch)))
			batch = append(batch, f)
		}
		SendAll(t, p.A, batch)
		got := r.Collect(t, len(batch), time.Second)
		if len(got) != len(batch) {
			t.Fatalf("sizes %d..: %d of %d frames arrived", size, len(got), len(batch))
		}
		for i, f := range got {
			if len(f) != len(batch[i]) {
				t.Fatalf("frame of %d bytes arrived as %d bytes", len(batch[i]), len(f))
			}
			if err := Check(f, p, p.B, p.A, seq+uint32(i)); err != nil {
				t.Fatal(err)
			}
		}
		seq += uint32(len(batch))
	}

}

func testForeign(t *testing.T, p Pair) {
	mk := func(seq uint32, mod func([]byte)) []byte {
		f := make([]byte, 100)
		Frame(f, p, p.B, p.A, seq)
		if mod != nil {
			mod(f)
		}
		return f
	}
	foreign := [][]byte{
		mk(1, func(f []byte) { binary.BigEndian.PutUint32(f[nic.OffJobKey:], p.JobKey^0x10000) }),
		mk(2, func(f []byte) { binary.BigEndian.PutUint16(f[nic.OffEtherType:], p.EtherType+1) }),
		mk(3, func(f []byte) { f[nic.OffVersion] = nic.Version + 1 }),
		mk(4, func(f []byte) { binary.BigEndian.PutUint16(f[nic.OffEtherType:], 0x0806) }),
	}
	for round := 0; round < 50; round++ {
		SendAll(t, p.A, foreign)
	}
	good := mk(5, nil)
	SendAll(t, p.A, [][]byte{good})
	got := NewReceiver(p.B).Collect(t, 2, 200*time.Millisecond)
	if len(got) != 1 {
		t.Fatalf("%d frames delivered, want only the good one", len(got))
	}
	if err := Check(got[0], p, p.B, p.A, 5); err != nil {
		t.Fatal(err)
	}
}

func testCloseUnblocks(t *testing.T, p Pair) {
	done := make(chan error, 1)
	go func() { done <- p.B.Wait(time.Time{}) }()
	time.Sleep(20 * time.Millisecond)
	if err := p.B.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, nic.ErrClosed) {
			t.Fatalf("Wait after Close returned %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock a blocked Wait")
	}
	if err := p.B.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func testWaitDeadline(t *testing.T, p Pair) {
	start := time.Now()
	err := p.B.Wait(start.Add(20 * time.Millisecond))
	if !errors.Is(err, nic.ErrTimeout) {
		t.Fatalf("Wait with nothing to read returned %v, want ErrTimeout", err)
	}
	if time.Since(start) < 15*time.Millisecond {
		t.Fatal("Wait returned before its deadline")
	}
	// An expired Wait must leave the device usable.
	f := make([]byte, 64)
	Frame(f, p, p.B, p.A, 9)
	SendAll(t, p.A, [][]byte{f})
	got := NewReceiver(p.B).Collect(t, 1, time.Second)
	if len(got) != 1 {
		t.Fatal("no frame received after a Wait timed out")
	}
}

func testOversize(t *testing.T, p Pair) {
	f := make([]byte, nic.FrameCap(p.A.MTU())+1)
	Frame(f, p, p.B, p.A, 1)
	if _, err := p.A.Send([][]byte{f}); !errors.Is(err, nic.ErrFrameSize) {
		t.Fatalf("oversize send returned %v, want ErrFrameSize", err)
	}
}

func testAllocs(t *testing.T, p Pair) {
	f := make([]byte, 128)
	Frame(f, p, p.B, p.A, 1)
	frames := [][]byte{f}
	r := NewReceiver(p.B)
	roundTrip := func() {
		SendAll(t, p.A, frames)
		for {
			n, err := p.B.Recv(r.bufs, r.lens)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			if err := p.B.Wait(time.Now().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	roundTrip()
	if a := testing.AllocsPerRun(200, roundTrip); a != 0 {
		t.Fatalf("%v allocations per send+recv", a)
	}
	timeout := func() {
		if err := p.B.Wait(time.Now().Add(10 * time.Microsecond)); err != nil && !errors.Is(err, nic.ErrTimeout) {
			t.Fatal(err)
		}
	}
	if a := testing.AllocsPerRun(50, timeout); a != 0 {
		t.Fatalf("%v allocations per timed-out Wait", a)
	}
}

// testRecvBesideWait checks that a Wait with a short deadline in one
// goroutine never makes a Recv in another fail: a progress engine may block
// in the background while a user polls.
func testRecvBesideWait(t *testing.T, p Pair) {
	stop := make(chan struct{})
	waited := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				waited <- nil
				return
			default:
			}
			err := p.B.Wait(time.Now().Add(50 * time.Microsecond))
			if err != nil && !errors.Is(err, nic.ErrTimeout) {
				waited <- err
				return
			}
		}
	}()
	f := make([]byte, 64)
	Frame(f, p, p.B, p.A, 3)
	bufs, lens := [][]byte{make([]byte, nic.RecvBufLen(p.B.MTU()))}, []int{0}
	got := 0
	for i := 0; i < 200; i++ {
		SendAll(t, p.A, [][]byte{f})
		deadline := time.Now().Add(2 * time.Second)
		for {
			n, err := p.B.Recv(bufs, lens)
			if err != nil {
				close(stop)
				t.Fatalf("Recv beside a Wait failed: %v", err)
			}
			if n > 0 {
				got++
				break
			}
			if time.Now().After(deadline) {
				close(stop)
				t.Fatalf("frame %d never arrived", i)
			}
			runtime.Gosched()
		}
	}
	close(stop)
	if err := <-waited; err != nil {
		t.Fatalf("Wait failed: %v", err)
	}
}

// testInterrupt: Interrupt ends a blocked Wait with nil long before its
// deadline; one given before a Wait ends that Wait at once, and only that
// one; and an interrupted device still receives.
func testInterrupt(t *testing.T, p Pair) {
	in, ok := p.B.(nic.Interrupter)
	if !ok {
		t.Fatalf("%T does not implement nic.Interrupter", p.B)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- p.B.Wait(start.Add(10 * time.Second)) }()
	time.Sleep(20 * time.Millisecond)
	in.Interrupt()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("interrupted Wait returned %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Interrupt did not end a blocked Wait")
	}
	in.Interrupt()
	in.Interrupt()
	if err := p.B.Wait(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatalf("Wait after Interrupt returned %v, want nil at once", err)
	}
	if err := p.B.Wait(time.Now().Add(20 * time.Millisecond)); !errors.Is(err, nic.ErrTimeout) {
		t.Fatalf("second Wait after two Interrupts returned %v, want ErrTimeout", err)
	}
	if n := testing.AllocsPerRun(100, in.Interrupt); n != 0 {
		t.Fatalf("Interrupt allocates %v times", n)
	}
	if err := p.B.Wait(time.Now().Add(time.Second)); err != nil {
		t.Fatalf("Wait after many Interrupts returned %v, want nil", err)
	}
	f := make([]byte, 64)
	Frame(f, p, p.B, p.A, 11)
	SendAll(t, p.A, [][]byte{f})
	if got := NewReceiver(p.B).Collect(t, 1, time.Second); len(got) != 1 {
		t.Fatal("no frame received after Interrupts")
	}
}

// testWakeFD: a device that watches a caller's descriptor (nic.WakeFDWaiter)
// ends a blocked Wait, plain or on its thread, once the descriptor is
// readable; with it drained, or unset, Wait keeps its deadline.
func testWakeFD(t *testing.T, p Pair) {
	w, ok := p.B.(nic.WakeFDWaiter)
	if !ok {
		t.Skipf("%T does not implement nic.WakeFDWaiter", p.B)
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	w.SetWakeFD(fds[0])
	defer w.SetWakeFD(-1)
	if err := p.B.Wait(time.Now().Add(20 * time.Millisecond)); !errors.Is(err, nic.ErrTimeout) {
		t.Fatalf("Wait with an empty wake descriptor returned %v, want ErrTimeout", err)
	}
	waits := []func(time.Time) error{p.B.Wait}
	if tw, ok := p.B.(nic.ThreadWaiter); ok {
		waits = append(waits, tw.WaitThread)
	}
	for i, wait := range waits {
		done := make(chan error, 1)
		go func() { done <- wait(time.Now().Add(10 * time.Second)) }()
		time.Sleep(20 * time.Millisecond)
		if _, err := unix.Write(fds[1], []byte{1}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("wait %d: woken by its descriptor, returned %v, want nil", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("wait %d: a readable wake descriptor did not end it", i)
		}
		var b [8]byte
		if n, _ := unix.Read(fds[0], b[:]); n != 1 {
			t.Fatalf("drained %d bytes, want 1", n)
		}
	}
	w.SetWakeFD(-1)
	if _, err := unix.Write(fds[1], []byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := p.B.Wait(time.Now().Add(20 * time.Millisecond)); !errors.Is(err, nic.ErrTimeout) {
		t.Fatalf("Wait after SetWakeFD(-1) returned %v, want ErrTimeout", err)
	}
}

// testWaitThread: a device's WaitThread (nic.ThreadWaiter) keeps Wait's
// contract: nil at once for a waiting frame or an earlier Interrupt,
// ErrTimeout at its deadline, ErrClosed once closed, no allocations. (Its
// goroutine holds its P, so a frame from this process cannot arrive while
// it blocks; the frame is sent first.)
func testWaitThread(t *testing.T, p Pair) {
	tw, ok := p.B.(nic.ThreadWaiter)
	if !ok {
		t.Skipf("%T does not implement nic.ThreadWaiter", p.B)
	}
	// A signal (the runtime preempting the goroutine) may end a wait
	// early with nil, a hint like Wait's: the caller waits again.
	start := time.Now()
	for {
		err := tw.WaitThread(start.Add(20 * time.Millisecond))
		if errors.Is(err, nic.ErrTimeout) {
			break
		}
		if err != nil || time.Since(start) > time.Second {
			t.Fatalf("WaitThread with nothing to read returned %v after %v, want ErrTimeout", err, time.Since(start))
		}
	}
	if time.Since(start) < 15*time.Millisecond {
		t.Fatal("WaitThread timed out before its deadline")
	}
	f := make([]byte, 64)
	Frame(f, p, p.B, p.A, 3)
	SendAll(t, p.A, [][]byte{f})
	deadline := time.Now().Add(5 * time.Second)
	if err := tw.WaitThread(deadline); err != nil {
		t.Fatalf("WaitThread with a frame waiting returned %v", err)
	}
	if got := NewReceiver(p.B).Collect(t, 1, time.Second); len(got) != 1 {
		t.Fatal("no frame received after WaitThread")
	}
	if in, ok := p.B.(nic.Interrupter); ok {
		in.Interrupt()
		start = time.Now()
		if err := tw.WaitThread(start.Add(5 * time.Second)); err != nil || time.Since(start) > time.Second {
			t.Fatalf("WaitThread after Interrupt returned %v after %v, want nil at once", err, time.Since(start))
		}
	}
	past := time.Now().Add(-time.Second)
	if n := testing.AllocsPerRun(100, func() { _ = tw.WaitThread(past) }); n != 0 {
		t.Fatalf("WaitThread allocates %v times", n)
	}
	p.B.Close()
	if err := tw.WaitThread(time.Now().Add(time.Second)); !errors.Is(err, nic.ErrClosed) {
		t.Fatalf("WaitThread after Close returned %v, want ErrClosed", err)
	}
}
