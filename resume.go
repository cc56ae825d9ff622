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
// The resume point. A part file of size S is continued from R = S when it carries the
// resume mark (resumemark.go), else from R = max(0, S-W), W being maxSpan; with a
// Journal (journal.go), from further on when the Journal knows more. Let B(S) be S for
// a marked part and max(0, S-W) for one without the mark. Every byte below B(S) of a
// part file this package left is the source's. That is an invariant, proven by
// induction over the runs that wrote the part, from what the engine keeps to and
// what it takes a server's (or the local file system's) word for:
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
//   - a server carries out one channel's requests in order, and a CLOSE it answered
//     came after every WRITE sent before it on that channel;
//   - a run's requests are over, carried out or dropped, by the time the next run
//     looks at the part (a server process whose client is gone ends once it has read
//     its input to the end);
//   - the mark (markTime) is set only as the mark rule below says, and the part's
//     modification time, as SETSTAT left it, is what LSTAT and FSTAT report.
//
// The mark rule. A run marks the part only once it has cut it to Pe and no write of
// the run can land after the cut: an upload, after every sibling lane's CLOSE was
// answered (every WRITE on it landed) and the FSETSTAT of the size, on the File's own
// channel behind every WRITE of it, was answered OK; then the times go in a request
// of their own (a server may apply the times of a request whose size fails, as
// OpenSSH's does, or apply them first: one request could leave a mark on a part it
// did not cut). A download, after every writer has ended, by ftruncate then futimens
// on the descriptor. And a run that continues a marked part takes the mark off
// (FSETSTAT or futimens of the times to now), and waits for that, before it writes a
// byte; a run that cannot, starts over in a new part. So a part that carries the mark
// is one a run cut to Pe with nothing of it landing after, and nothing written to it
// since, by a run of this package at least.
//
// Invariant, of a part of size S: every byte below B(S) is the source's. A new part
// is empty, so it holds. Step: a run continues a part of size S0 for which it holds,
// from R >= 0: R = B(S0), or, with a Journal, up to the prefix Pj a failed run of
// this process recorded for this part (Pj <= S0); so the bytes below R are the
// source's (below B(S0) by the invariant; below Pj because that run's acknowledged
// WRITEs landed, what it may have had land later is the source's bytes or a nonce at
// or past Pj, and, the Journal's premise, nothing else wrote the part since). The run writes at R and past it only, and a marked part loses its
// mark before the first write. Say it stops with prefix Pe >= R, and let M = max(R,
// Pe). Below M every byte is the source's: below R by the above, in [R, Pe) because
// the run's writes there landed (a nonce there was overwritten). Past M the part may
// hold anything: old bytes the invariant did not cover, holes, a nonce, writes that
// never landed. The part's new size S1 is either:
//
//   - cut on the way out to Pe and marked: nothing lands after the cut (the mark
//     rule), so S1 = Pe and B(S1) = Pe = M;
//   - cut on the way out to Pe, not marked (Get always cuts, while the process
//     lives; Put through the handle, partcut.go, when it still can), then grown at
//     most by late writes below Pe+W: S1-W < Pe, so B(S1) <= M; or
//   - not cut (the process killed, the connection lost): S0, or the end of a write
//     that landed. If S0 (nothing landed), the part is as the run found it, marked
//     still if it was and the run was stopped before it took the mark off, and the
//     invariant holds as it did, or unmarked with B(S0) = max(0, S0-W) <= R <= M;
//     else S1 < Pe+W, so S1-W < Pe <= M, and the part is unmarked.
//
// Either way every byte below B(S1) is below M, so the invariant holds after the run:
// after any number of stops and resumes, whatever options each run used (W is one
// constant: a later version may raise it, never lower it).
//
// So Resume sends at most W more than what the part is missing, and nothing more when
// the run before could cut and mark it (ctx, Close or a lost connection for a Get; a
// Put's ctx, or a failure the server reported); a part of W bytes or less without the
// mark is started over. What this cannot cover, Resume's documentation says: a part
// another program left or wrote (or a build of this package from before the bound),
// a mark another program set, a source that changed between runs, writes a machine's
// crash lost, and writes a server acknowledged and lost.
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
// again in a part created exclusively (createRemotePart). So is a marked part whose
// mark cannot be taken off (the mark rule). A server that refuses to open a file
// READ|WRITE (AWS Transfer, Azure Blob: Create opens WRITE only for them), or to READ
// through such a handle (SFTPGo on a cloud backend), cannot give this proof: nothing
// is written through a handle that cannot be checked, and the upload starts over
// there too. The file's first progress report says why (Progress.StartedOver), and
// Capabilities records the refusal.
//
// A download's part file is local (localfs.Dest.reopenPart): opened through the root
// without blocking, and checked to be the file LSTAT showed (os.SameFile), which no
// link or FIFO put in its place can be. Its bytes just before R (up to one READ) must
// be the remote file's at the same offsets, or it is replaced and the download starts
// over: a part of another version of the file is not continued. A marked one has its
// mark taken off through the descriptor first, or is replaced too.

