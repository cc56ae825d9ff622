package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Resume: where a part file is continued from, and the checks before a byte is
// written to it.
//
// The resume point. A part file of size S is continued from R = max(0, S-W), W being
// maxSpan: every byte below S-W of a part file this package left is the source's. That
// is an invariant, proven by induction over the runs that wrote the part, from what the
// engine keeps to and what it takes a server's (or the local file system's) word for:
//
//   - the span rule (read.go, write.go): with P the run's contiguous prefix known
//     written (acknowledged by the server, for an upload; reported written by the
//     writers, for a download), no request is sent whose bytes reach P+W. P only
//     grows, so every byte a run writes, or may still write after it stopped (WRITEs
//     in flight, a sibling lane's late ones, a WriteAt under way), lies below Pe+W,
//     Pe being the prefix where the run stopped, however it stopped;
//   - a run writes only the source's bytes at their offsets, and a nonce per stripe
//     round (reopen.go) at the start of a chunk it holds back, whose data follows it
//     on the same channel: a nonce below Pe was overwritten, since its chunk is then
//     acknowledged;
//   - a WRITE the server acknowledged, or a WriteAt that returned, is in the file;
//   - a server carries out one channel's requests in order.
//
// Invariant, of a part of size S: every byte below S-W is the source's. A new part
// is empty, so it holds. Step: a run continues a part of size S0 for which it holds,
// from R = max(0, S0-W), so the bytes below R are the source's; the run writes at R
// and past it only. Say it stops with prefix Pe >= R, and let M = max(R, Pe). Below M
// every byte is the source's: below R by the invariant, in [R, Pe) because the run's
// writes there landed (a nonce there was overwritten). Past M the part may hold
// anything: old bytes the invariant did not cover, holes, a nonce, writes that never
// landed. The part's new size S1 is either:
//
//   - cut on the way out to Pe (Get always, while the process lives; Put through the
//     handle, partcut.go), then grown at most by late writes below Pe+W: S1-W < Pe,
//     so S1-W <= M; or
//   - not cut (the process killed, the connection lost): S0, or the end of a write
//     that landed. If S0, S1-W = S0-W <= R <= M (or S1 <= W, and nothing is to
//     prove); else S1 < Pe+W, so S1-W < Pe <= M.
//
// Either way every byte below S1-W is below M, so the invariant holds after the run:
// after any number of stops and resumes, whatever options each run used (W is one
// constant: a later version may raise it, never lower it).
//
// So Resume sends at most W more than what the part is missing, and a part of W bytes
// or less is started over. What this cannot cover, Resume's documentation says: a
// part another program left (or a build of this package from before the bound), a
// source that changed between runs, and writes a machine's crash lost.
//
// The checks. Resume looks at the part with LSTAT, then opens it by name. Someone with
// write access to the destination directory can put a link at that name in between,
// and the rest of the transfer would be written through it (into authorized_keys,
// say). So the part is proven to be the one that was looked at before a byte is
// written to it. An upload's remote part:
//   - is opened READ|WRITE, without CREAT or TRUNC: nothing is made or cut;
//   - FSTAT through the handle must show the size, modification time, permissions
//     and owner LSTAT showed (a link's target is another file, which differs in at
//     least one of them unless it was made to match);
//   - its bytes just before R (up to one READ) must be the local source's bytes at
//     the same offsets: the content Resume takes the part to hold, which a file made
//     to match the attributes would have to match as well.
//
// A part that fails either check is not resumed: it is removed and the upload starts
// again in a part created exclusively (createRemotePart). A server that refuses to
// open a file READ|WRITE (some do: Create opens WRITE only for them) cannot give this
// proof, so Resume of uploads does not work there: Put says so rather than write
// through a handle it cannot check.
//
// A download's part file is local (localDest.reopenPart): opened through the root
// without blocking, and checked to be the file LSTAT showed (os.SameFile), which no
// link or FIFO put in its place can be. Its bytes just before R (up to one READ) must
// be the remote file's at the same offsets, or it is replaced and the download starts
// over: a part of another version of the file is not continued.

// errResumeRDWR wraps a server's refusal to open a part file READ|WRITE.
var errResumeRDWR = errors.New("sftp: Resume needs to open the part file for reading and writing to check it before writing to it, and the server refused; remove the part file or upload without Resume")

