package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether w is a terminal, so the progress bar never
// lands in a log file or a pipe.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progress draws a one-line bar on stderr: how far the run is through the
// size range (on a log scale, as the schedule grows), and the point in
// progress. It is cleared before every NetPIPE line.
type progress struct {
	w      io.Writer
	on     bool
	lo, hi float64
	total  int // points in the schedule (the run may stop earlier)
	drawn  bool
	buf    []byte
}

func newProgress(w io.Writer, on bool, lower, upper, total int) *progress {
	return &progress{w: w, on: on, lo: math.Log(float64(lower)), hi: math.Log(float64(upper) + 1), total: total}
}

const barWidth = 30

func (p *progress) update(n, bytes, repeats int) {
	if !p.on {
		return
	}
	frac := 1.0
	if p.hi > p.lo {
		frac = (math.Log(float64(bytes)) - p.lo) / (p.hi - p.lo)
	}
	frac = min(1, max(0, frac))
	full := int(frac * barWidth)
	p.buf = append(p.buf[:0], "\r\x1b[K["...)
	p.buf = append(p.buf, strings.Repeat("#", full)...)
	p.buf = append(p.buf, strings.Repeat(".", barWidth-full)...)
	p.buf = fmt.Appendf(p.buf, "] %3.0f%%  point %d/%d: %d bytes x %d", frac*100, n+1, p.total, bytes, repeats)
	p.w.Write(p.buf)
	p.drawn = true
}

func (p *progress) clear() {
	if p.on && p.drawn {
		io.WriteString(p.w, "\r\x1b[K")
		p.drawn = false
	}
}
