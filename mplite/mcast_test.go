package mplite_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/nic/memnic"
)

var mcastAlgos = []string{"mcast-ack", "mcast-nak"}

// mcastSizes: empty, one byte, odd, and 1 MiB.
var mcastSizes = []int{0, 1, 12345, 1 << 20}

// bcastCheck runs Bcast from every root in roots over sizes and checks
// every rank's buffer byte for byte against the root's data.
func bcastCheck(c *mplite.Comm, sizes []int, roots []int, seed int) error {
	for _, size := range sizes {
		for _, root := range roots {
			seed++
			want := gen(size, root, seed)
			buf := make([]byte, size)
			if c.Rank() == root {
				copy(buf, want)
			} else {
				for i := range buf {
					buf[i] = 0xee
				}
			}
			if err := c.Bcast(buf, root); err != nil {
				return fmt.Errorf("size %d root %d: %w", size, root, err)
			}
			if err := mismatch(fmt.Sprintf("size %d root %d", size, root), buf, want); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestMcastBcastLossy checks both reliable multicast protocols on 1 to 9
// ranks, with 5 % of all frames lost, against the root's data; and that
// the static group is joined while in use and left by Finalize.
func TestMcastBcastLossy(t *testing.T) {
	ns := []int{1, 2, 3, 4, 5, 8, 9}
	if testing.Short() {
		ns = []int{1, 3, 9}
	}
	for _, algo := range mcastAlgos {
		for _, n := range ns {
			t.Run(fmt.Sprintf("%s/%d", algo, n), func(t *testing.T) {
				opts := []mplite.Option{mplite.WithAlgorithm("bcast", algo),
					mplite.WithLocalFaults(uint64(n)*7+1, memnic.Faults{Loss: 0.05})}
				comms := make([]*mplite.Comm, n)
				errs := collWorld(t, n, 60*time.Second, opts, func(c *mplite.Comm) error {
					comms[c.Rank()] = c
					roots := []int{0, n - 1}
					if err := bcastCheck(c, mcastSizes, roots, 0); err != nil {
						return err
					}
					st := c.McastStats()
					if n > 1 && (st.Joined != 1 || len(mplite.PortGroups(c)) != 1) {
						return fmt.Errorf("groups joined %d, port's %v: want 1", st.Joined, mplite.PortGroups(c))
					}
					if n > 1 && st.Bcasts != len(mcastSizes)*len(roots) {
						return fmt.Errorf("%d multicast Bcasts counted, want %d", st.Bcasts, len(mcastSizes)*len(roots))
					}
					return nil
				})
				noErrors(t, errs)
				var sent, resent, fb uint64
				for _, c := range comms {
					st := c.McastStats()
					sent += st.DataSent
					resent += st.Resent
					fb += uint64(st.Fallbacks)
					if n > 1 && (st.Leaves != 1 || len(mplite.PortGroups(c)) != 0) {
						t.Errorf("rank %d after Finalize: %d leaves, port's groups %v", c.Rank(), st.Leaves, mplite.PortGroups(c))
					}
				}
				if n > 1 && (sent == 0 || fb != 0) {
					t.Errorf("chunks multicast %d, fallbacks %d: the multicast path did not run", sent, fb)
				}
				t.Logf("%s n=%d: %d chunks sent, %d resent", algo, n, sent, resent)
			})
		}
	}
}

// TestMcastDynamicGroups joins and leaves the group around every call.
func TestMcastDynamicGroups(t *testing.T) {
	opts := []mplite.Option{mplite.WithAlgorithm("bcast", "mcast-ack"),
		mplite.WithLocalFaults(5, memnic.Faults{Loss: 0.05})}
	noErrors(t, collWorld(t, 4, 60*time.Second, opts, func(c *mplite.Comm) error {
		c.SetMulticastGroups(true)
		if err := bcastCheck(c, []int{1, 777, 100000}, []int{0, 2}, 3); err != nil {
			return err
		}
		st := c.McastStats()
		if st.Joins != 6 || st.Leaves != 6 || st.Joined != 0 || len(mplite.PortGroups(c)) != 0 {
			return fmt.Errorf("dynamic groups: %d joins, %d leaves, %d joined, port's %v; want 6, 6, 0, none",
				st.Joins, st.Leaves, st.Joined, mplite.PortGroups(c))
		}
		return nil
	}))
}

// TestMcastLimitFallback gives one rank's NIC no room for a group (limit 0),
// or room for one while another group is open: the members agree to fall
// back to the binomial tree, and results stay exact.
func TestMcastLimitFallback(t *testing.T) {
	for _, limit := range []int{-1, 1} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			opts := []mplite.Option{mplite.WithAlgorithm("bcast", "mcast-nak"),
				mplite.WithLocalFaults(9, memnic.Faults{Loss: 0.05})}
			noErrors(t, collWorld(t, 5, 60*time.Second, opts, func(c *mplite.Comm) error {
				if c.Rank() == 3 {
					mplite.SetPortMaxMulticast(c, limit)
				}
				var other *mplite.Group
				if limit == 1 {
					// Fill rank 3's only slot with another group.
					var err error
					if other, err = c.OpenGroup([]int{3, 4}); err != nil {
						return err
					}
				}
				if err := bcastCheck(c, []int{1, 12345, 1 << 20}, []int{0, 3}, 1); err != nil {
					return err
				}
				st := c.McastStats()
				if st.Fallbacks == 0 {
					return errors.New("no fallback counted")
				}
				if st.DataSent != 0 && c.Rank() == 0 {
					return fmt.Errorf("rank 0 multicast %d chunks on the world despite the fallback", st.DataSent)
				}
				if other != nil {
					if c.Rank() >= 3 && !other.Multicast() {
						return errors.New("the two-rank group fell back")
					}
					buf := make([]byte, 5000)
					if c.Rank() == 4 {
						copy(buf, gen(5000, 4, 1))
					}
					if err := other.Bcast(buf, 4); err != nil {
						return err
					}
					if c.Rank() >= 3 {
						if err := mismatch("group bcast", buf, gen(5000, 4, 1)); err != nil {
							return err
						}
					}
					return other.Close()
				}
				return nil
			}))
		})
	}
}

