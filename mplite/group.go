package mplite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// Undefined is the color that keeps a rank out of every communicator Split
// makes (MPI_UNDEFINED): Split returns nil to it. Any negative color does.
const Undefined = -1

// ErrFreed: the communicator was freed.
var ErrFreed = errors.New("mplite: communicator freed")

// ErrContexts: every context id is taken; no more communicators can be made.
var ErrContexts = errors.New("mplite: out of communicator context ids")

// worldRank maps a rank of c (or AnySource) to the world rank.
func (c *Comm) worldRank(r int) int {
	if c.group == nil || r < 0 {
		return r
	}
	return c.group[r]
}

// commStatus maps the source of a status from a world rank to a rank of c.
func (c *Comm) commStatus(st Status) Status {
	if c.inv != nil && st.Source >= 0 && st.Source < len(c.inv) {
		st.Source = c.inv[st.Source]
	}
	return st
}

// IsWorld reports whether c is the world communicator of its rank.
func (c *Comm) IsWorld() bool { return c.world == c }

// WorldRank returns the world rank of rank r of c.
func (c *Comm) WorldRank(r int) (int, error) {
	if r < 0 || r >= c.csize {
		return 0, fmt.Errorf("mplite: rank %d of %d: %w", r, c.csize, ErrRank)
	}
	return c.worldRank(r), nil
}

// checkUsable fails on a freed communicator.
func (c *Comm) checkUsable() error {
	if c.freed.Load() {
		return ErrFreed
	}
	return nil
}

// newView makes a communicator over c's endpoint with the given members
// (world ranks, in rank order) and context pair.
func (c *Comm) newView(members []int, ctx uint16) *Comm {
	me := -1
	inv := make([]int, c.size)
	for i := range inv {
		inv[i] = -1
	}
	for i, w := range members {
		inv[w] = i
		if w == c.rank {
			me = i
		}
	}
	return &Comm{endpoint: c.endpoint, crank: me, csize: len(members), group: members, inv: inv,
		pctx: ctx, cctx: ctx + 1, world: c.world}
}

// ctxPairs is how many communicators besides the world a rank can hold at
// once: each takes a pair of context ids (point-to-point and collective)
// from ctxFirstFree. MPICH's default allows 2048.
const ctxPairs = 4096

// ctxSet has a bit per context pair, set while a communicator of this rank
// holds it.
type ctxSet [ctxPairs / 64]uint64

// freeMask returns the pairs this rank has free, a set bit per free pair,
// as little-endian words: the members of a communicator AND theirs
// together to find a pair free on all of them.
func (c *Comm) freeMask() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := make([]byte, ctxPairs/8)
	for i, w := range c.ctxUsed {
		binary.LittleEndian.PutUint64(b[i*8:], ^w)
	}
	return b
}

// takeCtx takes the lowest pair set in mask (the members' free pairs,
// ANDed) and, if hold, marks it used by this rank until Free.
func (c *Comm) takeCtx(mask []byte, hold bool) (uint16, error) {
	for i := 0; i < ctxPairs/64; i++ {
		w := binary.LittleEndian.Uint64(mask[i*8:])
		if w == 0 {
			continue
		}
		bit := bits.TrailingZeros64(w)
		if hold {
			c.mu.Lock()
			c.ctxUsed[i] |= 1 << bit
			c.mu.Unlock()
		}
		return ctxFirstFree + uint16(2*(i*64+bit)), nil
	}
	return 0, ErrContexts
}

// releaseCtx gives back c's context pair.
func (c *Comm) releaseCtx() {
	pair := int(c.pctx-ctxFirstFree) / 2
	c.mu.Lock()
	c.ctxUsed[pair/64] &^= 1 << (pair % 64)
	c.mu.Unlock()
}

// agreeCtx returns the members' common free pairs (an allreduce of their
// masks).
func (c *Comm) agreeCtx() ([]byte, error) {
	mine := c.freeMask()
	all := make([]byte, len(mine))
	if err := c.runReducing(&c.tables.allreduce, len(mine), true, &collArgs{send: mine, recv: all}, new(andU64())); err != nil {
		return nil, err
	}
	return all, nil
}

// Dup returns a new communicator with the same members in the same order
// and a message space of its own (MPI_Comm_dup). Every member must call it;
// it is collective over c.
func (c *Comm) Dup() (*Comm, error) {
	if err := c.enter("dup"); err != nil {
		return nil, err
	}
	defer c.leave()
	mask, err := c.agreeCtx()
	if err != nil {
		return nil, fmt.Errorf("mplite: dup: %w", err)
	}
	ctx, err := c.takeCtx(mask, true)
	if err != nil {
		return nil, fmt.Errorf("mplite: dup: %w", err)
	}
	members := make([]int, c.csize)
	for i := range members {
		members[i] = c.worldRank(i)
	}
	return c.newView(members, ctx), nil
}

