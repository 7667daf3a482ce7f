package auth_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/nic/memnic"
)

// FuzzReceive sends arbitrary bytes, as a host without the secret would,
// to an authenticating port, then a genuine frame: nothing forged may come
// out, and the genuine frame must, intact.
func FuzzReceive(f *testing.F) {
	f.Add(make([]byte, 60))
	f.Add(make([]byte, nic.PrefixLen+auth.TrailerLen))
	f.Add(bytes.Repeat([]byte{0xff}, 300))
	key, err := auth.NewKey(auth.Secret{1, 2, 3}, jobKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sw := memnic.NewSwitch(1)
		cfg := memnic.PortConfig{Config: nic.Config{JobKey: jobKey}}
		rawA, _ := sw.NewPort(cfg)
		rawB, _ := sw.NewPort(cfg)
		rogue, _ := sw.NewPort(cfg)
		defer rawA.Close()
		defer rawB.Close()
		defer rogue.Close()
		a, _ := auth.Wrap(rawA, key, auth.Config{})
		b, _ := auth.Wrap(rawB, key, auth.Config{})
		dst, _ := nic.MAC(b.HardwareAddr())
		src, _ := nic.MAC(a.HardwareAddr())
		forged := make([]byte, min(nic.PrefixLen+len(body), nic.EthHeaderLen+rawA.MTU()))
		nic.PutPrefix(forged, &nic.Prefix{Dst: dst, Src: src, EtherType: nic.DefaultEtherType, Version: nic.Version, JobKey: jobKey})
		copy(forged[nic.PrefixLen:], body)
		if _, err := rogue.Send([][]byte{forged}); err != nil {
			t.Fatal(err)
		}
		genuine := make([]byte, 100)
		nic.PutPrefix(genuine, &nic.Prefix{Dst: dst, Src: src, EtherType: nic.DefaultEtherType, Version: nic.Version, JobKey: jobKey})
		genuine[99] = 7
		if _, err := a.Send([][]byte{genuine}); err != nil {
			t.Fatal(err)
		}
		bufs, lens := [][]byte{make([]byte, nic.RecvBufLen(b.MTU())), make([]byte, nic.RecvBufLen(b.MTU()))}, []int{0, 0}
		var got [][]byte
		deadline := time.Now().Add(time.Second)
		for len(got) < 1 && time.Now().Before(deadline) {
			n, err := b.Recv(bufs, lens)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				got = append(got, append([]byte(nil), bufs[i][:lens[i]]...))
			}
		}
		if len(got) != 1 || !bytes.Equal(got[0], genuine) {
			t.Fatalf("got %d frames (want the genuine one only)", len(got))
		}
		if s := b.Stats(); s.RxBadTag != 1 {
			t.Fatalf("RxBadTag %d, want 1", s.RxBadTag)
		}
	})
}
