package shm_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ethervia/ethervia/shm"
)

// A receiver creates its inbox; a sender (here the same process, usually
// another one of the host) attaches under its identity and commits a
// message; the receiver finds it in the sender's ring.
func Example() {
	dir, _ := os.MkdirTemp("", "shm-example")
	defer os.RemoveAll(dir)
	in, err := shm.Create(filepath.Join(dir, "inbox"), shm.Config{Rings: 1, Slots: 4, SlotData: 256})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer in.Close()

	out, err := shm.Attach(in.Path(), 7)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer out.Close()
	slot, _ := out.Reserve()
	n := copy(slot, "hello from a neighbour")
	out.Commit(&shm.Entry{Kind: shm.Send, Length: n})

	ring := &in.Rings()[0]
	e, ok, err := ring.Peek()
	if err != nil || !ok {
		fmt.Println("nothing:", err)
		return
	}
	fmt.Printf("from %d: %s\n", ring.Owner(), e.Data)
	ring.Release()
	// Output: from 7: hello from a neighbour
}
