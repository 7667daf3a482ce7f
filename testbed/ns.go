package testbed

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"

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

// Start starts cmd (not yet started) inside the host's namespace: it forks
// from a locked thread that has entered the namespace, and the child
// inherits the thread's namespace. The thread returns to its namespace
// and lives on, so cmd.SysProcAttr.Pdeathsig works as usual. The caller
// waits for cmd as usual; Close kills the child if it still runs.
func (h *Host) Start(cmd *exec.Cmd) error {
	ns, err := h.tb.dup(h.sp)
	if err != nil {
		return fmt.Errorf("testbed host %d: %w", h.Index, err)
	}
	defer ns.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			// Still in the original namespace, but be safe: the thread
			// is discarded on return.
			errc <- fmt.Errorf("testbed host %d: current namespace: %w", h.Index, err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("testbed host %d: enter namespace %s: %w", h.Index, h.Name, err)
			return
		}
		err = cmd.Start()
		if rerr := netns.Set(orig); rerr == nil {
			runtime.UnlockOSThread()
		}
		if err != nil {
			err = fmt.Errorf("testbed host %d: start %s: %w", h.Index, cmd.Path, err)
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		return err
	}
	h.tb.addProc(cmd.Process)
	return nil
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
