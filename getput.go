package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"reflect"
	"time"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Get and Put move a file or a whole tree between the local file system and the
// server. The data goes through File.WriteTo and File.ReadFrom, so it is pipelined (and
// striped, for large files) exactly as those are; what this file adds is naming, atomic
// replacement, resumption, metadata and cancellation around them.

// partSuffix marks a file still being written. The name is fixed rather than random so
// that Resume can find what an interrupted transfer left.
const partSuffix = ".sluice-part"

type transferOptions struct {
	recursive bool
	resume    bool
	preserve  bool
	fsync     bool
	parallel  int
	progress  func(Progress)

	skipUnchanged bool
	stopOnError   bool // a tree stops at its first failure (StopOnError)
	// smallParallel is how many small files a tree keeps in flight; parallel bounds
	// the others among them.
	smallParallel int

	// afterPartLstat, set by tests only, runs between Resume's LSTAT of a remote part
	// file and its OPEN: where a third party could swap the part.
	afterPartLstat func(part string)
}

// TransferOption configures Get and Put. Each checks its value, so a bad one fails the
// call before anything is touched.
type TransferOption func(*transferOptions) error

// Recursive lets Get and Put copy a directory and everything below it. The tree is
// copied as it is walked: each directory is listed a page at a time, made at the
// destination, and its files handed out to move, up to Parallel of them in flight,
// while the walk goes on; what the call holds is the part of the walk under way, not
// the whole tree, so a tree of any size (a million files, a directory of a million
// entries) copies within WithMemoryLimit. Symbolic links inside the tree are recreated
// as links with the same target, not followed (like cp -r, or rsync -l); a link given
// as the source itself is followed. Other special files (devices, FIFOs, sockets) are
// skipped, and so are entries named *.sluice-part, which are this package's own
// unfinished transfers.
//
// A file, link or directory that fails does not stop the rest: every other one is
// copied, and the call returns a *TreeError listing the failures (StopOnError stops
// at the first instead). A directory that cannot be listed or made fails with
// everything below it. The call's ctx ending, or the connection dying, stops the
// tree.
//
// Nothing is ever written through a link in the destination, whether this call made
// it or an earlier one did: a file replaces a link at its name, and a link where the
// tree has a directory fails that directory rather than being followed. A Get writes
// nowhere outside its local destination (see the trust model in the README): it
// refuses a remote entry whose name could escape it (containing a slash, or "." or
// ".."), the same name listed again while its first is being copied, and directories
// nested more than 64 levels deep (as OpenSSH's client does). A server can still serve
// a tree without end (each directory listing more): the call then runs until its ctx
// ends, in bounded memory, as a file without end would.
//
// Without Recursive a directory source is an error.
func Recursive() TransferOption {
	return func(o *transferOptions) error { o.recursive = true; return nil }
}

// Resume continues transfers that an earlier call left unfinished. Each file is
// written under a part name first (".<name>.sluice-part" beside a remote destination,
// "<name>.sluice-part" for a local one); with Resume, an existing part file is taken to
// hold the source's first bytes and the transfer continues from its size. Only the part
// file counts: a destination already present under its final name is copied again and
// replaced. A part file larger than the source, or one that is not a regular file (a
// link, say: it is never followed), is an error.
//
// A part file is reopened by name after it was looked at, so the file opened is checked
// to be the one looked at before anything is written to it. A local part (Get) must be
// the same file (os.SameFile); it is not compared with the source. A remote part (Put)
// is opened for reading and writing, its attributes read through the handle must be
// those its LSTAT showed, and its last bytes (up to one READ) must be the source's bytes
// at those offsets; a part that fails either check is replaced and the upload starts
// over. A server that refuses to open a file for reading and writing (some do) cannot be
// checked: Put with Resume fails there when a part file exists (remove it, or upload
// without Resume).
func Resume() TransferOption {
	return func(o *transferOptions) error { o.resume = true; return nil }
}

