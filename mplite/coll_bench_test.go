package mplite_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ethervia/ethervia/mplite"
)

// benchColl times op on every rank of an n-rank local world with coll's
// algorithm forced; ns/op is rank 0's time per call. The machine shares
// its processors, so these only show that each algorithm runs.
func benchColl(b *testing.B, n int, coll, algo string, op func(c *mplite.Comm) error) {
	comms, err := mplite.NewLocalWorld(n, mplite.WithSpinTime(time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range comms {
		if err := c.SetAlgorithm(coll, algo); err != nil {
			b.Fatal(err)
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	iters := b.N
	b.ResetTimer()
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range iters {
				if err := op(c); err != nil {
					errs[i] = err
					mplite.Abandon(c)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	// Finalize synchronises the ranks, so they finalize together.
	for i, c := range comms {
		if errs[i] == nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = c.Finalize()
			}()
		}
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", i, err)
		}
	}
}

var benchSizes = []int{8, 1024, 64 << 10}

func BenchmarkBcast(b *testing.B) {
	for _, algo := range mplite.Algorithms("bcast") {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", algo, size), func(b *testing.B) {
				b.SetBytes(int64(size))
				buf := make([][]byte, 8)
				benchColl(b, 8, "bcast", algo, func(c *mplite.Comm) error {
					if buf[c.Rank()] == nil {
						buf[c.Rank()] = make([]byte, size)
					}
					return c.Bcast(buf[c.Rank()], 0)
				})
			})
		}
	}
}

func BenchmarkAllreduce(b *testing.B) {
	for _, algo := range mplite.Algorithms("allreduce") {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", algo, size), func(b *testing.B) {
				b.SetBytes(int64(size))
				bufs := make([][]float64, 8)
				benchColl(b, 8, "allreduce", algo, func(c *mplite.Comm) error {
					if bufs[c.Rank()] == nil {
						bufs[c.Rank()] = make([]float64, size/8)
					}
					v := bufs[c.Rank()]
					return mplite.Allreduce(c, v, v, mplite.Sum[float64]())
				})
			})
		}
	}
}

func BenchmarkAlltoall(b *testing.B) {
	for _, algo := range mplite.Algorithms("alltoall") {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", algo, size), func(b *testing.B) {
				b.SetBytes(int64(8 * size))
				bufs := make([][2][]byte, 8)
				benchColl(b, 8, "alltoall", algo, func(c *mplite.Comm) error {
					if bufs[c.Rank()][0] == nil {
						bufs[c.Rank()] = [2][]byte{make([]byte, 8*size), make([]byte, 8*size)}
					}
					return c.Alltoall(bufs[c.Rank()][0], bufs[c.Rank()][1])
				})
			})
		}
	}
}
