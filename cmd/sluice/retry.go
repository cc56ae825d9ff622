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

// A transfer's connection. With --retries it is an sftp.Reconnecting over the
// command's sessions: when the connection drops, the library closes the dead session
// at once, waits as ReconnectPolicy says (nothing after progress, else 1 s, 2 s, 4 s...
// up to 30 s), opens a new session, and continues the transfer from proven points.
type xferConn struct {
	a *app
	r remote
	// s is the current session: the one the next try runs on. The sessions the
	// Reconnecting opens replace it.
	s *session
	// stop is the first session's close function from app.open, until rc owns it.
	stop func() error
	// rc carries the transfer over reconnects; nil without --retries.
	rc *sftp.Reconnecting
	// onRetry is the transfer under way's: told of each failure rc retries.
	onRetry func(err error, pause time.Duration, failures int)
}

func (c *xferConn) close() error {
	if c.rc != nil {
		return c.rc.Close()
	}
	if c.stop == nil {
		return nil
	}
	return c.stop()
}

// dialRetrying connects for a transfer; with --retries a failed connect is retried
// too, with the same backoff, and the session is handed to an sftp.Reconnecting.
func (a *app) dialRetrying(ctx context.Context, r remote, x *xferFlags) (*xferConn, error) {
	c := &xferConn{a: a, r: r}
	count := retryCount{max: x.retries}
	for {
		var err error
		if c.s, c.stop, err = a.open(ctx, r); err == nil {
			break
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
	if x.retries > 0 {
		if err := a.reconnecting(ctx, c, x); err != nil {
			_ = c.stop()
			return nil, err
		}
	}
	return c, nil
}

// reconnecting hands c's session to an sftp.Reconnecting, which opens the next ones
// with app.open. Sessions are opened with the command's ctx, not the redial's: a
// session's interrupt handling (app.open) lasts as long as the command, and the
// command closes c only once its transfers have returned.
func (a *app) reconnecting(ctx context.Context, c *xferConn, x *xferFlags) error {
	first := true
	connect := func(context.Context) (*sftp.Client, func() error, error) {
		if first {
			first = false
			return c.s.client, c.stop, nil
		}
		s, stop, err := a.open(ctx, c.r)
		if err != nil {
			return nil, nil, err
		}
		c.s = s
		return s.client, stop, nil
	}
	wait := a.sleep
	if wait == nil {
		wait = sleepCtx
	}
	policy := sftp.ReconnectPolicy{MaxFailures: x.retries, MaxBackoff: maxBackoff, Wait: wait,
		OnRetry: func(err error, pause time.Duration, failures int) {
			if c.onRetry != nil {
				c.onRetry(err, pause, failures)
			}
		}}
	rc, err := sftp.NewReconnectingFrom(ctx, connect, policy)
	if err != nil {
		return err
	}
	c.rc, c.stop = rc, nil
	return nil
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
	a.tellRetry(d, r.fails, r.max, op, what, err)
	if d == 0 {
		return ctx.Err()
	}
	sleep := a.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	return sleep(ctx, d)
}

// tellRetry says that a failure of op will be retried after d: the fails-th in a row
// without progress, of max.
func (a *app) tellRetry(d time.Duration, fails, max int, op, what string, err error) {
	when := "retrying"
	if d > 0 {
		when = fmt.Sprintf("retrying in %v", d)
	}
	fmt.Fprintf(a.stderr, "sluice: %s; %s (retry %d of %d)\n", escapeText(prefixed(op, what, err)), when, fails, max)
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

// withRetries runs one put or get, and with --retries goes on after a failure that
// took the connection down: c's sftp.Reconnecting runs it again on a new session,
// with Resume, so the file in flight continues from its part file (an upload from
// what the server acknowledged, in the run's Journal), leaving out (SkipFiles) the
// files an earlier try completed, so each file crosses the wire about once however
// often the connection is cut. The dead session is closed at once, its extra
// connections with it, not held through the pause. A failure the server reports on a
// live connection (permission denied, no space) is final: retrying would only repeat
// it. --retries counts failures in a row without progress. It returns how many files
// the transfer found.
func (a *app) withRetries(ctx context.Context, c *xferConn, x *xferFlags, op, src, dst string,
	do func(s *session, opts ...sftp.TransferOption) error) (found int, err error) {
	run := a.newXferRun(op, src, dst, x)
	defer func() { run.finish(err) }()
	if c.rc == nil {
		err = run.try(x.options(), func(o ...sftp.TransferOption) error { return do(c.s, o...) })
		return run.found(), err
	}
	c.onRetry = func(err error, pause time.Duration, failures int) {
		a.tellRetry(pause, failures, x.retries, op, op+" "+src, err)
		run.next()
	}
	defer func() { c.onRetry = nil }()
	err = run.try(x.options(), func(o ...sftp.TransferOption) error {
		return c.rc.Transfer(ctx, func(_ *sftp.Client, o ...sftp.TransferOption) error { return do(c.s, o...) }, o...)
	})
	return run.found(), err
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
