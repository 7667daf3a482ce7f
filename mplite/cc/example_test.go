package cc_test

import (
	"bytes"
	"fmt"

	"github.com/ethervia/ethervia/mplite/cc"
)

// A Level 3 program: the schedule of a static pattern is compiled offline
// and stored; at run time every rank loads it and passes it to
// AlltoallvSchedule with its buffers.
func ExampleReadSchedule() {
	pattern := []cc.Msg{{Src: 0, Dst: 1, Size: 1 << 20}, {Src: 1, Dst: 3, Size: 1 << 20},
		{Src: 0, Dst: 2, Size: 10 << 10}, {Src: 2, Dst: 3, Size: 100}, {Src: 1, Dst: 5, Size: 100}, {Src: 2, Dst: 1, Size: 100}}
	s, err := cc.CompileSchedule(6, pattern, cc.SchedAllToAll, 0)
	if err != nil {
		panic(err)
	}
	var file bytes.Buffer
	if err := cc.WriteSchedule(&file, s); err != nil {
		panic(err)
	}
	fmt.Print(file.String())
	loaded, err := cc.ReadSchedule(&file)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(loaded.Phases()), "phases;", cc.CheckSchedule(pattern, loaded.Phases()))
	// Output:
	// mplite-schedule 1
	// ranks 6
	// phase
	// 0 1 1048576
	// 2 3 100
	// 1 5 100
	// phase
	// 1 3 1048576
	// 0 2 10240
	// 2 1 100
	// 2 phases; <nil>
}

// A Level 2 program: every rank holds the whole pattern and compiles the
// same schedule from it; each rank then runs its own part (what
// mplite.Comm.AlltoallvSchedule does with it).
func ExampleCompileSchedule() {
	pattern := []cc.Msg{{Src: 0, Dst: 1, Size: 1 << 20}, {Src: 1, Dst: 3, Size: 1 << 20},
		{Src: 0, Dst: 2, Size: 10 << 10}, {Src: 2, Dst: 3, Size: 100}, {Src: 1, Dst: 5, Size: 100}, {Src: 2, Dst: 1, Size: 100}}
	s, err := cc.CompileSchedule(6, pattern, cc.SchedAllToAll, 0)
	if err != nil {
		panic(err)
	}
	for k, p := range s.Phases() {
		fmt.Println("phase", k, p)
	}
	for _, op := range s.Ops(1) {
		fmt.Printf("rank 1, phase %d: send %v, peer %d, %d bytes\n", op.Phase, op.Send, op.Peer, op.Size)
	}
	fmt.Println(cc.CheckSchedule(pattern, s.Phases()))
	fmt.Printf("%d phases, longest message %d bytes\n", s.NumPhases(), s.Largest())
	// Output:
	// phase 0 [{0 1 1048576} {2 3 100} {1 5 100}]
	// phase 1 [{1 3 1048576} {0 2 10240} {2 1 100}]
	// rank 1, phase 0: send false, peer 0, 1048576 bytes
	// rank 1, phase 0: send true, peer 5, 100 bytes
	// rank 1, phase 1: send true, peer 3, 1048576 bytes
	// rank 1, phase 1: send false, peer 2, 100 bytes
	// <nil>
	// 2 phases, longest message 1048576 bytes
}

// The all-to-all pattern's n-1 contention-free phases: in phase i-1 rank j
// sends to rank j+i mod n.
func ExampleAllToAllPhases() {
	for _, p := range cc.AllToAllPhases(3) {
		fmt.Println(p)
	}
	// Output:
	// [{0 1 0} {1 2 0} {2 0 0}]
	// [{0 2 0} {1 0 0} {2 1 0}]
}
