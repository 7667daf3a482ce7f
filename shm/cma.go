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
	return remoteCopy(pid, src, dst, false)
}

// remoteCopy reads buf from address addr of process pid, or writes it
// there (process_vm_readv or _writev), in as many calls as it takes. The
// calls are direct: through a function value the iovecs would escape, an
// allocation per copy.
func remoteCopy(pid int, addr uint64, buf []byte, write bool) error {
	verb := "read"
	if write {
		verb = "write"
	}
	for len(buf) > 0 {
		local := []unix.Iovec{{Base: &buf[0]}}
		local[0].SetLen(len(buf))
		remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}
		var n int
		var err error
		if write {
			n, err = unix.ProcessVMWritev(pid, local, remote, 0)
		} else {
			n, err = unix.ProcessVMReadv(pid, local, remote, 0)
		}
		if err != nil {
			return fmt.Errorf("shm: %s %d bytes of process %d: %w", verb, len(buf), pid, err)
		}
		if n <= 0 {
			return fmt.Errorf("shm: %s of process %d at %#x made no progress", verb, pid, addr)
		}
		buf = buf[n:]
		addr += uint64(n)
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
