package sftp

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/sluicehq/sftp/internal/localfs"
	"github.com/sluicehq/sftp/internal/sshfx"
)

// The Put half of a tree transfer: the local tree is listed a page at a time through
// an os.Root on the source (internal/localfs, source.go), the remote one made by MKDIRs that go
// out as directories are found.
//
// Where the remote root was missing, nothing below it can be a link, so the MKDIRs of
// every directory go out as the walk finds them, without waiting for their parents'
// replies: a server that carries out a channel's requests in order (OpenSSH's does)
// makes a new tree's directories in one round trip per treeRepliesAhead. The replies
// are waited for in order on a reply queue; each file waits for its directory's
// before it is opened. A MKDIR that failed (a parent a reordering server had not made
// yet, or a name someone made meanwhile) is done again the careful way once its
// parent is made (mkdirRemote, which refuses a link in the way). Below a directory
// that existed, every MKDIR is the careful way, done by the directory's walker before
// it lists it.

// putSide lists local directories and makes remote ones.
type putSide struct {
	t      *getPutCall
	r      *treeRun
	mkdirs *replyQueue

	mu    sync.Mutex
	roots []*os.Root // the local sources, closed once the tree is done
}

func (t *getPutCall) newPutRun() (*treeRun, *putSide) {
	p := &putSide{t: t}
	p.r = t.newTreeRun("put", p)
	p.mkdirs = p.r.newReplyQueue()
	return p.r, p
}

// wait is treeRun.wait, then the sources are closed.
func (p *putSide) wait() error {
	err := p.r.wait()
	for _, root := range p.roots {
		root.Close()
	}
	return err
}

// putTree copies the local directory src, described by fi, to the remote path dst,
// of which Lstat said rr.
func (t *getPutCall) putTree(src, dst string, fi fs.FileInfo, rr remoteRoot) error {
	r, p := t.newPutRun()
	top, err := p.openTop(src, dst, rr)
	if err != nil {
		p.wait()
		return err
	}
	r.slots.Acquire(t.ctx, 1) // free: nothing else runs yet
	r.walkRoot(&treeDir{treeEntry: treeEntry{src: src, dst: dst, info: fi}, top: top})
	r.slots.Release(1)
	return p.wait()
}

// remoteRoot is what Lstat said of a Put tree's remote root before anything moved;
// assumed, that it was not asked (NoCheckDest) and is taken to be a directory.
type remoteRoot struct {
	fi      fs.FileInfo
	err     error
	assumed bool
}

// openTop opens the local source src, to be copied to dst, of which Lstat said rr.
func (p *putSide) openTop(src, dst string, rr remoteRoot) (*treeTop, error) {
	top := &treeTop{src: src}
	switch fi, err := rr.fi, rr.err; {
	case rr.assumed:
	case err == nil && fi.IsDir():
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return nil, pathErr("mkdir", dst, localfs.ErrLinkInTheWay)
	case err == nil:
		return nil, pathErr("mkdir", dst, syscall.ENOTDIR)
	case errors.Is(err, fs.ErrNotExist):
		top.fresh = true
	default:
		return nil, err
	}
	root, err := os.OpenRoot(src)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.roots = append(p.roots, root)
	p.mu.Unlock()
	top.root = root
	return top, nil
}

// PutAll copies each local file or, with Recursive, directory into the remote
// directory dir, under the base name of its path as given, as one transfer; see
// GetAll. dir is made if missing.
func (c *Client) PutAll(ctx context.Context, locals []string, dir string, opts ...TransferOption) error {
	bases, err := distinctBases(locals, filepath.Base)
	if err != nil {
		return err
	}
	t, err := c.newCall(ctx, opts)
	if err != nil {
		return err
	}
	if t.o.fsync && !c.hasExt(extFsync) {
		return pathErr("put", dir, errUnsupportedExt(extFsync))
	}
	if !t.blind() { // a write-only account's dir is taken to be there
		if err := mkdirPutAll(ctx, c, dir); err != nil {
			return err
		}
	}
	r, p := t.newPutRun()
	r.eachSource(locals, bases, func(src, base string) { p.putSource(src, path.Join(dir, base)) })
	return p.wait()
}

// mkdirPutAll makes PutAll's directory dir if it is missing.
func mkdirPutAll(ctx context.Context, c *Client, dir string) error {
	switch fi, err := c.Stat(ctx, dir); {
	case errors.Is(err, fs.ErrNotExist):
		return c.MkdirAll(ctx, dir, 0o755)
	case err != nil:
		return deniedLookHint(err)
	case !fi.IsDir():
		return pathErr("put", dir, syscall.ENOTDIR)
	}
	return nil
}

