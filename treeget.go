package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sftp/internal/localfs"
)

// The Get half of a tree transfer: the remote tree is listed a READDIR page at a
// time, the local one made through the os.Root of the destination (internal/localfs, dest.go).

// getSide lists remote directories and makes local ones.
type getSide struct {
	t      *getPutCall
	r      *treeRun
	closes *replyQueue // the CLOSEs of listed directories, waited for as the walk goes on
	// pre is the root's directory, opened with its Stat by Get; taken by the root's
	// walk, or closed once the tree is done when the walk never came to it.
	pre *Dir
}

func (t *getPutCall) newGetRun() (*treeRun, *getSide) {
	g := &getSide{t: t}
	g.r = t.newTreeRun("get", g)
	g.closes = g.r.newReplyQueue()
	return g.r, g
}

// getTree copies the remote directory src, described by fi, to the local copy's name
// in t.local.
func (t *getPutCall) getTree(src string, fi fs.FileInfo) error {
	r, g := t.newGetRun()
	g.pre, t.rootDir = t.rootDir, nil
	r.slots.Acquire(t.ctx, 1) // free: nothing else runs yet
	r.walkRoot(&treeDir{treeEntry: treeEntry{src: src, dst: t.local.Name, info: stripInfo(fi)}, top: &treeTop{src: src}})
	r.slots.Release(1)
	err := r.wait()
	if g.pre != nil {
		g.pre.close(t.ctx) // the tree stopped before its root was listed
	}
	return err
}

// GetAll copies each remote file or, with Recursive, directory into the local
// directory dir, under the base name of its path as given, as one transfer: the files
// of every source share the Parallel slots, the bound on small files in flight, one
// progress report (FilesTotal counts them all) and one *TreeError. dir is made if
// missing. Two sources with the same base name, or one without a base name (such as
// "." or "/"), are refused before anything moves.
//
// Each source is copied as Get copies it to dir/<base name>, with one difference: a
// failure of one source (a missing file, a directory without Recursive) is recorded
// in the TreeError like the failure of a file in a tree, and the others go on. An
// existing destination that is not a regular file or a directory is replaced, as in a
// tree, not written in place as Get does with the name it is given.
func (c *Client) GetAll(ctx context.Context, remotes []string, dir string, opts ...TransferOption) error {
	bases, err := distinctBases(remotes, path.Base)
	if err != nil {
		return err
	}
	t, err := c.newCall(ctx, opts)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	t.local = &localfs.Dest{Root: root, Dir: dir, Name: "."}
	defer t.local.Close()
	r, _ := t.newGetRun()
	r.eachSource(remotes, bases, r.getSource)
	return r.wait()
}

// distinctBases returns the base name of each source, refusing two alike and any
// that is not a plain name.
func distinctBases(srcs []string, base func(string) string) ([]string, error) {
	bases := make([]string, len(srcs))
	seen := make(map[string]string, len(srcs))
	for i, s := range srcs {
		b := base(s)
		if !localfs.PlainName(b) {
			return nil, pathErr("copy", s, errors.New("sftp: the source has no base name to give its copy"))
		}
		if other, ok := seen[b]; ok {
			return nil, pathErr("copy", s, fmt.Errorf("sftp: %s has the same base name: both would be copied to %s", other, b))
		}
		seen[b] = s
		bases[i] = b
	}
	return bases, nil
}

// eachSource starts copy on each source, on a walker of its own as walkers come free.
func (r *treeRun) eachSource(srcs, bases []string, copy func(src, dst string)) {
	for i, src := range srcs {
		if err := r.slots.Acquire(r.stop, 1); err != nil {
			return
		}
		r.walkers.Add(1)
		go func() {
			defer r.walkers.Done()
			defer r.slots.Release(1)
			copy(src, bases[i])
		}()
	}
}

