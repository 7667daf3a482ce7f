package netpipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// TCPModule is the "tcp" module: kernel TCP between the two ends, with
// Nagle off, as NPtcp runs it. It is the baseline every run is compared to.
type TCPModule struct{}

// Name implements Module.
func (TCPModule) Name() string { return "tcp" }

// Frames implements Module.
func (TCPModule) Frames() bool { return false }

// Connect implements Module. The receiver accepts one connection on
// ep.Listener or on ep.Addr; the transmitter dials ep.Addr, retrying until
// the receiver listens or the handshake time (6 × ep.Timeout) runs out.
func (TCPModule) Connect(ctx context.Context, ep Endpoint) (Conn, error) {
	timeout := ep.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, 6*timeout)
	defer cancel()
	var nc net.Conn
	if ep.Role == Receiver {
		ln := ep.Listener
		if ln == nil {
			var lc net.ListenConfig
			l, err := lc.Listen(hctx, "tcp", ep.Addr)
			if err != nil {
				return nil, fmt.Errorf("tcp: listen %s: %w", ep.Addr, err)
			}
			defer l.Close()
			ln = l
		}
		// Accept has no context: closing the listener ends it.
		stop := context.AfterFunc(hctx, func() { ln.Close() })
		c, err := ln.Accept()
		stop()
		if err != nil {
			if hctx.Err() != nil {
				err = hctx.Err()
			}
			return nil, fmt.Errorf("tcp: accept on %s: %w", ln.Addr(), err)
		}
		nc = c
	} else {
		var d net.Dialer
		for {
			c, err := d.DialContext(hctx, "tcp", ep.Addr)
			if err == nil {
				nc = c
				break
			}
			if hctx.Err() != nil {
				return nil, fmt.Errorf("tcp: dial %s: %w", ep.Addr, err)
			}
			// The receiver may not listen yet.
			select {
			case <-hctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("tcp: %T is not a TCP connection", nc)
	}
	if err := tc.SetNoDelay(true); err != nil {
		tc.Close()
		return nil, fmt.Errorf("tcp: set TCP_NODELAY: %w", err)
	}
	return &tcpConn{c: tc, timeout: timeout, closed: make(chan struct{})}, nil
}

// tcpConn is one end of a TCP connection.
type tcpConn struct {
	c       *net.TCPConn
	timeout time.Duration

	// A writer goroutine, started by the first Exchange, lets both ends
	// write at once without deadlocking on full socket buffers.
	wOnce  sync.Once
	wJob   chan []byte
	wDone  chan error
	closed chan struct{}
	cOnce  sync.Once
}

// Send implements Conn.
func (t *tcpConn) Send(ctx context.Context, msg []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("tcp: send: %w", err)
	}
	if err := t.c.SetWriteDeadline(time.Now().Add(t.timeout)); err != nil {
		return fmt.Errorf("tcp: send: %w", err)
	}
	if _, err := t.c.Write(msg); err != nil {
		return fmt.Errorf("tcp: send %d bytes: %w", len(msg), err)
	}
	return nil
}

// Recv implements Conn.
func (t *tcpConn) Recv(ctx context.Context, msg []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("tcp: receive: %w", err)
	}
	if err := t.c.SetReadDeadline(time.Now().Add(t.timeout)); err != nil {
		return fmt.Errorf("tcp: receive: %w", err)
	}
	if _, err := io.ReadFull(t.c, msg); err != nil {
		return fmt.Errorf("tcp: receive %d bytes: %w", len(msg), err)
	}
	return nil
}

// Exchange implements Conn: the writer goroutine sends out while this one
// reads in.
func (t *tcpConn) Exchange(ctx context.Context, out, in []byte) error {
	t.wOnce.Do(t.startWriter)
	select {
	case t.wJob <- out:
	case <-t.closed:
		return fmt.Errorf("tcp: exchange: %w", net.ErrClosed)
	}
	rerr := t.Recv(ctx, in)
	if rerr != nil {
		t.c.Close() // unblock the writer
	}
	werr := <-t.wDone
	return errors.Join(rerr, werr)
}

func (t *tcpConn) startWriter() {
	t.wJob = make(chan []byte)
	t.wDone = make(chan error, 1)
	go func() {
		for {
			select {
			case <-t.closed:
				return
			case out := <-t.wJob:
				t.wDone <- t.Send(context.Background(), out)
			}
		}
	}()
}

// Close implements Conn.
func (t *tcpConn) Close() error {
	var err error
	t.cOnce.Do(func() {
		close(t.closed)
		err = t.c.Close()
	})
	return err
}
