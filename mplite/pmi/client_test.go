package pmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// pairClient connects a client of the given version to s as rank, the way
// a launcher's PMI_FD does.
func pairClient(t *testing.T, ctx context.Context, s *Server, version, rank int) (*Client, <-chan error) {
	t.Helper()
	f, done, err := s.Pair(ctx, rank)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(ctx, conn, Config{Version: version, Rank: rank, Size: s.cfg.Size})
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	return c, done
}

// exchange runs every rank's put, fence and get of every other rank.
func exchange(ctx context.Context, clients []*Client) error {
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = func() error {
				if err := c.Put(ctx, "addr-"+strconv.Itoa(c.Rank()), fmt.Sprintf("02:00:00:00:00:%02x", c.Rank())); err != nil {
					return err
				}
				if err := c.Fence(ctx); err != nil {
					return err
				}
				for r := range c.Size() {
					v, err := c.Get(ctx, "addr-"+strconv.Itoa(r))
					if err != nil {
						return err
					}
					if want := fmt.Sprintf("02:00:00:00:00:%02x", r); v != want {
						return fmt.Errorf("rank %d read %q for rank %d, want %q", c.Rank(), v, r, want)
					}
				}
				if _, err := c.Get(ctx, "no-such-key"); !errors.Is(err, ErrNotFound) {
					return fmt.Errorf("missing key: %v, want ErrNotFound", err)
				}
				return c.Finalize(ctx)
			}()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func TestClientServer(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run("PMI-"+strconv.Itoa(version), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			const n = 5
			s, err := NewServer(ServerConfig{Size: n, JobID: "job-7"})
			if err != nil {
				t.Fatal(err)
			}
			clients := make([]*Client, n)
			dones := make([]<-chan error, n)
			for i := range clients {
				clients[i], dones[i] = pairClient(t, ctx, s, version, i)
				if clients[i].JobID() != "job-7" || clients[i].Size() != n || clients[i].Version() != version {
					t.Fatalf("rank %d: job %q size %d version %d", i, clients[i].JobID(), clients[i].Size(), clients[i].Version())
				}
			}
			if err := exchange(ctx, clients); err != nil {
				t.Fatal(err)
			}
			for i, d := range dones {
				if err := <-d; err != nil {
					t.Errorf("rank %d session: %v", i, err)
				}
			}
			st := s.Stats()
			if st.Puts != n || st.Fences != n || st.Gets != n*(n+1) || st.Finalized != n {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// A put is not visible before the fence that follows it.
func TestPutVisibleAfterFence(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _ := NewServer(ServerConfig{Size: 2, JobID: "j"})
	a, _ := pairClient(t, ctx, s, 2, 0)
	b, _ := pairClient(t, ctx, s, 1, 1)
	if err := a.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get before the fence: %v", err)
	}
	if err := a.Put(ctx, "k", "again"); !errors.Is(err, ErrFailed) {
		t.Fatalf("second put of one key: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- a.Fence(ctx) }()
	if err := b.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(ctx, "k"); err != nil || v != "v" {
		t.Fatalf("get after the fence: %q, %v", v, err)
	}
	if v, err := b.Get(ctx, "PMI_process_mapping"); err != nil || v != "(vector,(0,2,1))" {
		t.Fatalf("process mapping: %q, %v", v, err)
	}
}

// A rank that goes away without finalize fails the others' fence instead
// of leaving them waiting.
func TestFenceFailsWhenRankLeaves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _ := NewServer(ServerConfig{Size: 3, JobID: "j"})
	a, _ := pairClient(t, ctx, s, 1, 0)
	b, _ := pairClient(t, ctx, s, 2, 1)
	c, done := pairClient(t, ctx, s, 1, 2)
	errc := make(chan error, 2)
	go func() { errc <- a.Fence(ctx) }()
	go func() { errc <- b.Fence(ctx) }()
	time.Sleep(50 * time.Millisecond)
	c.Close()
	if err := <-done; err == nil {
		t.Error("the leaving rank's session ended without an error")
	}
	for range 2 {
		if err := <-errc; !errors.Is(err, ErrFailed) {
			t.Errorf("fence after a rank left: %v, want ErrFailed", err)
		}
	}
}

// PMI_PORT: ranks dial a TCP server and name themselves by PMI_ID.
func TestPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 3
	s, _ := NewServer(ServerConfig{Size: n, JobID: "port-job"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	clients := make([]*Client, n)
	for i := range clients {
		env := map[string]string{"PMI_PORT": ln.Addr().String(), "PMI_ID": strconv.Itoa(n - 1 - i)}
		c, err := FromEnv(ctx, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if c.Rank() != n-1-i || c.Size() != n || c.JobID() != "port-job" {
			t.Fatalf("rank %d of %d in %q", c.Rank(), c.Size(), c.JobID())
		}
		clients[i] = c
	}
	if err := exchange(ctx, clients); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	// A taken id is refused.
	if _, err := FromEnv(ctx, func(k string) string {
		return map[string]string{"PMI_PORT": "127.0.0.1:1", "PMI_ID": "x"}[k]
	}); !errors.Is(err, ErrEnvironment) {
		t.Errorf("bad PMI_ID: %v", err)
	}
}

func TestFromEnvErrors(t *testing.T) {
	ctx := context.Background()
	for _, env := range []map[string]string{
		{},
		{"PMI_FD": "x", "PMI_RANK": "0", "PMI_SIZE": "1"},
		{"PMI_FD": "1000", "PMI_RANK": "0", "PMI_SIZE": "1"},
		{"PMI_FD": "0", "PMI_SIZE": "1"},
		{"PMI_FD": "0", "PMI_RANK": "0", "PMI_SIZE": "1", "MPLITE_PMI": "3"},
		{"PMI_PORT": "127.0.0.1:1", "PMI_ID": "0", "MPLITE_PMI": "2"},
	} {
		if _, err := FromEnv(ctx, func(k string) string { return env[k] }); !errors.Is(err, ErrEnvironment) {
			t.Errorf("%v: %v, want ErrEnvironment", env, err)
		}
	}
}

// A deadline ends a fence nobody else joins.
func TestFenceDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _ := NewServer(ServerConfig{Size: 2, JobID: "j"})
	a, _ := pairClient(t, ctx, s, 2, 0)
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	if err := a.Fence(short); err == nil {
		t.Fatal("a fence of one rank out of two completed")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the deadline took %v to act", d)
	}
}
