package bpf_test

import (
	"fmt"

	xbpf "golang.org/x/net/bpf"

	"github.com/ethervia/ethervia/bpf"
	"github.com/ethervia/ethervia/nic"
)

// SocketFilter builds the classic filter for an AF_PACKET socket (pass it as
// packet.Config.Filter). Here it runs in x/net/bpf's VM instead of the
// kernel.
func ExampleSocketFilter() {
	f := nic.Config{JobKey: 42}.Filter()
	raw, err := bpf.SocketFilter(f)
	if err != nil {
		panic(err)
	}
	insns, _ := xbpf.Disassemble(raw)
	vm, err := xbpf.NewVM(insns)
	if err != nil {
		panic(err)
	}

	frame := make([]byte, 64)
	nic.PutPrefix(frame, &nic.Prefix{EtherType: f.EtherType, Version: nic.Version, JobKey: 42})
	n, _ := vm.Run(frame)
	fmt.Println("our job:", n > 0)

	nic.PutPrefix(frame, &nic.Prefix{EtherType: f.EtherType, Version: nic.Version, JobKey: 43})
	n, _ = vm.Run(frame)
	fmt.Println("another job:", n > 0)
	// Output:
	// our job: true
	// another job: false
}
