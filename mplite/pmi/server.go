package pmi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ServerConfig describes the job a Server serves.
type ServerConfig struct {
	// Size is the number of ranks, at least 1.
	Size int
	// JobID names the job's key-value space (kvsname, jobid).
	JobID string
	// ProcessMapping is the value of the reserved key PMI_process_mapping
	// ("(vector,(0,N,1))", one rank per node, when empty).
	ProcessMapping string
	// OnAbort, if set, is called when a rank asks to abort the job.
	OnAbort func(rank, code int, text string)
}

// ServerStats counts what the ranks asked for.
type ServerStats struct {
	Puts, Gets, Fences, Finalized int
}

// Server is the launcher's end of PMI for one job: a key-value space with
// a fence over Size ranks, speaking PMI-1 and PMI-2 (each connection picks
// its version in its init). Puts become visible to every rank when the
// fence that follows them completes, as the protocol promises and no more.
type Server struct {
	cfg ServerConfig

	mu        sync.Mutex
	store     map[string]string
	staged    map[string]string // puts of the fence in progress
	nodeAttrs map[string]string
	entered   int
	fence     *fenceRound
	ranks     map[int]bool // ranks with a live or finished connection
	broken    error        // set when a rank leaves without finalize
	stats     ServerStats
}

// fenceRound is one fence: done closes when every rank has entered, or when
// the job broke (err says why).
type fenceRound struct {
	done chan struct{}
	err  error
}

// NewServer makes a server for one job.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Size < 1 {
		return nil, fmt.Errorf("pmi: server for %d ranks", cfg.Size)
	}
	if cfg.JobID == "" || !validWord(cfg.JobID) || len(cfg.JobID) > 256 {
		return nil, fmt.Errorf("pmi: job id %q (visible ASCII without '=', at most 256 bytes)", cfg.JobID)
	}
	if cfg.ProcessMapping == "" {
		cfg.ProcessMapping = fmt.Sprintf("(vector,(0,%d,1))", cfg.Size)
	}
	return &Server{cfg: cfg, store: map[string]string{}, staged: map[string]string{},
		nodeAttrs: map[string]string{}, fence: &fenceRound{done: make(chan struct{})}, ranks: map[int]bool{}}, nil
}

// Stats returns the counts so far.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Pair makes a connected socket pair for one rank: the server serves one
// end in a goroutine, and the caller passes the other to the rank (for
// example as exec.Cmd.ExtraFiles[0], so PMI_FD=3) and closes its own copy
// once the rank has started. done reports how the rank's session ended.
func (s *Server) Pair(ctx context.Context, rank int) (child *os.File, done <-chan error, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("pmi: socketpair: %w", err)
	}
	mine := os.NewFile(uintptr(fds[0]), "pmi-server")
	conn, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("pmi: socketpair: %w", err)
	}
	ch := make(chan error, 1)
	go func() { ch <- s.ServeConn(ctx, conn, rank) }()
	return os.NewFile(uintptr(fds[1]), "pmi-client"), ch, nil
}

// Serve accepts PMI_PORT connections on ln until every rank has connected
// or ctx ends, and serves each; a rank names itself in its first message.
// It returns when every session has ended, with their errors joined.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	errs := make([]error, s.cfg.Size)
	var acceptErr error
	for i := range s.cfg.Size {
		conn, err := ln.Accept()
		if err != nil {
			acceptErr = fmt.Errorf("pmi: accept: %w", err)
			s.breakJob(acceptErr)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.ServeConn(ctx, conn, -1)
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, acceptErr)...)
}

// breakJob fails the fence in progress and every later one: a rank that
// left (or never came) can never enter it.
func (s *Server) breakJob(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken == nil {
		s.broken = err
		s.fence.err = err
		close(s.fence.done)
	}
}

// session is one rank's connection.
type session struct {
	s       *Server
	conn    net.Conn
	rd      *bufio.Reader
	buf     []byte
	rank    int
	version int
	puts    map[string]string
}

// ServeConn serves one rank's connection until it finalizes, aborts,
// breaks the protocol, goes away or ctx ends. rank is the rank the
// connection was made for (PMI_FD), or -1 for a PMI_PORT connection whose
// rank comes in its first message. A session that ends without finalize
// fails every fence from then on, so the other ranks do not wait forever.
func (s *Server) ServeConn(ctx context.Context, conn net.Conn, rank int) (err error) {
	ss := &session{s: s, conn: conn, rd: bufio.NewReaderSize(conn, maxV1Line), rank: rank, puts: map[string]string{}}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	defer conn.Close()
	finalized, err := ss.run(ctx)
	if err == nil && !finalized {
		err = errors.New("left without finalize")
	}
	if err != nil {
		err = fmt.Errorf("pmi server: rank %d: %w", ss.rank, err)
		s.breakJob(err)
	}
	return err
}

