package auth_test

import (
	"fmt"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/nic/memnic"
)

// Two ports of a job share a secret; a frame from a port without it is
// dropped and counted.
func Example() {
	secret, _ := auth.NewSecret() // the launcher's, handed to every rank
	key, _ := auth.NewKey(secret, 7)
	sw := memnic.NewSwitch(1)
	cfg := memnic.PortConfig{Config: nic.Config{JobKey: 7}}
	rawA, _ := sw.NewPort(cfg)
	rawB, _ := sw.NewPort(cfg)
	stranger, _ := sw.NewPort(cfg)
	a, _ := auth.Wrap(rawA, key, auth.Config{})
	b, _ := auth.Wrap(rawB, key, auth.Config{})
	defer a.Close()
	defer b.Close()
	defer stranger.Close()

	frame := func(text string) []byte {
		f := make([]byte, nic.PrefixLen+len(text))
		dst, _ := nic.MAC(b.HardwareAddr())
		src, _ := nic.MAC(a.HardwareAddr())
		nic.PutPrefix(f, &nic.Prefix{Dst: dst, Src: src, EtherType: nic.DefaultEtherType, Version: nic.Version, JobKey: 7})
		copy(f[nic.PrefixLen:], text)
		return f
	}
	stranger.Send([][]byte{frame("forged")})
	a.Send([][]byte{frame("genuine")})

	bufs, lens := [][]byte{make([]byte, nic.RecvBufLen(b.MTU()))}, []int{0}
	for {
		if n, _ := b.Recv(bufs, lens); n == 1 {
			break
		}
		b.Wait(time.Now().Add(time.Second))
	}
	fmt.Printf("%s; refused %d\n", bufs[0][nic.PrefixLen:lens[0]], b.Stats().RxBadTag)
	// Output: genuine; refused 1
}
