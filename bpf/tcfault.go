package bpf

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Direction selects the tc hook.
type Direction int

// The tc hooks.
const (
	Ingress Direction = iota
	Egress
)

// String returns "ingress" or "egress".
func (d Direction) String() string {
	switch d {
	case Ingress:
		return "ingress"
	case Egress:
		return "egress"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// tc return codes. tcNext is TC_ACT_UNSPEC, which TCX calls TCX_NEXT: the
// frame goes on to the next program or filter and then passes, so the
// injector composes with others on the same hook.
const (
	tcNext = -1
	tcShot = 2
)

// bpfFIngress is BPF_F_INGRESS for bpf_clone_redirect.
const bpfFIngress = 1

// TCFault is a tc fault injector on one hook of one interface. It is safe for
// concurrent use.
//
// A duplicated frame is a clone sent to the same device and direction with
// bpf_clone_redirect; it passes the hook a second time, is recognised by a
// mark (skb->mark = 0x45564455 while cloning) and passed untouched with its
// mark cleared to 0. The original keeps its mark.
type TCFault struct {
	ifindex int
	dir     Direction

	mu     sync.Mutex
	prog   *ebpf.Program
	cfg    *ebpf.Map
	ctrs   *ebpf.Map
	lnk    link.Link       // TCX attachment
	nl     *netlink.Handle // clsact fallback: a handle in the attach netns
	filter *netlink.BpfFilter
	closed bool
}

// AttachTCFault attaches a fault injector to the tc hook dir of ifindex in the
// current thread's network namespace (the caller locks its OS thread and
// setns'es). It uses TCX (Linux >= 6.6) and falls back to a clsact qdisc
// with a direct-action bpf filter only if TCX is unavailable. On ingress the
// injector runs first, on egress last, so it acts like the wire.
//
// etherType 0 means every frame; otherwise only frames with that EtherType
// at offset 12 are faulted, and others pass untouched and are not counted.
// All probabilities start at zero; set them with Set.
func AttachTCFault(ifindex int, dir Direction, etherType uint16) (*TCFault, error) {
	return attachTCFault(ifindex, dir, etherType, false)
}

func attachTCFault(ifindex int, dir Direction, etherType uint16, forceClsact bool) (*TCFault, error) {
	t, err := loadTCFault(ifindex, dir, etherType)
	if err != nil {
		return nil, err
	}
	if !forceClsact {
		err = t.attachTCX()
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, ebpf.ErrNotSupported) {
			t.Close()
			return nil, err
		}
	}
	if err := t.attachClsact(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// loadTCFault creates the maps and loads the program without attaching it.
func loadTCFault(ifindex int, dir Direction, etherType uint16) (*TCFault, error) {
	if ifindex < 1 {
		return nil, fmt.Errorf("bpf: tc fault: invalid ifindex %d", ifindex)
	}
	if dir != Ingress && dir != Egress {
		return nil, fmt.Errorf("bpf: tc fault %d: invalid direction %v", ifindex, dir)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("bpf: tc fault %d %v: remove memlock limit: %w", ifindex, dir, err)
	}
	t := &TCFault{ifindex: ifindex, dir: dir}
	var err error
	t.cfg, t.ctrs, err = newFaultMaps()
	if err != nil {
		return nil, fmt.Errorf("bpf: tc fault %d %v: %w", ifindex, dir, err)
	}
	insns := tcFaultInsns(ifindex, dir, etherType)
	if err := associate(insns, map[string]*ebpf.Map{refConfig: t.cfg, refCounters: t.ctrs}); err != nil {
		t.closeObjects()
		return nil, fmt.Errorf("bpf: tc fault %d %v: %w", ifindex, dir, err)
	}
	t.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "ev_tc_fault",
		Type:         ebpf.SchedCLS,
		License:      "Dual MIT/GPL",
		Instructions: insns,
	})
	if err != nil {
		t.closeObjects()
		return nil, fmt.Errorf("bpf: tc fault %d %v: load program: %w", ifindex, dir, err)
	}
	return t, nil
}

func tcFaultInsns(ifindex int, dir Direction, etherType uint16) asm.Instructions {
	var b builder
	const (
		pass  = "pass"
		fresh = "fresh"
	)
	b.emit(
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, skbMark, asm.Word),
		asm.JNE.Imm32(asm.R2, dupMark, fresh),
		// Our own clone on its second pass: clear the mark, leave it be.
		asm.Mov.Imm(asm.R2, 0),
		asm.StoreMem(asm.R6, skbMark, asm.R2, asm.Word),
	)
	b.ret(tcNext)
	b.label(fresh)
	if etherType != 0 {
		b.emit(
			asm.LoadMem(asm.R2, asm.R6, skbData, asm.Word),
			asm.LoadMem(asm.R3, asm.R6, skbDataEnd, asm.Word),
			asm.Mov.Reg(asm.R4, asm.R2),
			asm.Add.Imm(asm.R4, 14),
			asm.JGT.Reg(asm.R4, asm.R3, pass),
			asm.LoadMem(asm.R5, asm.R2, 12, asm.Half),
			asm.JNE.Imm32(asm.R5, nativeU16(etherType), pass),
		)
	}
	b.count(ctrSeen)
	flags := int32(0)
	if dir == Ingress {
		flags = bpfFIngress
	}
	b.faultStage(faultProg{
		offData:    skbData,
		offDataEnd: skbDataEnd,
		dropCode:   tcShot,
		tc:         true,
		ifindex:    int32(ifindex),
		cloneFlags: flags,
	})
	b.label(pass)
	b.ret(tcNext)
	return b.insns
}