// maxSpan (W) bounds how far out of order any transfer writes, summed over all its
// lanes: no byte is written W or more past the transfer's contiguous prefix known
// written (an upload's acknowledged prefix; a download's prefix its writers have
// written to an io.WriterAt), whatever the window, the lanes or the order in which
// servers carry out and answer the requests. So whatever stops a transfer, even a
// killed process that cuts nothing, everything below size-W of what it leaves is
// written, and Resume continues from there (the proof is below).
//
// It is one constant, not a function of WithMaxInflight, WithChannels or the request
// size, because a later run relies on the bound an earlier one kept, whatever options
// either used; for the same reason it may be raised in a later version, never lowered.
// It costs no throughput: it is twice the largest striped window (windowBudget), so a
// window can run a whole window's worth past a request that is late at the prefix. It
// is also what a resumed transfer sends again at most, so it is not larger.
const maxSpan = 64 << 20

// span is W for this Client's transfers: maxSpan (tests lower it).
func (c *Client) span() int64 {
	if c.opts.span > 0 {
		return c.opts.span
	}
	return maxSpan
}

// errResumeRDWR is why Resume starts over on a server that refuses to open a part
// file READ|WRITE.
var errResumeRDWR = errors.New("sftp: Resume opens the part file for reading and writing to check it before writing to it, and the server refused")

// resumeRemotePart opens for Resume the part file of an upload of size bytes from lf,
// proven as the comment above says, and returns it with the offset to continue from
// (remoteResumePoint), its mark taken off if it had one. f is nil when there is no
// part to continue (none, one without a proven byte, or one that could not be proven
// or unmarked: restart says why): the caller creates a new one, which replaces what
// is there.
func (t *getPutCall) resumeRemotePart(ctx context.Context, part string, lf io.ReaderAt, size int64) (f *File, off int64, restart, err error) {
	pfi, err := t.c.Lstat(ctx, part)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, nil, nil
	case err != nil:
		return nil, 0, nil, err
	case !pfi.Mode().IsRegular():
		return nil, 0, nil, pathErr("resume", part, errNotRegular)
	}
	if pfi.Size() > size {
		return nil, 0, nil, partTooLong(part, pfi.Size(), size)
	}
	if off = t.remoteResumePoint(part, pfi); off == 0 {
		return nil, 0, nil, nil // nothing proven to continue from
	}
	if t.o.afterPartLstat != nil {
		t.o.afterPartLstat(part)
	}
	f, err = t.openRemote(ctx, part, os.O_RDWR, 0)
	var se *StatusError
	if errors.As(err, &se) {
		t.c.facts.refuse(RefusedReadWriteOpen, se)
		return nil, 0, t.dropPart(ctx, part, fmt.Errorf("%w: %w", errResumeRDWR, err)), nil
	}
	if err != nil {
		return nil, 0, nil, err
	}
	restart = provePart(ctx, f, remoteAttrsOf(pfi), lf, off)
	if restart == nil && markedRemote(remoteAttrsOf(pfi)) {
		if err := unmarkRemote(ctx, f); err != nil {
			restart = fmt.Errorf("sftp: the part file's mark could not be taken off: %w", err)
		}
	}
	if err := ctxError(ctx, ""); err != nil || restart != nil {
		f.Close()
		if err != nil {
			return nil, 0, nil, err
		}
		return nil, 0, t.dropPart(ctx, part, restart), nil
	}
	return f, off, nil, nil
}

// dropPart removes part, a part file Resume will not continue for the reason why, and
// returns why. The exclusive create that follows would remove it too, but some
// servers answer that create with a refusal of their own rather than "exists" (SFTPGo
// on a cloud backend refuses any OPEN for writing of an existing file without TRUNC),
// so the name is cleared first. A REMOVE that fails is left to that create to report.
func (t *getPutCall) dropPart(ctx context.Context, part string, why error) error {
	_ = t.c.sendRemove(ctx, part)
	return why
}

