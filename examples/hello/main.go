// Command hello is the smallest Ethervia MPI program: every rank other than
// 0 sends a greeting to rank 0, which prints them. Run it under mprun:
//
//	go build -o hello ./examples/hello
//	sudo go run ./cmd/mprun -np 4 -- ./hello
package main

import (
	"fmt"
	"log"

	"github.com/ethervia/ethervia/mplite"
)

func main() {
	// Init reads the rank, the job size, the interfaces and the job key
	// from the environment mprun (or mpiexec, or Slurm) set.
	world, err := mplite.Init()
	if err != nil {
		log.Fatal(err)
	}
	defer world.Finalize()

	const tag = 1
	me, n := world.Rank(), world.Size()
	if me != 0 {
		msg := fmt.Sprintf("hello from rank %d of %d", me, n)
		if err := world.Send([]byte(msg), 0, tag); err != nil {
			log.Fatal(err)
		}
		return
	}
	buf := make([]byte, 64)
	for i := 1; i < n; i++ {
		st, err := world.Recv(buf, mplite.AnySource, tag)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("rank 0 got %q\n", buf[:st.Count])
	}
}
