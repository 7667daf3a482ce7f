// Command mpitest runs mplite's MPI-semantics suite as one rank of a real
// job: start it under mprun or MPICH's Hydra (mpiexec), once per host. The
// end-to-end tests in test/ drive it.
//
//	mprun -np 4 -- mpitest [-max BYTES] [-isends N] [-only a,b] [-early-exit]
//
// Every rank prints "mpitest: rank R of N: ok" when its checks pass and
// exits 0; a failing rank prints the failure and exits 1. With -early-exit
// the last rank exits at once without Finalize, while the others must see an
// error naming it (within -peer-timeout) and then exit 0.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/ethervia/ethervia/mplite"
	"github.com/ethervia/ethervia/mplite/internal/mpitest"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("mpitest", flag.ContinueOnError)
	maxSize := fs.Int("max", 64<<20, "largest message of the size sweep, in bytes")
	isends := fs.Int("isends", 1000, "outstanding Isends in the many-isends check")
	only := fs.String("only", "", "comma-separated checks to run (default: all)")
	eager := fs.Int("eager", mplite.DefaultEagerLimit, "eager limit in bytes")
	early := fs.Bool("early-exit", false, "run the early-exit check instead: the last rank dies")
	chaos := fs.Int("chaos", 0, "instead of the suite: run this many seeded random operations (point-to-point and collective), checking every byte")
	seed := fs.Uint64("seed", 1, "seed of -chaos (the same on every rank)")
	kill := fs.Duration("sigkill-after", 0, "instead of the suite: every rank exchanges with the last, which SIGKILLs itself after this long")
	peerTimeout := fs.Duration("peer-timeout", mplite.DefaultPeerTimeout, "how long a silent peer lives (the library's default; a loaded machine can starve a rank for seconds)")
	loop := fs.String("loop", "", "instead of the suite: repeat alltoall (every rank) or pingpong (ranks 0 and 1) for -for, checking every byte")
	loopSize := fs.Int("size", 1<<20, "message (pingpong) or block (alltoall) size of -loop")
	loopFor := fs.Duration("for", 2*time.Second, "how long -loop runs")
	verbose := fs.Bool("v", false, "log each check")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	start := time.Now()
	c, err := mplite.Init(mplite.WithEagerLimit(*eager), mplite.WithPeerTimeout(*peerTimeout))
	if err != nil {
		fmt.Fprintf(os.Stderr, "mpitest: init: %v\n", err)
		return 1
	}
	who := fmt.Sprintf("rank %d of %d", c.Rank(), c.Size())
	if *chaos > 0 {
		cc := mpitest.ChaosConfig{Seed: *seed, Ops: *chaos, MaxSize: *maxSize}
		if *verbose {
			cc.Log = func(format string, a ...any) { fmt.Printf("mpitest: "+who+": "+format+"\n", a...) }
		}
		sum, err := mpitest.Chaos(c, cc)
		if st := c.Stats(); st.Rails > 1 {
			fmt.Printf("mpitest: %s: rails %d, rail failures %d, reconnects %d\n", who, st.Rails, st.RailFailures, st.RailReconnects)
		}
		if err != nil {
			err = fmt.Errorf("chaos: %w", err)
		}
		return finish(c, who, err, func() string {
			return fmt.Sprintf("chaos ok: %d ops, %d messages, %d bytes checked in %v", sum.Ops, sum.Messages, sum.Bytes,
				time.Since(start).Round(time.Millisecond))
		})
	}
	if *loop != "" {
		res, err := runLoop(c, *loop, *loopSize, *loopFor)
		st := c.Stats()
		return finish(c, who, err, func() string {
			return fmt.Sprintf("loop %s ok: %d calls, %d bytes checked in %v; rails %d, rail failures %d, first seen in call %d",
				*loop, res.calls, res.bytes, time.Since(start).Round(time.Millisecond), st.Rails, st.RailFailures, res.failedIn)
		})
	}
	if *kill > 0 {
		return sigkill(c, who, *kill, start)
	}
	if *early {
		last := c.Size() - 1
		err := mpitest.EarlyExit(c, func() {
			// Vanish: no Finalize, no goodbye on the wire.
			fmt.Printf("mpitest: %s: exiting early\n", who)
			os.Exit(0)
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "mpitest: %s: %v\n", who, err)
			return 1
		}
		// Finalize cannot synchronise with a dead rank; it must say so
		// rather than hang.
		ferr := c.Finalize()
		fmt.Printf("mpitest: %s: saw rank %d die after %v; finalize: %v\n", who, last, time.Since(start).Round(time.Millisecond), ferr)
		return 0
	}
	cfg := mpitest.Config{EagerLimit: *eager, MaxSize: *maxSize, Isends: *isends}
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	if *verbose {
		cfg.Log = func(format string, a ...any) { fmt.Printf("mpitest: "+who+": "+format+"\n", a...) }
	}
	err = mpitest.Run(c, cfg)
	st := c.Stats()
	if st.Rails > 1 {
		fmt.Printf("mpitest: %s: rails %d, rail failures %d, reconnects %d\n", who, st.Rails, st.RailFailures, st.RailReconnects)
	}
	if st.Driver != "" {
		fmt.Printf("mpitest: %s: driver %s\n", who, st.Driver)
	}
	if st.SharedMemory > 0 {
		fmt.Printf("mpitest: %s: %d entries through shared memory\n", who, st.SharedMemory)
	}
	if as := c.AuthStats(); as.On {
		fmt.Printf("mpitest: %s: authenticated, refused %d frames for their tag and %d replays\n", who, as.BadTag, as.Replayed)
	}
	return finish(c, who, err, func() string { return fmt.Sprintf("ok in %v", time.Since(start).Round(time.Millisecond)) })
}

