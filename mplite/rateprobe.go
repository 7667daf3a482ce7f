package mplite

import (
	"encoding/binary"
	"math"
	"slices"
	"time"
)

// The port-rate probe of a measured tuning (MPLITE_TUNING=measure with no
// rate configured): after the ping-pongs, rank 0 streams probeMsgs messages
// of probeMsg bytes to rank 1, all posted at once, and rank 1 times the
// second half of what it receives. A rate-limited port lets a bucket's
// worth through at the link's own speed first (the testbed's holds 5 ms of
// traffic), so the first half warms it up. The other ranks wait: streams
// of their own would share the CPUs and measure those instead. Where ranks
// outnumber the CPUs (MPLITE_YIELD) there is no probe: eight ranks on two
// CPUs streamed at 1.2 Gbit/s over an unlimited veth, 1.65 t_c, which
// would pass for a line. A stream of 2 MiB takes 168 ms at 100 Mbit/s and
// 17 ms at 1 Gbit/s; the probe times probeRuns of them.
const (
	probeMsg  = 32 << 10 // eager at the default limit: no handshake per message
	probeMsgs = 64
	probeTag  = 902 // measure's ping-pongs use 900 and 901
)

// probeRuns is how many streams the probe times, keeping the fastest. One
// stream was slowed by the machine often enough to mislead: on a
// 100 Mbit/s port it measured 59.7 Mbit/s of payload, and on an unlimited
// veth 1.9 Gbit/s, slow enough against t_c to pass for a line (2026-11-28,
// two of four runs of test/TestMeasuredPortRate).
const probeRuns = 3

// lineBindsFactor: a port binds when it takes a byte at least this many
// times as long as a byte costs the CPUs (t_c). Measured here, a stream
// over an unlimited veth ran at 0.8 t_c (the ping-pongs' t_c carries their
// own overheads); at 1 Gbit/s at 3 t_c, and at 100 Mbit/s at 1.9 t_c,
// whose 64 KiB ping-pong already waits for the line in part.
const lineBindsFactor = 1.5

// clockSpread: a stream is clocked by a line when the interquartile range
// of its messages' inter-arrival times is under this share of their
// median. A line serialises every message in the same time: at 100 Mbit/s
// the second half's gaps spread 1-2 % and at 1 Gbit/s 8-15 %, while over
// an unlimited veth they spread 35-540 % (2026-12-02, idle and with a third
// process spinning on one of the two CPUs). A stream the CPUs stall is
// irregular too; that errs towards no line, the default cost model. The
// ratio to t_c alone once passed a stall-slowed veth stream for a line
// (CI, 3.06 Gbit/s).
const clockSpread = 0.25

// lineClocked reports whether inter-arrival gaps come at a line's steady
// pace rather than in the CPUs' bursts and stalls. It sorts gaps.
func lineClocked(gaps []time.Duration) bool {
	if len(gaps) < 4 {
		return false
	}
	slices.Sort(gaps)
	n := len(gaps)
	med := gaps[n/2]
	iqr := gaps[3*n/4] - gaps[n/4]
	return med > 0 && float64(iqr) < clockSpread*float64(med)
}

// lineBinds reports whether a measured stream rate (payload bytes per
// second) is a line's rather than the CPUs': the line is then the one
// rate worth telling the cost model.
func lineBinds(bytesPerSec, tc float64) bool {
	return bytesPerSec > 0 && tc > 0 && 1/bytesPerSec >= lineBindsFactor*tc
}

// probeRate runs the stream between ranks 0 and 1 (the only callers) and
// returns, on both, the payload rate rank 1 received the second half at,
// in bytes per second, or 0 when that half was not clocked by a line.
func (c *Comm) probeRate(x *xfer) (float64, error) {
	var rb [8]byte
	if c.rank == 0 {
		out := make([]byte, probeMsg)
		for range probeMsgs {
			if err := x.send(out, 1, probeTag); err != nil {
				_ = x.wait()
				return 0, err
			}
		}
		if err := x.recv(rb[:], 1, probeTag+1); err != nil {
			_ = x.wait()
			return 0, err
		}
		if err := x.wait(); err != nil {
			return 0, err
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(rb[:])), nil
	}
	in := make([]byte, probeMsgs*probeMsg)
	for i := range probeMsgs {
		if err := x.recv(in[i*probeMsg:(i+1)*probeMsg], 0, probeTag); err != nil {
			_ = x.wait()
			return 0, err
		}
	}
	var arrived [probeMsgs]time.Time
	for i := range probeMsgs {
		if err := x.waitOne(i); err != nil {
			_ = x.wait()
			return 0, err
		}
		arrived[i] = time.Now()
	}
	half := arrived[probeMsgs/2-1:]
	var gaps [probeMsgs / 2]time.Duration
	for i := range gaps {
		gaps[i] = half[i+1].Sub(half[i])
	}
	rate := 0.0
	if dt := half[len(half)-1].Sub(half[0]).Seconds(); dt > 0 && lineClocked(gaps[:]) {
		rate = float64(probeMsgs/2*probeMsg) / dt
	}
	binary.LittleEndian.PutUint64(rb[:], math.Float64bits(rate))
	if err := x.send(rb[:], 0, probeTag+1); err != nil {
		_ = x.wait()
		return 0, err
	}
	return rate, x.wait()
}
