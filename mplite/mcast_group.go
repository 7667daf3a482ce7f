package mplite

import (
	"errors"
	"fmt"
	"slices"
)

// Group is a multicast group opened explicitly, CC-MPI's compiler-assisted
// scheme: open_group (OpenGroup) once, data_movement (Bcast) as often as
// needed, close_group (Close). Hoisting the opening out of a loop saves the
// agreement every dynamic group pays per call.
type Group struct {
	parent  *Comm
	sub     *Comm // the members' communicator; nil on other ranks
	g       *mcGroup
	members []int // ranks of the parent, in group order
}

// OpenGroup opens a multicast group of the given ranks of c (distinct, in
// any order; the group's order is theirs). Every member of c must call it
// with the same members, also the ranks that are not in the group (they get
// a Group whose Bcast does nothing). Each member adds the group address to
// its NIC's filter; if any member cannot (no multicast support, the NIC's
// group limit), the group falls back to the binomial tree on every member.
func (c *Comm) OpenGroup(members []int) (*Group, error) {
	seen := make(map[int]bool, len(members))
	key := -1
	for i, r := range members {
		if r < 0 || r >= c.csize || seen[r] {
			return nil, fmt.Errorf("mplite rank %d: open group: member %d of %d: %w", c.crank, r, c.csize, ErrRank)
		}
		seen[r] = true
		if r == c.crank {
			key = i
		}
	}
	color := Undefined
	if key >= 0 {
		color = 0
	}
	sub, err := c.Split(color, key)
	if err != nil {
		return nil, fmt.Errorf("mplite rank %d: open group: %w", c.crank, err)
	}
	gr := &Group{parent: c, sub: sub, members: slices.Clone(members)}
	if sub == nil {
		return gr, nil
	}
	gr.g, _ = sub.commGroup()
	if err := sub.enter("open_group"); err != nil {
		return nil, err
	}
	defer sub.leave()
	if err := sub.openGroup(gr.g); err != nil {
		return nil, sub.collErr("open_group", err)
	}
	return gr, nil
}

// Members returns the group's ranks of the parent communicator.
func (gr *Group) Members() []int { return slices.Clone(gr.members) }

// Multicast reports whether the group multicasts (false: not a member, or
// the members fell back to the binomial tree).
func (gr *Group) Multicast() bool { return gr.sub != nil && gr.g.opened && !gr.g.fallback }

// Bcast sends root's buf to the buf of every member (root is a rank of the
// parent communicator and must be a member). Every member must call it; on
// other ranks it returns at once. The protocol is the parent's Bcast
// algorithm when that is "mcast-ack" or "mcast-nak" (SetAlgorithm,
// WithAlgorithm, MPLITE_ALGO_BCAST), else "mcast-nak".
func (gr *Group) Bcast(buf []byte, root int) error {
	if gr.sub == nil {
		return nil
	}
	sub := gr.sub
	r := slices.Index(gr.members, root)
	if r < 0 {
		return sub.collErr(collBcast, fmt.Errorf("group root %d is not a member: %w", root, ErrRank))
	}
	if err := sub.enter(collBcast); err != nil {
		return err
	}
	defer sub.leave()
	if !gr.g.opened {
		return sub.collErr(collBcast, errors.New("group closed"))
	}
	if sub.csize == 1 {
		return nil
	}
	if gr.g.fallback {
		return sub.collErr(collBcast, sub.bcastBinomial(buf, r))
	}
	e := gr.parent.pick(&gr.parent.tables.bcast, len(buf), true)
	nak := e == nil || e.id != algoMcastAck
	return sub.collErr(collBcast, sub.mcastBcast(gr.g, buf, r, nak))
}

// Close leaves the group's address and releases the group (close_group).
// It is local; the members' Bcasts that returned are complete everywhere.
func (gr *Group) Close() error {
	if gr.sub == nil {
		return nil
	}
	if !gr.g.opened {
		return nil
	}
	gr.sub.closeGroup(gr.g)
	return gr.sub.Free()
}
