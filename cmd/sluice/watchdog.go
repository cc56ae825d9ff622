package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// replyClock records when the server last sent anything, so that --timeout can bound
// the wait for each reply rather than a whole command: a recursive rm of thousands of
// files, each removal answered at once, must not be cut off for taking long in total.
// It sees the bytes on the transport (the SSH connection or the server's stdout), as
// the library's requests are not visible one by one from here.
type replyClock struct {
	last atomic.Int64 // UnixNano of the last read that returned data; 0 before any
}

func (c *replyClock) seen() { c.last.Store(time.Now().UnixNano()) }

// since is the later of start and the last reply.
func (c *replyClock) since(start time.Time) time.Time {
	if n := c.last.Load(); n > start.UnixNano() {
		return time.Unix(0, n)
	}
	return start
}

// reader is r with every read that returns data counted as a reply.
func (c *replyClock) reader(r io.Reader) io.Reader { return &replyReader{r, c} }

// conn is nc with every read that returns data counted as a reply.
func (c *replyClock) conn(nc net.Conn) net.Conn { return &replyConn{nc, c} }

type replyReader struct {
	r     io.Reader
	clock *replyClock
}

func (r *replyReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.clock.seen()
	}
	return n, err
}

type replyConn struct {
	net.Conn
	clock *replyClock
}

func (c *replyConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.clock.seen()
	}
	return n, err
}

// errNoReply is the cause of an operation context ended by the watchdog.
var errNoReply = errors.New("no reply within --timeout")

// opCtx bounds a metadata operation (stat, listing, mkdir, rm -r, realpath, glob) by
// --timeout of silence: it ends when the server has sent nothing for that long, and
// lives as long as replies keep coming. A server that never answers cannot hold the
// command; one that answers many requests quickly is never cut off.
func (a *app) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := a.cfg.timeout
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	octx, cancel := context.WithCancelCause(ctx)
	start := time.Now()
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		idle := time.Since(a.replies.since(start))
		if idle >= d {
			stopped = true
			cancel(errNoReply)
			return
		}
		t.Reset(d - idle)
	}
	mu.Lock()
	t = time.AfterFunc(d, check)
	mu.Unlock()
	return octx, func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
		cancel(context.Canceled)
	}
}

// timeoutError says which call ran out of --timeout, when one did.
func (a *app) timeoutError(ctx, octx context.Context, what string, err error) error {
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(octx), errNoReply) {
		return fmt.Errorf("%s: the server sent no reply for %v (--timeout)", what, a.cfg.timeout)
	}
	return err
}
