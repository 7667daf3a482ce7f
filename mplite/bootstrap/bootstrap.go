// Package bootstrap lets the ranks of a job find each other's MAC addresses
// with raw Ethernet broadcasts under the job key: no TCP, no configuration
// server. A hostfile is the alternative for switches that filter broadcast.
//
// Each rank broadcasts an announcement every Period carrying its rank, the
// job size and two flags: Done (I have heard every rank) and AllDone (I have
// heard every rank say Done, so every rank knows every address). A rank
// returns once it has AllDone and no rank without AllDone has spoken for
// Linger periods; lingering ranks keep announcing, so a rank that is late or
// whose frames are lost still hears everything it needs. An announcement
// that disagrees with what a rank knows (another job size, a second claim
// of a rank) is ignored and counted, so that one frame from a stranger
// neither ends nor stalls the discovery; if the discovery then times out,
// the error says so (ErrSizeMismatch, ErrDuplicateRank). Announcements are
// not authenticated: a stranger that claims a rank before the real one is
// heard is believed.
package bootstrap

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/ethervia/ethervia/nic"
)

// KindAnnounce is the frame kind of announcements. Kinds from 0x80 up are
// reserved for the layers above the VI provider, which drops them.
const KindAnnounce = 0x80

// Announcement layout after the nic prefix.
const (
	offRank  = nic.PrefixLen + 0 // 4
	offSize  = nic.PrefixLen + 4 // 4
	offRail  = nic.PrefixLen + 8 // 2
	offFlags = nic.PrefixLen + 10
	offCRC   = nic.PrefixLen + 12 // 4: CRC32C of the bytes before it
	msgLen   = nic.PrefixLen + 16
)

// castagnoli is immutable once built.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	flagDone    = 1
	flagAllDone = 2
)

// Announcement is a decoded announcement frame.
type Announcement struct {
	Src [6]byte
	// Endpoint is the sender's endpoint on its NIC (the prefix's source
	// endpoint).
	Endpoint      uint16
	Rank, Size    int
	Rail          int
	Done, AllDone bool
}

// Errors.
var (
	ErrNotAnnouncement = errors.New("bootstrap: not an announcement")
	ErrBadAnnouncement = errors.New("bootstrap: malformed announcement")
	// ErrChecksum (which also matches ErrBadAnnouncement) reports an
	// announcement whose CRC32C does not match: it was damaged on the way.
	ErrChecksum      = fmt.Errorf("%w: CRC32C mismatch", ErrBadAnnouncement)
	ErrSizeMismatch  = errors.New("bootstrap: ranks disagree on the job size")
	ErrDuplicateRank = errors.New("bootstrap: two hosts claim one rank")
)

// Parse decodes an announcement. The caller's device has already checked
// the EtherType and job key.
func Parse(frame []byte) (Announcement, error) {
	var a Announcement
	if len(frame) < msgLen {
		return a, fmt.Errorf("%w: %d bytes", ErrBadAnnouncement, len(frame))
	}
	if frame[nic.OffKind] != KindAnnounce {
		return a, ErrNotAnnouncement
	}
	if crc32.Checksum(frame[:offCRC], castagnoli) != binary.BigEndian.Uint32(frame[offCRC:]) {
		return a, ErrChecksum
	}
	copy(a.Src[:], frame[6:12])
	a.Endpoint = binary.BigEndian.Uint16(frame[nic.OffSrcEP:])
	rank := binary.BigEndian.Uint32(frame[offRank:])
	size := binary.BigEndian.Uint32(frame[offSize:])
	if size == 0 || size > 1<<20 || rank >= size {
		return a, fmt.Errorf("%w: rank %d of %d", ErrBadAnnouncement, rank, size)
	}
	flags := binary.BigEndian.Uint16(frame[offFlags:])
	if flags&^(flagDone|flagAllDone) != 0 {
		return a, fmt.Errorf("%w: flags %#x", ErrBadAnnouncement, flags)
	}
	a.Rank, a.Size = int(rank), int(size)
	a.Rail = int(binary.BigEndian.Uint16(frame[offRail:]))
	a.Done, a.AllDone = flags&flagDone != 0, flags&flagAllDone != 0
	return a, nil
}

