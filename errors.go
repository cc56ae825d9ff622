package sftp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The error types a caller matches (StatusError, ProtocolError), and where ctx ends a
// wait (below).

// StatusCode is the code of a STATUS reply (SFTP v3 defines 0 to 8). Its String is
// the draft's name ("NO_SUCH_FILE"). Prefer errors.Is with the standard errors a
// *StatusError matches (fs.ErrNotExist, fs.ErrPermission, errors.ErrUnsupported) to
// comparing codes: see StatusError.Is.
type StatusCode uint32

// Status codes of SFTP version 3 (draft-ietf-secsh-filexfer-02, section 7: the
// SSH_FX_* values); pkg/sftp's ErrSSHFx* constants carry the same numbers.
const (
	StatusOK               StatusCode = 0 // SSH_FX_OK
	StatusEOF              StatusCode = 1 // SSH_FX_EOF
	StatusNoSuchFile       StatusCode = 2 // SSH_FX_NO_SUCH_FILE
	StatusPermissionDenied StatusCode = 3 // SSH_FX_PERMISSION_DENIED
	StatusFailure          StatusCode = 4 // SSH_FX_FAILURE
	StatusBadMessage       StatusCode = 5 // SSH_FX_BAD_MESSAGE
	StatusNoConnection     StatusCode = 6 // SSH_FX_NO_CONNECTION
	StatusConnectionLost   StatusCode = 7 // SSH_FX_CONNECTION_LOST
	StatusOpUnsupported    StatusCode = 8 // SSH_FX_OP_UNSUPPORTED
)

// String returns the draft's name of the code ("NO_SUCH_FILE"), or "Status(n)" for a
// code SFTP v3 does not define.
func (c StatusCode) String() string { return sshfx.Status(c).String() }

// StatusError is a failure the server reported with a STATUS reply. Decide on Code
// (through errors.Is where possible), never on Message: servers word the same failure
// differently.
//
// os.IsNotExist and os.IsPermission report false for it, and for every error of this
// package: they predate errors.Is and recognise only the os package's own errors.
// Write errors.Is(err, fs.ErrNotExist) and errors.Is(err, fs.ErrPermission), which
// work here and on os errors alike. (pkg/sftp returned the bare os.ErrNotExist, so
// os.IsNotExist and == worked there.)
type StatusError struct {
	Code    StatusCode
	Message string // for people; may be empty; the server's first 1 KiB, then how long it was
	Lang    string
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return "sftp: " + e.Code.String()
	}
	return "sftp: " + e.Message + " (" + e.Code.String() + ")"
}

// normal maps codes this version does not define to FAILURE, as servers speaking
// later versions mean them.
func (c StatusCode) normal() StatusCode {
	if c > StatusOpUnsupported {
		return StatusFailure
	}
	return c
}

// Is lets errors.Is match fs.ErrNotExist, fs.ErrPermission, errors.ErrUnsupported, and
// another *StatusError with the same (normalised) code.
func (e *StatusError) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Code == StatusNoSuchFile
	case fs.ErrPermission:
		return e.Code == StatusPermissionDenied
	case errors.ErrUnsupported:
		return e.Code == StatusOpUnsupported
	}
	if t, ok := target.(*StatusError); ok {
		return t.Code.normal() == e.Code.normal()
	}
	return false
}

// ProtocolError reports a reply the client cannot accept. The channel it came on is
// closed, because after a malformed packet nothing later on it can be trusted: the
// error every call on that channel gets, the one that met the bad reply included,
// matches both *ProtocolError (errors.As) and net.ErrClosed (errors.Is).
type ProtocolError struct {
	Op     string // what was being decoded
	Reason error
}

func (e *ProtocolError) Error() string {
	return "sftp: protocol error in " + e.Op + ": " + e.Reason.Error()
}

func (e *ProtocolError) Unwrap() error { return e.Reason }

// Where ctx ends a wait. Every wait of this package selects on a ctx: a call's reply
// (call.wait, conn.go), a transfer's (readStream.more, writeStream.schedule), a
// listing's (Dir), and work that takes no ctx (waitWithin, below). When the ctx ends
// first the wait returns ctxError(ctx), the one place where that becomes an error, so
// a caller gets the same error for the same cause wherever the wait was. The ctx is
// the caller's, or for a File's io methods, which take none, the File's life
// (deadline.go), which ends with an error of its own that says why: Close
// (errFileClosed) or the deadline (errDeadline); a Dir's read ends with errDirClosed
// when the Dir is closed under it. Those come back as they are, also through a ctx
// derived from the life (a transfer's errgroup); any other ctx's end is "sftp: " and
// ctx's error, which errors.Is matches.

// errFileClosed is what a wait of a File ends with when the File is closed under it
// (its life ends with it), and what a request about a closed File's handle gets.
var errFileClosed = fmt.Errorf("sftp: file closed during the transfer: %w", fs.ErrClosed)

// errDirClosed is what a read of a Dir ends with when the Dir is closed under it.
var errDirClosed = fmt.Errorf("sftp: directory closed during the read: %w", fs.ErrClosed)

// ctxError is the error of a wait its ctx ended, nil while ctx lasts: the cause, when
// it is one of a File's or a Dir's own (see above), else "sftp: ", op and ": " if op
// is not empty, and ctx's error.
func ctxError(ctx context.Context, op string) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	switch cause := context.Cause(ctx); cause {
	case errFileClosed, errDirClosed, errDeadline:
		return cause
	}
	if op == "" {
		return fmt.Errorf("sftp: %w", err)
	}
	return fmt.Errorf("sftp: %s: %w", op, err)
}

// waitWithin runs fn, work that takes no ctx (x/crypto's session and channel calls, a
// dialer, a pipe opener, or a CLOSE and the requests that must follow it), on a
// goroutine, and waits for it only while ctx lasts. ok is false when ctx ended first:
// fn then goes on alone, what it returns with a nil error goes to late (if not nil),
// as nobody else will use it, and err is ctxError(ctx, op). An answer that came in
// time counts even once ctx has ended.
//
// With cn not nil the goroutine is counted on cn (conn.background), so closing cn
// waits for it; fn must then end once cn fails, as every wait on cn does, and where cn
// has failed already fn runs inline, where it fails at once. Without cn the goroutine
// lasts as long as fn: x/crypto's calls end at the latest when their connection
// closes, and a dialer or opener when it gives up on its own ctx.
func waitWithin[T any](ctx context.Context, op string, cn *conn, fn func() (T, error), late func(T)) (v T, ok bool, err error) {
	if ctx.Done() == nil {
		v, err = fn()
		return v, true, err
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	var mu sync.Mutex
	gaveUp := false
	run := func() {
		v, err := fn()
		mu.Lock()
		abandoned := gaveUp
		if !abandoned {
			done <- result{v, err} // room: the one result
		}
		mu.Unlock()
		if abandoned && err == nil && late != nil {
			late(v)
		}
	}
	if cn == nil {
		go run()
	} else if !cn.background(run) {
		v, err = fn() // the conn is gone: fn fails at once
		return v, true, err
	}
	select {
	case r := <-done:
		return r.v, true, r.err
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case r := <-done: // an answer that came in time still counts
		return r.v, true, r.err
	default:
		gaveUp = true
		return v, false, ctxError(ctx, op)
	}
}
