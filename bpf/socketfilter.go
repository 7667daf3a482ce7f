package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/ethervia/ethervia/nic"
)

// socketAccept is the classic BPF return value that keeps a frame whole (the
// kernel trims it to the frame's length).
const socketAccept = 0xffffffff

// SocketFilter returns a classic BPF program (golang.org/x/net/bpf raw
// instructions, as taken by github.com/mdlayher/packet's Config.Filter) that
// accepts a frame only if it has at least nic.PrefixLen bytes, its EtherType
// at offset 12 equals f.EtherType, the byte at 14 equals nic.Version, the
// big-endian uint32 at 18 equals f.JobKey and the destination endpoint at
// 22 is f.Endpoint or nic.EndpointAll. Accepted frames are kept whole.
//
// It does not look behind VLAN tags: on Linux, AF_PACKET sockets see frames
// with the tag already moved to metadata.
func SocketFilter(f nic.Filter) ([]bpf.RawInstruction, error) {
	return SharedSocketFilter(f, nil)
}

// SharedSocketFilter is SocketFilter for a socket that also sees the frames
// other sockets on its interface send (bound to every protocol, without
// PACKET_QDISC_BYPASS), so that endpoints sharing a NIC reach each other
// although no switch sends a frame back out of the port it came in by. With
// local, the interface's MAC, it further accepts a frame this host sends
// only if it is for local (or is multicast) and is not the socket's own
// (source endpoint f.Endpoint). A nil local is SocketFilter.
func SharedSocketFilter(f nic.Filter, local net.HardwareAddr) ([]bpf.RawInstruction, error) {
	if f.EtherType == 0 {
		return nil, errors.New("bpf: socket filter: EtherType 0 (use nic.Config.Filter for defaults)")
	}
	if local != nil && len(local) != 6 {
		return nil, fmt.Errorf("bpf: socket filter: local MAC %v", local)
	}
	var p prog
	p.op(bpf.LoadExtension{Num: bpf.ExtLen})
	p.jump(bpf.JumpLessThan, nic.PrefixLen, "reject")
	p.op(bpf.LoadAbsolute{Off: nic.OffEtherType, Size: 2})
	p.jump(bpf.JumpNotEqual, uint32(f.EtherType), "reject")
	p.op(bpf.LoadAbsolute{Off: nic.OffVersion, Size: 1})
	p.jump(bpf.JumpNotEqual, nic.Version, "reject")
	p.op(bpf.LoadAbsolute{Off: nic.OffJobKey, Size: 4})
	p.jump(bpf.JumpNotEqual, f.JobKey, "reject")
	p.op(bpf.LoadAbsolute{Off: nic.OffDstEP, Size: 2})
	p.jump(bpf.JumpEqual, uint32(f.Endpoint), "endpoint")
	p.jump(bpf.JumpNotEqual, nic.EndpointAll, "reject")
	p.label("endpoint")
	if local != nil {
		hi, lo := binary.BigEndian.Uint32(local[0:4]), uint32(binary.BigEndian.Uint16(local[4:6]))
		// Frames from the wire are for us; frames this host sends are
		// only if they go to our MAC (or a group) and are not our own.
		p.op(bpf.LoadExtension{Num: bpf.ExtType})
		p.jump(bpf.JumpNotEqual, unix.PACKET_OUTGOING, "accept")
		p.op(bpf.LoadAbsolute{Off: nic.OffSrcEP, Size: 2})
		p.jump(bpf.JumpNotEqual, uint32(f.Endpoint), "notmine")
		p.op(bpf.LoadAbsolute{Off: 6, Size: 4}) // our endpoint: our frame if from our MAC
		p.jump(bpf.JumpNotEqual, hi, "notmine")
		p.op(bpf.LoadAbsolute{Off: 10, Size: 2})
		p.jump(bpf.JumpEqual, lo, "reject")
		p.label("notmine")
		p.op(bpf.LoadAbsolute{Off: 0, Size: 1})
		p.jump(bpf.JumpBitsSet, 1, "accept") // a group address
		p.op(bpf.LoadAbsolute{Off: 0, Size: 4})
		p.jump(bpf.JumpNotEqual, hi, "reject")
		p.op(bpf.LoadAbsolute{Off: 4, Size: 2})
		p.jump(bpf.JumpNotEqual, lo, "reject")
	}
	p.label("accept")
	p.op(bpf.RetConstant{Val: socketAccept})
	p.label("reject")
	p.op(bpf.RetConstant{Val: 0})
	insns, err := p.resolve()
	if err != nil {
		return nil, fmt.Errorf("bpf: socket filter: %w", err)
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("bpf: socket filter: assemble: %w", err)
	}
	return raw, nil
}

// prog assembles classic BPF whose conditional jumps go forward to labels.
type prog struct {
	insns   []bpf.Instruction
	targets map[int]string // index of a JumpIf -> the label its true branch takes
	labels  map[string]int
}

func (p *prog) op(ins bpf.Instruction) { p.insns = append(p.insns, ins) }

// jump adds a JumpIf that goes to label when true and falls through when not.
func (p *prog) jump(cond bpf.JumpTest, val uint32, label string) {
	if p.targets == nil {
		p.targets = map[int]string{}
	}
	p.targets[len(p.insns)] = label
	p.insns = append(p.insns, bpf.JumpIf{Cond: cond, Val: val})
}

func (p *prog) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.insns)
}

// resolve fills in every jump's skip count.
func (p *prog) resolve() ([]bpf.Instruction, error) {
	for i, name := range p.targets {
		at, ok := p.labels[name]
		skip := at - i - 1
		if !ok || skip < 0 || skip > 255 {
			return nil, fmt.Errorf("jump %d to %q (%d) cannot be encoded", i, name, at)
		}
		j := p.insns[i].(bpf.JumpIf)
		j.SkipTrue = uint8(skip)
		p.insns[i] = j
	}
	return p.insns, nil
}
