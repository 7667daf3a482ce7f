// Package hostile builds what a host without a job's secret sends at the
// job, for the attack tests: replays of frames it saw, those frames with
// their tag cut off and the CRC made good, connection requests in a rank's
// name and from made-up addresses, datagrams to the job's multicast
// groups, and bootstrap announcements claiming ranks.
package hostile

import (
	"bytes"
	"math/rand/v2"
	"time"

	"github.com/ethervia/ethervia/mplite/bootstrap"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
	"github.com/ethervia/ethervia/reliability"
	"github.com/ethervia/ethervia/vi"
)

// maxCaptured bounds the frames an Attacker keeps.
const maxCaptured = 8192

// Attacker is the state of one hostile host. It is not safe for
// concurrent use.
type Attacker struct {
	Job   uint32    // the job key: the attacker sees it in every frame
	Self  [6]byte   // the attacker's own MAC
	Ranks [][6]byte // every rank's MAC, as seen on the wire
	// Replay holds frames of an earlier job, sent as they were.
	Replay [][]byte
	// Captured holds the frames seen so far (Capture).
	Captured [][]byte
	round    int
}

// Capture keeps a copy of a frame the attacker saw, unless it sent it.
func (a *Attacker) Capture(frame []byte) {
	if len(a.Captured) < maxCaptured && len(frame) >= 12 && !bytes.Equal(frame[6:12], a.Self[:]) {
		a.Captured = append(a.Captured, bytes.Clone(frame))
	}
}

// Round returns the next round of hostile frames. With announce, it
// includes a bootstrap announcement claiming a rank, of the job's size
// every other round and of another size the rest.
func (a *Attacker) Round(rng *rand.Rand, announce bool) [][]byte {
	a.round++
	var out [][]byte
	if k := len(a.Captured); k > 0 {
		f := a.Captured[rng.IntN(k)]
		out = append(out, bytes.Clone(f)) // a replay, byte for byte
		var h reliability.Header
		if len(f) > reliability.HeaderLen+auth.TrailerLen && reliability.Parse(f, &h) == nil {
			g := bytes.Clone(f[:len(f)-auth.TrailerLen])
			g[len(g)-1] ^= 0x5a
			reliability.Seal(g) // a good CRC and job key, no tag
			out = append(out, g)
		}
	}
	if k := len(a.Replay); k > 0 {
		out = append(out, a.Replay[rng.IntN(k)])
	}
	n := len(a.Ranks)
	// The last rank's name, to rank 1, which it has not talked to yet.
	out = append(out, a.request(reliability.KindPeerReq, a.Ranks[n-1], a.Ranks[min(1, n-1)]))
	made := [6]byte{0x02, byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))}
	out = append(out, a.request(reliability.KindConnReq, made, a.Ranks[rng.IntN(n)]))
	pl := make([]byte, 64)
	for i := range pl {
		pl[i] = byte(rng.IntN(256))
	}
	dg := make([]byte, vi.DatagramHeaderLen+len(pl))
	if m, err := vi.PutDatagram(dg, &vi.Datagram{Dst: nic.GroupMAC(a.Job, uint32(rng.IntN(4))), Src: a.Ranks[0], DstEP: nic.EndpointAll,
		EtherType: nic.DefaultEtherType, Kind: vi.MinDatagramKind + uint8(rng.IntN(4)), JobKey: a.Job, Payload: pl}); err == nil {
		out = append(out, dg[:m])
	}
	if announce {
		ann := make([]byte, bootstrap.FrameLen)
		size := n
		if a.round%2 == 0 {
			size = 99
		}
		bootstrap.Put(ann, bootstrap.Announcement{Src: a.Self, Rank: a.round % n, Size: size}, nic.DefaultEtherType, a.Job)
		out = append(out, ann)
	}
	return out
}

// request is a connection request from src to dst with a good CRC.
func (a *Attacker) request(kind reliability.Kind, src, dst [6]byte) []byte {
	f := make([]byte, reliability.HeaderLen+16)
	reliability.Put(f, &reliability.Header{Dst: dst, Src: src, EtherType: nic.DefaultEtherType, Kind: kind, JobKey: a.Job,
		SrcVI: 1, ConnID: 7, Length: 16})
	return f
}

// Run is the attacker at work on dev: it keeps every frame dev receives
// and sends a round (Round) every period, until stop closes. It returns
// how many frames it sent.
func (a *Attacker) Run(dev nic.Device, seed uint64, announce bool, period time.Duration, stop <-chan struct{}) int64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	bufs, lens := make([][]byte, 64), make([]int, 64)
	for i := range bufs {
		bufs[i] = make([]byte, nic.RecvBufLen(dev.MTU()))
	}
	var sent int64
	for {
		select {
		case <-stop:
			return sent
		default:
		}
		n, _ := dev.Recv(bufs, lens)
		for i := range n {
			a.Capture(bufs[i][:lens[i]])
		}
		m, _ := dev.Send(a.Round(rng, announce))
		sent += int64(m)
		time.Sleep(period)
	}
}
