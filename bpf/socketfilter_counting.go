package bpf

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/rlimit"

	"github.com/ethervia/ethervia/nic"
)

// Keys of the counting socket filter's per-CPU counters map: one per reason
// a frame of our EtherType is refused.
const (
	sfShort = iota
	sfVersion
	sfJobKey
	sfNumCounters
)

// sfLen is the offset of len in struct __sk_buff.
const sfLen = 0

// SocketFilterCounters count frames of this job's EtherType that the counting
// socket filter refused in the kernel, by reason, summed over CPUs. Frames of
// other EtherTypes are refused without being counted.
type SocketFilterCounters struct {
	// Short counts frames shorter than nic.PrefixLen.
	Short uint64
	// Version counts frames with another wire version.
	Version uint64
	// JobKey counts frames of another job (right version, other key).
	JobKey uint64
}

// Foreign returns the sum of all reasons: the frames of our EtherType that
// were refused.
func (c SocketFilterCounters) Foreign() uint64 { return c.Short + c.Version + c.JobKey }

// SocketFilterProg is an eBPF socket filter (BPF_PROG_TYPE_SOCKET_FILTER)
// with the accept rule of SocketFilter that also counts, per reason, the
// frames of our EtherType it refuses. Attach it to a socket with
// setsockopt(SO_ATTACH_BPF, FD()); the socket keeps its own reference, but
// the counters are readable only while the SocketFilterProg is open.
//
// A SocketFilterProg is safe for concurrent use.
type SocketFilterProg struct {
	mu     sync.Mutex
	prog   *ebpf.Program
	ctrs   *ebpf.Map
	closed bool
}

// NewCountingSocketFilter loads the counting socket filter for f. It needs
// CAP_BPF (root); callers without it can fall back to SocketFilter.
func NewCountingSocketFilter(f nic.Filter) (*SocketFilterProg, error) {
	if f.EtherType == 0 {
		return nil, errors.New("bpf: counting socket filter: EtherType 0 (use nic.Config.Filter for defaults)")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("bpf: counting socket filter: remove memlock limit: %w", err)
	}
	ctrs, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       "ev_sockf_ctrs",
		Type:       ebpf.PerCPUArray,
		KeySize:    4,
		ValueSize:  8,
		MaxEntries: sfNumCounters,
	})
	if err != nil {
		return nil, fmt.Errorf("bpf: counting socket filter: create counters map: %w", err)
	}
	insns := socketFilterInsns(f)
	if err := associate(insns, map[string]*ebpf.Map{refCounters: ctrs}); err != nil {
		ctrs.Close()
		return nil, fmt.Errorf("bpf: counting socket filter: %w", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "ev_sockf",
		Type:         ebpf.SocketFilter,
		License:      "Dual MIT/GPL",
		Instructions: insns,
	})
	if err != nil {
		ctrs.Close()
		return nil, fmt.Errorf("bpf: counting socket filter: load program: %w", err)
	}
	return &SocketFilterProg{prog: prog, ctrs: ctrs}, nil
}

// socketFilterInsns builds the program. It reads the frame with the legacy
// packet loads (LD_ABS), which socket filters may use without direct packet
// access; they yield host-order values, so the constants need no swapping.
// The length is checked first because an LD_ABS beyond the frame ends the
// program with 0 (reject) before the frame could be counted.
func socketFilterInsns(f nic.Filter) asm.Instructions {
	var b builder
	const (
		reject  = "reject"
		short   = "short"
		version = "version"
		jobKey  = "job_key"
	)
	b.emit(
		// LD_ABS wants the context in R6; R7 (callee-saved) keeps the
		// length across the counter's helper call.
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R7, asm.R6, sfLen, asm.Word),
		asm.JLT.Imm(asm.R7, nic.OffEtherType+2, reject),
		asm.LoadAbs(nic.OffEtherType, asm.Half),
		asm.JNE.Imm(asm.R0, int32(f.EtherType), reject),
		asm.JLT.Imm(asm.R7, nic.PrefixLen, short),
		asm.LoadAbs(nic.OffVersion, asm.Byte),
		asm.JNE.Imm(asm.R0, nic.Version, version),
		asm.LoadAbs(nic.OffJobKey, asm.Word),
		// 32-bit compare: the immediate is sign-extended in a 64-bit one.
		asm.JNE.Imm32(asm.R0, int32(f.JobKey), jobKey),
		// Another endpoint's frame is refused, not counted: it is not
		// foreign, only not ours.
		asm.LoadAbs(nic.OffDstEP, asm.Half),
		asm.JEq.Imm(asm.R0, int32(f.Endpoint), "keep"),
		asm.JNE.Imm(asm.R0, nic.EndpointAll, reject),
	)
	b.label("keep")
	b.emit(
		// Keep the whole frame.
		asm.Mov.Reg(asm.R0, asm.R7),
		asm.Return(),
	)
	b.label(short)
	b.count(sfShort)
	b.emit(asm.Ja.Label(reject))
	b.label(version)
	b.count(sfVersion)
	b.emit(asm.Ja.Label(reject))
	b.label(jobKey)
	b.count(sfJobKey)
	b.label(reject)
	b.ret(0)
	return b.insns
}

// FD returns the program's file descriptor, for SO_ATTACH_BPF, or -1 after
// Close.
func (p *SocketFilterProg) FD() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return -1
	}
	return p.prog.FD()
}

// Program returns the loaded program, for test runs or attaching by other
// means. It is owned by p and closed by Close.
func (p *SocketFilterProg) Program() *ebpf.Program { return p.prog }

// Counters returns the counters summed over all CPUs.
func (p *SocketFilterProg) Counters() (SocketFilterCounters, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return SocketFilterCounters{}, fmt.Errorf("bpf: socket filter counters: %w", ErrClosed)
	}
	var c [sfNumCounters]uint64
	var vals []uint64
	for i := range uint32(sfNumCounters) {
		if err := p.ctrs.Lookup(i, &vals); err != nil {
			return SocketFilterCounters{}, fmt.Errorf("bpf: socket filter counters: read counter %d: %w", i, err)
		}
		for _, v := range vals {
			c[i] += v
		}
	}
	return SocketFilterCounters{Short: c[sfShort], Version: c[sfVersion], JobKey: c[sfJobKey]}, nil
}

// Close frees the program and its counters. Sockets it is attached to keep
// filtering (and counting) until they close. It is idempotent.
func (p *SocketFilterProg) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if err := errors.Join(p.prog.Close(), p.ctrs.Close()); err != nil {
		return fmt.Errorf("bpf: counting socket filter: close: %w", err)
	}
	return nil
}