// Config describes this rank.
type Config struct {
	Rank, Size int
	// Rail is the rail index this device serves, carried for diagnostics.
	Rail int
	// EtherType, JobKey and Endpoint must match the device's filter.
	EtherType uint16
	JobKey    uint32
	Endpoint  uint16
	// Period between announcements; zero means DefaultPeriod(Size).
	Period time.Duration
	// Linger is how many quiet periods a finished rank waits for stragglers;
	// zero means 40.
	Linger int
}

// perRankPeriod stretches the announcement period with the job: every rank
// hears every other rank's announcements, so a host takes size/Period
// frames a second; 20µs a rank keeps that under 50 000.
const perRankPeriod = 20 * time.Microsecond

// DefaultPeriod is the announcement period of a job of size ranks: 5ms, or
// 20µs a rank in larger jobs, so that no host receives more than 50 000
// announcements a second however large the job.
func DefaultPeriod(size int) time.Duration {
	return max(5*time.Millisecond, time.Duration(size)*perRankPeriod)
}

// Discover finds every rank's address (MAC and endpoint) on dev's network.
// It returns them indexed by rank (its own included), or an error naming the
// ranks it never heard when ctx ends.
func Discover(ctx context.Context, dev nic.Device, cfg Config) ([]nic.Addr, error) {
	if cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return nil, fmt.Errorf("bootstrap: rank %d of %d", cfg.Rank, cfg.Size)
	}
	if cfg.Period == 0 {
		cfg.Period = DefaultPeriod(cfg.Size)
	}
	if cfg.Linger == 0 {
		cfg.Linger = 40
	}
	if cfg.EtherType == 0 {
		cfg.EtherType = nic.DefaultEtherType
	}
	self, ok := nic.MAC(dev.HardwareAddr())
	if !ok {
		return nil, fmt.Errorf("bootstrap: device address %v is not Ethernet", dev.HardwareAddr())
	}
	s := &state{
		cfg:   cfg,
		addrs: make([]nic.Addr, cfg.Size),
		heard: make([]bool, cfg.Size),
		done:  make([]bool, cfg.Size),
	}
	s.addrs[cfg.Rank], s.heard[cfg.Rank] = nic.Addr{MAC: self, EP: cfg.Endpoint}, true
	s.nHeard = 1
	if cfg.Size == 1 {
		return s.result(), nil
	}

	out := make([]byte, msgLen)
	bufs := make([][]byte, dev.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, nic.RecvBufLen(dev.MTU()))
	}
	lens := make([]int, len(bufs))
	next := time.Now()
	quiet := 0
	for {
		now := time.Now()
		if !now.Before(next) {
			if s.finished() && quiet >= cfg.Linger {
				return s.result(), nil
			}
			quiet++
			s.announce(out, self)
			if _, err := dev.Send([][]byte{out}); err != nil && !errors.Is(err, nic.ErrFrameSize) {
				return nil, fmt.Errorf("bootstrap rank %d: announce: %w", cfg.Rank, err)
			}
			next = now.Add(cfg.Period)
		}
		n, err := dev.Recv(bufs, lens)
		if err != nil {
			return nil, fmt.Errorf("bootstrap rank %d: %w", cfg.Rank, err)
		}
		for i := 0; i < n; i++ {
			a, err := Parse(bufs[i][:lens[i]])
			if err != nil {
				// Someone else's frame, or a damaged one: dropped, and
				// the sender repeats its announcement anyway.
				continue
			}
			if s.hear(a) && !a.AllDone {
				quiet = 0 // a straggler: stay and keep answering
			}
		}
		if n > 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			if s.conflict != nil {
				// What may explain the stall: another job under this
				// key, a misconfigured rank, or a stranger.
				err = errors.Join(err, fmt.Errorf("%w (%d conflicting announcements ignored)", s.conflict, s.conflicts))
			}
			return nil, fmt.Errorf("bootstrap rank %d: %w: %s", cfg.Rank, err, s.missing())
		}
		wake := next
		if d, ok := ctx.Deadline(); ok && d.Before(wake) {
			wake = d
		}
		if err := dev.Wait(wake); err != nil && !errors.Is(err, nic.ErrTimeout) {
			return nil, fmt.Errorf("bootstrap rank %d: %w", cfg.Rank, err)
		}
	}
}