// putSource copies one source of a PutAll to dst.
func (p *putSide) putSource(src, dst string) {
	t, r := p.t, p.r
	fi, err := os.Stat(src)
	switch {
	case err != nil:
		r.fail(src, err)
	case fi.IsDir() && !t.o.recursive:
		r.fail(src, errNeedRecursive)
	case fi.IsDir():
		rr := remoteRoot{assumed: t.blind()}
		if !rr.assumed {
			rr.fi, rr.err = t.c.Lstat(r.stop, dst)
		}
		top, err := p.openTop(src, dst, rr)
		if err != nil {
			r.fail(src, err)
			return
		}
		r.walkRoot(&treeDir{treeEntry: treeEntry{src: src, dst: dst, info: fi}, top: top})
	case !fi.Mode().IsRegular():
		r.fail(src, errNotRegular)
	case t.skipped(src, fi):
	default:
		r.foundFile(fi)
		r.hand(nil, treeEntry{src: src, dst: dst, info: fi}, true)
	}
}

// enter makes the remote directory before it is listed: by a MKDIR sent now and
// answered later when its parent was missing, else the careful way, now.
func (p *putSide) enter(ctx context.Context, d *treeDir) error {
	d.made = make(chan struct{})
	perm := dirPerm(d.info.Mode(), true)
	switch {
	case d.parent == nil && !d.top.fresh:
		p.resolve(d, nil) // the root was there, a directory
		return nil
	case d.parent == nil || d.parent.sendChildren:
		// Made by this MKDIR, so nothing is below it yet.
		d.sendChildren = true
		p.sendMkdir(d, perm)
		return nil
	case d.parent.madeErr != nil: // made by its own walker, before it was listed
		p.resolve(d, errParentFailed)
		return errParentFailed
	}
	created, err := p.t.mkdirRemote(ctx, d.dst, perm)
	p.resolve(d, err)
	d.sendChildren = created
	return err
}

// resolve sets the outcome of d's MKDIR, for the files waiting for it.
func (p *putSide) resolve(d *treeDir, err error) {
	d.madeErr = err
	close(d.made)
}

// sendMkdir sends d's MKDIR and queues the wait for its reply.
func (p *putSide) sendMkdir(d *treeDir, perm fs.FileMode) {
	t := p.t
	cn := t.c.main
	a := sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: toUnixPerm(perm)}
	mkdir := cn.start(t.ctx, appendStringAttrs(nil, sshfx.TypeMkdir, cn.newID(), d.dst, &a), nil)
	if mkdir.err != nil {
		p.r.fail(d.src, mkdir.err)
		p.resolve(d, errParentFailed)
		return
	}
	p.mkdirs.add(func() {
		err := mkdir.take(t.ctx, status("MKDIR"))
		var se *StatusError
		if errors.As(err, &se) {
			p.r.bg.Go(func() { p.remake(d, perm) })
			return
		}
		if err != nil {
			p.r.fail(d.src, err)
			err = errParentFailed
		}
		p.resolve(d, err)
	})
}

// remake makes d the careful way once its parent is made, after its MKDIR sent
// without waiting failed.
func (p *putSide) remake(d *treeDir, perm fs.FileMode) {
	ctx := p.t.ctx
	var err error
	switch {
	case d.parent == nil:
		// The root's parents may be missing: they are the caller's path.
		err = p.t.mkdirRemoteRoot(ctx, d.dst, perm)
	default:
		<-d.parent.made
		if d.parent.madeErr != nil {
			p.resolve(d, errParentFailed)
			return
		}
		_, err = p.t.mkdirRemote(ctx, d.dst, perm)
	}
	if err != nil {
		p.r.fail(d.src, err)
		err = errParentFailed
	}
	p.resolve(d, err)
}

