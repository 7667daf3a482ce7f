package rdma_test

import (
	"errors"
	"fmt"

	"github.com/ethervia/ethervia/rdma"
)

// A target registers a buffer for remote writes; an access with the wrong
// protection tag is refused and writes nothing.
func Example() {
	table := rdma.NewTable(rdma.Limits{MaxRegions: 16})
	buf := make([]byte, 8)
	region, _ := table.Register(buf, 42, rdma.RemoteWrite)

	err := table.CopyIn(region.Handle(), 42, 1, 0, []byte("via"))
	fmt.Println(err, string(buf[:3]))

	err = table.CopyIn(region.Handle(), 7, 1, 0, []byte("bad"))
	fmt.Println(errors.Is(err, rdma.ErrProtection), string(buf[:3]))
	// Output:
	// <nil> via
	// true via
}
