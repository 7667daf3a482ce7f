package testbed

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// runFresh runs fn on a new goroutine locked to its OS thread and waits. fn
// may change the thread's network namespace: afterwards the thread goes back
// to its original namespace and, still locked, exits with the goroutine, so
// the runtime discards it. (The one thread the runtime cannot discard, the
// main thread, is parked for good instead; restoring its namespace keeps
// /proc/self/net, which follows the main thread, pointing at the
// caller's namespace.)
func runFresh(fn func() error) error {
	return <-goFresh(fn)
}

func goFresh(fn func() error) <-chan error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread, see above.
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("testbed: current namespace: %w", err)
			return
		}
		defer orig.Close()
		defer netns.Set(orig) //nolint:errcheck // best effort; the thread is discarded anyway
		errc <- fn()
	}()
	return errc
}

// goIn runs fn on a fresh locked thread switched into the namespace ns (an fd
// it takes over and closes) and sends fn's error on the returned channel.
// The thread is discarded afterwards, as in runFresh.
func goIn(name string, ns netns.NsHandle, fn func() error) <-chan error {
	return goFresh(func() error {
		err := netns.Set(ns)
		ns.Close()
		if err != nil {
			return fmt.Errorf("testbed: enter namespace %s: %w", name, err)
		}
		return fn()
	})
}

// dup returns a private copy of the namespace fd, or ErrClosed.
func (tb *Testbed) dup(sp *space) (netns.NsHandle, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		return -1, ErrClosed
	}
	return sp.dup()
}

// dup returns a private copy of the namespace fd.
func (sp *space) dup() (netns.NsHandle, error) {
	if sp.ns < 0 {
		return -1, ErrClosed
	}
	fd, err := unix.FcntlInt(uintptr(sp.ns), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("testbed %s: dup namespace fd: %w", sp.name, err)
	}
	return netns.NsHandle(fd), nil
}

// run runs fn on a fresh thread inside sp and waits. The caller makes sure
// sp stays open (holds tb.mu, or is building).
func (sp *space) run(fn func() error) error {
	ns, err := sp.dup()
	if err != nil {
		return err
	}
	return <-goIn(sp.name, ns, fn)
}

// Do runs fn on a fresh OS thread switched into the host's namespace, waits,
// and returns fn's error. Sockets fn opens stay in the namespace for their
// whole life and may be used from any goroutine afterwards; goroutines fn
// starts run in the caller's namespace. The thread is discarded afterwards.
// fn must not call testing.T.FailNow (it runs on another goroutine).
func (h *Host) Do(fn func() error) error {
	return <-h.Go(fn)
}

// Go is like Do but does not wait: fn runs on its own locked thread in the
// namespace, and its error (or the error of entering the namespace) arrives
// on the returned channel, which has room for it.
func (h *Host) Go(fn func() error) <-chan error {
	ns, err := h.tb.dup(h.sp)
	if err != nil {
		errc := make(chan error, 1)
		errc <- fmt.Errorf("testbed host %d: %w", h.Index, err)
		return errc
	}
	return goIn(h.Name, ns, fn)
}

// Start starts cmd (not yet started) inside the host's namespace. Every
// Start of a testbed forks from one dedicated thread that stays locked, so
// the runtime never discards it while children run: with
// cmd.SysProcAttr.Pdeathsig set, a child dies only when that thread does,
// which is when the testbed closes (or the process exits). Forking from a
// pooled thread would not do: a later namespace operation may lock that
// thread and discard it, killing the child. The caller waits for cmd as
// usual; Close kills the child if it still runs.
func (h *Host) Start(cmd *exec.Cmd) error { return h.start(cmd, -1) }

// StartOnCPU is Start with the process bound to CPU cpu (its affinity at
// birth, inherited by every thread it makes), as MPI launchers bind ranks
// to cores when there are enough for all.
func (h *Host) StartOnCPU(cmd *exec.Cmd, cpu int) error {
	if cpu < 0 || cpu >= 64*len(unix.CPUSet{}) {
		return fmt.Errorf("testbed host %d: no CPU %d", h.Index, cpu)
	}
	return h.start(cmd, cpu)
}

