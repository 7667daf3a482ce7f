package netpipe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Point is one NetPIPE data point.
type Point struct {
	// N is the point's index in the run, from 0.
	N int
	// Bytes is the message size.
	Bytes int
	// Repeats is the number of messages per trial.
	Repeats int
	// Mbps is NetPIPE's throughput, bits / (Seconds * 2^20).
	Mbps float64
	// Seconds is the one-way transfer time: the fastest trial's mean,
	// halved for ping-pong.
	Seconds float64
}

// Usec is the transfer time in microseconds.
func (p Point) Usec() float64 { return p.Seconds * 1e6 }

// AppendNPOut appends p as one np.out line, NetPIPE's "%8d %lf %12.8lf\n"
// (bytes, Mbps, seconds).
func AppendNPOut(b []byte, p Point) []byte {
	return fmt.Appendf(b, "%8d %f %12.8f\n", p.Bytes, p.Mbps, p.Seconds)
}

// AppendStderrLine appends NetPIPE's progress line for p, without the
// newline: "%3d: %7d bytes %6d times --> %8.2lf Mbps in %10.2lf usec".
func AppendStderrLine(b []byte, p Point) []byte {
	return fmt.Appendf(b, "%3d: %7d bytes %6d times --> %8.2f Mbps in %10.2f usec", p.N, p.Bytes, p.Repeats, p.Mbps, p.Usec())
}

// ErrNPOut reports an np.out line that does not have NetPIPE 3's layout.
var ErrNPOut = errors.New("not an np.out line (want: bytes Mbps seconds)")

// ParseNPOutLine parses one np.out line: three whitespace-separated columns,
// an integer byte count, the throughput in Mbps and the time in seconds.
// N and Repeats are left zero.
func ParseNPOutLine(line string) (Point, error) {
	var p Point
	f := strings.Fields(line)
	if len(f) != 3 {
		return p, fmt.Errorf("%w: %d columns", ErrNPOut, len(f))
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 0 {
		return p, fmt.Errorf("%w: bytes %q", ErrNPOut, f[0])
	}
	mbps, err := strconv.ParseFloat(f[1], 64)
	if err != nil || math.IsNaN(mbps) || math.IsInf(mbps, 0) || mbps < 0 {
		return p, fmt.Errorf("%w: Mbps %q", ErrNPOut, f[1])
	}
	sec, err := strconv.ParseFloat(f[2], 64)
	if err != nil || math.IsNaN(sec) || math.IsInf(sec, 0) || sec < 0 {
		return p, fmt.Errorf("%w: seconds %q", ErrNPOut, f[2])
	}
	p.Bytes, p.Mbps, p.Seconds = n, mbps, sec
	return p, nil
}

// ParseNPOut reads an np.out file. Blank lines are skipped; any other line
// must have NetPIPE 3's three columns. Points are numbered in file order.
func ParseNPOut(r io.Reader) ([]Point, error) {
	var pts []Point
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		p, err := ParseNPOutLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("np.out line %d: %w", line, err)
		}
		p.N = len(pts)
		pts = append(pts, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("np.out: read: %w", err)
	}
	return pts, nil
}
