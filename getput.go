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

	"github.com/sluicehq/sftp/internal/localfs"
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
	// preserveLoose: Preserve's SETSTAT may be refused (PreserveWherePossible).
	preserveLoose bool
	parallel      int
	progress      func(Progress)

	skipUnchanged bool
	stopOnError   bool     // a tree stops at its first failure (StopOnError)
	delivery      delivery // how an upload reaches its name (delivery.go)
	// verify checks each file end to end (Verify), with verifyAlg or, when it is "",
	// the Client's choice; sameContent makes SkipUnchanged compare hashes (verify.go).
	verify      bool
	verifyAlg   HashAlgorithm
	sameContent bool
	// skipFile is SkipFiles' predicate; nil without.
	skipFile func(src string, fi fs.FileInfo) bool
	// smallParallel is how many small files a tree keeps in flight; parallel bounds
	// the others among them.
	smallParallel int

	// afterPartLstat, set by tests only, runs between Resume's LSTAT of a remote part
	// file and its OPEN: where a third party could swap the part.
	afterPartLstat func(part string)

	journal *Journal // KeepJournal's; nil without
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
// "<name>.sluice-part" for a local one); with Resume, an existing part file is
// continued from the point below which it is proven to hold the source's bytes, and
// only the rest is sent. Only the part file counts: a destination already present
// under its final name is copied again and replaced. A part file larger than the
// source, or one that is not a regular file (a link, say: it is never followed), is
// an error.
//
// What Resume proves. A transfer of this package writes at most 64 MiB (W) out of
// order: nothing lands 64 MiB or more past a prefix known written (acknowledged by the
// server, for Put; written to the local file, for Get), whatever the options and
// whatever stops it: its ctx, Client.Close, a lost connection, the process killed.
// So a part file of S bytes this package left holds the source's bytes everywhere
// below S-W, after any number of stops and resumes, and Resume continues from there
// (from the start when S is W or less): a stop costs at most W sent again.
//
// A transfer that stops while the program runs also cuts its part to the known prefix
// (a Get's locally; a Put's through its open handle, never by name, and only while
// that handle is open), and once nothing of it can land any more, marks the part as
// cut (its modification time set to one no clock shows, 2101-03-04T05:06:08Z): then
// Resume continues from the part's end, and a stop costs nothing sent again. That is
// every stop of a Get but the process killed, and a Put stopped by its ctx or by a
// failure the server reported (the cut runs in the background once the ctx has
// ended; Client.Close waits for it a little, see Close); a Put whose connection is
// lost cannot cut its part (KeepJournal carries what it knew to the next call in the
// same process). Any write to a marked part takes the mark away (a run of this
// package that continues it does so before its first write), and a server that
// ignores or refuses times in SETSTAT keeps none: then Resume goes back W.
//
// Before anything is written, the part is checked: it must be the file that was looked
// at (a local part, os.SameFile; a remote one, opened for reading and writing, its
// attributes read through the handle those its LSTAT showed), and its bytes just
// before the resume point (up to one READ) must be the source's there (for Put, the
// local file's; for Get, the remote file's). A part that fails a check is replaced and
// the transfer starts over. A server that refuses to open a file for reading and
// writing, or to read through such a handle (AWS Transfer, Azure Blob, SFTPGo on a
// cloud backend), cannot be checked: Put with Resume starts over there, nothing
// written through a handle it could not check. A file started over says why on its
// first progress report (Progress.StartedOver).
//
// What Resume cannot prove, and so takes on trust:
//   - that a part file was left by this package, and by a build of it that bounded
//     its writes: another program's part, or an older build's, may have holes
//     anywhere below its size, which the check at the resume point does not see, and
//     another program could set the mark on a part it did not cut;
//   - that the source did not change between the runs elsewhere than where the check
//     looks: the copy would mix old and new bytes;
//   - that the part survived a crash of the machine that holds it (power lost, a
//     kernel panic; not a process killed, which loses nothing written): writes the
//     system had not put on stable storage are lost, anywhere in the file, while its
//     size may still cover them. Fsync does not change that for a part: it flushes a
//     file only once complete. A server that acknowledges WRITEs it has not stored
//     (and loses them) is the same case.
//
// Comparing a checksum of the copy with the source's is what catches these.
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
//
// What holds after a crash of the machine that holds the copy (power lost, a kernel
// panic), which loses the writes the system had not yet stored: with Fsync, a file
// renamed into place holds the whole source, or the rename was lost and its part file
// is left whole, for Resume to finish; without Fsync, even a file renamed into place
// may have lost writes (a file system may store the rename before the data). Either
// way a part file of a transfer the crash interrupted was never flushed and may have
// lost writes anywhere below its size, which Resume cannot see (see Resume).
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
	local *localfs.Dest // Get: where every local write goes
	// share is how many files move side by side: each file's transfer keeps that
	// share of the window (File.share, see fileShare), so a tree's memory stays
	// bounded.
	share int
	// rootDir is a recursive Get's root, opened with its Stat, for the walk to list.
	rootDir *Dir
	// tree is the tree transfer this call runs, if it is one.
	tree *treeRun
	// discardPart is set when the source cannot continue a part file (a PutReader
	// of a plain stream): a failed upload removes its part, whatever it holds.
	discardPart bool
	// check is the algorithm Verify uses for this call's files (verify.go).
	check callCheck
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
	if err := t.o.checkDelivery(); err != nil {
		return nil, err
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
		if t.local, err = localfs.OpenDest(local, true, dirPerm(fi.Mode(), remoteHasPerm(fi))); err != nil {
			return pathErr("get", remote, err)
		}
		defer t.local.Close()
		return t.getTree(remote, fi)
	}
	if t.skipped(remote, fi) {
		return nil
	}
	t.rep.plan(remoteSize(fi))
	if lfi, err := os.Stat(local); err == nil && specialMode(lfi.Mode()) {
		return pathErr("get", remote, t.getInPlace(ctx, remote, local, fi, lfi))
	}
	if t.local, err = localfs.OpenDest(local, false, 0); err != nil {
		return pathErr("get", remote, err)
	}
	defer t.local.Close()
	return pathErr("get", remote, t.getFile(ctx, remote, t.local.Name, fi))
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
		if t.blind() {
			root.assumed = true
		} else if root.fi, root.err = c.Lstat(ctx, remote); root.err != nil && !errors.Is(root.err, fs.ErrNotExist) {
			return deniedLookHint(root.err)
		}
		return t.putTree(local, remote, fi, root)
	case !fi.Mode().IsRegular():
		return pathErr("put", local, errNotRegular)
	case t.skipped(local, fi):
		return nil
	}
	return pathErr("put", local, t.putFileTo(ctx, localfs.Source{Path: local, Info: fi}, remote))
}

