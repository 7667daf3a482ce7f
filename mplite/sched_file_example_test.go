package mplite_test

import (
	"bytes"
	"fmt"

	"github.com/ethervia/ethervia/mplite"
)

// A Level 3 program: the schedule of a static pattern is compiled offline
// and stored; at run time every rank loads it and passes it to
// AlltoallvSchedule with its buffers.
func ExampleReadSchedule() {
	pattern := []mplite.Msg{{Src: 0, Dst: 1, Size: 1 << 20}, {Src: 1, Dst: 3, Size: 1 << 20},
		{Src: 0, Dst: 2, Size: 10 << 10}, {Src: 2, Dst: 3, Size: 100}, {Src: 1, Dst: 5, Size: 100}, {Src: 2, Dst: 1, Size: 100}}
	s, err := mplite.CompileSchedule(6, pattern, mplite.SchedAllToAll, 0)
	if err != nil {
		panic(err)
	}
	var file bytes.Buffer
	if err := mplite.WriteSchedule(&file, s); err != nil {
		panic(err)
	}
	fmt.Print(file.String())
	loaded, err := mplite.ReadSchedule(&file)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(loaded.Phases()), "phases;", mplite.CheckSchedule(pattern, loaded.Phases()))
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