func (ss *session) run(ctx context.Context) (finalized bool, err error) {
	m, err := readV1(ss.rd)
	if err != nil {
		return false, err
	}
	if m.cmd == "initack" {
		if err := ss.initack(m); err != nil {
			return false, err
		}
		if m, err = readV1(ss.rd); err != nil {
			return false, err
		}
	}
	if ss.rank < 0 {
		return false, fmt.Errorf("%w: no rank named", ErrProtocol)
	}
	if m.cmd != "init" {
		return false, fmt.Errorf("%w: first command %s, want init", ErrProtocol, m.cmd)
	}
	v, _ := m.get("pmi_version")
	sub, _ := m.get("pmi_subversion")
	switch v {
	case "1":
		ss.version = 1
		err = ss.send(msg("response_to_init", "rc", "0", "pmi_version", "1", "pmi_subversion", "1"))
	case "2":
		ss.version = 2
		err = ss.send1(msg("response_to_init", "rc", "0", "pmi_version", "2", "pmi_subversion", "0"))
	default:
		ss.send(msg("response_to_init", "rc", "-1", "pmi_version", v, "pmi_subversion", sub))
		return false, fmt.Errorf("%w: PMI version %q", ErrProtocol, v)
	}
	if err != nil {
		return false, err
	}
	for {
		m, err := readMsg(ss.rd, ss.version)
		if err != nil {
			return false, err
		}
		end, err := ss.handle(ctx, m)
		if err != nil || end {
			return end && err == nil && m.cmd == "finalize", err
		}
	}
}

// initack is PMI_PORT's preamble: the rank names itself by its id.
func (ss *session) initack(m message) error {
	id, err := m.getInt("pmiid")
	if err != nil {
		return err
	}
	s := ss.s
	s.mu.Lock()
	taken := id < 0 || id >= s.cfg.Size || s.ranks[id]
	if !taken {
		s.ranks[id] = true
	}
	s.mu.Unlock()
	if taken {
		ss.send1(msg("initack", "rc", "-1"))
		return fmt.Errorf("%w: pmiid %d is not a free rank of %d", ErrProtocol, id, s.cfg.Size)
	}
	ss.rank = id
	for _, m := range []message{msg("initack", "rc", "0"), msg("set", "size", strconv.Itoa(s.cfg.Size)),
		msg("set", "rank", strconv.Itoa(id)), msg("set", "debug", "0")} {
		if err := ss.send1(m); err != nil {
			return err
		}
	}
	return nil
}

// send1 answers in PMI-1's form, which init and initack use whatever the
// session's version.
func (ss *session) send1(m message) error { return ss.write(1, m) }

// send answers in the session's version.
func (ss *session) send(m message) error { return ss.write(ss.version, m) }

func (ss *session) write(version int, m message) error {
	b, err := appendMsg(ss.buf[:0], version, m)
	if err != nil {
		return err
	}
	ss.buf = b
	_, err = ss.conn.Write(b)
	return err
}

// reply answers a request with rc=0 and the given pairs.
func (ss *session) reply(cmd string, kv ...string) error {
	return ss.send(msg(cmd, append([]string{"rc", "0"}, kv...)...))
}

// fail answers a request with rc=-1 and a message without spaces.
func (ss *session) fail(cmd, text string) error {
	return ss.send(msg(cmd, "rc", "-1", "msg", text))
}

