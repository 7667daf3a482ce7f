package testbed

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// sharedNetnsDir makes NetnsDir a shared mount point of its own, as
// iproute2's `ip netns add` does on first use. Without it, an `ip netns
// add` run after a testbed was built bind-mounts the directory over
// itself and hides the testbed's namespaces: their files can then be
// neither unmounted nor removed by path ("device or resource busy"), and
// Sweep cannot remove them until that mount goes. Made a mount point
// first, the directory is left alone by iproute2.
func sharedNetnsDir() error {
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return fmt.Errorf("testbed: %s: %w", NetnsDir, err)
	}
	err := unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) { // not a mount point yet
		if err = unix.Mount(NetnsDir, NetnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
			err = unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		}
	}
	if err != nil {
		return fmt.Errorf("testbed: make %s a shared mount point: %w", NetnsDir, err)
	}
	return nil
}
