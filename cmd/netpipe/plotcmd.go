package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ethervia/ethervia/cmd/netpipe/internal/netpipe"
)

// runPlot is `netpipe plot A.out [B.out ...] -o cmp.svg`: it overlays
// several np.out files in NetPIPE's two graphs. Flags may come before or
// after the file names.
func runPlot(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("netpipe plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "output file, .svg or .png (required)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: netpipe plot A.out [B.out ...] -o cmp.svg|png\n")
		fs.PrintDefaults()
	}
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) == 0 {
		return errors.New("plot: name at least one np.out file")
	}
	if *out == "" {
		return errors.New("plot: -o FILE.svg|png is required")
	}
	if _, err := netpipe.PlotFormat(*out); err != nil {
		return err
	}
	var series []netpipe.Series
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		pts, err := netpipe.ParseNPOut(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		if len(pts) == 0 {
			return fmt.Errorf("plot %s: no data points", name)
		}
		series = append(series, netpipe.Series{Name: strings.TrimSuffix(filepath.Base(name), ".out"), Points: pts})
	}
	if err := netpipe.PlotFile(*out, series); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Plot of %d runs written to %s\n", len(series), *out)
	return nil
}
