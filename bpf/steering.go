package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/ethervia/ethervia/nic"
)

// XDP return codes.
const (
	xdpDrop     = 1
	xdpPass     = 2
	xdpRedirect = 4
)

// DefaultQueues is the XSKMAP size when SteeringOptions.Queues is zero.
const DefaultQueues = 64

// ErrXDPDuplicate is returned by Steering.SetFault for Duplicate > 0: XDP
// cannot clone a frame, so duplication needs the tc injector (AttachTCFault).
var ErrXDPDuplicate = errors.New("bpf: XDP fault stage cannot duplicate frames (use AttachTCFault)")

// ErrClosed is returned by methods of a closed Steering or TCFault.
var ErrClosed = errors.New("bpf: closed")

// SteeringOptions tune NewSteering.
type SteeringOptions struct {
	// Queues is the XSKMAP size: receive queues 0..Queues-1 can get a
	// socket. Zero means DefaultQueues.
	Queues int
}

// SteeringCounters are the steering program's counters, summed over CPUs.
type SteeringCounters struct {
	// Redirected counts this job's frames handed to an AF_XDP socket.
	Redirected uint64
	// Passed counts foreign frames (other EtherType, version or job key,
	// or too short) given to the kernel stack.
	Passed uint64
	// Foreign counts the part of Passed that carried this job's EtherType
	// (directly or behind one 802.1Q tag) but failed the rest of the
	// prefix check: another wire version or job key, or too short for the
	// prefix. They are frames of another job rather than of another
	// protocol.
	Foreign uint64
	// Unclaimed counts this job's frames passed to the kernel stack
	// because no socket was registered for their receive queue.
	Unclaimed uint64
	// Fault counts the fault stage, which sees only this job's frames.
	Fault FaultCounters
}

// Steering is the XDP program for AF_XDP. It redirects this job's frames
// (the prefix checks of SocketFilter, optionally behind one 802.1Q tag) into
// the XSKMAP slot of the receive queue they arrived on, and passes every
// other frame to the kernel so IP and ARP keep working. A frame of ours whose
// queue has no socket is passed as well.
//
// Before the redirect, a fault stage may drop or corrupt this job's frames
// (see FaultConfig); it cannot duplicate them.
//
// A Steering is safe for concurrent use.
type Steering struct {
	queues int

	mu     sync.Mutex
	prog   *ebpf.Program
	cfg    *ebpf.Map
	ctrs   *ebpf.Map
	xsks   *ebpf.Map
	lnk    link.Link
	closed bool
}

// NewSteering loads the steering program for filter f. Attach it with
// Attach and feed sockets with Register.
func NewSteering(f nic.Filter, opt SteeringOptions) (*Steering, error) {
	if f.EtherType == 0 {
		return nil, errors.New("bpf: steering: EtherType 0 (use nic.Config.Filter for defaults)")
	}
	q := opt.Queues
	if q == 0 {
		q = DefaultQueues
	}
	if q < 0 || q > 1<<16 {
		return nil, fmt.Errorf("bpf: steering: queues %d out of range", q)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("bpf: steering: remove memlock limit: %w", err)
	}
	s := &Steering{queues: q}
	var err error
	s.cfg, s.ctrs, err = newFaultMaps()
	if err != nil {
		return nil, fmt.Errorf("bpf: steering: %w", err)
	}
	s.xsks, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "ev_xsks",
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: uint32(q),
	})
	if err != nil {
		s.closeObjects()
		return nil, fmt.Errorf("bpf: steering: create XSKMAP: %w", err)
	}
	insns := steeringInsns(f)
	if err := associate(insns, map[string]*ebpf.Map{
		refConfig: s.cfg, refCounters: s.ctrs, refXSK: s.xsks,
	}); err != nil {
		s.closeObjects()
		return nil, fmt.Errorf("bpf: steering: %w", err)
	}
	s.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "ev_steer",
		Type:         ebpf.XDP,
		License:      "Dual MIT/GPL",
		Instructions: insns,
	})
	if err != nil {
		s.closeObjects()
		return nil, fmt.Errorf("bpf: steering: load program: %w", err)
	}
	return s, nil
}