// Split partitions c (CCL's partition, MPI_Comm_split): the members that
// pass the same color form one new communicator, ordered by key with ties
// broken by their rank in c. A rank passing a negative color (Undefined)
// gets nil. Every member of c must call it; no member returns before all
// have called.
func (c *Comm) Split(color, key int) (*Comm, error) {
	if err := c.enter("split"); err != nil {
		return nil, err
	}
	defer c.leave()
	if color < 0 {
		color = Undefined
	}
	const rec = 16
	mine := make([]byte, rec)
	binary.LittleEndian.PutUint64(mine[0:], uint64(int64(color)))
	binary.LittleEndian.PutUint64(mine[8:], uint64(int64(key)))
	all := make([]byte, rec*c.csize)
	if err := c.run(&c.tables.allgather, rec, true, &collArgs{send: mine, recv: all}); err != nil {
		return nil, fmt.Errorf("mplite: split: %w", err)
	}
	mask, err := c.agreeCtx()
	if err != nil {
		return nil, fmt.Errorf("mplite: split: %w", err)
	}
	type entry struct{ color, key, rank int }
	var same []entry
	for r := range c.csize {
		b := all[r*rec:]
		e := entry{int(int64(binary.LittleEndian.Uint64(b))), int(int64(binary.LittleEndian.Uint64(b[8:]))), r}
		if color != Undefined && e.color == color {
			same = append(same, e)
		}
	}
	// Every member agrees on the same pair, whatever its color: the new
	// communicators are disjoint, so they may share it. A rank left out
	// holds nothing.
	ctx, err := c.takeCtx(mask, color != Undefined)
	if err != nil {
		return nil, fmt.Errorf("mplite: split: %w", err)
	}
	if color == Undefined {
		return nil, nil
	}
	slices.SortStableFunc(same, func(a, b entry) int {
		if a.key != b.key {
			if a.key < b.key {
				return -1
			}
			return 1
		}
		return a.rank - b.rank
	})
	members := make([]int, len(same))
	for i, e := range same {
		members[i] = c.worldRank(e.rank)
	}
	return c.newView(members, ctx), nil
}

// CreateGroup returns a communicator of the given members of c (ranks in
// c, in the new communicator's order), made by those members alone
// (MPI_Comm_create_group): every listed rank must call it with the same
// list, and no other rank calls it. The members agree on a context pair by
// an allreduce among themselves in c's collective space, so no collective
// of c may run at the same time on any of them.
func (c *Comm) CreateGroup(ranks []int) (*Comm, error) {
	if err := c.checkUsable(); err != nil {
		return nil, fmt.Errorf("mplite: create group: %w", err)
	}
	members := make([]int, len(ranks))
	seen := make(map[int]bool, len(ranks))
	me := -1
	for i, r := range ranks {
		if r < 0 || r >= c.csize || seen[r] {
			return nil, fmt.Errorf("mplite: create group: member %d of %d (repeated or out of range): %w", r, c.csize, ErrRank)
		}
		seen[r] = true
		members[i] = c.worldRank(r)
		if r == c.crank {
			me = i
		}
	}
	if me < 0 {
		return nil, fmt.Errorf("mplite: create group: rank %d is not among the members", c.crank)
	}
	ctx, err := c.agreeAmong(members, c.cctx, "create group")
	if err != nil {
		return nil, err
	}
	return c.newView(members, ctx), nil
}

// Intercomm returns an intercommunicator's view for point-to-point between
// this rank's group local and the disjoint group remote (both world ranks,
// each in its group's rank order): its Rank is this rank's in local, its
// Size is remote's, and a destination or source names a rank of remote
// (MPI's intercommunicator point-to-point). Every member of both groups
// calls it, with its own group as local, and no other rank: they agree on
// a context pair by an allreduce among themselves in the world's
// collective space. Collectives on the view are not defined.
func (c *Comm) Intercomm(local, remote []int) (*Comm, error) {
	if err := c.checkUsable(); err != nil {
		return nil, fmt.Errorf("mplite: intercomm: %w", err)
	}
	w := c.world
	in := make([]bool, w.size)
	me := -1
	for i, g := range [][]int{local, remote} {
		for j, r := range g {
			if r < 0 || r >= w.size || in[r] {
				return nil, fmt.Errorf("mplite: intercomm: world rank %d (repeated, shared by both groups or out of range): %w", r, ErrRank)
			}
			in[r] = true
			if i == 0 && r == w.rank {
				me = j
			}
		}
	}
	if me < 0 {
		return nil, fmt.Errorf("mplite: intercomm: rank %d is not in the local group", w.rank)
	}
	var union []int
	for r, ok := range in {
		if ok {
			union = append(union, r)
		}
	}
	ctx, err := w.agreeAmong(union, w.cctx, "intercomm")
	if err != nil {
		return nil, err
	}
	v := w.newView(remote, ctx)
	v.crank, v.local = me, slices.Clone(local)
	return v, nil
}