func (h *Host) start(cmd *exec.Cmd, cpu int) error {
	ns, err := h.tb.dup(h.sp)
	if err != nil {
		return fmt.Errorf("testbed host %d: %w", h.Index, err)
	}
	defer ns.Close()
	req := spawnReq{cmd: cmd, ns: ns, name: h.Name, cpu: cpu, errc: make(chan error, 1)}
	if err := h.tb.spawn(req); err != nil {
		return fmt.Errorf("testbed host %d: %w", h.Index, err)
	}
	if err := <-req.errc; err != nil {
		return fmt.Errorf("testbed host %d: %w", h.Index, err)
	}
	h.tb.addProc(cmd.Process)
	return nil
}

// spawnReq asks the spawner thread to start cmd inside ns.
type spawnReq struct {
	cmd  *exec.Cmd
	ns   netns.NsHandle
	name string
	cpu  int // the CPU the child is bound to, or -1
	errc chan error
}

// spawner is the thread every Start forks from. Its channels are made with
// the testbed; the thread starts on first use.
type spawner struct {
	once sync.Once
	reqs chan spawnReq
	quit chan struct{} // closed by Close
	dead chan struct{} // closed when the thread stops serving
	err  error         // why the thread could not start
}

// spawn hands req to the spawner, starting it on first use.
func (tb *Testbed) spawn(req spawnReq) error {
	sp := &tb.spawner
	sp.once.Do(func() {
		ready := make(chan error, 1)
		go runSpawner(sp, ready)
		sp.err = <-ready
	})
	if sp.err != nil {
		return sp.err
	}
	select {
	case sp.reqs <- req:
		return nil
	case <-sp.quit:
		return ErrClosed
	case <-sp.dead:
		return errors.New("the spawner thread is gone")
	}
}

// runSpawner locks its thread for good and starts commands in the
// namespaces asked for, returning to its own namespace after each.
func runSpawner(sp *spawner, ready chan<- error) {
	defer close(sp.dead)
	runtime.LockOSThread()
	// No UnlockOSThread: the thread dies with the goroutine, taking any
	// child still running (Pdeathsig) with it.
	orig, err := netns.Get()
	if err != nil {
		ready <- fmt.Errorf("current namespace: %w", err)
		return
	}
	defer orig.Close()
	ready <- nil
	for {
		select {
		case <-sp.quit:
			return
		case req := <-sp.reqs:
			if err := netns.Set(req.ns); err != nil {
				req.errc <- fmt.Errorf("enter namespace %s: %w", req.name, err)
				continue
			}
			err := startBound(req.cmd, req.cpu)
			if rerr := netns.Set(orig); rerr != nil {
				// The thread is in the wrong namespace: stop serving.
				req.errc <- errors.Join(err, fmt.Errorf("return from namespace %s: %w", req.name, rerr))
				return
			}
			if err != nil {
				err = fmt.Errorf("start %s: %w", req.cmd.Path, err)
			}
			req.errc <- err
		}
	}
}

// startBound starts cmd from this (locked) thread, bound to cpu unless it
// is negative: a child is born with its parent thread's affinity, so the
// thread takes the child's for the fork and its own back after.
func startBound(cmd *exec.Cmd, cpu int) error {
	if cpu < 0 {
		return cmd.Start()
	}
	var own, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &own); err != nil {
		return fmt.Errorf("affinity: %w", err)
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return fmt.Errorf("bind to CPU %d: %w", cpu, err)
	}
	err := cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &own); rerr != nil && err == nil {
		err = fmt.Errorf("restore affinity: %w", rerr)
	}
	return err
}

// Run starts cmd in the host's namespace and waits for it. If ctx ends first
// the child is killed and Run returns ctx's error joined with cmd's.
func (h *Host) Run(ctx context.Context, cmd *exec.Cmd) error {
	if err := h.Start(cmd); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return errors.Join(ctx.Err(), <-done)
	}
}

// NetNS returns an open handle to the host's namespace, which the caller
// must close: for APIs that take a namespace fd, such as
// netlink.NewHandleAt.
func (h *Host) NetNS() (netns.NsHandle, error) {
	return h.tb.dup(h.sp)
}
