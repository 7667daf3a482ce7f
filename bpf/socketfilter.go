package bpf

import (
	"errors"
	"fmt"

	"golang.org/x/net/bpf"

	"github.com/ethervia/ethervia/nic"
)

// socketAccept is the classic BPF return value that keeps a frame whole (the
// kernel trims it to the frame's length).
const socketAccept = 0xffffffff

// SocketFilter returns a classic BPF program (golang.org/x/net/bpf raw
// instructions, as taken by github.com/mdlayher/packet's Config.Filter) that
// accepts a frame only if it has at least nic.PrefixLen bytes, its EtherType
// at offset 12 equals f.EtherType, the byte at 14 equals nic.Version and the
// big-endian uint32 at 18 equals f.JobKey. Accepted frames are kept whole.
//
// It does not look behind VLAN tags: on Linux, AF_PACKET sockets see frames
// with the tag already moved to metadata.
func SocketFilter(f nic.Filter) ([]bpf.RawInstruction, error) {
	if f.EtherType == 0 {
		return nil, errors.New("bpf: socket filter: EtherType 0 (use nic.Config.Filter for defaults)")
	}
	// Jump offsets count instructions to skip; "reject" is the last one.
	prog := []bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtLen},
		bpf.JumpIf{Cond: bpf.JumpLessThan, Val: nic.PrefixLen, SkipTrue: 7},
		bpf.LoadAbsolute{Off: nic.OffEtherType, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(f.EtherType), SkipTrue: 5},
		bpf.LoadAbsolute{Off: nic.OffVersion, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nic.Version, SkipTrue: 3},
		bpf.LoadAbsolute{Off: nic.OffJobKey, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: f.JobKey, SkipTrue: 1},
		bpf.RetConstant{Val: socketAccept},
		bpf.RetConstant{Val: 0},
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("bpf: socket filter: assemble: %w", err)
	}
	return raw, nil
}
