package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Resume's checks. Resume continues an upload into the part file an earlier attempt
// left: it looks at the part with LSTAT, then opens it by name. Someone with write
// access to the destination directory can put a link at that name in between, and
// the rest of the upload would be written through it (into authorized_keys, say). So
// the handle is proven to be the part that was looked at before a byte is written
// through it:
//   - it is opened READ|WRITE, without CREAT or TRUNC: nothing is made or cut;
//   - FSTAT through the handle must show the size, modification time, permissions
//     and owner LSTAT showed (a link's target is another file, which differs in at
//     least one of them unless it was made to match);
//   - its last bytes (up to one READ) must be the local source's bytes at the same
//     offsets: the content Resume takes the part to hold, which a file made to match
//     the attributes would have to match as well.
//
// A part that fails either check is not resumed: it is removed and the upload starts
// again in a part created exclusively (createRemotePart). A server that refuses to
// open a file READ|WRITE (some do: Create opens WRITE only for them) cannot give this
// proof, so Resume of uploads does not work there: Put says so rather than write
// through a handle it cannot check.
//
// A download's part file is local (localDest.reopenPart): opened through the root
// without blocking, and checked to be the file LSTAT showed (os.SameFile), which no
// link or FIFO put in its place can be.

// errResumeRDWR wraps a server's refusal to open a part file READ|WRITE.
var errResumeRDWR = errors.New("sftp: Resume needs to open the part file for reading and writing to check it before writing to it, and the server refused; remove the part file or upload without Resume")

// resumeRemotePart opens for Resume the part file of an upload of size bytes from lf,
// proven as the package comment says, and returns it with the offset to continue
// from. f is nil when there is no part to continue (none, an empty one, or one that
// failed the proof): the caller creates a new one, which replaces what is there.
func (t *getPutCall) resumeRemotePart(ctx context.Context, part string, lf *os.File, size int64) (f *File, off int64, err error) {
	pfi, err := t.c.Lstat(ctx, part)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, nil
	case err != nil:
		return nil, 0, err
	case !pfi.Mode().IsRegular():
		return nil, 0, pathErr("resume", part, errNotRegular)
	}
	if off = pfi.Size(); off > size {
		return nil, 0, partTooLong(part, off, size)
	}
	if off == 0 {
		return nil, 0, nil // nothing to continue
	}
	if t.o.afterPartLstat != nil {
		t.o.afterPartLstat(part)
	}
	f, err = t.openRemote(ctx, part, os.O_RDWR, 0)
	var se *StatusError
	if errors.As(err, &se) {
		return nil, 0, pathErr("resume", part, fmt.Errorf("%w: %w", errResumeRDWR, err))
	}
	if err != nil {
		return nil, 0, err
	}
	proven := provePart(ctx, f, remoteAttrsOf(pfi), lf, off)
	if err := ctxError(ctx, ""); err != nil || !proven {
		f.Close()
		return nil, 0, err // nil: not proven, a new part replaces it
	}
	return f, off, nil
}

// provePart reports whether f, open on a part file of off bytes, is the file whose
// LSTAT said want and holds lf's bytes before off at its end, asking while ctx lasts.
func provePart(ctx context.Context, f *File, want *sshfx.Attrs, lf *os.File, off int64) bool {
	got, err := f.fstat(ctx)
	if err != nil || !sameFileAttrs(want, &got) {
		return false
	}
	n := min(off, int64(f.c.readSize()))
	remote, local := make([]byte, n), make([]byte, n)
	if got, _ := f.readAt(ctx, remote, off-n); got != len(remote) {
		return false
	}
	if _, err := lf.ReadAt(local, off-n); err != nil {
		return false
	}
	return bytes.Equal(remote, local)
}

// remoteAttrsOf is the ATTRS a remote FileInfo was made from.
func remoteAttrsOf(fi fs.FileInfo) *sshfx.Attrs {
	if rfi, ok := fi.(*fileInfo); ok {
		return &rfi.attrs
	}
	return &sshfx.Attrs{}
}

// resumePoint finds the part file a download left: its size is where the transfer of
// size bytes (-1: not known) continues, and pfi what the reopen must find (nil when
// there is none).
func (d *localDest) resumePoint(part string, size int64) (off int64, pfi fs.FileInfo, err error) {
	pfi, err = d.lstat(part)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil, nil
	case err != nil:
		return 0, nil, err
	case !pfi.Mode().IsRegular():
		return 0, nil, pathErr("resume", d.path(part), errNotRegular)
	}
	if off = pfi.Size(); size >= 0 && off > size {
		return 0, nil, partTooLong(d.path(part), off, size)
	}
	return off, pfi, nil
}
