package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/sluicehq/sftp/internal/localfs"
)

// Destinations that are not regular files. Get and Put write a regular file under a
// part name and rename it into place; done to a device, a FIFO or a terminal, that
// rename replaces the node with a regular file (`get big /dev/null`, run as root, left
// a 0644 file at /dev/null, and every program writing there then filled the disk or
// failed). So the destination the caller names, when it exists and is such a node, is
// opened for writing where it is (without creating or truncating it) and written in
// order, as scp and sftp(1) do: never replaced, renamed over, truncated, chmodded or
// given times. Resume, SkipUnchanged, Preserve and Fsync do not apply to it.
//
// This holds for the name the caller gives Get or Put. Inside a tree, and for the
// sources of GetAll and PutAll, a name that is such a node is replaced by the copy like
// any other file: those names come from listings, not from the caller.

// errRemoteFIFO refuses a Put onto a remote FIFO or socket.
var errRemoteFIFO = errors.New("sftp: the remote destination is a FIFO or a socket; opening it would block the server until a reader came, so Put does not write to it")

// specialMode reports whether m is a node that is written in place.
func specialMode(m fs.FileMode) bool { return !m.IsRegular() && !m.IsDir() }

// getInPlace copies the remote regular file src, described by fi, into the existing
// local node dst (lfi from Stat: links in the caller's path are followed, so
// /dev/stdout is the terminal or pipe it leads to).
func (t *getPutCall) getInPlace(ctx context.Context, src, dst string, fi, lfi fs.FileInfo) (err error) {
	// Not blocking: a FIFO with no reader fails at once (ENXIO) instead of holding
	// the open past ctx.
	lf, err := os.OpenFile(dst, os.O_WRONLY|localfs.OpenFlags, 0)
	if errors.Is(err, syscall.ENXIO) {
		return fmt.Errorf("sftp: no process has %s open for reading: %w", dst, err)
	}
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := localfs.CheckSame(lf, lfi, specialMode); err != nil {
		return pathErr("open", dst, err)
	}
	unhook, err := writeWithin(ctx, lf)
	if err != nil {
		return err
	}
	defer unhook()
	f, err := t.openRemote(ctx, src, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	p := t.rep.start(src, dst, 0, remoteSize(fi))
	defer func() { p.end(ctx, err) }()
	chk, err := t.startCheck(ctx, nil, 0)
	if err != nil {
		f.Close()
		return err
	}
	chk.askRemote(ctx, src)
	defer chk.stop()
	// Only Write, so the data comes in order: a FIFO or a terminal has no offsets.
	var w io.Writer = lf
	if p != nil {
		w = &progressFile{f: lf, p: p}
	}
	n, err := f.writeTo(ctx, "writeto", struct{ io.Writer }{chk.writer(w)})
	f.Close()
	if cerr := ctxError(ctx, ""); cerr != nil {
		return cerr // the write it interrupted says only that its deadline passed
	}
	if err == nil {
		err = chk.verify(ctx, "get", src, src, "", n) // written already: only said
	}
	return err
}

// writeWithin bounds lf's writes by ctx where the system can interrupt them (a FIFO, a
// terminal: files the runtime polls, kept non-blocking for it); elsewhere (a device
// such as /dev/null) writes do not wait, and lf is made blocking.
func writeWithin(ctx context.Context, lf *os.File) (unhook func(), err error) {
	if lf.SetWriteDeadline(time.Time{}) != nil {
		return func() {}, localfs.SetBlocking(lf)
	}
	stop := context.AfterFunc(ctx, func() { lf.SetWriteDeadline(time.Unix(1, 0)) })
	return func() { stop() }, nil
}

// putInPlace copies the local file ls to the existing remote device dst: opened for
// writing only (no create, no truncate) and written, never replaced. It is never
// striped: another lane would open it again by name.
func (t *getPutCall) putInPlace(ctx context.Context, ls localfs.Source, dst string) error {
	lf, err := ls.Open()
	if err != nil {
		return err
	}
	defer lf.Close()
	_, err = t.sendInPlace(ctx, lf, ls.Path, ls.Info.Size(), dst)
	return err
}

// sendInPlace writes what src yields (size bytes, -1 when not known; from the source
// named name, for progress) to the existing remote device dst, as putInPlace does,
// and returns the bytes the server acknowledged.
func (t *getPutCall) sendInPlace(ctx context.Context, r io.Reader, name string, size int64, dst string) (n int64, err error) {
	f, err := t.openRemote(ctx, dst, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	f.append = true // not striped (see above); the offsets it sends are kept
	p := t.rep.start(name, dst, 0, size)
	defer func() { p.end(ctx, err) }()
	if p != nil {
		f.onAcked = p.add
	}
	n, err = f.readFrom(ctx, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}
