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
	var err error
	for attempt := 0; ; attempt++ {
		if c.s, c.stop, err = a.open(ctx, r); err == nil {
			return c, nil
		}
		if attempt >= x.retries || ctx.Err() != nil || isUsage(err) {
			return nil, err
		}
		if err := a.backoff(ctx, attempt, x.retries, "connecting", err); err != nil {
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

// backoff tells the user about a failure it will retry and waits 1 s, 2 s, 4 s...
// (at most maxBackoff) or until ctx ends.
func (a *app) backoff(ctx context.Context, attempt, retries int, what string, err error) error {
	d := min(time.Second<<min(attempt, 10), maxBackoff)
	fmt.Fprintf(a.stderr, "sluice: %s: %s; retrying in %v (retry %d of %d)\n", what, escapeText(userError(err)), d, attempt+1, retries)
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
// that took the connection down: on a new connection, with Resume, so each
// unfinished file continues from its part file rather than from the start. A failure
// the server reports on a live connection (permission denied, no space) is final:
// retrying would only repeat it. It returns how many files the last try found.
func (a *app) withRetries(ctx context.Context, c *xferConn, x *xferFlags, op, src, dst string,
	do func(s *session, opts ...sftp.TransferOption) error) (int, error) {
	opts := x.options()
	for attempt := 0; ; attempt++ {
		s := c.s
		found, err := a.transfer(op, src, dst, x, opts, func(o ...sftp.TransferOption) error { return do(s, o...) })
		if err == nil || attempt >= x.retries || ctx.Err() != nil || a.connectionAlive(ctx, s) {
			return found, err
		}
		for {
			if berr := a.backoff(ctx, attempt, x.retries, op+" "+src, err); berr != nil {
				return found, err
			}
			_ = c.close()
			c.s, c.stop, err = a.open(ctx, c.r)
			if err == nil {
				break
			}
			if attempt++; attempt >= x.retries || ctx.Err() != nil {
				c.s, c.stop = s, nil // closed already; keep close() harmless
				return found, err
			}
		}
		if !x.resume {
			opts = append(opts, sftp.Resume())
		}
	}
}

// connectionAlive asks the server something trivial: an answer means the failure
// was the server's verdict on the operation, not a lost connection.
func (a *app) connectionAlive(ctx context.Context, s *session) bool {
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