// provePart returns nil when f, open on a part file, is the file whose LSTAT said
// want and holds lf's bytes before off, the resume point, asking while ctx lasts;
// else why it is not proven.
func provePart(ctx context.Context, f *File, want *sshfx.Attrs, lf io.ReaderAt, off int64) error {
	got, err := f.fstat(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("sftp: the part file's attributes could not be read through its handle: %w", err)
	case !sameFileAttrs(want, &got):
		return errors.New("sftp: the part file opened is not the one looked at (its attributes differ)")
	}
	err = compareBefore(f.readerAt(ctx), lf, off, f.c.readSize())
	var se *StatusError
	if errors.As(err, &se) && se.Code != StatusEOF {
		f.c.facts.refuse(RefusedReadBack, se)
	}
	return err
}

// sameBefore reports whether a and b hold the same bytes in the n (at most) before
// off: the check that a part holds the source's bytes at the resume point. A read
// that fails or comes back short is a difference.
func sameBefore(a, b io.ReaderAt, off int64, n int) bool { return compareBefore(a, b, off, n) == nil }

// compareBefore is sameBefore saying why not: a read of a (the part) or b (the
// source) failed, or the bytes differ.
func compareBefore(a, b io.ReaderAt, off int64, n int) error {
	k := min(off, int64(n))
	x, y := make([]byte, k), make([]byte, k)
	if _, err := io.ReadFull(io.NewSectionReader(a, off-k, k), x); err != nil {
		return fmt.Errorf("sftp: the part file could not be read back at the resume point: %w", err)
	}
	if _, err := io.ReadFull(io.NewSectionReader(b, off-k, k), y); err != nil {
		return fmt.Errorf("sftp: the source could not be read at the resume point: %w", err)
	}
	if !bytes.Equal(x, y) {
		return errors.New("sftp: the part file does not hold the source's bytes at the resume point")
	}
	return nil
}

// remoteAttrsOf is the ATTRS a remote FileInfo was made from.
func remoteAttrsOf(fi fs.FileInfo) *sshfx.Attrs {
	if rfi, ok := fi.(*fileInfo); ok {
		return &rfi.attrs
	}
	return &sshfx.Attrs{}
}

// resumeOffset is where a transfer continues into a part file of size bytes without
// the mark: W (maxSpan) before its end, the point below which it is proven written
// (see the proof above), or 0.
func (c *Client) resumeOffset(size int64) int64 {
	return max(0, size-c.span())
}

// remoteResumePoint is where an upload continues the part file its LSTAT showed as
// pfi: its end when it carries the mark, else W before it, or further on what the
// call's Journal holds for it (at most its end).
func (t *getPutCall) remoteResumePoint(part string, pfi fs.FileInfo) int64 {
	size := pfi.Size()
	if markedRemote(remoteAttrsOf(pfi)) {
		return size
	}
	off := t.c.resumeOffset(size)
	if w := t.o.journal.written(part); w <= size {
		off = max(off, w)
	}
	return off
}

// localResumePoint is where a download continues the part file its LSTAT showed as
// pfi: its end when it carries the mark, else W before it.
func (t *getPutCall) localResumePoint(pfi fs.FileInfo) int64 {
	if markedLocal(pfi) {
		return pfi.Size()
	}
	return t.c.resumeOffset(pfi.Size())
}

// resumePoint finds the part file a download of size bytes (-1: not known) left: pfi
// is what the reopen must find, nil when there is no part to continue (none, or none
// long enough to hold a proven byte).
func (t *getPutCall) resumePoint(part string, size int64) (off int64, pfi fs.FileInfo, err error) {
	d := t.local
	pfi, err = d.Lstat(part)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil, nil
	case err != nil:
		return 0, nil, err
	case !pfi.Mode().IsRegular():
		return 0, nil, pathErr("resume", d.Path(part), errNotRegular)
	}
	if size >= 0 && pfi.Size() > size {
		return 0, nil, partTooLong(d.Path(part), pfi.Size(), size)
	}
	if off = t.localResumePoint(pfi); off == 0 {
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
	lf, err := t.local.ReopenPart(part, pfi)
	if err != nil {
		return nil, 0, err
	}
	same := sameBefore(f.readerAt(ctx), lf, off, t.c.readSize())
	if err := ctxError(ctx, ""); err != nil {
		lf.Close()
		return nil, 0, err
	}
	if same && markedLocal(pfi) {
		same = unmarkLocal(lf) == nil // else the part is started over
	}
	if same {
		return lf, off, nil
	}
	lf.Close()
	lf, err = t.local.CreatePart(part, perm)
	return lf, 0, err
}