// Preserve gives each copied file and directory its source's permission bits and its
// access and modification times, in whole seconds (all SFTP v3 carries). Setuid, setgid
// and sticky bits are not copied, as by OpenSSH's client: a server must not be able to
// hand the caller a setuid program, nor the caller's files become one on the server.
// Symbolic links keep the times of their creation.
//
// A directory gets its mode and times last, once everything below it is copied, and
// never through a link someone put at its name meanwhile: locally they are set through
// a descriptor of the directory, opened and checked to be the one made; on the server
// with lsetstat@openssh.com, which does not follow a link. A server without it gets
// an LSTAT just before the SETSTAT, and a name that is no longer a directory is left
// alone (and recorded as failed); a swap between those two requests still makes the
// SETSTAT act on the link's target.
//
// Without Preserve, a new file gets its source's permission bits plus owner write
// (so that Resume can reopen it), less the umask where it is created; a new directory
// gets its source's bits plus owner rwx.
func Preserve() TransferOption {
	return func(o *transferOptions) error { o.preserve = true; return nil }
}

// Fsync flushes each file to stable storage before it is renamed into place: with
// fsync@openssh.com for Put (a server without it fails the Put before anything moves)
// and fsync(2) for Get. The rename itself is not flushed.
func Fsync() TransferOption {
	return func(o *transferOptions) error { o.fsync = true; return nil }
}

// defaultParallel is how many files a tree transfer moves at once when the caller did
// not choose Parallel: large files are bound by bandwidth, which each one's window
// fills already, so more in flight would only share the window out thinner (File.share)
// and hold more of the server's handles.
const defaultParallel = 16

// Parallel sets how many files a tree transfer keeps in flight, and how many
// directories it lists at once. By default 16 files are in flight, and up to 512 when
// they are small (one READ or WRITE each), as long as those hold no more than 32 MiB
// together; Parallel(n) sets both counts to n. Files in flight each hold a remote
// handle; the value is lowered to fit the server's limit on open handles when it
// publishes one. A tree of small files is bound by round trips, not bandwidth, so it
// gains from many in flight; large files gain less, each already fills the window.
func Parallel(n int) TransferOption {
	return func(o *transferOptions) error {
		if n < 1 || n > 1024 {
			return fmt.Errorf("sftp: Parallel(%d): want 1 to 1024", n)
		}
		o.parallel = n
		return nil
	}
}

// StopOnError makes a tree transfer (Recursive, GetAll, PutAll) stop at its first
// failure, which it returns, alone, once the files in flight have stopped. Without it
// a tree goes on past a file that fails, copies every other one, and returns a
// *TreeError listing the failures. Part files of the files that failed or were
// stopped stay for Resume, as always.
func StopOnError() TransferOption {
	return func(o *transferOptions) error { o.stopOnError = true; return nil }
}

// OnProgress calls fn as files start, as data moves and as they finish (see Progress).
// Calls never overlap, so fn needs no locking; they are made on the goroutines moving
// data and are not throttled, so fn should be quick (a display would throttle itself).
// fn may cancel the call's context.
func OnProgress(fn func(Progress)) TransferOption {
	return func(o *transferOptions) error {
		if fn == nil {
			return errors.New("sftp: OnProgress(nil)")
		}
		o.progress = fn
		return nil
	}
}

// getPutCall is the state of one Get or Put call.
type getPutCall struct {
	c *Client
	// ctx is the caller's. Work a failure elsewhere in a tree stops is given a context
	// of its own, which says when to stop; ctx bounds the waits that clean up after it
	// (an OPEN's reply, the CLOSE of its handle), so the call returns only once the
	// handles it opened are closed, or once ctx ends.
	ctx   context.Context
	o     transferOptions
	rep   *reporter
	local *localDest // Get: where every local write goes
	// share is how many files move side by side: each file's transfer keeps that
	// share of the window (File.share, see fileShare), so a tree's memory stays
	// bounded.
	share int
	// rootDir is a recursive Get's root, opened with its Stat, for the walk to list.
	rootDir *Dir
	// tree is the tree transfer this call runs, if it is one.
	tree *treeRun
}

