package mplite_test

import (
	"fmt"
	"log"
	"sync"

	"github.com/ethervia/ethervia/mplite"
)

// A program's shape under a launcher (mprun, mpiexec): Init reads the
// rank, the job size, the interfaces and the job key from the
// environment. Started alone, the program is a world of one.
func ExampleInit() {
	c, err := mplite.Init()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Finalize()
	if c.Rank() == 0 {
		// Send to self: short messages are buffered, so this cannot block.
		if err := c.Send([]byte("hello"), 0, 1); err != nil {
			log.Fatal(err)
		}
	}
	buf := make([]byte, 16)
	st, err := c.Recv(buf, mplite.AnySource, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d of %d got %q from rank %d\n", c.Rank(), c.Size(), buf[:st.Count], st.Source)
	// Output: rank 0 of 1 got "hello" from rank 0
}

// Four ranks in one process: a ring passes a token around.
func ExampleNewLocalWorld() {
	comms, err := mplite.NewLocalWorld(4)
	if err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	out := make([]string, len(comms))
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Finalize()
			me, n := c.Rank(), c.Size()
			token := []byte{0}
			if me == 0 {
				if err := c.Send(token, 1, 0); err != nil {
					log.Fatal(err)
				}
			}
			if _, err := c.Recv(token, (me+n-1)%n, 0); err != nil {
				log.Fatal(err)
			}
			token[0]++
			if me != 0 {
				if err := c.Send(token, (me+1)%n, 0); err != nil {
					log.Fatal(err)
				}
			}
			out[me] = fmt.Sprintf("rank %d saw the token at %d", me, token[0])
		}()
	}
	wg.Wait()
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// rank 0 saw the token at 4
	// rank 1 saw the token at 1
	// rank 2 saw the token at 2
	// rank 3 saw the token at 3
}

// An MPI hello world on four ranks in one process (under a launcher, each
// process would call Init instead and get its own rank): every rank
// greets rank 0 with a nonblocking send, rank 0 receives the greetings,
// and an Allreduce sums the ranks before every rank finalizes.
func Example() {
	comms, err := mplite.NewLocalWorld(4)
	if err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Finalize()
			me, n := c.Rank(), c.Size()
			req, err := c.Isend([]byte(fmt.Sprintf("hello from rank %d of %d", me, n)), 0, 0)
			if err != nil {
				log.Fatal(err)
			}
			if me == 0 {
				buf := make([]byte, 64)
				for src := range n {
					st, err := c.Recv(buf, src, 0)
					if err != nil {
						log.Fatal(err)
					}
					fmt.Println(string(buf[:st.Count]))
				}
			}
			if _, err := req.Wait(); err != nil {
				log.Fatal(err)
			}
			sum := make([]int, 1)
			if err := mplite.Allreduce(c, []int{me}, sum, mplite.Sum[int]()); err != nil {
				log.Fatal(err)
			}
			if me == 0 {
				fmt.Println("sum of ranks:", sum[0])
			}
		}()
	}
	wg.Wait()
	// Output:
	// hello from rank 0 of 4
	// hello from rank 1 of 4
	// hello from rank 2 of 4
	// hello from rank 3 of 4
	// sum of ranks: 6
}