// nativeU16 and nativeU32 return the value a native-endian load of the
// big-endian encoding of v yields, so programs compare without byte swaps.
func nativeU16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

func nativeU32(v uint32) int32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return int32(binary.NativeEndian.Uint32(b[:]))
}

const etherTypeVLAN = 0x8100

// ctrForeign is the steering program's slot in the shared counters map (the
// fault stage and tc use the lower ones); the constant expression below
// fails to compile if it leaves the map.
const ctrForeign = ctrUnclaimed + 1

const _ = uint(numCounters - ctrForeign - 1)

func steeringInsns(f nic.Filter) asm.Instructions {
	var b builder
	const (
		passed  = "passed"
		foreign = "foreign"
		fields  = "fields"
	)
	// R2 is the frame start (moved past a VLAN tag, if any), R3 the end.
	b.emit(
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, xdpData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, xdpDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, nic.EthHeaderLen),
		asm.JGT.Reg(asm.R4, asm.R3, passed),
		asm.LoadMem(asm.R5, asm.R2, nic.OffEtherType, asm.Half),
		asm.JEq.Imm32(asm.R5, nativeU16(f.EtherType), fields),
		// One 802.1Q tag: check the inner EtherType, then read the rest
		// of the prefix 4 bytes later by moving R2.
		asm.JNE.Imm32(asm.R5, nativeU16(etherTypeVLAN), passed),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, nic.EthHeaderLen+nic.VLANTagLen),
		asm.JGT.Reg(asm.R4, asm.R3, passed),
		asm.Add.Imm(asm.R2, nic.VLANTagLen),
		asm.LoadMem(asm.R5, asm.R2, nic.OffEtherType, asm.Half),
		asm.JNE.Imm32(asm.R5, nativeU16(f.EtherType), passed),
	)
	// Our EtherType from here on: a failed check is another job's frame.
	b.label(fields)
	b.emit(
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, nic.PrefixLen),
		asm.JGT.Reg(asm.R4, asm.R3, foreign),
		asm.LoadMem(asm.R5, asm.R2, nic.OffVersion, asm.Byte),
		asm.JNE.Imm32(asm.R5, nic.Version, foreign),
		asm.LoadMem(asm.R5, asm.R2, nic.OffJobKey, asm.Word),
		asm.JNE.Imm32(asm.R5, nativeU32(f.JobKey), foreign),
	)
	// This job's frame, for this endpoint or every one; one for another
	// endpoint of the NIC goes to the kernel (an AF_PACKET socket may
	// serve it), counted as passed but not foreign.
	forUs := b.fresh("for_us")
	b.emit(
		asm.LoadMem(asm.R5, asm.R2, nic.OffDstEP, asm.Half),
		asm.JEq.Imm(asm.R5, nativeU16(f.Endpoint), forUs),
		asm.JNE.Imm(asm.R5, nativeU16(nic.EndpointAll), passed),
	)
	b.label(forUs)
	b.count(ctrSeen)
	b.faultStage(faultProg{offData: xdpData, offDataEnd: xdpDataEnd, dropCode: xdpDrop})
	unclaimed := b.fresh("unclaimed")
	b.emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(refXSK),
		asm.LoadMem(asm.R2, asm.R6, xdpRxQueueIndex, asm.Word),
		// The low bits of flags are the action when the slot is empty.
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.JNE.Imm(asm.R0, xdpRedirect, unclaimed),
	)
	b.count(ctrRedirected)
	b.ret(xdpRedirect)
	b.label(unclaimed)
	b.count(ctrUnclaimed)
	b.ret(xdpPass)
	// Foreign frames are counted twice: as Foreign and, falling through,
	// as Passed.
	b.label(foreign)
	b.count(ctrForeign)
	b.label(passed)
	b.count(ctrPassed)
	b.ret(xdpPass)
	return b.insns
}