func (t *TCFault) attachTCX() error {
	opts := link.TCXOptions{Interface: t.ifindex, Program: t.prog}
	if t.dir == Ingress {
		opts.Attach, opts.Anchor = ebpf.AttachTCXIngress, link.Head()
	} else {
		opts.Attach, opts.Anchor = ebpf.AttachTCXEgress, link.Tail()
	}
	l, err := link.AttachTCX(opts)
	if err != nil {
		return fmt.Errorf("bpf: tc fault %d %v: attach tcx: %w", t.ifindex, t.dir, err)
	}
	t.lnk = l
	return nil
}

// attachClsact is the fallback for kernels without TCX: a clsact qdisc (kept
// if it exists) and a direct-action bpf filter with a kernel-chosen priority,
// found again by program ID so Close removes exactly ours.
func (t *TCFault) attachClsact() error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("bpf: tc fault %d %v: netlink: %w", t.ifindex, t.dir, err)
	}
	fail := func(what string, err error) error {
		h.Close()
		return fmt.Errorf("bpf: tc fault %d %v: %s: %w", t.ifindex, t.dir, what, err)
	}
	lk, err := h.LinkByIndex(t.ifindex)
	if err != nil {
		return fail("link", err)
	}
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: t.ifindex,
		Handle:    netlink.MakeHandle(0xffff, 0),
		Parent:    netlink.HANDLE_CLSACT,
	}}
	if err := h.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return fail("add clsact qdisc", err)
	}
	parent := uint32(netlink.HANDLE_MIN_EGRESS)
	if t.dir == Ingress {
		parent = netlink.HANDLE_MIN_INGRESS
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: t.ifindex,
			Parent:    parent,
			Protocol:  unix.ETH_P_ALL,
		},
		Fd:           t.prog.FD(),
		Name:         "ev_tc_fault",
		DirectAction: true,
	}
	if err := h.FilterAdd(f); err != nil {
		return fail("add bpf filter", err)
	}
	info, err := t.prog.Info()
	if err != nil {
		return fail("program info", err)
	}
	id, _ := info.ID()
	filters, err := h.FilterList(lk, parent)
	if err != nil {
		return fail("list filters", err)
	}
	for _, x := range filters {
		if bf, ok := x.(*netlink.BpfFilter); ok && bf.Id == int(id) {
			t.nl, t.filter = h, bf
			return nil
		}
	}
	return fail("find added filter", fmt.Errorf("no bpf filter runs program %d", id))
}

// Set sets the fault probabilities; it takes effect for the next frame.
func (t *TCFault) Set(c FaultConfig) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("bpf: tc fault %d %v: set: %w", t.ifindex, t.dir, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("bpf: tc fault %d %v: set: %w", t.ifindex, t.dir, ErrClosed)
	}
	if err := t.cfg.Update(uint32(0), c.faultValue(), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: tc fault %d %v: set: %w", t.ifindex, t.dir, err)
	}
	return nil
}

// Counters returns the counters summed over all CPUs. Seen counts frames
// that matched the EtherType (all frames for 0); clones are not counted.
func (t *TCFault) Counters() (FaultCounters, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return FaultCounters{}, fmt.Errorf("bpf: tc fault %d %v: counters: %w", t.ifindex, t.dir, ErrClosed)
	}
	c, err := readCounters(t.ctrs)
	if err != nil {
		return FaultCounters{}, fmt.Errorf("bpf: tc fault %d %v: counters: %w", t.ifindex, t.dir, err)
	}
	return faultCounters(c), nil
}

// Program returns the loaded tc program, for test runs. It is owned by t and
// closed by Close.
func (t *TCFault) Program() *ebpf.Program { return t.prog }

// Close detaches the injector and frees it. It is idempotent and may be
// called from any thread.
func (t *TCFault) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	if t.lnk != nil {
		if err := t.lnk.Close(); err != nil {
			errs = append(errs, fmt.Errorf("bpf: tc fault %d %v: detach tcx: %w", t.ifindex, t.dir, err))
		}
		t.lnk = nil
	}
	if t.nl != nil {
		// The handle's socket lives in the attach namespace.
		if err := t.nl.FilterDel(t.filter); err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("bpf: tc fault %d %v: delete filter: %w", t.ifindex, t.dir, err))
		}
		t.nl.Close()
		t.nl, t.filter = nil, nil
	}
	t.closeObjects()
	return errors.Join(errs...)
}

func (t *TCFault) closeObjects() {
	t.prog.Close()
	t.ctrs.Close()
	t.cfg.Close()
}
