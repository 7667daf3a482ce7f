package afxdp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// xdpOptions is struct xdp_options from <linux/if_xdp.h>.
type xdpOptions struct{ Flags uint32 }

// setsockoptPtr and getsockoptPtr pass structs that golang.org/x/sys/unix has
// no typed helper for (struct xdp_umem_reg, struct xdp_mmap_offsets, ...).
func setsockoptPtr(fd, level, opt int, p unsafe.Pointer, size uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), size, 0)
	if e != 0 {
		return e
	}
	return nil
}

// getsockoptPtr returns the length the kernel wrote.
func getsockoptPtr(fd, level, opt int, p unsafe.Pointer, size uintptr) (uintptr, error) {
	l := uint32(size)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, e
	}
	return uintptr(l), nil
}

// kick asks the kernel to transmit what is on the TX ring. It is
// sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0), written out so that it does not
// allocate.
func kick(fd int) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

// pollFds is poll(2) on a caller-owned array, so that the hot path does not
// allocate a slice header on the heap.
func pollFds(fds []unix.PollFd, timeoutMs int, raw bool) (int, unix.Errno) {
	if raw { // see nic.ThreadWaiter
		r, _, e := unix.RawSyscall(unix.SYS_POLL, uintptr(unsafe.Pointer(unsafe.SliceData(fds))), uintptr(len(fds)), uintptr(timeoutMs))
		return int(r), e
	}
	r, _, e := unix.Syscall(unix.SYS_POLL, uintptr(unsafe.Pointer(unsafe.SliceData(fds))), uintptr(len(fds)), uintptr(timeoutMs))
	return int(r), e
}
