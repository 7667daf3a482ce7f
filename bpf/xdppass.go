package bpf

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// AttachXDPPass attaches a trivial XDP_PASS program to ifindex in the current
// thread's network namespace, through a BPF link with the kernel's choice of
// mode. A veth needs an XDP program on its peer before native-mode XDP can
// redirect frames into it. Close the returned closer to detach and free it.
func AttachXDPPass(ifindex int) (io.Closer, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("bpf: xdp pass %d: remove memlock limit: %w", ifindex, err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "ev_xdp_pass",
		Type:         ebpf.XDP,
		License:      "Dual MIT/GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpPass), asm.Return()},
	})
	if err != nil {
		return nil, fmt.Errorf("bpf: xdp pass %d: load program: %w", ifindex, err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex})
	if err != nil {
		prog.Close()
		return nil, fmt.Errorf("bpf: xdp pass %d: attach: %w", ifindex, err)
	}
	return &xdpPassCloser{prog: prog, lnk: l}, nil
}

type xdpPassCloser struct {
	mu   sync.Mutex
	prog *ebpf.Program
	lnk  link.Link
}

// Close detaches and frees the program; it is idempotent.
func (x *xdpPassCloser) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.lnk == nil {
		return nil
	}
	err := errors.Join(x.lnk.Close(), x.prog.Close())
	x.lnk, x.prog = nil, nil
	if err != nil {
		return fmt.Errorf("bpf: xdp pass: close: %w", err)
	}
	return nil
}