func (c *Client) newCall(ctx context.Context, opts []TransferOption) (*getPutCall, error) {
	t := &getPutCall{c: c, ctx: ctx}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&t.o); err != nil {
			return nil, err
		}
	}
	// Small files take requests, not windows: unless the caller chose, more of them
	// are in flight than of large files (see smallfile.go).
	t.o.smallParallel = t.o.parallel
	if t.o.parallel == 0 {
		t.o.parallel, t.o.smallParallel = defaultParallel, defaultSmallParallel
	}
	// Leave half the server's handles to whatever else shares the Client.
	if h := c.limits.MaxOpenHandles; h > 0 {
		t.o.parallel = max(1, min(t.o.parallel, h/2))
		t.o.smallParallel = max(1, min(t.o.smallParallel, h/2))
	}
	t.rep = newReporter(t.o.progress)
	return t, nil
}

var (
	errNeedRecursive = errors.New("sftp: is a directory (use Recursive to copy trees)")
	errNotRegular    = errors.New("sftp: not a regular file or directory")
)

// Get copies the remote file or, with Recursive, directory to local. local names the
// copy itself, as with GNU cp -T, never a directory to put it in: a file's copy is
// local (an existing directory there is an error), a tree's copy is the directory
// local, made if missing and merged into if it exists. So the same Get run twice
// lands in the same place, and with SkipUnchanged the second run moves nothing. To
// copy into a directory under the source's base name, use GetAll.
//
// Each file is written to a part file and renamed into place only once complete, so
// an existing file is replaced whole or not at all. On failure a part file holding
// data stays for Resume; one with none is removed. When local is an existing device,
// FIFO or terminal (or a link to one, such as /dev/stdout), the file is written into
// it in place instead: opened without creating or truncating it, never renamed over
// or given a mode or times; Resume, SkipUnchanged, Preserve and Fsync do not apply. A
// FIFO with no reader fails at once rather than wait for one.
//
// Every local write goes through an os.Root opened on the directory that receives the
// copy, so no name or link the server sends resolves outside it (see Recursive).
//
// When ctx ends, transfers in flight stop and Get returns promptly with an error
// matching ctx.Err(): it waits for the server no longer. The CLOSEs of its remote
// handles are sent and complete in the background (Client.Close waits for them). A
// tree's failures are listed in a *TreeError (see Recursive).
func (c *Client) Get(ctx context.Context, remote, local string, opts ...TransferOption) error {
	t, err := c.newCall(ctx, opts)
	if err != nil {
		return err
	}
	fi, err := t.statSource(remote)
	defer func() {
		if t.rootDir != nil {
			t.rootDir.close(ctx) // not listed: the Get failed before its walk
		}
	}()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		if t.local, err = openLocalDest(local, true, dirPerm(fi.Mode(), remoteHasPerm(fi))); err != nil {
			return pathErr("get", remote, err)
		}
		defer t.local.close()
		return t.getTree(remote, fi)
	}
	t.rep.plan(remoteSize(fi))
	if lfi, err := os.Stat(local); err == nil && specialMode(lfi.Mode()) {
		return pathErr("get", remote, t.getInPlace(ctx, remote, local, fi, lfi))
	}
	if t.local, err = openLocalDest(local, false, 0); err != nil {
		return pathErr("get", remote, err)
	}
	defer t.local.close()
	return pathErr("get", remote, t.getFile(ctx, remote, t.local.name, fi))
}

