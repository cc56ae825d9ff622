package sftp

import (
	"context"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// How a failed upload leaves its part file. The part is cut to the prefix the server
// acknowledged, so that it holds no hole and no nonce (reopen.go) for anyone who looks
// at it; Resume does not depend on the cut (the span bound proves its resume point,
// resume.go), so the cut is made only where it cannot act on another file:
//
//   - through the File's own handle (FSETSTAT), never by name: a co-tenant who can
//     write the directory can swap the name for a link, and a truncate by name would
//     cut the link's target (issue 26);
//   - after every WRITE that may land: the engine has collected its sibling lanes'
//     CLOSE replies before it returns (a server carries out one channel's requests in
//     order, so a CLOSE answered is every WRITE before it landed), and the FSETSTAT
//     goes on the File's own channel behind its WRITEs. When the call's ctx ended
//     before a sibling's CLOSE was answered, a late WRITE of it can still land past
//     the cut: the part then holds a hole again, which the span bound keeps Resume
//     right about;
//   - when the handle is gone (its channel died, or the CLOSE went out already), there
//     is no cut.
//
// A part of which nothing is known written is removed, by name (removeUnproven).

// cutAndClose cuts f, the part file of a failed upload, to size through its handle and
// closes it: the FSETSTAT and the CLOSE go out back to back on f's channel, and both
// replies are awaited (the caller bounds that, see finishPut). The cut is best effort:
// a server that refuses it leaves the part as it is. The error is the CLOSE's.
func cutAndClose(f *File, size int64) error {
	defer f.cancel()
	bg := context.Background()
	cut := &sshfx.Attrs{Flags: sshfx.AttrSize, Size: uint64(size)}
	reqs, cls, err := f.sendThenClose(bg, bg, []encoder{unshared(func(id uint32) []byte {
		return appendStringAttrs(nil, sshfx.TypeFsetstat, id, f.handle, cut)
	})})
	collect(bg, f.cn, reqs, func(_ int, r response, werr error) {
		if werr == nil {
			f.cn.check(expectStatus("FSETSTAT", &r))
			r.release()
		}
	})
	if cerr := closeReply(bg, f, cls); cerr != nil || err != nil {
		return f.err("close", firstErr(cerr, err))
	}
	return nil
}

// closeCutting is finishPut's closeFile for an upload whose handle f is still open:
// a failed upload's part is cut to acked through f first (cutAndClose).
func closeCutting(f *File, acked int64) func(failed bool) error {
	return func(failed bool) error {
		if failed {
			return cutAndClose(f, acked)
		}
		return f.Close()
	}
}

// removeUnproven removes the part file of a failed upload of which nothing is known
// written, by name, but only when LSTAT shows a regular file there: REMOVE acts on the
// name and never through a link, so a name swapped between the two requests costs at
// most the entry swapped in, never a file a link points to, and a link found there is
// left alone. WRITEs that landed unacknowledged go with it: nothing of them was proven
// (by the span bound they are all below W, where Resume would start over anyway).
func (t *getPutCall) removeUnproven(ctx context.Context, part string) {
	fi, err := t.c.Lstat(ctx, part)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	t.c.Remove(ctx, part)
}