// made waits for d's MKDIR; an error means nothing can be copied into d.
func (p *putSide) made(ctx context.Context, d *treeDir) error {
	if d == nil {
		return nil
	}
	select {
	case <-d.made:
		return d.madeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// list lists the local directory a page at a time, through the source's root.
func (p *putSide) list(ctx context.Context, d *treeDir, emit func(treeEntry) error) error {
	rel, err := d.top.rel(d.src)
	if err != nil {
		return err
	}
	f, err := localfs.OpenDir(d.top.root, rel, d.info)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		page, err := f.ReadDir(localPageEntries)
		if perr := p.emitPage(d, rel, page, emit); perr != nil {
			return perr
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
}

// emitPage passes on the entries of one page of a local listing.
func (p *putSide) emitPage(d *treeDir, rel string, page []fs.DirEntry, emit func(treeEntry) error) error {
	var cost int64
	for _, de := range page {
		cost += entryOverhead + int64(len(de.Name()))
	}
	if err := p.r.budget.charge(cost); err != nil {
		p.r.budget.release(cost)
		return err
	}
	defer p.r.budget.release(cost)
	for _, de := range page {
		name := de.Name()
		e := treeEntry{src: filepath.Join(d.src, name), dst: path.Join(d.dst, name)}
		info, err := de.Info()
		if err != nil {
			p.r.fail(e.src, err)
			continue
		}
		e.info = info
		switch mode := info.Mode(); {
		case mode.IsRegular() && strings.HasSuffix(name, partSuffix):
			continue // an unfinished transfer of this package's
		case mode&fs.ModeSymlink != 0:
			if e.target, err = d.top.root.Readlink(filepath.Join(rel, name)); err != nil {
				p.r.fail(e.src, err)
				continue
			}
		}
		if err := emit(e); err != nil {
			return err
		}
	}
	return nil
}

func (p *putSide) small(fi fs.FileInfo) bool { return p.t.smallPut(fi.Size()) }

func (p *putSide) size(fi fs.FileInfo) int64 { return fi.Size() }

func (p *putSide) file(ctx context.Context, d *treeDir, e treeEntry) error {
	if err := p.made(ctx, d); err != nil {
		return err
	}
	src := localfs.Source{Path: e.src, Info: e.info}
	if d != nil {
		rel, err := d.top.rel(e.src)
		if err != nil {
			return err
		}
		src.Root, src.Name = d.top.root, rel
	}
	return p.t.putFile(ctx, src, e.dst)
}

func (p *putSide) link(ctx context.Context, d *treeDir, e treeEntry) error {
	if err := p.made(ctx, d); err != nil {
		return err
	}
	return p.t.symlinkRemote(ctx, e.target, e.dst)
}

// finish gives the remote directory its source's mode and times, last (see getSide's).
// SETSTAT follows a link: were the directory swapped for one since it was made, the
// link's target would be changed. So the server's lsetstat@openssh.com is used where
// it offers it, which acts on the link itself (and OpenSSH's fails on one). Elsewhere
// the name is looked at with LSTAT just before the SETSTAT and left alone if it is no
// longer a directory; a swap between those two requests still goes through, a race
// only lsetstat closes.
func (p *putSide) finish(ctx context.Context, d *treeDir) error {
	if err := p.made(ctx, d); err != nil {
		return err
	}
	if !p.t.preserving() {
		return nil // PreserveWherePossible, on a server seen to refuse it
	}
	return p.t.preserveOutcome(p.setDirAttrs(ctx, d))
}

// setDirAttrs sends finish's SETSTAT (or lsetstat) of d's mode and times.
func (p *putSide) setDirAttrs(ctx context.Context, d *treeDir) error {
	a, err := preserveAttrs(d.info.Mode(), localAtime(d.info), d.info.ModTime())
	if err != nil {
		return err
	}
	c := p.t.c
	if c.hasExt(extLsetstat) {
		return pathErr("lsetstat", d.dst, c.main.do(ctx, func(dst []byte, id uint32) []byte {
			return appendLsetstat(dst, id, d.dst, a)
		}, status(extLsetstat)))
	}
	fi, err := c.Lstat(ctx, d.dst)
	switch {
	case err != nil:
		return err
	case !fi.IsDir():
		return pathErr("setstat", d.dst, errNoLongerDir)
	}
	return c.setstat(ctx, "setstat", d.dst, a)
}

// errNoLongerDir is the failure of a remote directory replaced by something else
// before its mode and times were set: the same failure as a local one's.
var errNoLongerDir = localfs.ErrNoLongerDir

// rel is the path of src, a path in the tree, relative to the tree's source.
func (top *treeTop) rel(src string) (string, error) {
	return filepath.Rel(top.src, src)
}

// mkdirRemote makes a remote directory whose parent exists, and reports whether it
// did; one already there is fine, but a link there is not, even to a directory: the
// copy would land wherever it points (rsync replaces such a link; refusing is the
// safer of the two). Servers report an existing name with a generic failure, so ask
// rather than guess.
func (t *getPutCall) mkdirRemote(ctx context.Context, name string, perm fs.FileMode) (created bool, err error) {
	err = t.c.Mkdir(ctx, name, perm)
	if err == nil {
		return true, nil
	}
	if t.blind() {
		return false, err // a write-only account: nothing is looked at
	}
	if fi, lerr := t.c.Lstat(ctx, name); lerr == nil {
		switch {
		case fi.IsDir():
			return false, nil
		case fi.Mode()&fs.ModeSymlink != 0:
			return false, pathErr("mkdir", name, localfs.ErrLinkInTheWay)
		}
	}
	return false, err
}

// mkdirRemoteRoot makes the root of a Put's tree, and its missing parents. The parents
// are the caller's path, taken as given; the root itself is held to mkdirRemote's rule.
func (t *getPutCall) mkdirRemoteRoot(ctx context.Context, name string, perm fs.FileMode) error {
	fi, err := t.c.Lstat(ctx, name)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return pathErr("mkdir", name, localfs.ErrLinkInTheWay)
	case err == nil:
		return pathErr("mkdir", name, syscall.ENOTDIR)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return t.c.MkdirAll(ctx, name, perm)
}

// symlinkRemote is localfs.Dest.symlink on the server.
func (t *getPutCall) symlinkRemote(ctx context.Context, target, dst string) error {
	err := t.c.Symlink(ctx, target, dst)
	if err == nil {
		return nil
	}
	if fi, lerr := t.c.Lstat(ctx, dst); lerr != nil || fi.IsDir() {
		return err
	}
	part := remotePart(dst)
	t.c.Remove(ctx, part) // left by an earlier attempt, if at all
	if err := t.c.Symlink(ctx, target, part); err != nil {
		return err
	}
	return t.c.Rename(ctx, part, dst)
}
