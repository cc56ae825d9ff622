package sftp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The error types a caller matches (StatusError, ProtocolError), and the one family
// of helpers that turn a call cut short by its ctx, or by its File being closed, into
// the error the caller can act on.

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

// errFileClosed is what a transfer returns when its File was closed under it.
var errFileClosed = fmt.Errorf("sftp: file closed during the transfer: %w", fs.ErrClosed)

// ctxError is the error of a call its ctx ended, nil while ctx lasts: "sftp: ", op
// and ": " if op is not empty, and ctx's error, which errors.Is matches.
func ctxError(ctx context.Context, op string) error {
	err := ctx.Err()
	switch {
	case err == nil:
		return nil
	case op == "":
		return fmt.Errorf("sftp: %w", err)
	default:
		return fmt.Errorf("sftp: %s: %w", op, err)
	}
}

// ctxDone makes a run that ctx cut short fail even when none of the work it started
// did: work not started is not done.
func ctxDone(ctx context.Context, err error) error {
	if err == nil {
		return ctxError(ctx, "")
	}
	return err
}

// stopped reports an error that a cancelled ctx caused (by cancelling the file, which
// surfaces as fs.ErrClosed) as the ctx error, the one a caller can act on.
func stopped(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if err == nil || cerr == nil {
		return err
	}
	if err == cerr || errors.Is(err, fs.ErrClosed) && !errors.Is(err, cerr) {
		return fmt.Errorf("sftp: %w", cerr)
	}
	return err
}

// stoppedPath reports a transfer that ctx cut short (by cancelling the file, which surfaces
// as fs.ErrClosed) as the ctx error, which is what the caller can act on.
func stoppedPath(ctx context.Context, op, name string, err error) error {
	if ctx.Err() != nil && errors.Is(err, fs.ErrClosed) {
		return pathErr(op, name, ctxError(ctx, ""))
	}
	return err
}

// waitErr turns the error of a wait that ended because the File was closed into
// fs.ErrClosed, the error os.File gives.
func (f *File) waitErr(err error) error {
	if err != nil && f.ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return fmt.Errorf("sftp: file closed during the operation: %w", fs.ErrClosed)
	}
	return err
}
