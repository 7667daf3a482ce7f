package test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNPmpich2Integrity runs Debian's unmodified NPmpich2 (NetPIPE linked
// against MPICH) over our libmpich.so.12 under mprun, in NetPIPE's
// integrity mode (every byte of every message checked) from 1 byte to
// 4 MiB, eager and handshake (RDMA into the program's own malloc'd
// buffers), on a clean link and with 5 % of frames dropped.
func TestNPmpich2Integrity(t *testing.T) {
	needRoot(t)
	needTools(t, "NPmpich2")
	dir := t.TempDir()
	buildShared(t, dir, "github.com/ethervia/ethervia/cmd/libmpich", "libmpich.so.12")
	mprun := built.path(t, "mprun")
	for _, drop := range []string{"0", "0.05"} {
		t.Run("drop="+drop, func(t *testing.T) {
			out, errOut, err := runEnv(t, 3*time.Minute, []string{"LD_LIBRARY_PATH=" + dir}, mprun,
				"-np", "2", "-drop", drop, "-timeout", "150s", "--",
				"NPmpich2", "-i", "-u", "4194304", "-o", dir+"/np.out")
			all := out + errOut
			if err != nil {
				t.Fatalf("mprun failed: %v\n%s", err, all)
			}
			// NetPIPE reports each size on stderr.
			passed := regexp.MustCompile(`(\d+) bytes +\d+ times -->  Integrity check passed`).FindAllStringSubmatch(all, -1)
			largest := 0
			if len(passed) > 0 {
				largest, _ = strconv.Atoi(passed[len(passed)-1][1])
			}
			if strings.Contains(all, "failed") || len(passed) < 30 || largest < 3<<20 {
				t.Fatalf("%d sizes passed the integrity check (want every size to 3 MiB and more):\n%s", len(passed), all)
			}
			if drop != "0" {
				if dropped, frames, ok := droppedFrames(all); !ok || dropped == 0 {
					t.Errorf("%d of %d frames dropped (report found: %v): the faults did not happen", dropped, frames, ok)
				}
			}
		})
	}
}