// TestMcastOpenGroup is CC-MPI's compiler-assisted scheme: open a group of
// some ranks once, broadcast in it repeatedly, close it.
func TestMcastOpenGroup(t *testing.T) {
	members := []int{5, 1, 2, 6, 0}
	opts := []mplite.Option{mplite.WithLocalFaults(3, memnic.Faults{Loss: 0.05})}
	for _, algo := range mcastAlgos {
		t.Run(algo, func(t *testing.T) {
			noErrors(t, collWorld(t, 7, 60*time.Second, opts, func(c *mplite.Comm) error {
				if err := c.SetAlgorithm("bcast", algo); err != nil {
					return err
				}
				g, err := c.OpenGroup(members)
				if err != nil {
					return err
				}
				if !slices.Equal(g.Members(), members) {
					return fmt.Errorf("Members() = %v, want %v", g.Members(), members)
				}
				in := bytes.Contains([]byte{5, 1, 2, 6, 0}, []byte{byte(c.Rank())})
				if g.Multicast() != in {
					return fmt.Errorf("Multicast() = %v for a rank with membership %v", g.Multicast(), in)
				}
				if in && len(mplite.PortGroups(c)) != 1 || !in && len(mplite.PortGroups(c)) != 0 {
					return fmt.Errorf("member %v has port groups %v", in, mplite.PortGroups(c))
				}
				for i, root := range []int{5, 0, 6, 6} {
					size := []int{0, 1, 9999, 300000}[i]
					want := gen(size, root, i)
					buf := make([]byte, size)
					if c.Rank() == root {
						copy(buf, want)
					}
					if err := g.Bcast(buf, root); err != nil {
						return err
					}
					if in {
						if err := mismatch(fmt.Sprintf("group bcast %d", i), buf, want); err != nil {
							return err
						}
					} else if !bytes.Equal(buf, make([]byte, size)) {
						return errors.New("a non-member's buffer changed")
					}
				}
				if err := g.Bcast(make([]byte, 3), 3); in && err == nil {
					return errors.New("Bcast from a non-member root succeeded")
				}
				if err := g.Close(); err != nil {
					return err
				}
				if len(mplite.PortGroups(c)) != 0 {
					return fmt.Errorf("port groups %v after Close", mplite.PortGroups(c))
				}
				// The communicator still works afterwards.
				return bcastCheck(c, []int{4321}, []int{2}, 8)
			}))
		})
	}
}

// FuzzMcastHeader: the multicast header parser never panics, and what it
// accepts re-encodes to the same header bytes.
func FuzzMcastHeader(f *testing.F) {
	f.Add([]byte{1, 0, 0, 2, 0, 0, 2, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0x30, 0x39, 0, 0, 0, 0, 0, 0, 0, 0, 9, 9})
	f.Add([]byte{3, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x30, 0x39, 0, 0, 0, 0, 0, 0, 0, 5})
	f.Add([]byte{2, 3, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ok, out := mplite.ParseMcastHeader(b)
		if ok && !bytes.Equal(out, b[:len(out)]) {
			t.Fatalf("re-encoded % x from % x", out, b)
		}
	})
}

