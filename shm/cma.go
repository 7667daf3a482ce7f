package shm

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReadRemote copies len(dst) bytes from address src of process pid into
// dst with process_vm_readv: one copy, by this process, with no help from
// the other. The kernel allows it where ptrace would be allowed (same
// user, and Yama's ptrace_scope permitting; Create opens that to every
// process of the user).
func ReadRemote(pid int, src uint64, dst []byte) error {
	for len(dst) > 0 {
		local := []unix.Iovec{{Base: &dst[0]}}
		local[0].SetLen(len(dst))
		remote := []unix.RemoteIovec{{Base: uintptr(src), Len: len(dst)}}
		n, err := unix.ProcessVMReadv(pid, local, remote, 0)
		if err != nil {
			return fmt.Errorf("shm: read %d bytes of process %d: %w", len(dst), pid, err)
		}
		if n <= 0 {
			return fmt.Errorf("shm: read of process %d at %#x made no progress", pid, src)
		}
		dst = dst[n:]
		src += uint64(n)
	}
	return nil
}

// Address returns the address of b's first byte, for WriteRemote's Source.
// The caller keeps b alive (and, for Go memory, referenced) until the
// entry is consumed.
func Address(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}
