package mplite_test

import (
	"fmt"
	"log"
	"sync"

	"github.com/ethervia/ethervia/mplite"
)

// column is one column of a row-major matrix of bytes: the halo of a
// stencil code, an MPI_Type_vector.
type column struct {
	m          []byte
	rows, cols int
	col        int
}

func (c column) Len() int { return c.rows }

func (c column) Gather(dst []byte) {
	for i := range dst {
		dst[i] = c.m[i*c.cols+c.col]
	}
}

func (c column) Scatter(src []byte) {
	for i, v := range src {
		c.m[i*c.cols+c.col] = v
	}
}

// Rank 0 sends the last column of its matrix into the first column of
// rank 1's, with no packing on either side.
func ExampleComm_IsendLayout() {
	comms, err := mplite.NewLocalWorld(2)
	if err != nil {
		log.Fatal(err)
	}
	const rows, cols = 3, 4
	var wg sync.WaitGroup
	var got []byte
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Finalize()
			m := make([]byte, rows*cols)
			if c.Rank() == 0 {
				for i := range m {
					m[i] = byte(i)
				}
				r, err := c.IsendLayout(column{m, rows, cols, cols - 1}, 1, 0)
				if err == nil {
					_, err = r.Wait()
				}
				if err != nil {
					log.Fatal(err)
				}
				return
			}
			r, err := c.IrecvLayout(column{m, rows, cols, 0}, 0, 0)
			if err == nil {
				_, err = r.Wait()
			}
			if err != nil {
				log.Fatal(err)
			}
			got = m
		}()
	}
	wg.Wait()
	for i := 0; i < rows; i++ {
		fmt.Println(got[i*cols : (i+1)*cols])
	}
	// Output:
	// [3 0 0 0]
	// [7 0 0 0]
	// [11 0 0 0]
}
