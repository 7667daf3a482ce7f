package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Overlaying two np.out files, as `netpipe plot a.out b.out -o cmp.svg`.
func Example_plot() {
	dir, _ := os.MkdirTemp("", "netpipe-example")
	defer os.RemoveAll(dir)
	a, b := filepath.Join(dir, "a.out"), filepath.Join(dir, "b.out")
	os.WriteFile(a, []byte("       1 0.397926   0.00001917\n    1024 390.625000   0.00002000\n"), 0o644)
	os.WriteFile(b, []byte("       1 1.525879   0.00000500\n    1024 1302.083333   0.00000600\n"), 0o644)
	out := filepath.Join(dir, "cmp.svg")
	var stdout strings.Builder
	if err := run([]string{"plot", a, b, "-o", out}, &stdout, os.Stderr); err != nil {
		fmt.Println(err)
	}
	fmt.Print(strings.ReplaceAll(stdout.String(), dir, "DIR"))
	st, _ := os.Stat(out)
	fmt.Println(st.Size() > 1000)
	// Output:
	// Plot of 2 runs written to DIR/cmp.svg
	// true
}