// putFileTo copies the local file ls to remote, the copy's name.
func (t *getPutCall) putFileTo(ctx context.Context, ls localfs.Source, remote string) error {
	device, err := t.lookRemoteDest(ctx, remote)
	if err != nil {
		return err
	}
	t.rep.plan(ls.Info.Size())
	if device {
		return t.putInPlace(ctx, ls, remote)
	}
	return t.putFile(ctx, ls, remote)
}

// lookRemoteDest looks at remote, the name the copy of one file takes, before an
// upload: an existing directory, FIFO or socket there is refused, and device reports
// an existing device, which is written in place. Lstat: a link at remote is replaced
// by the copy, as in a tree.
//
// A write-only account (NoCheckDest) is not looked at. On a server that reports a
// directory at any missing name (phantomDirs), a directory that lists nothing counts
// as absent: it may be none.
func (t *getPutCall) lookRemoteDest(ctx context.Context, remote string) (device bool, err error) {
	if t.blind() {
		return false, nil
	}
	rfi, err := t.c.Lstat(ctx, remote)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, deniedLookHint(err)
	case rfi.IsDir() && t.c.phantomDir(ctx, remote):
		return false, nil
	case rfi.IsDir():
		return false, pathErr("put", remote, localfs.ErrIsDirectory)
	case rfi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0:
		return false, pathErr("put", remote, errRemoteFIFO)
	}
	return rfi.Mode()&fs.ModeDevice != 0, nil
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
	if t.o.skipUnchanged && t.unchangedGet(ctx, src, dst, fi) {
		t.rep.skip(src, dst, size)
		return nil
	}
	part := dst + partSuffix
	var off int64
	var resumed fs.FileInfo // the part file to continue, if any
	if t.o.resume {
		if off, resumed, err = t.resumePoint(part, size); err != nil {
			return err
		}
	}
	f, err := t.openSource(ctx, src)
	if err != nil {
		return err
	}
	var lf *os.File
	perm := createPerm(fi.Mode(), remoteHasPerm(fi))
	if resumed != nil {
		lf, off, err = t.reopenLocalPart(ctx, f, part, resumed, off, perm)
	} else {
		lf, err = t.local.CreatePart(part, perm)
	}
	if err != nil {
		f.Close()
		return err
	}
	p := t.rep.start(src, t.local.Path(dst), off, size)
	defer func() { p.end(ctx, err) }()
	chk, err := t.startGetCheck(ctx, src, part, lf, off)
	if err != nil {
		f.Close()
		lf.Close()
		return err
	}
	defer chk.stop()
	n, err := t.download(ctx, f, src, lf, off, size, p, chk)
	if err == nil {
		err = ctxError(ctx, "")
	}
	if err == nil {
		err = t.finishLocal(lf, part, fi)
	}
	if err == nil {
		err = chk.verify(ctx, "get", src, src, t.local.Path(part), off+n)
	}
	if err != nil {
		var ve *VerifyError
		switch {
		case chk.nothingToKeep(off+n, err):
			lf.Close()
			t.local.Remove(part)
		case errors.As(err, &ve):
			// Kept for the caller to look at, never to be continued: no mark.
			lf.Close()
		default:
			// Every writer has ended: the part is cut to what they wrote, and marked
			// for Resume to continue from its end (resumemark.go). A part closed
			// already (finishLocal failed) is left as it is, unmarked.
			markLocalPart(lf, off+n)
			lf.Close()
		}
		return err
	}
	return t.local.Rename(part, dst)
}

