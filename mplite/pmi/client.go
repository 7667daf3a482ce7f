package pmi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client is one rank's connection to its launcher. Its methods are safe
// for concurrent use; the protocol itself is lock-step, so they run one at
// a time.
type Client struct {
	mu      sync.Mutex
	conn    net.Conn
	rd      *bufio.Reader
	buf     []byte
	version int
	rank    int
	size    int
	appnum  int
	jobID   string
	done    bool
}

// Rank is this process's rank in the job.
func (c *Client) Rank() int { return c.rank }

// Size is the number of ranks in the job.
func (c *Client) Size() int { return c.size }

// Version is the protocol version in use: 1 or 2.
func (c *Client) Version() int { return c.version }

// JobID is the launcher's name for the job's key-value space (PMI-1's
// kvsname, PMI-2's jobid). It is the same in every rank of a job and
// differs between jobs.
func (c *Client) JobID() string { return c.jobID }

// Envs of the launcher interface.
const (
	envFD      = "PMI_FD"
	envPort    = "PMI_PORT"
	envID      = "PMI_ID"
	envRank    = "PMI_RANK"
	envSize    = "PMI_SIZE"
	envJobID   = "PMI_JOBID"
	envVersion = "MPLITE_PMI"
)

// Offered reports whether the environment offers a PMI connection
// (PMI_FD or PMI_PORT).
func Offered(getenv func(string) string) bool {
	return getenv(envFD) != "" || getenv(envPort) != ""
}

// FromEnv connects to the launcher the environment names and initialises
// the protocol. PMI_FD is a socket the launcher connected before it
// started us; PMI_RANK gives the rank. PMI_PORT is host:port of a PMI-1
// server, with PMI_ID our id there. The version is PMI-2 when PMI_JOBID is
// set (Slurm's mpi/pmi2 sets it), else PMI-1; MPLITE_PMI=1 or 2 overrides.
// The context bounds the connection and the initial exchange.
func FromEnv(ctx context.Context, getenv func(string) string) (*Client, error) {
	version := 1
	if getenv(envJobID) != "" {
		version = 2
	}
	if s := getenv(envVersion); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || (v != 1 && v != 2) {
			return nil, fmt.Errorf("%w: %s=%q (1 or 2)", ErrEnvironment, envVersion, s)
		}
		version = v
	}
	if s := getenv(envFD); s != "" {
		fd, err := strconv.Atoi(s)
		if err != nil || fd < 0 {
			return nil, fmt.Errorf("%w: %s=%q", ErrEnvironment, envFD, s)
		}
		rank, err := envInt(getenv, envRank)
		if err != nil {
			return nil, err
		}
		size, err := envInt(getenv, envSize)
		if err != nil {
			return nil, err
		}
		conn, err := fdConn(fd)
		if err != nil {
			return nil, err
		}
		c, err := New(ctx, conn, Config{Version: version, Rank: rank, Size: size})
		if err != nil {
			conn.Close()
			return nil, err
		}
		return c, nil
	}
	addr := getenv(envPort)
	if addr == "" {
		return nil, fmt.Errorf("%w: neither %s nor %s is set", ErrEnvironment, envFD, envPort)
	}
	if version != 1 {
		return nil, fmt.Errorf("%w: %s serves PMI-1 only", ErrEnvironment, envPort)
	}
	id, err := envInt(getenv, envID)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pmi: %s=%s: %w", envPort, addr, err)
	}
	c, err := newPort(ctx, conn, id)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func envInt(getenv func(string) string, name string) (int, error) {
	s := getenv(name)
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %s=%q", ErrEnvironment, name, s)
	}
	return n, nil
}

// fdConn takes over the inherited socket fd.
func fdConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "pmi")
	if f == nil {
		return nil, fmt.Errorf("%w: %s=%d is not open", ErrEnvironment, envFD, fd)
	}
	defer f.Close() // FileConn holds its own duplicate
	conn, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %s=%d: %v", ErrEnvironment, envFD, fd, err)
	}
	return conn, nil
}

// Config is what a launcher tells a rank besides its connection.
type Config struct {
	// Version is the protocol to speak: 1 or 2.
	Version int
	// Rank is the rank the launcher started us as (PMI_RANK).
	Rank int
	// Size is the job size (PMI_SIZE). PMI-2 learns it from the server and
	// checks it when it is set.
	Size int
}

