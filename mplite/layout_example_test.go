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

// rowHalves is the middle half of every row of a row-major matrix: runs
// long enough for a long message to move by RDMA straight out of and into
// the matrix (an MPI subarray).
type rowHalves struct {
	m          []byte
	rows, cols int
}

func (h rowHalves) Len() int     { return h.rows * h.cols / 2 }
func (h rowHalves) NumRuns() int { return h.rows }

func (h rowHalves) Runs() ([]byte, []mplite.Run) {
	runs := make([]mplite.Run, h.rows)
	for i := range runs {
		runs[i] = mplite.Run{Off: i*h.cols + h.cols/4, Len: h.cols / 2}
	}
	return h.m, runs
}

func (h rowHalves) Gather(dst []byte) {
	for i := 0; len(dst) > 0; i++ {
		dst = dst[copy(dst, h.m[i*h.cols+h.cols/4:i*h.cols+h.cols/4+h.cols/2]):]
	}
}

func (h rowHalves) Scatter(src []byte) {
	for i := 0; len(src) > 0; i++ {
		src = src[copy(h.m[i*h.cols+h.cols/4:i*h.cols+h.cols/4+h.cols/2], src):]
	}
}

// Rank 0 sends the middle halves of the 16 rows of a 16 x 16 KiB matrix
// (128 KiB, past the eager limit) to the same place in rank 1's: by RDMA
// from run to run, no staging copy on either side.
func ExampleRunLayout() {
	comms, err := mplite.NewLocalWorld(2)
	if err != nil {
		log.Fatal(err)
	}
	const rows, cols = 16, 16 << 10
	var wg sync.WaitGroup
	var got []byte
	var staged uint64
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Finalize()
			m := make([]byte, rows*cols)
			var r *mplite.Request
			var err error
			if c.Rank() == 0 {
				for i := range m {
					m[i] = byte(i / cols)
				}
				r, err = c.IsendLayout(rowHalves{m, rows, cols}, 1, 0)
			} else {
				r, err = c.IrecvLayout(rowHalves{m, rows, cols}, 0, 0)
			}
			if err == nil {
				_, err = r.Wait()
			}
			if err != nil {
				log.Fatal(err)
			}
			if c.Rank() == 1 {
				got, staged = m, c.Stats().Staged
			}
		}()
	}
	wg.Wait()
	fmt.Println("row 5:", got[5*cols], got[5*cols+cols/4], got[5*cols+3*cols/4-1], got[5*cols+3*cols/4])
	fmt.Println("staging copies:", staged)
	// Output:
	// row 5: 0 5 5 0
	// staging copies: 0
}
