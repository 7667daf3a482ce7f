package mplite

import (
	"fmt"
)

// ---- Gather and Scatter ----

// Gather collects every member's send (all of one length m) into root's
// recv, rank i's at recv[i*m:]; recv is used at root only. Algorithms:
// "binomial" (tree) and "linear" (direct to root).
func (c *Comm) Gather(send, recv []byte, root int) error {
	if err := c.enter(collGather); err != nil {
		return err
	}
	defer c.leave()
	if err := c.checkRoot(root); err != nil {
		return c.collErr(collGather, err)
	}
	m, n := len(send), c.csize
	if c.crank == root && len(recv) != n*m {
		return c.collErr(collGather, fmt.Errorf("receive buffer of %d bytes for %d blocks of %d", len(recv), n, m))
	}
	return c.collErr(collGather, c.run(&c.tables.gather, m, true, &collArgs{send: send, recv: recv, root: root}))
}

// uniform gives counts and displacements of n blocks of m bytes, in
// memory the communicator keeps for its running collective.
func (c *Comm) uniform(n, m int) (counts, displs []int) {
	l := c.coll.layout(2 * n)
	counts, displs = l[:n:n], l[n:]
	for i := range counts {
		counts[i], displs[i] = m, i*m
	}
	return counts, displs
}

func (c *Comm) gatherBinomial(send, recv []byte, root int) error {
	n, m := c.csize, len(send)
	vr := (c.crank - root + n) % n
	sub := n // blocks of this rank's subtree
	if vr != 0 {
		sub = min(vr&-vr, n-vr)
	}
	tmp := c.coll.scr.get(sub * m)
	copy(tmp, send)
	x := c.newXfer()
	mask := 1
	for ; mask < n && vr&mask == 0; mask <<= 1 {
		if child := vr + mask; child < n {
			if err := x.recv(tmp[mask*m:(mask+min(mask, n-child))*m], (child+root)%n, 0); err != nil {
				return err
			}
		}
	}
	if err := x.wait(); err != nil {
		return err
	}
	if vr != 0 {
		if err := x.send(tmp, (vr-mask+root)%n, 0); err != nil {
			return err
		}
		return x.wait()
	}
	for v := range n {
		r := (v + root) % n
		copy(recv[r*m:(r+1)*m], tmp[v*m:])
	}
	return nil
}

// Gatherv collects member i's send (counts[i] bytes) into root's recv at
// displs[i]; counts, displs and recv are used at root only. Algorithm:
// "linear".
func (c *Comm) Gatherv(send, recv []byte, counts, displs []int, root int) error {
	if err := c.enter(collGatherv); err != nil {
		return err
	}
	defer c.leave()
	if err := c.checkRoot(root); err != nil {
		return c.collErr(collGatherv, err)
	}
	if c.crank == root {
		if err := checkLayout(counts, displs, len(recv), c.csize); err != nil {
			return c.collErr(collGatherv, err)
		}
	}
	return c.collErr(collGatherv, c.run(&c.tables.gatherv, len(send), true,
		&collArgs{send: send, recv: recv, rcounts: counts, rdispls: displs, root: root}))
}

// checkLayout checks n blocks (counts, displs) inside a buffer of size.
func checkLayout(counts, displs []int, size, n int) error {
	if len(counts) != n || len(displs) != n {
		return fmt.Errorf("%d counts and %d displacements for %d ranks", len(counts), len(displs), n)
	}
	for i := range counts {
		if counts[i] < 0 || displs[i] < 0 || displs[i]+counts[i] > size {
			return fmt.Errorf("block %d (%d bytes at %d) outside the %d-byte buffer", i, counts[i], displs[i], size)
		}
	}
	return nil
}

func (c *Comm) gathervLinear(send, recv []byte, counts, displs []int, root int) error {
	x := c.newXfer()
	if c.crank != root {
		if err := x.send(send, root, 0); err != nil {
			return err
		}
		return x.wait()
	}
	for i := range c.csize {
		blk := recv[displs[i] : displs[i]+counts[i]]
		if i == root {
			if len(send) != counts[i] {
				return fmt.Errorf("own block of %d bytes where %d are expected", len(send), counts[i])
			}
			copy(blk, send)
			continue
		}
		if err := x.recv(blk, i, 0); err != nil {
			_ = x.wait()
			return err
		}
	}
	return x.wait()
}

