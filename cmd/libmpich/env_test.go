package main

import "testing"

func TestGoProcsFromLauncher(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		cpus int
		want int
		ok   bool
	}{
		{map[string]string{"MPI_LOCALNRANKS": "2"}, 2, 1, true},
		{map[string]string{"MPI_LOCALNRANKS": "4"}, 64, 16, true},
		{map[string]string{"OMPI_COMM_WORLD_LOCAL_SIZE": "8"}, 2, 1, true},
		{map[string]string{"MPI_LOCALNRANKS": "2", "GOMAXPROCS": "2"}, 2, 0, false},
		{map[string]string{"MPI_LOCALNRANKS": "x"}, 2, 0, false},
		{nil, 2, 0, false},
	} {
		n, ok := goProcs(func(k string) string { return tc.env[k] }, tc.cpus)
		if n != tc.want || ok != tc.ok {
			t.Errorf("env %v on %d CPUs: %d, %v; want %d, %v", tc.env, tc.cpus, n, ok, tc.want, tc.ok)
		}
	}
}