// handle serves one request; end reports that the session is over.
func (ss *session) handle(ctx context.Context, m message) (end bool, err error) {
	s := ss.s
	v2 := ss.version == 2
	switch {
	case !v2 && m.cmd == "get_maxes":
		return false, ss.reply("maxes", "kvsname_max", "256", "keylen_max", strconv.Itoa(MaxKeyLen), "vallen_max", strconv.Itoa(MaxValueLen))
	case !v2 && m.cmd == "get_my_kvsname":
		return false, ss.reply("my_kvsname", "kvsname", s.cfg.JobID)
	case !v2 && m.cmd == "get_universe_size":
		return false, ss.reply("universe_size", "size", strconv.Itoa(s.cfg.Size))
	case !v2 && m.cmd == "get_appnum":
		return false, ss.reply("appnum", "appnum", "0")
	case v2 && m.cmd == "fullinit":
		if r, err := m.getInt("pmirank"); err == nil && r != ss.rank {
			return true, fmt.Errorf("%w: fullinit as rank %d on rank %d's connection", ErrProtocol, r, ss.rank)
		}
		return false, ss.reply("fullinit-response", "pmi-version", "2", "pmi-subversion", "0",
			"rank", strconv.Itoa(ss.rank), "size", strconv.Itoa(s.cfg.Size), "appnum", "0",
			"debugged", "FALSE", "pmiverbose", "0")
	case v2 && m.cmd == "job-getid":
		return false, ss.reply("job-getid-response", "jobid", s.cfg.JobID)
	case m.cmd == "put" || m.cmd == "kvs-put":
		return false, ss.put(m)
	case m.cmd == "barrier_in" || m.cmd == "kvs-fence":
		return false, ss.fence(ctx, m.cmd)
	case m.cmd == "get" || m.cmd == "kvs-get" || m.cmd == "info-getjobattr":
		return false, ss.get(m)
	case v2 && m.cmd == "info-putnodeattr":
		k, _ := m.get("key")
		v, _ := m.get("value")
		s.mu.Lock()
		s.nodeAttrs[k] = v
		s.mu.Unlock()
		return false, ss.reply("info-putnodeattr-response")
	case v2 && m.cmd == "info-getnodeattr":
		k, _ := m.get("key")
		s.mu.Lock()
		v, ok := s.nodeAttrs[k]
		s.mu.Unlock()
		return false, ss.reply("info-getnodeattr-response", "found", boolWord(ok), "value", v)
	case m.cmd == "finalize":
		s.mu.Lock()
		s.stats.Finalized++
		s.mu.Unlock()
		if v2 {
			return true, ss.reply("finalize-response")
		}
		return true, ss.reply("finalize_ack")
	case m.cmd == "abort":
		code, _ := m.getInt("exitcode")
		text, _ := m.get("msg")
		if s.cfg.OnAbort != nil {
			s.cfg.OnAbort(ss.rank, code, text)
		}
		return true, fmt.Errorf("aborted the job (code %d) %s", code, text)
	}
	ss.fail(m.cmd+"-response", "unknown_command")
	return true, fmt.Errorf("%w: unknown command %q in PMI-%d", ErrProtocol, m.cmd, ss.version)
}

func boolWord(b bool) string {
	if b {
		return "TRUE"
	}
	return "FALSE"
}

func (ss *session) put(m message) error {
	resp := "put_result"
	if ss.version == 2 {
		resp = "kvs-put-response"
	}
	k, _ := m.get("key")
	v, _ := m.get("value")
	if ss.version == 1 {
		if name, _ := m.get("kvsname"); name != ss.s.cfg.JobID {
			return ss.fail(resp, "unknown_kvsname")
		}
	}
	if err := checkKV(k, v); err != nil {
		return ss.fail(resp, "invalid_key_or_value")
	}
	ss.s.mu.Lock()
	_, dup := ss.s.store[k]
	ss.s.stats.Puts++
	ss.s.mu.Unlock()
	if _, again := ss.puts[k]; dup || again {
		return ss.fail(resp, "duplicate_key")
	}
	ss.puts[k] = v
	return ss.reply(resp)
}

func (ss *session) fence(ctx context.Context, cmd string) error {
	resp := "barrier_out"
	if ss.version == 2 {
		resp = "kvs-fence-response"
	}
	s := ss.s
	s.mu.Lock()
	s.stats.Fences++
	round := s.fence
	if s.broken != nil {
		s.mu.Unlock()
		return ss.fail(resp, "job_broken")
	}
	dup := ""
	for k, v := range ss.puts {
		if _, ok := s.staged[k]; ok {
			dup = k
		}
		s.staged[k] = v
	}
	clear(ss.puts)
	s.entered++
	if s.entered == s.cfg.Size {
		for k, v := range s.staged {
			s.store[k] = v
		}
		clear(s.staged)
		s.entered = 0
		s.fence = &fenceRound{done: make(chan struct{})}
		close(round.done)
	}
	s.mu.Unlock()
	if dup != "" {
		return ss.fail(resp, "duplicate_key")
	}
	select {
	case <-round.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if round.err != nil {
		return ss.fail(resp, "job_broken")
	}
	return ss.reply(resp)
}

func (ss *session) get(m message) error {
	s := ss.s
	k, _ := m.get("key")
	s.mu.Lock()
	s.stats.Gets++
	v, ok := s.store[k]
	s.mu.Unlock()
	if k == "PMI_process_mapping" {
		v, ok = s.cfg.ProcessMapping, true
	}
	if ss.version == 2 {
		resp := "kvs-get-response"
		if m.cmd == "info-getjobattr" {
			resp = "info-getjobattr-response"
		}
		return ss.reply(resp, "found", boolWord(ok), "value", v)
	}
	if name, _ := m.get("kvsname"); name != s.cfg.JobID {
		return ss.fail("get_result", "unknown_kvsname")
	}
	if !ok {
		return ss.fail("get_result", "key_"+k+"_not_found")
	}
	return ss.reply("get_result", "value", v)
}