type state struct {
	cfg           Config
	addrs         []nic.Addr
	heard, done   []bool
	nHeard, nDone int
	// conflict is the first announcement that disagreed with what this
	// rank knows (another size, a rank claimed twice); conflicts counts
	// them. They are ignored, so that one frame from a stranger cannot
	// end a job's start-up, and reported if the discovery times out.
	conflict  error
	conflicts int
}

func (s *state) noteConflict(err error) {
	if s.conflict == nil {
		s.conflict = err
	}
	s.conflicts++
}

// hear takes in an announcement and reports whether it was believed. One
// that conflicts with what is known already (the first claim of a rank
// wins) is counted and ignored, and does not keep this rank lingering.
func (s *state) hear(a Announcement) bool {
	if a.Size != s.cfg.Size {
		s.noteConflict(fmt.Errorf("%w: rank %d (%x) says %d, this rank %d", ErrSizeMismatch, a.Rank, a.Src, a.Size, s.cfg.Size))
		return false
	}
	from := nic.Addr{MAC: a.Src, EP: a.Endpoint}
	if a.Rank == s.cfg.Rank && from != s.addrs[s.cfg.Rank] {
		s.noteConflict(fmt.Errorf("%w: %d is claimed by %v and by this rank", ErrDuplicateRank, a.Rank, from))
		return false
	}
	if s.heard[a.Rank] && s.addrs[a.Rank] != from {
		s.noteConflict(fmt.Errorf("%w: %d is claimed by %v and %v", ErrDuplicateRank, a.Rank, s.addrs[a.Rank], from))
		return false
	}
	if !s.heard[a.Rank] {
		s.heard[a.Rank], s.addrs[a.Rank] = true, from
		s.nHeard++
	}
	if a.Done && !s.done[a.Rank] {
		s.done[a.Rank] = true
		s.nDone++
	}
	return true
}

// selfIsDone: this rank has heard every rank.
func (s *state) selfIsDone() bool { return s.nHeard == s.cfg.Size }

// finished: every rank has said Done (counting this one).
func (s *state) finished() bool {
	if !s.selfIsDone() {
		return false
	}
	if !s.done[s.cfg.Rank] {
		s.done[s.cfg.Rank] = true
		s.nDone++
	}
	return s.nDone == s.cfg.Size
}

func (s *state) announce(out []byte, self [6]byte) {
	Put(out, Announcement{Src: self, Endpoint: s.cfg.Endpoint, Rank: s.cfg.Rank, Size: s.cfg.Size, Rail: s.cfg.Rail,
		Done: s.selfIsDone(), AllDone: s.finished()}, s.cfg.EtherType, s.cfg.JobKey)
}

// FrameLen is the length of an announcement frame.
const FrameLen = msgLen

// Put writes a, broadcast under the EtherType and job key, into the first
// FrameLen bytes of out: the frame Parse reads back.
func Put(out []byte, a Announcement, etherType uint16, jobKey uint32) {
	var flags uint16
	if a.Done {
		flags |= flagDone
	}
	if a.AllDone {
		flags |= flagAllDone
	}
	nic.PutPrefix(out, &nic.Prefix{
		Dst: [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, Src: a.Src,
		EtherType: etherType, Version: nic.Version, Kind: KindAnnounce, JobKey: jobKey,
		DstEP: nic.EndpointAll, SrcEP: a.Endpoint,
	})
	binary.BigEndian.PutUint32(out[offRank:], uint32(a.Rank))
	binary.BigEndian.PutUint32(out[offSize:], uint32(a.Size))
	binary.BigEndian.PutUint16(out[offRail:], uint16(a.Rail))
	binary.BigEndian.PutUint16(out[offFlags:], flags)
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[:offCRC], castagnoli))
}

func (s *state) result() []nic.Addr { return append([]nic.Addr(nil), s.addrs...) }

func (s *state) missing() string {
	var never []int
	for r, h := range s.heard {
		if !h {
			never = append(never, r)
		}
	}
	if len(never) > 0 {
		return fmt.Sprintf("never heard ranks %v", never)
	}
	var notDone []int
	for r, d := range s.done {
		if !d {
			notDone = append(notDone, r)
		}
	}
	return fmt.Sprintf("ranks %v never confirmed they heard everyone", notDone)
}