// New initialises the protocol on a connection the launcher made for one
// rank (PMI_FD's case).
func New(ctx context.Context, conn net.Conn, cfg Config) (*Client, error) {
	if cfg.Version != 1 && cfg.Version != 2 {
		return nil, fmt.Errorf("%w: PMI version %d", ErrEnvironment, cfg.Version)
	}
	if cfg.Rank < 0 || (cfg.Version == 1 && cfg.Rank >= cfg.Size) {
		return nil, fmt.Errorf("%w: rank %d of %d", ErrEnvironment, cfg.Rank, cfg.Size)
	}
	c := &Client{conn: conn, rd: bufio.NewReaderSize(conn, maxV1Line), version: cfg.Version, rank: cfg.Rank, size: cfg.Size}
	if err := c.init(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// newPort runs PMI_PORT's preamble: the client names itself by id and the
// server tells it the job size and its rank.
func newPort(ctx context.Context, conn net.Conn, id int) (*Client, error) {
	c := &Client{conn: conn, rd: bufio.NewReaderSize(conn, maxV1Line), version: 1}
	stop := c.deadline(ctx)
	defer stop()
	r, err := c.call1(msg("initack", "pmiid", strconv.Itoa(id)), "initack")
	if err != nil {
		return nil, err
	}
	if err := r.rc(); err != nil {
		return nil, err
	}
	for range 3 {
		m, err := readV1(c.rd)
		if err != nil {
			return nil, c.wrap("initack", err)
		}
		if m.cmd != "set" {
			return nil, fmt.Errorf("%w: initack followed by %s", ErrProtocol, m.cmd)
		}
		for _, p := range m.pairs {
			n, err := strconv.Atoi(p.val)
			if err != nil {
				return nil, fmt.Errorf("%w: set %s=%q", ErrProtocol, p.key, p.val)
			}
			switch p.key {
			case "size":
				c.size = n
			case "rank":
				c.rank = n
			}
		}
	}
	stop()
	if err := c.init(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// init negotiates the version and learns the job's shape and name.
func (c *Client) init(ctx context.Context) error {
	stop := c.deadline(ctx)
	defer stop()
	// Both versions start with a PMI-1 line.
	sub := "1"
	if c.version == 2 {
		sub = "0"
	}
	r, err := c.call1(msg("init", "pmi_version", strconv.Itoa(c.version), "pmi_subversion", sub), "response_to_init")
	if err != nil {
		return err
	}
	if err := r.rc(); err != nil {
		return err
	}
	if v, _ := r.get("pmi_version"); v != "" && v != strconv.Itoa(c.version) {
		return fmt.Errorf("%w: asked for PMI-%d, server offers PMI-%s", ErrProtocol, c.version, v)
	}
	if c.version == 2 {
		return c.init2()
	}
	if _, err := c.call1(msg("get_maxes"), "maxes"); err != nil {
		return err
	}
	r, err = c.call1(msg("get_my_kvsname"), "my_kvsname")
	if err != nil {
		return err
	}
	c.jobID, _ = r.get("kvsname")
	if c.jobID == "" || c.size < 1 || c.rank >= c.size {
		return fmt.Errorf("%w: job %q, rank %d of %d", ErrProtocol, c.jobID, c.rank, c.size)
	}
	return nil
}

func (c *Client) init2() error {
	r, err := c.call2(msg("fullinit", "pmirank", strconv.Itoa(c.rank), "threaded", "FALSE"), "fullinit-response")
	if err != nil {
		return err
	}
	want := c.size
	if c.rank, err = r.getInt("rank"); err != nil {
		return err
	}
	if c.size, err = r.getInt("size"); err != nil {
		return err
	}
	if want != 0 && want != c.size {
		return fmt.Errorf("%w: PMI_SIZE=%d but the server says %d", ErrProtocol, want, c.size)
	}
	c.appnum, _ = r.getInt("appnum")
	r, err = c.call2(msg("job-getid"), "job-getid-response")
	if err != nil {
		return err
	}
	c.jobID, _ = r.get("jobid")
	if c.jobID == "" || c.size < 1 || c.rank < 0 || c.rank >= c.size {
		return fmt.Errorf("%w: job %q, rank %d of %d", ErrProtocol, c.jobID, c.rank, c.size)
	}
	return nil
}

// deadline applies ctx's deadline to the connection, and makes a
// cancellation of ctx interrupt a blocked read. The returned func undoes
// both.
func (c *Client) deadline(ctx context.Context) func() {
	if d, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		c.conn.SetDeadline(time.Time{})
	}
}

func (c *Client) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("pmi rank %d: %s: %w", c.rank, what, err)
}

// call1 sends a PMI-1 request and reads the response, which must be want.
func (c *Client) call1(req message, want string) (message, error) { return c.exchange(1, req, want) }

// call2 sends a PMI-2 request and reads the response, which must be want
// and carry rc=0.
func (c *Client) call2(req message, want string) (message, error) {
	r, err := c.exchange(2, req, want)
	if err != nil {
		return r, err
	}
	return r, c.wrap(req.cmd, r.rc())
}

// exchange sends req in the wire form of version and reads the response,
// which must be want.
func (c *Client) exchange(version int, req message, want string) (message, error) {
	b, err := appendMsg(c.buf[:0], version, req)
	if err != nil {
		return message{}, c.wrap(req.cmd, err)
	}
	c.buf = b
	if _, err := c.conn.Write(b); err != nil {
		return message{}, c.wrap(req.cmd, err)
	}
	r, err := readMsg(c.rd, version)
	if err != nil {
		return r, c.wrap(req.cmd, err)
	}
	if r.cmd != want {
		return r, c.wrap(req.cmd, fmt.Errorf("%w: answered by %s, want %s", ErrProtocol, r.cmd, want))
	}
	return r, nil
}

// call sends a request in the session's version; for PMI-1 it also checks rc.
func (c *Client) call(ctx context.Context, v1, v2 message, want1, want2 string) (message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return message{}, c.wrap(v1.cmd, errors.New("pmi: finalized"))
	}
	stop := c.deadline(ctx)
	defer stop()
	if c.version == 2 {
		return c.call2(v2, want2)
	}
	r, err := c.call1(v1, want1)
	if err == nil {
		err = c.wrap(v1.cmd, r.rc())
	}
	return r, err
}

func checkKV(key, val string) error {
	if key == "" || len(key) > MaxKeyLen || !validWord(key) {
		return fmt.Errorf("%w: key %q", ErrProtocol, key)
	}
	if len(val) > MaxValueLen || !validWord(val) {
		return fmt.Errorf("%w: value of %d bytes for %q (visible ASCII, no '=', at most %d)", ErrProtocol, len(val), key, MaxValueLen)
	}
	return nil
}

// Put stores key=value in the job's key-value space. Other ranks see it
// after everyone has called Fence. Keys and values are visible ASCII
// without '=' (what PMI-1 can carry), keys up to MaxKeyLen and values up to
// MaxValueLen bytes; a key is put at most once per job.
func (c *Client) Put(ctx context.Context, key, value string) error {
	if err := checkKV(key, value); err != nil {
		return c.wrap("put", err)
	}
	_, err := c.call(ctx, msg("put", "kvsname", c.jobID, "key", key, "value", value),
		msg("kvs-put", "key", key, "value", value), "put_result", "kvs-put-response")
	return err
}

// Fence commits this rank's puts and waits until every rank has called
// Fence: PMI-1's commit and barrier, PMI-2's kvs-fence.
func (c *Client) Fence(ctx context.Context) error {
	if c.version == 1 {
		// PMI-1's commit is local to the client library: nothing to send.
		_, err := c.call(ctx, msg("barrier_in"), message{}, "barrier_out", "")
		return err
	}
	_, err := c.call(ctx, message{}, msg("kvs-fence"), "", "kvs-fence-response")
	return err
}

// Get returns the value some rank put under key before the last Fence, or
// an error matching ErrNotFound.
func (c *Client) Get(ctx context.Context, key string) (string, error) {
	if err := checkKV(key, ""); err != nil {
		return "", c.wrap("get", err)
	}
	r, err := c.call(ctx, msg("get", "kvsname", c.jobID, "key", key),
		msg("kvs-get", "jobid", c.jobID, "srcid", "-1", "key", key), "get_result", "kvs-get-response")
	if err != nil {
		if c.version == 1 && errors.Is(err, ErrFailed) {
			// PMI-1 reports a missing key only as a failed get.
			return "", fmt.Errorf("%w: %s (%v)", ErrNotFound, key, err)
		}
		return "", err
	}
	if c.version == 2 {
		if f, _ := r.get("found"); f != "TRUE" {
			return "", c.wrap("get", fmt.Errorf("%w: %s", ErrNotFound, key))
		}
	}
	v, ok := r.get("value")
	if !ok {
		return "", c.wrap("get", fmt.Errorf("%w: %s has no value", ErrProtocol, r.cmd))
	}
	return v, nil
}

// Finalize tells the launcher this rank is done with PMI and closes the
// connection. Hydra and Slurm expect it before a rank exits normally.
func (c *Client) Finalize(ctx context.Context) error {
	_, err := c.call(ctx, msg("finalize"), msg("finalize"), "finalize_ack", "finalize-response")
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	if cerr := c.conn.Close(); err == nil && cerr != nil {
		err = c.wrap("finalize", cerr)
	}
	return err
}

// Abort asks the launcher to end the whole job, with an exit code and a
// message for its log. The launcher does not answer; the connection is
// closed.
func (c *Client) Abort(code int, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil
	}
	c.done = true
	defer c.conn.Close()
	c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	m := msg("abort", "exitcode", strconv.Itoa(code))
	if c.version == 2 {
		m = msg("abort", "isworld", "1", "msg", text)
	}
	b, err := appendMsg(nil, c.version, m)
	if err == nil {
		_, err = c.conn.Write(b)
	}
	if err != nil {
		return c.wrap("abort", err)
	}
	return nil
}

// Close drops the connection without finalizing.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	return c.conn.Close()
}

// LocalAddr is this end's address of the connection to the launcher: an
// IP address for PMI_PORT, a Unix socket's for PMI_FD.
func (c *Client) LocalAddr() net.Addr { return c.conn.LocalAddr() }