// Put copies the local file or, with Recursive, directory to remote. remote names the
// copy itself, as for Get: a file's copy is remote (an existing directory there is an
// error, a link there is replaced), a tree's copy is the directory remote, made if
// missing and merged into if it exists. To copy into a directory under the source's
// base name, use PutAll.
//
// Each file is uploaded under a part name in its destination directory and renamed
// over the destination (posix-rename@openssh.com, so an existing file is replaced
// atomically) only after all its data, its metadata and the handle's close succeeded.
// On failure a part file holding data stays for Resume; one with none is removed. When
// remote is an existing device, the file is written into it in place (opened for
// writing only, never striped, renamed over or given attributes); a remote FIFO or
// socket is refused, as opening it would block the server until a reader came.
//
// Local files are opened as they were looked at, or not at all: the files of a tree
// through an os.Root on the source, without following a link or blocking on a FIFO
// put in their place since the walk, and checked to be the file the walk saw; one
// that is not fails, and nothing of it is sent.
//
// Cancellation and failures behave as for Get.
func (c *Client) Put(ctx context.Context, local, remote string, opts ...TransferOption) error {
	t, err := c.newCall(ctx, opts)
	if err != nil {
		return err
	}
	if t.o.fsync && !c.hasExt(extFsync) {
		return pathErr("put", local, errUnsupportedExt(extFsync))
	}
	fi, err := os.Stat(local)
	switch {
	case err != nil:
		return err
	case fi.IsDir() && !t.o.recursive:
		return pathErr("put", local, errNeedRecursive)
	case fi.IsDir():
		var root remoteRoot
		if root.fi, root.err = c.Lstat(ctx, remote); root.err != nil && !errors.Is(root.err, fs.ErrNotExist) {
			return root.err
		}
		return t.putTree(local, remote, fi, root)
	case !fi.Mode().IsRegular():
		return pathErr("put", local, errNotRegular)
	}
	return pathErr("put", local, t.putFileTo(ctx, localSource{path: local, info: fi}, remote))
}

