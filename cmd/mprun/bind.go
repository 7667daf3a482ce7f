package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// rankCPUs returns the CPU each rank of a testbed job is bound to, or nil
// when ranks are left to the kernel: -bind none, or more ranks than the
// CPUs mprun may use. A rank that polls keeps its CPU's caches and never
// has to be moved off its partner's CPU, as Open MPI and MPICH's Hydra
// bind ranks to cores when there are enough.
func rankCPUs(o options) ([]int, error) {
	if o.bind == "none" { // parse allows auto and none
		return nil, nil
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("mprun: CPUs: %w", err)
	}
	return bindOrder(set, o.np), nil
}

// bindOrder gives rank r the r-th CPU of set, or nil if set has fewer
// CPUs than np ranks.
func bindOrder(set unix.CPUSet, np int) []int {
	if set.Count() < np {
		return nil
	}
	cpus := make([]int, 0, np)
	for c := 0; len(cpus) < np; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}
