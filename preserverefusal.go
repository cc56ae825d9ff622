package sftp

import (
	"errors"
	"fmt"
)

// Preserve on servers that refuse it. Services in front of object stores refuse a
// SETSTAT of mode or times (AWS Transfer without its no-op option, Azure Blob, SFTPGo
// on a cloud backend; docs/servers.md): a Put with Preserve fails there at each file's
// FSETSTAT, after its data. The failure is a *RefusalError, so a caller can tell a
// refusal from a broken transfer, and PreserveWherePossible makes the same call copy
// the data and carry on without the metadata the server would not take.

// RefusalError is a request a server refused that the call could have done without:
// What names the request, Err is the server's STATUS (errors.As finds the
// StatusError through it).
type RefusalError struct {
	What Refusal
	Err  error
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("sftp: the server refused %s: %v (PreserveWherePossible copies without it)", e.What, e.Err)
}

func (e *RefusalError) Unwrap() error { return e.Err }

// PreserveWherePossible is Preserve that carries on where the server refuses to set
// mode or times: the file is copied and keeps what the server gave it, the refusal is
// recorded (Capabilities), and later files of the Client are not asked again. Other
// failures of the SETSTAT fail the file as with Preserve.
func PreserveWherePossible() TransferOption {
	return func(o *transferOptions) error { o.preserve, o.preserveLoose = true, true; return nil }
}

// preserving reports whether an upload is to set its file's mode and times: with
// Preserve, unless PreserveWherePossible and the server was seen to refuse it.
func (t *getPutCall) preserving() bool {
	return t.o.preserve && !(t.o.preserveLoose && t.c.facts.refused(RefusedSetstat))
}

// preserveOutcome sorts the answer to an upload's Preserve SETSTAT: a STATUS refusing
// it is recorded, and is nil with PreserveWherePossible or a *RefusalError without;
// anything else (the connection, ctx) is err as it is.
func (t *getPutCall) preserveOutcome(err error) error {
	var se *StatusError
	if !errors.As(err, &se) {
		return err
	}
	t.c.facts.refuse(RefusedSetstat, se)
	if t.o.preserveLoose {
		return nil
	}
	return &RefusalError{What: RefusedSetstat, Err: err}
}
