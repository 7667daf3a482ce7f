package mplite_test

import (
	"fmt"
	"log"
	"sync"

	"github.com/ethervia/ethervia/mplite"
)

// Split six ranks into evens and odds, ordered by descending world rank,
// and sum the world ranks within each half.
func ExampleComm_Split() {
	comms, err := mplite.NewLocalWorld(6)
	if err != nil {
		log.Fatal(err)
	}
	out := make([]string, len(comms))
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Finalize()
			me := c.Rank()
			half, err := c.Split(me%2, -me)
			if err != nil {
				log.Fatal(err)
			}
			defer half.Free()
			sum := []int{me}
			if err := mplite.Allreduce(half, sum, sum, mplite.Sum[int]()); err != nil {
				log.Fatal(err)
			}
			out[me] = fmt.Sprintf("world rank %d is rank %d of %d in its half; the half's sum is %d",
				me, half.Rank(), half.Size(), sum[0])
		}()
	}
	wg.Wait()
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// world rank 0 is rank 2 of 3 in its half; the half's sum is 6
	// world rank 1 is rank 2 of 3 in its half; the half's sum is 9
	// world rank 2 is rank 1 of 3 in its half; the half's sum is 6
	// world rank 3 is rank 1 of 3 in its half; the half's sum is 9
	// world rank 4 is rank 0 of 3 in its half; the half's sum is 6
	// world rank 5 is rank 0 of 3 in its half; the half's sum is 9
}

// Every rank contributes a vector; all get the element-wise sum and max.
func ExampleAllreduce() {
	comms, err := mplite.NewLocalWorld(4)
	if err != nil {
		log.Fatal(err)
	}
	res := make([][]float64, len(comms))
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Finalize()
			r := float64(c.Rank())
			sum := make([]float64, 2)
			if err := mplite.Allreduce(c, []float64{r, 1}, sum, mplite.Sum[float64]()); err != nil {
				log.Fatal(err)
			}
			hi := []float64{r * r}
			if err := mplite.Allreduce(c, hi, hi, mplite.Max[float64]()); err != nil {
				log.Fatal(err)
			}
			res[c.Rank()] = append(sum, hi...)
		}()
	}
	wg.Wait()
	fmt.Println(res[0], res[3])
	// Output: [6 4 9] [6 4 9]
}

// On a switch whose line rate binds, the selector changes its mind: a long
// Bcast goes by multicast (each port carries the message once), an
// Alltoall by CC-MPI's phases (each port receives from one sender at a
// time). mprun gives the ranks the rate as MPLITE_RATE; WithPortRate does
// the same in code.
func ExampleWithPortRate() {
	for _, rate := range []uint64{0, 100e6} {
		comms, err := mplite.NewLocalWorld(8, mplite.WithPortRate(rate), mplite.WithSharedCPUs(2))
		if err != nil {
			log.Fatal(err)
		}
		bcast, _ := comms[0].Algorithm("bcast", 1<<20)
		alltoall, _ := comms[0].Algorithm("alltoall", 1<<20)
		fmt.Printf("rate %d bit/s: 1 MiB bcast by %s, alltoall of 1 MiB blocks by %s\n", rate, bcast, alltoall)
		var wg sync.WaitGroup
		for _, c := range comms {
			wg.Add(1)
			go func() { defer wg.Done(); c.Finalize() }() // collective
		}
		wg.Wait()
	}
	// Output:
	// rate 0 bit/s: 1 MiB bcast by binomial, alltoall of 1 MiB blocks by pairwise
	// rate 100000000 bit/s: 1 MiB bcast by mcast-nak, alltoall of 1 MiB blocks by phased
}