// finish ends a run: on err it reports it and closes c (exit 1); else it
// finalizes c and prints the run's ok line.
func finish(c *mplite.Comm, who string, err error, okLine func() string) int {
	if err != nil {
		fmt.Fprintf(os.Stderr, "mpitest: %s: %v\n", who, err)
		c.Close()
		return 1
	}
	if err := c.Finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "mpitest: %s: finalize: %v\n", who, err)
		return 1
	}
	fmt.Printf("mpitest: %s: %s\n", who, okLine())
	return 0
}

// sigkill is the killed-rank run: ranks 0..n-2 exchange messages with the
// last rank without pause; the last rank serves them and, after the given
// time, kills itself with SIGKILL mid-exchange. A survivor must get an error
// naming the dead rank; it reports it and exits 1, as a real program would.
func sigkill(c *mplite.Comm, who string, after time.Duration, start time.Time) int {
	last := c.Size() - 1
	buf := make([]byte, 4096)
	if c.Rank() == last {
		deadline := time.Now().Add(after)
		for peer := 0; ; peer = (peer + 1) % last {
			if time.Now().After(deadline) {
				fmt.Printf("mpitest: %s: SIGKILL to myself\n", who)
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
			if _, err := c.Recv(buf, peer, 1); err != nil {
				fmt.Fprintf(os.Stderr, "mpitest: %s: %v\n", who, err)
				return 1
			}
			if err := c.Send(buf, peer, 2); err != nil {
				fmt.Fprintf(os.Stderr, "mpitest: %s: %v\n", who, err)
				return 1
			}
		}
	}
	var died time.Time
	for n := 0; ; n++ {
		err := c.Send(buf, last, 1)
		if err == nil {
			_, err = c.Recv(buf, last, 2)
		}
		if err == nil {
			continue
		}
		died = time.Now()
		var pe *mplite.PeerError
		if !errors.As(err, &pe) || pe.Rank != last {
			fmt.Fprintf(os.Stderr, "mpitest: %s: after %d exchanges: %v (does not name rank %d)\n", who, n, err, last)
			return 3
		}
		fmt.Printf("mpitest: %s: rank %d died after %d exchanges, noticed at %v: %v\n", who, last, n, died.Sub(start).Round(time.Millisecond), err)
		break
	}
	c.Close()
	return 1
}
