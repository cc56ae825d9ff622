package sftp

import (
	"context"
	"errors"
	"fmt"
	"path"
	"syscall"
)

// A full file system on the server. SFTP v3 has no status code for it: OpenSSH's
// sftp-server answers a WRITE that meets ENOSPC with a bare FAILURE, which tells the
// user nothing. Where the server offers statvfs@openssh.com, a Put that fails with
// FAILURE asks it about the destination's file system, and when that has less room
// than one WRITE the failure says so and matches syscall.ENOSPC. The part file is then
// removed, not kept for Resume: it cannot grow, and the space it holds is what the
// other files of a tree would need (every later file of a put -r onto a small file
// system failed behind one such part).

// noSpaceError is a failed upload's error explained by a full file system.
type noSpaceError struct {
	err  error
	free uint64 // bytes an unprivileged user can still write, per statvfs
}

func (e *noSpaceError) Error() string {
	return fmt.Sprintf("%v: no space left on device (the server's file system has %d bytes free)", e.err, e.free)
}

func (e *noSpaceError) Unwrap() []error { return []error{e.err, syscall.ENOSPC} }

// explainFull returns err explained as a full file system when it is a FAILURE from
// the server and statvfs says the file system holding name has no room for one more
// WRITE; else err as it is. ctx bounds the STATVFS.
func (t *getPutCall) explainFull(ctx context.Context, name string, err error) error {
	var se *StatusError
	if !errors.As(err, &se) || se.Code != StatusFailure || !t.c.hasExt(extStatVFS) || ctx.Err() != nil {
		return err
	}
	st, serr := t.c.StatVFS(ctx, path.Dir(name))
	if serr != nil || st.FreeSpace() >= uint64(t.c.limits.MaxWrite) {
		return err
	}
	return &noSpaceError{err: err, free: st.FreeSpace()}
}