// agreeAmong has members (world ranks, listed alike on each, this rank among
// them), and no other rank, agree on a context pair free on all of them,
// by an allreduce of their masks spoken in the collective context cctx,
// and holds the pair for this rank. No collective of cctx may run at the
// same time on any member. what names the caller in errors.
func (c *Comm) agreeAmong(members []int, cctx uint16, what string) (uint16, error) {
	tmp := c.newView(members, cctx-1)
	if err := tmp.enterTuned(what, false); err != nil {
		return 0, err
	}
	mine := tmp.freeMask()
	mask := make([]byte, len(mine))
	err := tmp.allreduceRecDoubling(mine, mask, new(andU64()))
	tmp.leave()
	if err != nil {
		return 0, fmt.Errorf("mplite: %s: %w", what, err)
	}
	ctx, err := c.takeCtx(mask, true)
	if err != nil {
		return 0, fmt.Errorf("mplite: %s: %w", what, err)
	}
	return ctx, nil
}

// IsInter reports whether c is an intercommunicator's view (Intercomm).
func (c *Comm) IsInter() bool { return c.local != nil }

// LocalGroup returns the world ranks of an intercommunicator's own group,
// in rank order (nil for an intracommunicator).
func (c *Comm) LocalGroup() []int { return slices.Clone(c.local) }

// Merge returns the intracommunicator of both groups of an
// intercommunicator (MPI_Intercomm_merge), made by all their members: the
// group whose members pass high false comes first, each group in its own
// order; when both groups pass the same value, the group holding the lowest
// world rank comes first. The members of a group must pass the same high.
func (c *Comm) Merge(high bool) (*Comm, error) {
	if c.local == nil {
		return nil, errors.New("mplite: merge: not an intercommunicator")
	}
	if err := c.checkUsable(); err != nil {
		return nil, fmt.Errorf("mplite: merge: %w", err)
	}
	w := c.world
	union := append(slices.Clone(c.local), c.group...)
	slices.Sort(union)
	// Both groups' members, in world order, speaking in c's collective
	// context: each tells its high, then they agree on a context pair.
	tmp := w.newView(union, c.cctx-1)
	if err := tmp.enterTuned("merge", false); err != nil {
		return nil, err
	}
	defer tmp.leave()
	mine := []byte{0}
	if high {
		mine[0] = 1
	}
	highs := make([]byte, len(union))
	if err := tmp.allgatherBruck(mine, highs); err != nil {
		return nil, fmt.Errorf("mplite: merge: %w", err)
	}
	at := func(world int) bool { return highs[slices.Index(union, world)] == 1 }
	lh, rh := at(c.local[0]), at(c.group[0])
	localFirst := !lh && rh || lh == rh && slices.Min(c.local) < slices.Min(c.group)
	order := append(slices.Clone(c.group), c.local...)
	if localFirst {
		order = append(slices.Clone(c.local), c.group...)
	}
	free := tmp.freeMask()
	mask := make([]byte, len(free))
	if err := tmp.allreduceRecDoubling(free, mask, new(andU64())); err != nil {
		return nil, fmt.Errorf("mplite: merge: %w", err)
	}
	ctx, err := c.takeCtx(mask, true)
	if err != nil {
		return nil, fmt.Errorf("mplite: merge: %w", err)
	}
	return w.newView(order, ctx), nil
}

// Free releases a communicator made by Dup or Split: later operations on
// it fail with ErrFreed. Messages still in flight on it are not received.
// The world cannot be freed (Finalize ends it). Free is local: it needs no
// other member.
func (c *Comm) Free() error {
	if c.IsWorld() {
		return errors.New("mplite: the world communicator is ended by Finalize, not freed")
	}
	if c.freed.Swap(true) {
		return ErrFreed
	}
	c.releaseCtx()
	return nil
}

// maxU64 is the byte-level maximum of little-endian uint64s.
func maxU64() Reducer {
	return Reducer{Elem: 8, Commutative: true, Fn: func(dst, a, b []byte) {
		for i := 0; i+8 <= len(dst); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], max(binary.LittleEndian.Uint64(a[i:]), binary.LittleEndian.Uint64(b[i:])))
		}
	}}
}

// andU64 is the bitwise AND of little-endian uint64s.
func andU64() Reducer {
	return Reducer{Elem: 8, Commutative: true, Fn: func(dst, a, b []byte) {
		for i := 0; i+8 <= len(dst); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(a[i:])&binary.LittleEndian.Uint64(b[i:]))
		}
	}}
}
