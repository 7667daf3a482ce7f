// Command netpipe is a NetPIPE-compatible benchmark for every Ethervia
// layer. It runs NetPIPE 3's method (size schedule with ±perturbation,
// calibrated repeats, the fastest of several trials, time halved for
// ping-pong), prints NetPIPE's progress lines on stderr, writes NetPIPE's
// np.out columns, and can plot them.
//
// Usage:
//
//	netpipe [flags]                 run a benchmark (see -h)
//	netpipe plot A.out [B.out...] -o cmp.svg
//	netpipe -sweep                  remove testbeds that killed runs left
//
// As root it builds a private two-host testbed (-local); otherwise it runs
// both ends in process over memnic (-mem). With -iface it runs one end on
// real interfaces: -r on the receiver, -peer MAC on the transmitter.
//
// The default run measures the mplite module with 3 short trials per point
// and takes about a minute; -full runs NetPIPE's 7 trials of 250 ms. It ends
// with a summary (latency, peak, and with -tcp FILE where the curve crosses
// TCP's). SIGINT and SIGTERM stop the run and remove the testbed; netpipe
// then exits 1.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "netpipe: %v\n", err)
		os.Exit(1)
	}
}

// run is the whole command, callable from tests. Interrupts cancel the run,
// which then removes whatever it built.
func run(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 && args[0] == "plot" {
		return runPlot(args[1:], stdout, stderr)
	}
	return runBench(ctx, args, stdout, stderr)
}