// getSource copies one source of a GetAll to dst, a name in the local root.
func (r *treeRun) getSource(src, dst string) {
	t := r.t
	fi, err := t.c.Stat(r.stop, src)
	switch {
	case err != nil:
		r.fail(src, err)
	case fi.IsDir() && !t.o.recursive:
		r.fail(src, errNeedRecursive)
	case fi.IsDir():
		r.walkRoot(&treeDir{treeEntry: treeEntry{src: src, dst: dst, info: stripInfo(fi)}, top: &treeTop{src: src}})
	case !fi.Mode().IsRegular():
		r.fail(src, errNotRegular)
	case t.skipped(src, fi):
	default:
		if lfi, err := t.local.Lstat(dst); err == nil && lfi.IsDir() {
			r.fail(src, localfs.ErrIsDirectory)
			return
		}
		r.foundFile(fi)
		r.hand(nil, treeEntry{src: src, dst: dst, info: stripInfo(fi)}, true)
	}
}

// enter makes the local directory, or finds it there (never a link in its place).
func (g *getSide) enter(_ context.Context, d *treeDir) error {
	return g.t.local.Mkdir(d.dst, dirPerm(d.info.Mode(), remoteHasPerm(d.info)))
}

// list lists the remote directory a READDIR page at a time, with READDIRs in flight
// ahead of the one being read (streamDir). Its CLOSE goes out once the listing ends,
// and is waited for on the reply queue while the walk goes on.
func (g *getSide) list(ctx context.Context, d *treeDir, emit func(treeEntry) error) error {
	t := g.t
	dir := g.takePre(d)
	if dir == nil {
		// The OPENDIR waits under the call's ctx, not the tree's stop: a handle
		// given up on would be closed only after the call returned.
		var err error
		if dir, err = t.c.openDir(t.ctx, d.src); err != nil {
			return err
		}
	}
	streamDir(dir)
	dir.acct = g.r.budget
	if err := g.readPages(ctx, d, dir, emit); err != nil {
		dir.close(t.ctx)
		return err
	}
	name := dir.name
	cl, _ := dir.sendClose(t.ctx)
	g.closes.add(func() { g.r.fail(d.src, pathErr("close", name, cl.take(t.ctx, status("CLOSE")))) })
	return nil
}

// takePre returns the directory Get opened with the root's Stat, once, for the root.
func (g *getSide) takePre(d *treeDir) *Dir {
	if d.parent != nil || g.pre == nil {
		return nil
	}
	dir := g.pre
	g.pre = nil
	return dir
}

// readPages reads dir page by page, each charged to the budget while its entries are
// turned into what the walk keeps, and hands the entries to emit.
func (g *getSide) readPages(ctx context.Context, d *treeDir, dir *Dir, emit func(treeEntry) error) error {
	for {
		page, err := dir.ReadDirContext(ctx, treePageEntries)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var cost int64
		for _, de := range page {
			cost += listedCost(de)
		}
		err = g.r.budget.charge(cost)
		if err == nil {
			err = g.emitPage(d, page, emit)
		}
		g.r.budget.release(cost)
		if err != nil {
			return err
		}
	}
}

