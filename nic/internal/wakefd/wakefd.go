// Package wakefd is a non-blocking eventfd in a frame driver's poll set: a
// way for another goroutine to end a blocked Wait (Close, Interrupt).
package wakefd

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// FD is an eventfd. Its zero value is not open: Close does nothing, and
// the drivers keep one in their Device from the start of setup.
type FD struct {
	fd   int
	open bool
	// one is the increment Signal writes, kept here, read-only, so that
	// Signal allocates nothing, even under -race (a stack word passed to
	// write(2) escapes there).
	one [8]byte
}

// Open creates the eventfd.
func (w *FD) Open() error {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	w.fd, w.open = fd, true
	binary.NativeEndian.PutUint64(w.one[:], 1)
	return nil
}

// Fd is the descriptor to poll for POLLIN.
func (w *FD) Fd() int32 { return int32(w.fd) }

// Signal makes the eventfd readable. It never blocks.
func (w *FD) Signal() { _, _ = unix.Write(w.fd, w.one[:]) }

// Drain makes it unreadable again, whatever number of Signals came first.
func (w *FD) Drain() {
	var b [8]byte
	_, _ = unix.Read(w.fd, b[:])
}

// Close closes the eventfd if it is open.
func (w *FD) Close() error {
	if !w.open {
		return nil
	}
	w.open = false
	return unix.Close(w.fd)
}
