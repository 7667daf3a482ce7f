package bpf

import (
	"errors"
	"fmt"
	"math"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// FaultConfig sets fault probabilities, each in [0,1].
//
// Drop discards the frame. Corrupt flips one byte at an offset chosen
// uniformly in [14, len), so the Ethernet header stays intact and the frame
// still reaches the right socket; the byte is XORed with a random non-zero
// mask. Duplicate sends the frame twice (tc only). A frame is first
// considered for Drop, then (if kept) for Corrupt, then for Duplicate, each
// decision independent.
type FaultConfig struct{ Drop, Corrupt, Duplicate float64 }

// FaultCounters count frames seen by a fault stage and the faults applied.
type FaultCounters struct{ Seen, Dropped, Corrupted, Duplicated uint64 }

// ErrProbability reports a fault probability outside [0,1] or NaN.
var ErrProbability = errors.New("bpf: fault probability out of [0,1]")

// Validate rejects probabilities outside [0,1] or NaN.
func (c FaultConfig) Validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"drop", c.Drop}, {"corrupt", c.Corrupt}, {"duplicate", c.Duplicate}} {
		if math.IsNaN(p.v) || p.v < 0 || p.v > 1 {
			return fmt.Errorf("%w: %s = %v", ErrProbability, p.name, p.v)
		}
	}
	return nil
}

// threshold converts a probability to the u32 compared against
// bpf_get_prandom_u32; thresholdAlways means the fault always fires, so that
// p=1 is exact although 2^32 does not fit.
func threshold(p float64) uint32 {
	if p >= 1 {
		return thresholdAlways
	}
	if p <= 0 {
		return 0
	}
	return uint32(math.Min(math.Floor(p*(1<<32)), thresholdAlways))
}

const thresholdAlways = math.MaxUint32

// faultValue is the single entry of the fault config map.
func (c FaultConfig) faultValue() [4]uint32 {
	return [4]uint32{threshold(c.Drop), threshold(c.Corrupt), threshold(c.Duplicate), 0}
}

// Indices into the per-CPU counters map.
const (
	ctrSeen = iota
	ctrDropped
	ctrCorrupted
	ctrDuplicated
	ctrRedirected
	ctrPassed
	ctrUnclaimed
	numCounters = 8
)

// Map names used as asm references.
const (
	refConfig   = "ev_fault_cfg"
	refCounters = "ev_counters"
	refXSK      = "ev_xsks"
)

// newFaultMaps creates the config map (one entry, all thresholds zero) and
// the per-CPU counters map.
func newFaultMaps() (cfg, ctrs *ebpf.Map, err error) {
	cfg, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "ev_fault_cfg",
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  16,
		MaxEntries: 1,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create fault config map: %w", err)
	}
	ctrs, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "ev_counters",
		Type:       ebpf.PerCPUArray,
		KeySize:    4,
		ValueSize:  8,
		MaxEntries: numCounters,
	})
	if err != nil {
		cfg.Close()
		return nil, nil, fmt.Errorf("create counters map: %w", err)
	}
	return cfg, ctrs, nil
}

// readCounters sums every per-CPU counter.
func readCounters(m *ebpf.Map) ([numCounters]uint64, error) {
	var out [numCounters]uint64
	var vals []uint64
	for i := range uint32(numCounters) {
		if err := m.Lookup(i, &vals); err != nil {
			return out, fmt.Errorf("read counter %d: %w", i, err)
		}
		for _, v := range vals {
			out[i] += v
		}
	}
	return out, nil
}

func faultCounters(c [numCounters]uint64) FaultCounters {
	return FaultCounters{
		Seen:       c[ctrSeen],
		Dropped:    c[ctrDropped],
		Corrupted:  c[ctrCorrupted],
		Duplicated: c[ctrDuplicated],
	}
}

// builder assembles a program with generated labels. A label attaches to the
// next emitted instruction; two labels in a row get a no-op between them.
type builder struct {
	insns   asm.Instructions
	pending string
	n       int
}

func (b *builder) emit(ins ...asm.Instruction) {
	for _, in := range ins {
		if b.pending != "" {
			in = in.WithSymbol(b.pending)
			b.pending = ""
		}
		b.insns = append(b.insns, in)
	}
}

func (b *builder) label(name string) {
	if b.pending != "" {
		// "goto +0" is a valid no-op that carries the earlier label.
		b.emit(asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource)})
	}
	b.pending = name
}

func (b *builder) fresh(prefix string) string {
	b.n++
	return fmt.Sprintf("%s_%d", prefix, b.n)
}

// ret sets R0 and exits.
func (b *builder) ret(v int32) {
	b.emit(asm.Mov.Imm(asm.R0, v), asm.Return())
}

// count adds one to counter idx. It clobbers R0-R5 and the stack slot at
// fp-8.
func (b *builder) count(idx int) {
	skip := b.fresh("count_skip")
	b.emit(
		asm.StoreImm(asm.RFP, -8, int64(idx), asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.LoadMapPtr(asm.R1, 0).WithReference(refCounters),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, skip),
		asm.Mov.Imm(asm.R1, 1),
		// Atomic although per-CPU: a tc program can be interrupted by XDP
		// or another softirq on the same CPU.
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
	)
	b.label(skip)
}

// decide jumps to skip unless the fault with threshold in register thr
// fires. It clobbers R0-R5.
func (b *builder) decide(thr asm.Register, skip string) {
	fire := b.fresh("fire")
	b.emit(
		asm.JEq.Imm(thr, 0, skip),
		asm.JEq.Imm32(thr, -1, fire), // thresholdAlways
		asm.FnGetPrandomU32.Call(),
		asm.JGE.Reg(asm.R0, thr, skip),
	)
	b.label(fire)
}