// emitPage checks each listed name and passes its entry on.
func (g *getSide) emitPage(d *treeDir, page []fs.DirEntry, emit func(treeEntry) error) error {
	for _, de := range page {
		name := de.Name()
		src := path.Join(d.src, name)
		// The name becomes part of a local path: one that is not a plain name ("..",
		// "a/b") would let the server write outside the destination.
		if !localfs.PlainName(name) {
			g.r.fail(src, errUnsafeName)
			continue
		}
		// Part names are this package's own, whatever the server says they are: an
		// entry under one could take the place of a part file.
		if strings.HasSuffix(name, partSuffix) {
			continue
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		if err := emit(treeEntry{src: src, dst: filepath.Join(d.dst, name), info: stripInfo(info)}); err != nil {
			return err
		}
	}
	return nil
}

// listedCost is what a listed entry costs while its page is held.
func listedCost(de fs.DirEntry) int64 {
	if e, ok := de.(dirEntry); ok {
		return entryCost(e.fi.name, &e.fi.attrs)
	}
	return entryOverhead + int64(len(de.Name()))
}

// stripInfo returns fi without the extended attributes the server sent, which a
// tree transfer never uses: what it keeps of each entry is its name, type, size,
// mode and times.
func stripInfo(fi fs.FileInfo) fs.FileInfo {
	rfi, ok := fi.(*fileInfo)
	if !ok || len(rfi.attrs.Extended) == 0 {
		return fi
	}
	c := *rfi
	c.attrs.Extended = nil
	return &c
}

// streamDir makes reads of d a page at a time (Dir.ReadDir(n > 0)) keep READDIRs in
// flight ahead of the page being read, as a whole listing does: two at first, then up
// to readAhead. A tree's walker reads its directories that way, to hold one page of
// each and not the whole listing.
func streamDir(d *Dir) {
	d.mu.Lock()
	if d.batch == 0 {
		d.batch = 2
	}
	d.mu.Unlock()
}

func (g *getSide) small(fi fs.FileInfo) bool { return g.t.smallGet(remoteSize(fi)) }

func (g *getSide) size(fi fs.FileInfo) int64 { return remoteSize(fi) }

func (g *getSide) file(ctx context.Context, _ *treeDir, e treeEntry) error {
	return g.t.getFile(ctx, e.src, e.dst, e.info)
}

// link recreates a remote link as a local link with the same target.
func (g *getSide) link(ctx context.Context, _ *treeDir, e treeEntry) error {
	target, err := g.t.c.Readlink(ctx, e.src)
	if err != nil {
		return err
	}
	return g.t.local.Symlink(target, e.dst, e.dst+partSuffix)
}

// finish gives the local directory its source's mode and times: last, as creating
// files inside a directory changes its times, and a read-only mode would have
// stopped them being created.
func (g *getSide) finish(_ context.Context, d *treeDir) error {
	at, mt, ok := remoteTimes(d.info)
	return g.t.local.SetDirMeta(d.dst, d.info.Mode()&modeBits, ok, at, mt)
}

// statSource looks at what a Get copies: a regular file, or with Recursive a
// directory. A recursive Get will list remote if it is a directory: its OPENDIR goes
// out with the Stat rather than a round trip after it, and is kept in t.rootDir.
func (t *getPutCall) statSource(remote string) (fs.FileInfo, error) {
	var pre preopened
	if t.o.recursive {
		pre.done = make(chan struct{})
		go func() {
			defer close(pre.done)
			pre.d, pre.err = t.c.openDir(t.ctx, remote)
		}()
	}
	fi, err := t.c.Stat(t.ctx, remote)
	if err == nil && fi.IsDir() {
		t.rootDir = pre.take()
	} else {
		pre.discard(t.ctx)
	}
	switch {
	case err != nil:
		return nil, err
	case fi.IsDir() && !t.o.recursive:
		return nil, pathErr("get", remote, errNeedRecursive)
	case !fi.IsDir() && !fi.Mode().IsRegular():
		return nil, pathErr("get", remote, errNotRegular)
	}
	return fi, nil
}

// preopened is an OPENDIR sent before it is known to be wanted.
type preopened struct {
	done chan struct{} // closed once d and err are set; nil when none was sent
	d    *Dir
	err  error
}

// take waits for the OPENDIR and returns its Dir, or nil when it failed (the walk
// then opens the directory itself, and reports what goes wrong there).
func (p *preopened) take() *Dir {
	if p.done == nil {
		return nil
	}
	<-p.done
	return p.d
}

// discard closes the Dir the OPENDIR opened, if it did, while ctx allows.
func (p *preopened) discard(ctx context.Context) {
	if d := p.take(); d != nil {
		d.close(ctx)
	}
}