// putFileTo copies the local file ls to remote, the copy's name.
func (t *getPutCall) putFileTo(ctx context.Context, ls localSource, remote string) error {
	// Lstat: a link at remote is replaced by the copy, as in a tree.
	rfi, err := t.c.Lstat(ctx, remote)
	switch {
	case err == nil && rfi.IsDir():
		return pathErr("put", remote, errIsDirectory)
	case err == nil && rfi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0:
		return pathErr("put", remote, errRemoteFIFO)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	t.rep.plan(ls.info.Size())
	if err == nil && rfi.Mode()&fs.ModeDevice != 0 {
		return t.putInPlace(ctx, ls, remote)
	}
	return t.putFile(ctx, ls, remote)
}

// openRemote opens a remote file for a transfer that stop may end. The OPEN itself
// waits under the call's ctx, not stop: an OPEN given up on leaves its handle to be
// closed in the background, after Get or Put returned. So a tree whose first failure
// ends stop still collects every OPEN in flight and closes its handle before returning.
// The File's CLOSEs are bounded by the call's ctx likewise (File.callCtx).
func (t *getPutCall) openRemote(stop context.Context, name string, flag int, perm fs.FileMode) (*File, error) {
	if err := ctxError(stop, ""); err != nil {
		return nil, err
	}
	f, err := t.c.OpenFile(t.ctx, name, flag, perm)
	if err != nil {
		return nil, err
	}
	f.share = t.fileShare()
	f.callCtx = t.ctx
	if err := ctxError(stop, ""); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// getFile copies the remote regular file src, described by fi, to dst, a name in the
// local destination's root.
func (t *getPutCall) getFile(ctx context.Context, src, dst string, fi fs.FileInfo) (err error) {
	size := remoteSize(fi)
	if t.o.skipUnchanged && t.local.unchangedLocal(dst, fi) {
		t.rep.skip(src, dst, size)
		return nil
	}
	part := dst + partSuffix
	var off int64
	var resumed fs.FileInfo // the part file to continue, if any
	if t.o.resume {
		if off, resumed, err = t.local.resumePoint(part, size); err != nil {
			return err
		}
	}
	f, err := t.openRemote(ctx, src, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	var lf *os.File
	if resumed != nil {
		lf, err = t.local.reopenPart(part, resumed)
	} else {
		lf, err = t.local.createPart(part, createPerm(fi.Mode(), remoteHasPerm(fi)))
	}
	if err != nil {
		f.Close()
		return err
	}
	p := t.rep.start(src, t.local.path(dst), off, size)
	defer func() { p.end(err) }()
	n, err := t.download(ctx, f, src, lf, off, size, p)
	if err == nil {
		err = ctxError(ctx, "")
	}
	if err == nil {
		err = t.finishLocal(lf, part, fi)
	}
	if err != nil {
		lf.Close()
		if off == 0 && n == 0 {
			t.local.remove(part)
		}
		return err
	}
	return t.local.rename(part, dst)
}

// download moves the data of f (opened on src, listed as size bytes) into lf from off,
// by the two round trips of a small file or by the engine, and closes f.
func (t *getPutCall) download(ctx context.Context, f *File, src string, lf *os.File, off, size int64, p *fileProgress) (n int64, err error) {
	if off == 0 && t.smallGet(size) {
		return t.getSmall(ctx, f, src, lf, size, p) // closes f
	}
	n, err = receive(ctx, f, lf, off, p)
	// Free the handle before the local work. A read handle's CLOSE reports nothing
	// that matters to data already received.
	f.Close()
	return n, err
}

// receive writes f from off into lf, the part file, while ctx lasts. writeTo writes
// each piece at its offset as it arrives and reports n, the bytes received in one run
// from off: pieces past them may be in lf (a failure, or a server that contradicted
// itself), so lf is cut to off+n on every outcome. Resume trusts a part file's size.
func receive(ctx context.Context, f *File, lf *os.File, off int64, p *fileProgress) (int64, error) {
	if off > 0 {
		if _, err := lf.Seek(off, io.SeekStart); err != nil {
			return 0, err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return 0, err
		}
	}
	var w io.Writer = lf
	if p != nil {
		w = &progressFile{f: lf, p: p}
	}
	n, err := f.writeTo(ctx, w)
	if terr := lf.Truncate(off + n); terr != nil {
		err = errors.Join(err, terr)
	}
	return n, err
}

// finishLocal sets the metadata of a complete local part file, syncs and closes it.
func (t *getPutCall) finishLocal(lf *os.File, part string, fi fs.FileInfo) error {
	if t.o.preserve {
		if err := lf.Chmod(fi.Mode() & modeBits); err != nil {
			return err
		}
		if at, mt, ok := remoteTimes(fi); ok {
			// Through the descriptor where the system allows: the name could have
			// been swapped since.
			err := futimes(lf, at, mt)
			if errors.Is(err, errors.ErrUnsupported) {
				err = t.local.chtimes(part, at, mt)
			}
			if err != nil {
				return err
			}
		}
	}
	if t.o.fsync {
		if err := lf.Sync(); err != nil {
			return err
		}
	}
	return lf.Close()
}

// putFile copies the local regular file src to the remote path dst.
func (t *getPutCall) putFile(ctx context.Context, ls localSource, dst string) (err error) {
	src, fi := ls.path, ls.info
	if t.o.skipUnchanged && t.unchangedRemote(ctx, dst, fi) {
		t.rep.skip(src, dst, fi.Size())
		return nil
	}
	lf, err := ls.open()
	if err != nil {
		return err
	}
	defer lf.Close()
	part := remotePart(dst)
	var off int64
	var f *File
	if t.o.resume {
		if f, off, err = t.resumeRemotePart(ctx, part, lf, fi.Size()); err != nil {
			return err
		}
	}
	if f == nil {
		if f, err = t.createRemotePart(ctx, part, createPerm(fi.Mode(), true)); err != nil {
			return err
		}
	}
	p := t.rep.start(src, dst, off, fi.Size())
	defer func() { p.end(err) }()
	var n int64
	// A ctx that ended already (say from a progress callback) sends nothing.
	if err = ctxError(ctx, ""); err == nil {
		var data []byte
		var small bool
		if data, small, err = t.smallUpload(lf, fi, off); small {
			return t.putSmall(ctx, f, part, dst, data, fi, p) // closes f
		} else if err == nil {
			err = t.sendFile(ctx, f, lf, fi, off, p, &n)
		}
	}
	// The server may report a failed write only now, when the file is closed. After
	// a failure the part is cut to what was acknowledged, once the close is done (see
	// keepPart), which is waited for in the background once ctx has ended.
	return t.finishPut(ctx, f, part, dst, err, off+n, func() error { return f.close(context.Background()) })
}

// finishPut ends an upload to part whose data phase ended with err, acked bytes known
// to be on the server: closeFile closes f (its error wrapped as File's are), then on any
// failure the part is cut to acked (keepPart), else it is renamed to dst. The close and
// the cut are waited for only while the call's ctx lasts; then they finish in the
// background, in that order.
func (t *getPutCall) finishPut(ctx context.Context, f *File, part, dst string, err error, acked int64, closeFile func() error) error {
	failed := err != nil
	_, ok, cerr := waitWithin(t.ctx, "", f.cn, func() (struct{}, error) {
		cerr := closeFile()
		if failed || cerr != nil {
			t.keepPart(context.WithoutCancel(t.ctx), part, acked)
		}
		return struct{}{}, cerr
	}, nil)
	if !ok {
		cerr = f.err("close", cerr)
	}
	if err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return t.c.Rename(ctx, part, dst)
}

// createRemotePart creates a part file for an upload. It is created exclusively, so
// that a link someone left under the part name is never written through; one already
// there (a file an earlier attempt left, or such a link) is removed and the create
// tried once more. That costs round trips only when the name is taken.
func (t *getPutCall) createRemotePart(ctx context.Context, part string, perm fs.FileMode) (*File, error) {
	const flag = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	f, err := t.openRemote(ctx, part, flag, perm)
	if err == nil || ctx.Err() != nil {
		return f, err
	}
	// Servers report an existing name with a generic failure, so ask. Only a file or
	// a link is removed; anything else at the part name stops the upload.
	fi, lerr := t.c.Lstat(ctx, part)
	switch {
	case errors.Is(lerr, fs.ErrNotExist):
		// Nothing there, yet the exclusive create failed: a server that does not
		// do EXCL, or a failure the plain create will report again.
		return t.openRemote(ctx, part, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	case lerr != nil || fi.IsDir():
		return nil, err
	}
	if rerr := t.c.Remove(ctx, part); rerr != nil {
		return nil, err
	}
	return t.openRemote(ctx, part, flag, perm)
}

// keepPart leaves a failed upload's part file holding exactly its acknowledged
// prefix, or removes it when that is empty. WRITEs given up on may still have landed,
// out of order across striped channels, leaving a hole before data that Resume would
// take as sent; the handle's close has let every such WRITE land, so cutting the file
// now keeps only what is known to be there. Best effort.
func (t *getPutCall) keepPart(ctx context.Context, part string, acked int64) {
	if acked == 0 {
		t.c.Remove(ctx, part)
		return
	}
	t.c.Truncate(ctx, part, acked)
}

// sendFile writes lf from off into f, then sets metadata and syncs as asked; *n counts
// the bytes the server acknowledged.
func (t *getPutCall) sendFile(ctx context.Context, f *File, lf *os.File, fi fs.FileInfo, off int64, p *fileProgress, n *int64) error {
	if off > 0 {
		if _, err := lf.Seek(off, io.SeekStart); err != nil {
			return err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
	}
	// ReadFrom reads a local file with several goroutines (ReadAt) up to where it
	// ends, whether it grew since it was listed or not, as cp would copy it.
	var src io.Reader = lf
	if p != nil {
		src = &progressFile{f: lf, p: p}
	}
	var err error
	if *n, err = f.readFrom(ctx, src); err != nil {
		return err
	}
	if err := ctxError(ctx, ""); err != nil {
		return err
	}
	if t.o.preserve {
		// Mode and times in one FSETSTAT, before the sync so that it covers them.
		a, err := preserveAttrs(fi.Mode(), localAtime(fi), fi.ModTime())
		if err != nil {
			return err
		}
		if err := f.setstat(ctx, a); err != nil {
			return f.err("setstat", err)
		}
	}
	if t.o.fsync {
		return f.sync(ctx)
	}
	return nil
}

// preserveAttrs is the SETSTAT that gives a remote file mode and times.
func preserveAttrs(mode fs.FileMode, atime, mtime time.Time) (*sshfx.Attrs, error) {
	a, err := timesAttrs(atime, mtime)
	if err != nil {
		return nil, err
	}
	a.Flags |= sshfx.AttrPermissions
	a.Permissions = toUnixPerm(mode & modeBits)
	return a, nil
}

// remotePart is the name a remote file is uploaded under before the rename. It is
// hidden, so listings of the directory do not show it as a finished file.
func remotePart(dst string) string {
	return path.Join(path.Dir(dst), "."+path.Base(dst)+partSuffix)
}

func partTooLong(part string, have, size int64) error {
	return pathErr("resume", part, fmt.Errorf("sftp: part file has %d bytes, more than the %d-byte source", have, size))
}

// modeBits is what Preserve copies of a mode: the permission bits only. Setuid,
// setgid and sticky are dropped, as OpenSSH's client drops them: a copy must not turn
// into a program that runs as the person who fetched it.
const modeBits = fs.ModePerm

// createPerm is the mode a new file is created with: the source's permission bits,
// plus owner write so that Resume can reopen the part file.
func createPerm(mode fs.FileMode, known bool) fs.FileMode {
	if !known {
		return 0o666
	}
	return mode.Perm() | 0o200
}

func remoteAttrs(fi fs.FileInfo) *FileAttrs {
	if a, ok := fi.Sys().(*FileAttrs); ok {
		return a
	}
	return &FileAttrs{}
}

// remoteSize is the size the server sent, or -1 when it sent none.
func remoteSize(fi fs.FileInfo) int64 {
	if !remoteAttrs(fi).Flags.Has(AttrSize) {
		return -1
	}
	return fi.Size()
}

func remoteHasPerm(fi fs.FileInfo) bool {
	return remoteAttrs(fi).Flags.Has(AttrPermissions)
}

func remoteTimes(fi fs.FileInfo) (atime, mtime time.Time, ok bool) {
	a := remoteAttrs(fi)
	return a.ATime, a.MTime, a.Flags.Has(AttrACModTime)
}

// localAtime digs the access time out of a local FileInfo. The field is Atim on Linux
// and most Unixes and Atimespec on Darwin and some BSDs, both {Sec, Nsec}; reading it
// by name works on each without a build-tagged file per platform. Where there is no
// such field (Windows), the modification time stands in.
func localAtime(fi fs.FileInfo) time.Time {
	v := reflect.ValueOf(fi.Sys())
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct {
		for _, name := range []string{"Atim", "Atimespec"} {
			ts := v.FieldByName(name)
			if !ts.IsValid() || ts.Kind() != reflect.Struct {
				continue
			}
			sec, nsec := ts.FieldByName("Sec"), ts.FieldByName("Nsec")
			if sec.IsValid() && nsec.IsValid() && sec.CanInt() && nsec.CanInt() {
				return time.Unix(sec.Int(), nsec.Int())
			}
		}
	}
	return fi.ModTime()
}
