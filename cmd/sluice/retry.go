package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sluicehq/sftp"
)

// A transfer's connection, replaced when --retries reconnects after a drop.
type xferConn struct {
	a *app
	r remote
	s *session
	// stop is the session's close function from app.open.
	stop func() error
}

func (c *xferConn) close() error {
	if c.stop == nil {
		return nil
	}
	return c.stop()
}

// dialRetrying connects for a transfer; with --retries a failed connect is retried
// too, with the same backoff.
func (a *app) dialRetrying(ctx context.Context, r remote, x *xferFlags) (*xferConn, error) {
	c := &xferConn{a: a, r: r}
	count := retryCount{max: x.retries}
	for {
		var err error
		if c.s, c.stop, err = a.open(ctx, r); err == nil {
			return c, nil
		}
		if ctx.Err() != nil || isUsage(err) {
			return nil, err
		}
		delay, ok := count.failed(false)
		if !ok {
			return nil, err
		}
		if err := a.backoff(ctx, delay, &count, "", "connecting", err); err != nil {
			return nil, err
		}
	}
}

func isUsage(err error) bool {
	var ue *usageError
	return errors.As(err, &ue)
}

// maxBackoff caps the pause between retries.
const maxBackoff = 30 * time.Second

// retryCount is --retries: how many failures in a row without progress a transfer
// may have, and the pause before each next try.
type retryCount struct {
	max    int // --retries
	fails  int // failures in a row without progress, the last one included
	stalls int // of those, the ones that followed no progress at all
}

// failed records a failed try (or connect) and returns the pause before the next, or
// ok false when the retries are spent. A try that got further than any before
// (progressed) starts the count again and the next try goes at once: the connection
// was moving data until it died. Each failure after one without progress waits 1 s,
// 2 s, 4 s... up to maxBackoff, so a server that is down is not hammered.
func (r *retryCount) failed(progressed bool) (pause time.Duration, ok bool) {
	if progressed {
		r.fails, r.stalls = 0, 0
	}
	r.fails++
	if r.fails > r.max {
		return 0, false
	}
	if progressed {
		return 0, true
	}
	r.stalls++
	return min(time.Second<<min(r.stalls-1, 10), maxBackoff), true
}

// backoff tells the user about a failure it will retry, and waits d or until ctx ends.
// what names the operation op (empty for none) the failure is of (see prefixed).
func (a *app) backoff(ctx context.Context, d time.Duration, r *retryCount, op, what string, err error) error {
	when := "retrying"
	if d > 0 {
		when = fmt.Sprintf("retrying in %v", d)
	}
	fmt.Fprintf(a.stderr, "sluice: %s; %s (retry %d of %d)\n", escapeText(prefixed(op, what, err)), when, r.fails, r.max)
	if d == 0 {
		return ctx.Err()
	}
	sleep := a.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	return sleep(ctx, d)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// withRetries runs one put or get, and with --retries runs it again after a failure
// that took the connection down: on a new connection, with Resume, so the file in
// flight continues from its part file, and leaving out (SkipFiles) the files an
// earlier try completed, so each file crosses the wire about once however often the
// connection is cut. The dead session is closed at once, its extra connections with
// it, not held through the pause. A failure the server reports on a live connection
// (permission denied, no space) is final: retrying would only repeat it. --retries
// counts failures in a row without progress (retryCount). It returns how many files
// the transfer found.
func (a *app) withRetries(ctx context.Context, c *xferConn, x *xferFlags, op, src, dst string,
	do func(s *session, opts ...sftp.TransferOption) error) (found int, err error) {
	run := a.newXferRun(op, src, dst, x)
	defer func() { run.finish(err) }()
	opts := x.options()
	count := retryCount{max: x.retries}
	for {
		s := c.s
		err = run.try(opts, func(o ...sftp.TransferOption) error { return do(s, o...) })
		if err == nil || x.retries == 0 || ctx.Err() != nil || a.connectionAlive(ctx, s) {
			return run.found(), err
		}
		_ = c.close()
		c.stop = nil // closed: the caller's close must not wait on it again
		if err = a.reconnect(ctx, c, &count, run.progressed(), op, op+" "+src, err); err != nil {
			return run.found(), err
		}
		run.next()
		opts = run.retryOptions(x)
	}
}

// reconnect waits as count says after a try of op that failed with err, and opens a
// new session for c; a failed open counts as a failure without progress.
func (a *app) reconnect(ctx context.Context, c *xferConn, count *retryCount, progressed bool, op, what string, err error) error {
	for {
		delay, ok := count.failed(progressed)
		if !ok {
			return err
		}
		if berr := a.backoff(ctx, delay, count, op, what, err); berr != nil {
			return err
		}
		progressed = false
		s, stop, oerr := a.open(ctx, c.r)
		if oerr == nil {
			c.s, c.stop = s, stop
			return nil
		}
		if err = oerr; ctx.Err() != nil || isUsage(err) {
			return err
		}
	}
}

// connectionAlive asks the server something trivial: an answer means the failure
// was the server's verdict on the operation, not a lost connection. A Client that
// knows its connection is gone is not asked.
func (a *app) connectionAlive(ctx context.Context, s *session) bool {
	select {
	case <-s.client.Done():
		return false
	default:
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.client.Getwd(pctx)
	return err == nil
}

// partName matches the part files the library names in its errors: ".NAME.sluice-part"
// remotely, "NAME.sluice-part" locally.
var partName = regexp.MustCompile(`(^|[/ ])\.?([^/\s]+)\.sluice-part\b`)

// userError is err's message with part-file names replaced by the names the user
// gave: "open /d/.f.sluice-part: Permission denied" becomes "open /d/f: ...". A
// message about resuming keeps them, since the part file is then the point.
func userError(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "resume") || strings.Contains(msg, "part file") {
		return msg
	}
	return partName.ReplaceAllString(msg, "$1$2")
}