// TestMcastAllgatherLossy checks the multicast Allgather with 5 % frame
// loss against every rank's block: n multicast Bcasts, and at a known line
// rate n concurrent paced streams.
func TestMcastAllgatherLossy(t *testing.T) {
	for _, tc := range []struct {
		n    int
		rate uint64
	}{{2, 0}, {5, 0}, {9, 0}, {2, 1e9}, {5, 1e9}, {9, 10e9}} {
		n := tc.n
		t.Run(fmt.Sprint(n, "/", tc.rate), func(t *testing.T) {
			opts := []mplite.Option{mplite.WithAlgorithm("allgather", "mcast"), mplite.WithPortRate(tc.rate),
				mplite.WithLocalFaults(uint64(n)+40, memnic.Faults{Loss: 0.05})}
			noErrors(t, collWorld(t, n, 60*time.Second, opts, func(c *mplite.Comm) error {
				for seed, m := range []int{0, 1, 13, 20000} {
					recv := make([]byte, n*m)
					if err := c.Allgather(gen(m, c.Rank(), seed), recv); err != nil {
						return err
					}
					for r := range n {
						if err := mismatch(fmt.Sprintf("block %d of %d bytes", r, m), recv[r*m:(r+1)*m], gen(m, r, seed)); err != nil {
							return err
						}
					}
				}
				if st := c.McastStats(); st.DataSent == 0 || st.Fallbacks != 0 {
					return fmt.Errorf("stats %+v: the multicast path did not run", st)
				}
				return nil
			}))
		})
	}
}

// TestMcastScatterLossy checks the aggregated multicast Scatter with 5 %
// frame loss: every rank gets exactly its block of the root's buffer.
func TestMcastScatterLossy(t *testing.T) {
	for _, n := range []int{2, 6, 9} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			opts := []mplite.Option{mplite.WithAlgorithm("scatter", "mcast"),
				mplite.WithLocalFaults(uint64(n)+70, memnic.Faults{Loss: 0.05})}
			noErrors(t, collWorld(t, n, 60*time.Second, opts, func(c *mplite.Comm) error {
				for seed, m := range []int{0, 1, 13, 5000, 100003} {
					for _, root := range []int{0, n - 1} {
						all := gen(n*m, root, seed)
						var send []byte
						if c.Rank() == root {
							send = all
						}
						recv := make([]byte, m)
						if err := c.Scatter(send, recv, root); err != nil {
							return err
						}
						me := c.Rank()
						if err := mismatch(fmt.Sprintf("block of %d bytes from root %d", m, root), recv, all[me*m:(me+1)*m]); err != nil {
							return err
						}
					}
				}
				if st := c.McastStats(); c.Rank() == 0 && st.DataSent == 0 || st.Fallbacks != 0 {
					return fmt.Errorf("stats %+v: the multicast path did not run", st)
				}
				return nil
			}))
		})
	}
}

// TestMcastForgedDatagrams: a stranger on the switch multicasts data
// datagrams for the group's next operations that claim another length.
// They are counted as bad and dropped; every Bcast completes with the
// root's data (a forged length used to end the call before the sender was
// checked).
func TestMcastForgedDatagrams(t *testing.T) {
	const n = 4
	for _, authOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("auth=%v", authOn), func(t *testing.T) {
			opts := []mplite.Option{mplite.WithAlgorithm("bcast", "mcast-ack"), mplite.WithAuthentication(authOn)}
			var forged sync.Once
			errs := collWorld(t, n, 60*time.Second, opts, func(c *mplite.Comm) error {
				// The group opens on the first call; the forgeries target the
				// operations after it, and are stashed until their turn.
				if err := bcastCheck(c, []int{100}, []int{0}, 0); err != nil {
					return err
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				var ferr error
				forged.Do(func() {
					for op := uint32(2); op < 8 && ferr == nil; op++ {
						ferr = mplite.ForgeMcast(c, op, 0, 999999)
					}
				})
				if ferr != nil {
					return ferr
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				if err := bcastCheck(c, []int{1000, 12345, 3}, []int{0}, 1); err != nil {
					return err
				}
				if c.Rank() == 0 {
					return nil
				}
				// Without authentication the multicast layer refuses the
				// forgeries; with it they never get that far.
				st, as := c.McastStats(), c.AuthStats()
				switch {
				case !authOn && st.Bad == 0:
					return fmt.Errorf("rank %d counted no bad datagram: %+v", c.Rank(), st)
				case authOn && (as.BadTag < 6 || st.Bad != 0):
					return fmt.Errorf("rank %d: %d forgeries refused for their tag (want 6), %d reached multicast", c.Rank(), as.BadTag, st.Bad)
				}
				return nil
			})
			noErrors(t, errs)
		})
	}
}