// faultProg describes how the shared fault stage talks to its context.
type faultProg struct {
	offData, offDataEnd int16 // context offsets of data and data_end
	dropCode            int32 // return code that drops the frame
	tc                  bool  // skb program: pull data, may duplicate
	ifindex             int32 // tc: target of bpf_clone_redirect
	cloneFlags          int32 // tc: 0 or BPF_F_INGRESS
}

// maxCorruptOffset is the largest offset the corruption can hit; only
// frames longer than 64 KiB have bytes beyond it.
const maxCorruptOffset = 0xfffe

// dupMark is put in skb->mark while cloning, so that the clone, which passes
// the same hook again, is recognised and not faulted a second time.
const dupMark = 0x45564455 // "EVDU"

// Offsets in struct __sk_buff.
const (
	skbMark    = 8
	skbData    = 76
	skbDataEnd = 80
)

// Offsets in struct xdp_md.
const (
	xdpData         = 0
	xdpDataEnd      = 4
	xdpRxQueueIndex = 16
)

// faultStage emits the fault stage. On entry R6 holds the context. It falls
// through when the frame is kept, and returns dropCode when dropped. It
// clobbers R0-R5 and R7-R9.
func (b *builder) faultStage(p faultProg) {
	done := b.fresh("fault_done")
	noDrop := b.fresh("no_drop")
	noCorrupt := b.fresh("no_corrupt")

	b.emit(
		asm.StoreImm(asm.RFP, -8, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.LoadMapPtr(asm.R1, 0).WithReference(refConfig),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, done),
		asm.LoadMem(asm.R7, asm.R0, 0, asm.Word),
		asm.LoadMem(asm.R8, asm.R0, 4, asm.Word),
		asm.LoadMem(asm.R9, asm.R0, 8, asm.Word),
	)

	// Drop.
	b.decide(asm.R7, noDrop)
	b.count(ctrDropped)
	b.ret(p.dropCode)
	b.label(noDrop)

	// Corrupt.
	b.decide(asm.R8, noCorrupt)
	if p.tc {
		// Direct access covers only the linear part; pull the whole frame
		// so the offset is uniform over it. Errors leave it as it was.
		b.emit(
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, 0),
			asm.FnSkbPullData.Call(),
		)
	}
	b.emit(
		asm.FnGetPrandomU32.Call(),
		asm.Mov.Reg(asm.R7, asm.R0),
		// Mask: bits 24..31 of the random value, never zero.
		asm.Mov.Reg(asm.R1, asm.R0),
		asm.RSh.Imm(asm.R1, 24),
		asm.And.Imm(asm.R1, 0xff),
	)
	maskOK := b.fresh("mask_ok")
	b.emit(asm.JNE.Imm(asm.R1, 0, maskOK), asm.Mov.Imm(asm.R1, 0xff))
	b.label(maskOK)
	b.emit(
		asm.LoadMem(asm.R2, asm.R6, p.offData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, p.offDataEnd, asm.Word),
		// R4 = len - 14 (pointer minus pointer is a scalar for root).
		asm.Mov.Reg(asm.R4, asm.R3),
		asm.Sub.Reg(asm.R4, asm.R2),
		asm.Sub.Imm(asm.R4, 14),
		asm.JSLE.Imm(asm.R4, 0, noCorrupt),
		// Offset = 14 + rand % (len-14), bounded so the verifier accepts
		// pointer arithmetic (it wants offset+1 <= MAX_PACKET_OFF, 0xffff),
		// then checked against data_end.
		asm.Mod.Reg(asm.R7, asm.R4),
		asm.Add.Imm(asm.R7, 14),
		asm.JGT.Imm(asm.R7, maxCorruptOffset, noCorrupt),
		asm.Add.Reg(asm.R2, asm.R7),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 1),
		asm.JGT.Reg(asm.R4, asm.R3, noCorrupt),
		asm.LoadMem(asm.R5, asm.R2, 0, asm.Byte),
		asm.Xor.Reg(asm.R5, asm.R1),
		asm.StoreMem(asm.R2, 0, asm.R5, asm.Byte),
	)
	b.count(ctrCorrupted)
	b.label(noCorrupt)

	if p.tc {
		// Duplicate: clone to the same device and direction. The clone
		// carries dupMark; the original gets its mark back.
		noDup := b.fresh("no_dup")
		b.decide(asm.R9, noDup)
		b.emit(
			asm.LoadMem(asm.R7, asm.R6, skbMark, asm.Word),
			asm.Mov.Imm(asm.R1, dupMark),
			asm.StoreMem(asm.R6, skbMark, asm.R1, asm.Word),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, p.ifindex),
			asm.Mov.Imm(asm.R3, p.cloneFlags),
			asm.FnCloneRedirect.Call(),
			asm.StoreMem(asm.R6, skbMark, asm.R7, asm.Word),
			asm.JNE.Imm(asm.R0, 0, noDup),
		)
		b.count(ctrDuplicated)
		b.label(noDup)
	}
	b.label(done)
}

// associate binds the named map references in insns.
func associate(insns asm.Instructions, maps map[string]*ebpf.Map) error {
	for name, m := range maps {
		if err := insns.AssociateMap(name, m); err != nil {
			return fmt.Errorf("associate map %s: %w", name, err)
		}
	}
	return nil
}