// Attach attaches the program to ifindex in the current thread's network
// namespace through a BPF link (the caller locks its OS thread and setns'es).
// mode 0 lets the kernel choose (driver, falling back to generic); otherwise
// pass link.XDPGenericMode or link.XDPDriverMode. A Steering attaches to one
// interface at a time.
func (s *Steering) Attach(ifindex int, mode link.XDPAttachFlags) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("bpf: steering attach %d: %w", ifindex, ErrClosed)
	}
	if s.lnk != nil {
		return fmt.Errorf("bpf: steering attach %d: already attached", ifindex)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: s.prog, Interface: ifindex, Flags: mode})
	if err != nil {
		return fmt.Errorf("bpf: steering attach %d: %w", ifindex, err)
	}
	s.lnk = l
	return nil
}

// Detach removes the program from its interface; the maps and the program
// stay, so it can be attached again. It is a no-op when not attached.
func (s *Steering) Detach() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.detachLocked()
}

func (s *Steering) detachLocked() error {
	if s.lnk == nil {
		return nil
	}
	err := s.lnk.Close()
	s.lnk = nil
	if err != nil {
		return fmt.Errorf("bpf: steering detach: %w", err)
	}
	return nil
}

// Queues returns the XSKMAP size.
func (s *Steering) Queues() int { return s.queues }

// Register points receive queue queue at the AF_XDP socket xskFD, which must
// already be bound to that queue of the attached interface.
func (s *Steering) Register(queue int, xskFD int) error {
	if queue < 0 || queue >= s.queues {
		return fmt.Errorf("bpf: steering register queue %d: out of range [0,%d)", queue, s.queues)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("bpf: steering register queue %d: %w", queue, ErrClosed)
	}
	if err := s.xsks.Update(uint32(queue), uint32(xskFD), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: steering register queue %d fd %d: %w", queue, xskFD, err)
	}
	return nil
}

// Unregister empties the slot of queue; its frames are then passed to the
// kernel. Unregistering an empty slot is not an error.
func (s *Steering) Unregister(queue int) error {
	if queue < 0 || queue >= s.queues {
		return fmt.Errorf("bpf: steering unregister queue %d: out of range [0,%d)", queue, s.queues)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("bpf: steering unregister queue %d: %w", queue, ErrClosed)
	}
	if err := s.xsks.Delete(uint32(queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: steering unregister queue %d: %w", queue, err)
	}
	return nil
}

// SetFault sets the XDP fault stage. Duplicate must be 0: XDP cannot clone a
// frame, so Duplicate > 0 returns ErrXDPDuplicate and changes nothing.
func (s *Steering) SetFault(c FaultConfig) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("bpf: steering set fault: %w", err)
	}
	if c.Duplicate > 0 {
		return fmt.Errorf("bpf: steering set fault: duplicate = %v: %w", c.Duplicate, ErrXDPDuplicate)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("bpf: steering set fault: %w", ErrClosed)
	}
	if err := s.cfg.Update(uint32(0), c.faultValue(), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: steering set fault: %w", err)
	}
	return nil
}

// Counters returns the counters summed over all CPUs.
func (s *Steering) Counters() (SteeringCounters, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return SteeringCounters{}, fmt.Errorf("bpf: steering counters: %w", ErrClosed)
	}
	c, err := readCounters(s.ctrs)
	if err != nil {
		return SteeringCounters{}, fmt.Errorf("bpf: steering counters: %w", err)
	}
	return SteeringCounters{
		Redirected: c[ctrRedirected],
		Passed:     c[ctrPassed],
		Unclaimed:  c[ctrUnclaimed],
		Foreign:    c[ctrForeign],
		Fault:      faultCounters(c),
	}, nil
}

// Program returns the loaded XDP program, for test runs or for attaching
// by other means. It is owned by s and closed by Close.
func (s *Steering) Program() *ebpf.Program { return s.prog }

// Close detaches the program and frees it and its maps. It is idempotent.
func (s *Steering) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.detachLocked()
	s.closeObjects()
	return err
}

func (s *Steering) closeObjects() {
	// Close is nil-safe for both types, so a half-built Steering is fine.
	s.prog.Close()
	s.xsks.Close()
	s.ctrs.Close()
	s.cfg.Close()
}