// resumeRemotePart opens for Resume the part file of an upload of size bytes from lf,
// proven as the comment above says, and returns it with the offset to continue from
// (resumeOffset). f is nil when there is no part to continue (none, one without a
// proven byte, or one that failed the proof): the caller creates a new one, which
// replaces what is there.
func (t *getPutCall) resumeRemotePart(ctx context.Context, part string, lf io.ReaderAt, size int64) (f *File, off int64, err error) {
	pfi, err := t.c.Lstat(ctx, part)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, nil
	case err != nil:
		return nil, 0, err
	case !pfi.Mode().IsRegular():
		return nil, 0, pathErr("resume", part, errNotRegular)
	}
	if pfi.Size() > size {
		return nil, 0, partTooLong(part, pfi.Size(), size)
	}
	if off = t.c.resumeOffset(pfi.Size()); off == 0 {
		return nil, 0, nil // nothing proven to continue from
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
	stop := watch(ctx, f)
	proven := provePart(f, remoteAttrsOf(pfi), lf, off)
	stop()
	if err := ctx.Err(); err != nil || !proven {
		closeWithin(t.ctx, f)
		if err != nil {
			return nil, 0, fmt.Errorf("sftp: %w", err)
		}
		return nil, 0, nil
	}
	return f, off, nil
}

// provePart reports whether f, open on a part file, is the file whose LSTAT said want
// and holds lf's bytes before off, the resume point.
func provePart(f *File, want *sshfx.Attrs, lf io.ReaderAt, off int64) bool {
	got, err := f.fstat()
	if err != nil || !sameFileAttrs(want, &got) {
		return false
	}
	return sameBefore(f, lf, off, f.c.readSize())
}

// sameBefore reports whether a and b hold the same bytes in the n (at most) before
// off: the check that a part holds the source's bytes at the resume point. A read
// that fails or comes back short is a difference.
func sameBefore(a, b io.ReaderAt, off int64, n int) bool {
	k := min(off, int64(n))
	x, y := make([]byte, k), make([]byte, k)
	if _, err := io.ReadFull(io.NewSectionReader(a, off-k, k), x); err != nil {
		return false
	}
	if _, err := io.ReadFull(io.NewSectionReader(b, off-k, k), y); err != nil {
		return false
	}
	return bytes.Equal(x, y)
}

// remoteAttrsOf is the ATTRS a remote FileInfo was made from.
func remoteAttrsOf(fi fs.FileInfo) *sshfx.Attrs {
	if rfi, ok := fi.(*fileInfo); ok {
		return &rfi.attrs
	}
	return &sshfx.Attrs{}
}

// resumeOffset is where a transfer continues into a part file of size bytes: W
// (maxSpan) before its end, the point below which it is proven written (see the proof
// above), or 0.
func (c *Client) resumeOffset(size int64) int64 {
	return max(0, size-c.span())
}

// resumePoint finds the part file a download of size bytes (-1: not known) left: pfi
// is what the reopen must find, nil when there is no part to continue (none, or none
// long enough to hold a proven byte).
func (t *getPutCall) resumePoint(part string, size int64) (off int64, pfi fs.FileInfo, err error) {
	d := t.local
	pfi, err = d.lstat(part)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil, nil
	case err != nil:
		return 0, nil, err
	case !pfi.Mode().IsRegular():
		return 0, nil, pathErr("resume", d.path(part), errNotRegular)
	}
	if size >= 0 && pfi.Size() > size {
		return 0, nil, partTooLong(d.path(part), pfi.Size(), size)
	}
	if off = t.c.resumeOffset(pfi.Size()); off == 0 {
		return 0, nil, nil
	}
	return off, pfi, nil
}

// reopenLocalPart opens for Resume the part file a download left, pfi from its LSTAT,
// to continue at off, and checks that it holds the remote file's bytes before off
// (one READ of f, bounded by ctx): a part of another version of the file, or of
// another file, is not continued. When it does not, the part is replaced by a new one,
// empty, and off is 0.
func (t *getPutCall) reopenLocalPart(ctx context.Context, f *File, part string, pfi fs.FileInfo, off int64, perm fs.FileMode) (*os.File, int64, error) {
	lf, err := t.local.reopenPart(part, pfi)
	if err != nil {
		return nil, 0, err
	}
	stop := watch(ctx, f)
	same := sameBefore(f, lf, off, t.c.readSize())
	stop()
	if err := ctxError(ctx, ""); err != nil {
		lf.Close()
		return nil, 0, err
	}
	if same {
		return lf, off, nil
	}
	lf.Close()
	lf, err = t.local.createPart(part, perm)
	return lf, 0, err
}