// download moves the data of f (opened on src, listed as size bytes) into lf from off,
// by the two round trips of a small file or by the engine, and closes f.
func (t *getPutCall) download(ctx context.Context, f *File, src string, lf *os.File, off, size int64, p *fileProgress, chk *fileCheck) (n int64, err error) {
	if off == 0 && t.smallGet(size) {
		return t.getSmall(ctx, f, src, lf, size, p, chk) // closes f
	}
	n, err = receive(ctx, f, lf, off, p, chk)
	// Free the handle before the local work. A read handle's CLOSE reports nothing
	// that matters to data already received.
	f.Close()
	return n, err
}

// receive writes f from off into lf, the part file, while ctx lasts. writeTo writes
// each piece at its offset as it arrives and reports n, the bytes received in one run
// from off: pieces past them may be in lf (a failure, or a server that contradicted
// itself), so lf is cut to off+n on every outcome. Resume trusts a part file's size.
// With Verify, chk hashes what is received.
func receive(ctx context.Context, f *File, lf *os.File, off int64, p *fileProgress, chk *fileCheck) (int64, error) {
	if off > 0 {
		if _, err := lf.Seek(off, io.SeekStart); err != nil {
			return 0, err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return 0, err
		}
	}
	var w localFile = lf
	if p != nil {
		w = &progressFile{f: lf, p: p}
	}
	n, err := f.writeTo(ctx, "writeto", chk.local(w))
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
			err := localfs.Futimes(lf, at, mt)
			if errors.Is(err, errors.ErrUnsupported) {
				err = t.local.Chtimes(part, at, mt)
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
func (t *getPutCall) putFile(ctx context.Context, ls localfs.Source, dst string) (err error) {
	src, fi := ls.Path, ls.Info
	if t.o.skipUnchanged && t.unchangedPut(ctx, ls, dst) {
		t.rep.skip(src, dst, fi.Size())
		return nil
	}
	lf, err := ls.Open()
	if err != nil {
		return err
	}
	defer lf.Close()
	part := t.uploadName(dst) // the part file, or dst written in place (delivery.go)
	if err := t.c.partEnds.awaitPart(ctx, part); err != nil {
		return err // an earlier upload's end, in the background, is still at it
	}
	var off int64
	var f *File
	var restart error // why a part file was not continued
	if t.o.resume {
		if f, off, restart, err = t.resumeRemotePart(ctx, part, lf, fi.Size()); err != nil {
			return err
		}
	}
	if f == nil {
		if f, err = t.openUpload(ctx, part, createPerm(fi.Mode(), true)); err != nil {
			return err
		}
	}
	p := t.rep.startAfter(src, dst, off, fi.Size(), restart)
	defer func() { p.end(ctx, err) }()
	var n int64
	var chk *fileCheck
	if chk, err = t.startCheck(ctx, lf, off); err == nil {
		// A ctx that ended already (say from a progress callback) sends nothing.
		err = ctxError(ctx, "")
	}
	if err == nil {
		var framed []byte
		var small bool
		if framed, small, err = t.smallUpload(lf, fi, off); small {
			chk.hashData(framed[dataOff:])
			return t.putSmall(ctx, f, part, dst, framed, fi, p, chk) // closes f
		} else if err == nil {
			err = t.sendFile(ctx, f, lf, fi, off, p, &n, chk)
		}
	}
	// The server may report a failed write only now, when the file is closed. After
	// a failure the part is cut to what was acknowledged, through the handle, before
	// the close (partcut.go).
	return t.finishPut(ctx, f, part, dst, err, off+n, t.closing(f, off+n), chk)
}

// finishPut ends an upload to part whose data phase ended with err, acked bytes known
// to be on the server: closeFile closes f (its error wrapped as File's are; told
// whether the upload failed, so it can cut the part first), then a failed upload's
// part is removed if the delivery says so (removeUnproven; by default when nothing of
// it is known written), and a finished one is delivered to dst (renamed, unless it was
// written in place) once chk (with Verify) has found the server's hash of part to be
// that of the bytes sent. The close and what follows are waited for only while the
// call's ctx lasts; then they finish in the background, in that order.
func (t *getPutCall) finishPut(ctx context.Context, f *File, part, dst string, err error, acked int64, closeFile func(failed bool) error, chk *fileCheck) error {
	failed := err != nil
	if failed {
		var ns *noSpaceError
		if err = t.explainFull(t.ctx, part, err); errors.As(err, &ns) {
			acked = 0 // a part that cannot grow is removed (nospace.go)
		}
	}
	t.c.partEnds.start(part) // Client.Close lets it finish (partcut.go)
	_, ok, cerr := waitWithin(t.ctx, "", f.cn, func() (struct{}, error) {
		defer t.c.partEnds.done(part)
		cerr := closeFile(failed)
		if (failed || cerr != nil) && t.discardFailed(acked) {
			t.removeUnproven(context.WithoutCancel(t.ctx), part)
		}
		if journalled(cerr, acked) == 0 {
			t.o.journal.forget(part) // after the record below, when this runs late
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
		t.o.journal.record(part, journalled(cerr, acked))
		return err
	}
	if err := chk.verify(ctx, "put", dst, part, part, -1); err != nil { // moved: sendFile, sendStream
		return err
	}
	if err = t.deliver(ctx, part, dst); err != nil {
		t.o.journal.record(part, acked) // the part is whole, unless renamed after all
	} else {
		t.o.journal.forget(part)
	}
	return err
}

// journalled is what a Journal records for a failed upload whose CLOSE ended with
// cerr, acked bytes known written: nothing when the server answered the CLOSE with a
// failure, which may report a write it lost.
func journalled(cerr error, acked int64) int64 {
	var se *StatusError
	if errors.As(cerr, &se) {
		return 0
	}
	return acked
}

// createRemotePart creates the part file of an upload: the one way every upload
// (Put's, a tree's, PutReader's) makes one. It is created exclusively, so that a link
// someone left under the part name is never written through, and the handle it returns
// is the upload's: every write, FSETSTAT and fsync goes through it, and the only later
// requests that name the part are the proven reopens of striping and Resume and the
// rename (see "Part files" in docs/design.md). A name already taken (a file an earlier
// attempt left, or a co-tenant's link) is removed, never opened, and the exclusive
// create tried once more. The removal is a plain REMOVE, which fails on a directory
// (and in a sticky directory on another user's file): that stops the upload. It costs
// round trips only when the name is taken. A server that fails the exclusive create
// with nothing at the name fails the upload: no create that could follow a link is
// ever sent instead.
func (t *getPutCall) createRemotePart(ctx context.Context, part string, perm fs.FileMode) (*File, error) {
	const flag = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	t.o.journal.forget(part) // what it held was about the part this one replaces
	f, err := t.openRemote(ctx, part, flag, perm)
	if !errors.Is(err, fs.ErrExist) || ctx.Err() != nil {
		return f, err
	}
	if rerr := t.c.sendRemove(ctx, part); rerr != nil {
		return nil, err
	}
	return t.openRemote(ctx, part, flag, perm)
}

// sendFile writes lf from off into f, then sets metadata and syncs as asked; *n counts
// the bytes the server acknowledged. With Verify, chk hashes what is sent.
func (t *getPutCall) sendFile(ctx context.Context, f *File, lf *os.File, fi fs.FileInfo, off int64, p *fileProgress, n *int64, chk *fileCheck) error {
	if off > 0 {
		if _, err := lf.Seek(off, io.SeekStart); err != nil {
			return err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
	}
	// ReadFrom reads a local file with several goroutines (ReadAt) up to where it
	// ends, whether it grew since it was listed or not, as cp would copy it. Progress
	// counts what the server acknowledged.
	if p != nil {
		f.onAcked = p.add
	}
	var err error
	if *n, err = f.readFrom(ctx, chk.reader(lf)); err != nil {
		return err
	}
	if err := chk.moved(off + *n); err != nil {
		return err
	}
	if err := ctxError(ctx, ""); err != nil {
		return err
	}
	if t.preserving() {
		// Mode and times in one FSETSTAT, before the sync so that it covers them.
		a, err := preserveAttrs(fi.Mode(), localAtime(fi), fi.ModTime())
		if err != nil {
			return err
		}
		if err := t.preserveOutcome(f.setstat(ctx, a)); err != nil {
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
