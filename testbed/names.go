package testbed

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// NetnsDir is where named network namespaces are bind-mounted (as by
// `ip netns` and github.com/vishvananda/netns).
const NetnsDir = "/run/netns"

// NamePrefix starts the name of every namespace a testbed makes, followed by
// the run label (see Prefix) and a dash.
const NamePrefix = "ev"

// RunEnv names the environment variable that labels one run's namespaces:
// with ETHERVIA_RUN=ci7k every testbed name starts "evci7k-" instead of
// "ev-", so that a CI job can count exactly what its own tests left behind
// while other jobs share the machine. Up to MaxRunLabel lower-case letters
// and digits; any other value is ignored.
const RunEnv = "ETHERVIA_RUN"

// MaxRunLabel is the longest run label RunEnv may carry; link names made
// from it must fit the kernel's 15 bytes.
const MaxRunLabel = 6

// Prefix returns the start of every name this process gives a namespace:
// NamePrefix, the run label from RunEnv if it is valid, and a dash.
func Prefix() string {
	run := os.Getenv(RunEnv)
	if !validRun(run) {
		run = ""
	}
	return NamePrefix + run + "-"
}

func validRun(s string) bool {
	if len(s) > MaxRunLabel {
		return false
	}
	return strings.Trim(s, "0123456789abcdefghijklmnopqrstuvwxyz") == ""
}

const bridgeName = "br0"

func validTag(s string) bool {
	if len(s) == 0 || len(s) > MaxTag {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// baseName returns "ev[run]-<tag>-<pid>-<rand>" with 4 random base-36 digits, so
// that testbeds of one process (parallel tests) differ too.
func baseName(tag string, pid int) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("testbed: random name: %w", err)
	}
	n := binary.LittleEndian.Uint32(b[:]) % (36 * 36 * 36 * 36)
	r := strconv.FormatUint(uint64(n), 36)
	r = strings.Repeat("0", 4-len(r)) + r
	return fmt.Sprintf("%s%s-%d-%s", Prefix(), tag, pid, r), nil
}

func hostNS(base string, i int) string   { return fmt.Sprintf("%s-h%d", base, i) }
func switchNS(base string, r int) string { return fmt.Sprintf("%s-sw%d", base, r) }

// hostIface is the host's interface on rail r; names are per namespace, so
// they need not be unique across testbeds.
func hostIface(r int) string { return fmt.Sprintf("eth%d", r) }

// portIface is the bridge port towards host i, inside the rail's namespace.
func portIface(i int) string { return fmt.Sprintf("h%d", i) }

// hostMAC is 02:45:56:<rail>:<host hi>:<host lo>, locally administered
// ("EV"), unique within a testbed.
func hostMAC(i, r int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x45, 0x56, byte(r), byte(i >> 8), byte(i)}
}

// switchMAC is the bridge-side end of host i's veth on rail r.
func switchMAC(i, r int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x45, 0x57, byte(r), byte(i >> 8), byte(i)}
}

// HostIP returns the IPv4 address of host i on rail r: 198.18.<r>.<i+1>.
func HostIP(i, r int) net.IP {
	return net.IPv4(198, 18, byte(r), byte(i+1)).To4()
}

// parseName returns the pid encoded in a testbed namespace name, of any
// run label, and whether name is one.
func parseName(name string) (pid int, ok bool) {
	rest, ok := strings.CutPrefix(name, NamePrefix)
	if !ok {
		return 0, false
	}
	run, rest, ok := strings.Cut(rest, "-")
	if !ok || !validRun(run) {
		return 0, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 4 || !validTag(parts[0]) {
		return 0, false
	}
	if parts[1] == "" || parts[1][0] == '0' || parts[1][0] == '+' {
		return 0, false
	}
	p, err := strconv.ParseUint(parts[1], 10, 31)
	if err != nil {
		return 0, false
	}
	if len(parts[2]) != 4 || strings.Trim(parts[2], "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
		return 0, false
	}
	role := parts[3]
	switch {
	case strings.HasPrefix(role, "sw"):
		role = role[2:]
	case strings.HasPrefix(role, "h"):
		role = role[1:]
	default:
		return 0, false
	}
	if role == "" || (len(role) > 1 && role[0] == '0') || strings.Trim(role, "0123456789") != "" || len(role) > 4 {
		return 0, false
	}
	return int(p), true
}

// alive reports whether a process with the pid exists. EPERM means it does.
func alive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// deleteNamed unmounts and removes a named namespace; the kernel destroys
// it, and its links, once nothing else holds it. Missing pieces are fine.
func deleteNamed(name string) error {
	p := filepath.Join(NetnsDir, name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("testbed: unmount namespace %s: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("testbed: remove namespace %s: %w", name, err)
	}
	return nil
}

// Sweep removes the namespaces (and with them the links and bridges) left by
// testbeds whose building process no longer exists. It leaves alone every
// namespace of a live process, including this one's, and kills nothing:
// a leftover process that still runs in a swept namespace keeps it alive
// until it exits. Testbeds never create links outside their namespaces, so
// there are no others to remove. It returns the names it removed.
func Sweep() ([]string, error) {
	return sweep(alive)
}

// ReportSweep writes, for a command's -sweep, what Sweep removed.
func ReportSweep(w io.Writer, prog string, removed []string) {
	if len(removed) == 0 {
		fmt.Fprintf(w, "%s: -sweep: nothing to remove\n", prog)
		return
	}
	fmt.Fprintf(w, "%s: -sweep: removed %d namespace(s) and their links: %s\n", prog, len(removed), strings.Join(removed, " "))
}

func sweep(isAlive func(pid int) bool) ([]string, error) {
	ents, err := os.ReadDir(NetnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("testbed: sweep: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		pid, ok := parseName(e.Name())
		if !ok || isAlive(pid) {
			continue
		}
		if err := deleteNamed(e.Name()); err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}