// Scatter sends block i of root's send (len(recv) bytes each, at
// send[i*len(recv):]) to member i's recv; send is used at root only.
// Algorithms: "binomial" (tree) and "linear" (direct from root).
func (c *Comm) Scatter(send, recv []byte, root int) error {
	if err := c.enter(collScatter); err != nil {
		return err
	}
	defer c.leave()
	if err := c.checkRoot(root); err != nil {
		return c.collErr(collScatter, err)
	}
	m, n := len(recv), c.csize
	if c.crank == root && len(send) != n*m {
		return c.collErr(collScatter, fmt.Errorf("send buffer of %d bytes for %d blocks of %d", len(send), n, m))
	}
	return c.collErr(collScatter, c.run(&c.tables.scatter, m, true, &collArgs{send: send, recv: recv, root: root}))
}

func (c *Comm) scatterBinomial(send, recv []byte, root int) error {
	n, m := c.csize, len(recv)
	vr := (c.crank - root + n) % n
	x := c.newXfer()
	var tmp []byte
	mask := 1
	if vr == 0 {
		tmp = c.coll.scr.get(n * m)
		for v := range n {
			r := (v + root) % n
			copy(tmp[v*m:], send[r*m:(r+1)*m])
		}
		for mask < n {
			mask <<= 1
		}
	} else {
		mask = vr & -vr
		tmp = c.coll.scr.get(min(mask, n-vr) * m)
		if err := x.recv(tmp, (vr-mask+root)%n, 0); err != nil {
			return err
		}
		if err := x.wait(); err != nil {
			return err
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if child := vr + mask; child < n {
			if err := x.send(tmp[mask*m:(mask+min(mask, n-child))*m], (child+root)%n, 0); err != nil {
				_ = x.wait()
				return err
			}
		}
	}
	copy(recv, tmp[:m])
	return x.wait()
}

// Scatterv sends root's send[displs[i]:displs[i]+counts[i]] to member i's
// recv (which must be exactly that long); send, counts and displs are used
// at root only. Algorithm: "linear".
func (c *Comm) Scatterv(send []byte, counts, displs []int, recv []byte, root int) error {
	if err := c.enter(collScatterv); err != nil {
		return err
	}
	defer c.leave()
	if err := c.checkRoot(root); err != nil {
		return c.collErr(collScatterv, err)
	}
	if c.crank == root {
		if err := checkLayout(counts, displs, len(send), c.csize); err != nil {
			return c.collErr(collScatterv, err)
		}
	}
	return c.collErr(collScatterv, c.run(&c.tables.scatterv, len(recv), true,
		&collArgs{send: send, recv: recv, scounts: counts, sdispls: displs, root: root}))
}

func (c *Comm) scattervLinear(send []byte, counts, displs []int, recv []byte, root int) error {
	x := c.newXfer()
	if c.crank != root {
		if err := x.recv(recv, root, 0); err != nil {
			return err
		}
		return x.wait()
	}
	n := c.csize
	for k := 1; k < n; k++ {
		i := (root + k) % n
		if err := x.send(send[displs[i]:displs[i]+counts[i]], i, 0); err != nil {
			_ = x.wait()
			return err
		}
	}
	if counts[root] != len(recv) {
		_ = x.wait()
		return fmt.Errorf("own block of %d bytes for a %d-byte buffer", counts[root], len(recv))
	}
	copy(recv, send[displs[root]:displs[root]+counts[root]])
	return x.wait()
}

// ---- Allgather ----

// Allgather collects every member's send (all of one length m) into every
// member's recv, rank i's at recv[i*m:]. Algorithms: "bruck" (any n,
// ceil(log2 n) steps), "recursive_doubling" (powers of two; bruck
// otherwise), "ring", "mcast" (reliable multicast) and "hierarchical"
// (through one leader per host, where ranks share hosts).
func (c *Comm) Allgather(send, recv []byte) error {
	if err := c.enter(collAllgather); err != nil {
		return err
	}
	defer c.leave()
	if len(recv) != c.csize*len(send) {
		return c.collErr(collAllgather, fmt.Errorf("receive buffer of %d bytes for %d blocks of %d", len(recv), c.csize, len(send)))
	}
	return c.collErr(collAllgather, c.run(&c.tables.allgather, len(send), true, &collArgs{send: send, recv: recv}))
}

// allgatherRecDoubling is recursive doubling for a power-of-two n; for
// other sizes it is the Bruck allgather.
func (c *Comm) allgatherRecDoubling(send, recv []byte) error {
	n, m := c.csize, len(send)
	if n&(n-1) != 0 {
		return c.allgatherBruck(send, recv)
	}
	copy(recv[c.crank*m:], send)
	x := c.newXfer()
	for mask, step := 1, 0; mask < n; mask, step = mask<<1, step+1 {
		nd := c.crank ^ mask
		my, its := c.crank&^(mask-1), nd&^(mask-1)
		if err := x.sendrecv(recv[my*m:(my+mask)*m], nd, recv[its*m:(its+mask)*m], nd, step); err != nil {
			return err
		}
	}
	return nil
}

func (c *Comm) allgatherBruck(send, recv []byte) error {
	n, m, me := c.csize, len(send), c.crank
	// tmp[i] ends as the block of rank me+i.
	tmp := c.coll.scr.get(n * m)
	copy(tmp, send)
	x := c.newXfer()
	for k, step := 1, 0; k < n; k, step = k<<1, step+1 {
		cnt := min(k, n-k)
		if err := x.sendrecv(tmp[:cnt*m], (me-k+n)%n, tmp[k*m:(k+cnt)*m], (me+k)%n, step); err != nil {
			return err
		}
	}
	for i := range n {
		r := (me + i) % n
		copy(recv[r*m:(r+1)*m], tmp[i*m:])
	}
	return nil
}

// Allgatherv collects member i's send (counts[i] bytes) into every
// member's recv at displs[i]. Algorithms: "ring" and "linear" (every
// member sends to every other at once).
func (c *Comm) Allgatherv(send, recv []byte, counts, displs []int) error {
	if err := c.enter(collAllgatherv); err != nil {
		return err
	}
	defer c.leave()
	if err := checkLayout(counts, displs, len(recv), c.csize); err != nil {
		return c.collErr(collAllgatherv, err)
	}
	if counts[c.crank] != len(send) {
		return c.collErr(collAllgatherv, fmt.Errorf("own block of %d bytes where counts say %d", len(send), counts[c.crank]))
	}
	avg := 0
	for _, k := range counts {
		avg += k
	}
	avg /= c.csize
	return c.collErr(collAllgatherv, c.run(&c.tables.allgatherv, avg, true,
		&collArgs{send: send, recv: recv, rcounts: counts, rdispls: displs}))
}

func (c *Comm) allgathervRing(send, recv []byte, counts, displs []int) error {
	n, me := c.csize, c.crank
	blk := func(i int) []byte {
		i = (i%n + n) % n
		return recv[displs[i] : displs[i]+counts[i]]
	}
	copy(blk(me), send)
	x := c.newXfer()
	for s := 0; s < n-1; s++ {
		if err := x.sendrecv(blk(me-s), (me+1)%n, blk(me-s-1), (me-1+n)%n, s); err != nil {
			return err
		}
	}
	return nil
}

func (c *Comm) allgathervLinear(send, recv []byte, counts, displs []int) error {
	n, me := c.csize, c.crank
	copy(recv[displs[me]:displs[me]+counts[me]], send)
	x := c.newXfer()
	for k := 1; k < n; k++ {
		from := (me - k + n) % n
		if err := x.recv(recv[displs[from]:displs[from]+counts[from]], from, 0); err != nil {
			_ = x.wait()
			return err
		}
	}
	for k := 1; k < n; k++ {
		if err := x.send(send, (me+k)%n, 0); err != nil {
			_ = x.wait()
			return err
		}
	}
	return x.wait()
}

// ---- Alltoall ----

// Alltoall sends block j of every member's send (len(send)/n bytes each)
// to member j, which stores the block from member i at recv[i*m:].
// Algorithms: "bruck" (radix r: (r-1)·ceil(log_r n) steps; r from the cost
// model or SetAlltoallRadix), "pairwise" (n-1 exchanges), "linear" (all at
// once) and "phased" (CC-MPI: the n-1 contention-free phases of the
// all-to-all pattern, a barrier between phases; below the phased threshold
// it is linear).
func (c *Comm) Alltoall(send, recv []byte) error {
	if err := c.enter(collAlltoall); err != nil {
		return err
	}
	defer c.leave()
	n := c.csize
	if len(send)%n != 0 || len(recv) != len(send) {
		return c.collErr(collAlltoall, fmt.Errorf("buffers of %d and %d bytes for %d ranks", len(send), len(recv), n))
	}
	return c.collErr(collAlltoall, c.run(&c.tables.alltoall, len(send)/n, true, &collArgs{send: send, recv: recv}))
}

func (c *Comm) alltoallBruck(send, recv []byte, m, r int) error {
	n, me := c.csize, c.crank
	// tmp[i] holds the block bound for rank me+i (at the start) and, at
	// the end, the block from rank me-i.
	tmp := c.coll.scr.get(n * m)
	for i := range n {
		d := (me + i) % n
		copy(tmp[i*m:], send[d*m:(d+1)*m])
	}
	pack := c.coll.scr.get(n * m)[:0]
	unpack := c.coll.scr.get(n * m)
	x := c.newXfer()
	step := 0
	for w := 1; w < n; w *= r {
		for d := 1; d < r && d*w < n; d++ {
			pack = pack[:0]
			k := 0
			for i := range n {
				if (i/w)%r == d {
					pack = append(pack, tmp[i*m:(i+1)*m]...)
					k++
				}
			}
			if err := x.sendrecv(pack, (me+d*w)%n, unpack[:k*m], ((me-d*w)%n+n)%n, step); err != nil {
				return err
			}
			step++
			k = 0
			for i := range n {
				if (i/w)%r == d {
					copy(tmp[i*m:(i+1)*m], unpack[k*m:])
					k++
				}
			}
		}
	}
	for i := range n {
		s := (me - i + n) % n
		copy(recv[s*m:(s+1)*m], tmp[i*m:])
	}
	return nil
}

// Alltoallv sends send[sdispls[j]:sdispls[j]+scounts[j]] to member j,
// which receives it at recv[rdispls[i]:rdispls[i]+rcounts[i]] for sender i;
// rcounts[i] on j must equal scounts[j] on i. Algorithms: "pairwise",
// "linear" and "phased" (CC-MPI Level 1: the members exchange their counts,
// each computes the same contention-free schedule, see cc.AllToAllSchedule, and
// runs it phase by phase with a barrier between phases).
func (c *Comm) Alltoallv(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	if err := c.enter(collAlltoallv); err != nil {
		return err
	}
	defer c.leave()
	n := c.csize
	if err := checkLayout(scounts, sdispls, len(send), n); err != nil {
		return c.collErr(collAlltoallv, fmt.Errorf("send: %w", err))
	}
	if err := checkLayout(rcounts, rdispls, len(recv), n); err != nil {
		return c.collErr(collAlltoallv, fmt.Errorf("receive: %w", err))
	}
	avg := 0
	for _, k := range scounts {
		avg += k
	}
	avg /= n
	return c.collErr(collAlltoallv, c.run(&c.tables.alltoallv, avg, true,
		&collArgs{send: send, scounts: scounts, sdispls: sdispls, recv: recv, rcounts: rcounts, rdispls: rdispls}))
}

func (c *Comm) selfCopy(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	me := c.crank
	if scounts[me] != rcounts[me] {
		return fmt.Errorf("sends itself %d bytes but expects %d", scounts[me], rcounts[me])
	}
	copy(recv[rdispls[me]:rdispls[me]+rcounts[me]], send[sdispls[me]:sdispls[me]+scounts[me]])
	return nil
}

func (c *Comm) alltoallvLinear(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	n, me := c.csize, c.crank
	if err := c.selfCopy(send, scounts, sdispls, recv, rcounts, rdispls); err != nil {
		return err
	}
	x := c.newXfer()
	for k := 1; k < n; k++ {
		from := (me - k + n) % n
		if err := x.recv(recv[rdispls[from]:rdispls[from]+rcounts[from]], from, 0); err != nil {
			_ = x.wait()
			return err
		}
	}
	for k := 1; k < n; k++ {
		to := (me + k) % n
		if err := x.send(send[sdispls[to]:sdispls[to]+scounts[to]], to, 0); err != nil {
			_ = x.wait()
			return err
		}
	}
	return x.wait()
}

func (c *Comm) alltoallvPairwise(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	n, me := c.csize, c.crank
	if err := c.selfCopy(send, scounts, sdispls, recv, rcounts, rdispls); err != nil {
		return err
	}
	x := c.newXfer()
	for k := 1; k < n; k++ {
		to, from := (me+k)%n, (me-k+n)%n
		if err := x.sendrecv(send[sdispls[to]:sdispls[to]+scounts[to]], to,
			recv[rdispls[from]:rdispls[from]+rcounts[from]], from, k); err != nil {
			return err
		}
	}
	return nil
}
