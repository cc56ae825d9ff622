package sftp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/sluicehq/sftp/internal/sshfx"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// Tree transfers. A tree is listed whole before any data moves, so the file count and
// total size are known from the first progress report; then its directories are
// created, parents first; then its files and links move, Parallel at a time. On a
// tree of small files the cost is round trips, not bytes: listing, creating and
// copying all keep several requests in flight rather than paying one at a time.

// treeEntry is one thing a tree transfer copies.
type treeEntry struct {
	src, dst string
	info     fs.FileInfo
	target   string // of a local symbolic link, read during the walk
}

type treePlan struct {
	dirs  [][]treeEntry // by depth, dirs[0] holding the root: each level after its parents
	files []treeEntry
	links []treeEntry
	size  int64 // all files' sizes summed, or -1 when one is unknown
}

func (pl *treePlan) addDir(depth int, e treeEntry) {
	for len(pl.dirs) <= depth {
		pl.dirs = append(pl.dirs, nil)
	}
	pl.dirs[depth] = append(pl.dirs[depth], e)
}

func (pl *treePlan) addFile(e treeEntry, size int64) {
	pl.files = append(pl.files, e)
	if size < 0 || pl.size < 0 {
		pl.size = -1
	} else {
		pl.size += size
	}
}

var errUnsafeName = errors.New("sftp: the server listed a name that is not a plain file name")

// plainName reports whether a name from a remote listing names an entry of the local
// directory it is joined to, and nothing else: not "..", not "a/b", not "C:x". The rules
// are plainNameOn's for this system's separator; filepath.IsLocal has the OS's own say
// on top.
func plainName(name string) bool {
	return plainNameOn(name, filepath.Separator) && filepath.IsLocal(name)
}

var (
	errDuplicateName = errors.New("sftp: the server listed the same name twice")
	errTooDeep       = errors.New("sftp: the remote tree nests directories too deep")
	errTooBig        = errors.New("sftp: the remote tree is too big to list")
)

// walkLimits bound what a recursive Get takes from the server before any data moves.
// The whole tree is listed first and kept in memory, and a server can list a directory
// inside itself forever, or any number of entries: without bounds the walk would never
// end, or end the process.
type walkLimits struct {
	depth   int   // directory levels, the root's included (OpenSSH's client stops at 64)
	entries int64 // entries in the whole tree
	bytes   int64 // of names and paths kept for them
}

var defaultWalkLimits = walkLimits{depth: 64, entries: 1 << 20, bytes: 256 << 20}

// getTree copies the remote directory src, described by root, to dst, a name in the
// local destination's root.
func (t *getPutCall) getTree(ctx context.Context, src, dst string, root fs.FileInfo) (err error) {
	var closes []closeSent
	defer func() {
		if cerr := waitCloses(ctx, closes); err == nil {
			err = cerr
		}
	}()
	pl, err := t.walkRemote(ctx, src, dst, root, &closes)
	if err != nil {
		return err
	}
	t.rep.plan(len(pl.files), pl.size)
	t.share = min(t.o.parallel, len(pl.files))
	// Local directories cost no round trips: made one after another, parents first.
	for _, level := range pl.dirs {
		for _, d := range level {
			if err := t.local.mkdir(d.dst, dirPerm(d.info.Mode(), remoteHasPerm(d.info))); err != nil {
				return pathErr("get", d.src, err)
			}
		}
	}
	link := func(ctx context.Context, e treeEntry) error {
		target, err := t.c.Readlink(ctx, e.src)
		if err != nil {
			return err
		}
		return t.local.symlink(target, e.dst)
	}
	if err := t.run(ctx, "get", pl, t.getFile, link); err != nil {
		return err
	}
	if !t.o.preserve {
		return nil
	}
	// Last, as creating files inside a directory changes its times, and a read-only
	// mode would have stopped them being created.
	for _, level := range pl.dirs {
		for _, d := range level {
			if err := t.local.chmod(d.dst, d.info.Mode()&modeBits); err != nil {
				return err
			}
			if at, mt, ok := remoteTimes(d.info); ok {
				if err := t.local.chtimes(d.dst, at, mt); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// waitCloses waits for the replies to CLOSEs sent without waiting, every one of them
// while ctx lasts, and returns the first error.
func waitCloses(ctx context.Context, closes []closeSent) error {
	var first error
	for _, cs := range closes {
		if err := cs.wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// walkRemote lists the remote tree level by level, listing the directories of each
// level in parallel, within t.o.limits. The directories' CLOSEs go out as each
// listing ends and are added to closes, not waited for: the caller waits for them
// before it returns, by which time their replies are in.
func (t *getPutCall) walkRemote(ctx context.Context, src, dst string, root fs.FileInfo, closes *[]closeSent) (*treePlan, error) {
	lim := t.o.limits
	// The root, when Get opened it with its Stat: the first level lists it, and it is
	// closed here if the walk stops before.
	pre := t.rootDir
	t.rootDir = nil
	defer func() {
		if pre != nil {
			pre.close(ctx)
		}
	}()
	var listed, size atomic.Int64 // entries and bytes taken in so far
	pl := &treePlan{}
	level := []treeEntry{{src: src, dst: dst, info: root}}
	for depth := 0; len(level) > 0; depth++ {
		if depth >= lim.depth {
			return nil, pathErr("get", level[0].src, fmt.Errorf("%w: more than %d levels", errTooDeep, lim.depth))
		}
		pl.dirs = append(pl.dirs, level)
		lists := make([][]fs.DirEntry, len(level))
		sent := make([]closeSent, len(level))
		// stop only keeps listings from starting once one failed: each runs under
		// ctx, so one under way finishes and closes its handle before Get returns.
		g, stop := errgroup.WithContext(ctx)
		g.SetLimit(t.o.parallel)
		for i, d := range level {
			g.Go(func() error {
				if err := stop.Err(); err != nil {
					return pathErr("get", d.src, fmt.Errorf("sftp: %w", err))
				}
				// The shared budget is charged page by page as the listing comes in,
				// so Parallel listings in flight hold at most a page each past it,
				// not a whole listing (MaxReadDirBytes) each.
				list := t.c.listDir
				if depth == 0 && pre != nil {
					list = func(ctx context.Context, _ string, charge func([]fs.DirEntry) error) ([]fs.DirEntry, closeSent, error) {
						return pre.listAll(ctx, charge)
					}
				}
				es, cs, err := list(ctx, d.src, func(page []fs.DirEntry) error {
					// What each entry will keep: its name in two paths, built on its
					// parent's.
					n := int64(len(d.src)+len(d.dst)+2) * int64(len(page))
					for _, de := range page {
						n += 2 * int64(len(de.Name()))
					}
					if listed.Add(int64(len(page))) > lim.entries || size.Add(n) > lim.bytes {
						return fmt.Errorf("%w: more than %d entries or %d bytes of names", errTooBig, lim.entries, lim.bytes)
					}
					return nil
				})
				if err != nil {
					return err
				}
				lists[i], sent[i] = es, cs
				return nil
			})
		}
		err := ctxDone(ctx, g.Wait())
		*closes = append(*closes, sent...)
		if err != nil {
			return nil, err
		}
		var next []treeEntry
		for i, d := range level {
			prev := ""
			for _, de := range lists[i] {
				name := de.Name()
				// The name becomes part of a local path: one that is not a plain name
				// ("..", "a/b") would let the server write outside the destination.
				if !plainName(name) {
					return nil, pathErr("get", d.src+"/"+name, errUnsafeName)
				}
				// Listings come sorted, so a repeat is next to its first. One name
				// listed as two things (a file and a link) would be made twice.
				if name == prev {
					return nil, pathErr("get", d.src+"/"+name, errDuplicateName)
				}
				prev = name
				// Part names are this package's own, whatever the server says they
				// are: an entry under one could take the place of a part file.
				if strings.HasSuffix(name, partSuffix) {
					continue
				}
				info, err := de.Info()
				if err != nil {
					return nil, err
				}
				e := treeEntry{src: path.Join(d.src, name), dst: filepath.Join(d.dst, name), info: info}
				switch mode := info.Mode(); {
				case mode.IsDir():
					next = append(next, e)
				case mode&fs.ModeSymlink != 0:
					pl.links = append(pl.links, e)
				case mode.IsRegular():
					pl.addFile(e, remoteSize(info))
				}
			}
		}
		level = next
	}
	return pl, nil
}

// remoteRoot is what Lstat said of a Put tree's remote root before anything moved.
type remoteRoot struct {
	fi  fs.FileInfo
	err error
}

// putTree copies the local directory src, described by root, to the remote path dst,
// of which Lstat said rr.
func (t *getPutCall) putTree(ctx context.Context, src, dst string, root fs.FileInfo, rr remoteRoot) error {
	pl, err := walkLocal(src, dst, root)
	if err != nil {
		return err
	}
	t.rep.plan(len(pl.files), pl.size)
	t.share = min(t.o.parallel, len(pl.files))
	levels := pl.dirs
	switch fi, err := rr.fi, rr.err; {
	case err == nil && fi.IsDir():
		levels = levels[1:] // the root is there
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return pathErr("mkdir", dst, errLinkInTheWay)
	case err == nil:
		return pathErr("mkdir", dst, syscall.ENOTDIR)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if len(levels) == len(pl.dirs) {
		// Nothing is there yet, so nothing below can be a link: every directory is
		// asked for at once.
		err = t.mkdirTree(ctx, levels)
	} else {
		// A level's directories are made in parallel, once their parents exist and
		// are known to be directories, not links to somewhere else.
		for _, level := range levels {
			err = t.each(ctx, level, func(ctx context.Context, d treeEntry) error {
				return t.mkdirRemote(ctx, d.dst, dirPerm(d.info.Mode(), true))
			})
			if err != nil {
				break
			}
		}
	}
	if err != nil {
		return err
	}
	link := func(ctx context.Context, e treeEntry) error { return t.symlinkRemote(ctx, e.target, e.dst) }
	if err := t.run(ctx, "put", pl, t.putFile, link); err != nil {
		return err
	}
	if !t.o.preserve {
		return nil
	}
	// Last, for the reasons given in getTree; the order among directories does not
	// matter, as setting a directory's mode or times leaves its parent's alone.
	for _, level := range pl.dirs {
		err := t.each(ctx, level, func(ctx context.Context, d treeEntry) error {
			a, err := preserveAttrs(d.info.Mode(), localAtime(d.info), d.info.ModTime())
			if err != nil {
				return pathErr("put", d.src, err)
			}
			return t.c.setstat(ctx, "setstat", d.dst, a)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// walkLocal lists the local tree. Symbolic links are not followed, but the root is, if
// it is one.
func walkLocal(src, dst string, root fs.FileInfo) (*treePlan, error) {
	// WalkDir would list a root that is a link as just the link.
	if fi, err := os.Lstat(src); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if src, err = filepath.EvalSymlinks(src); err != nil {
			return nil, err
		}
	}
	pl := &treePlan{}
	pl.addDir(0, treeEntry{src: src, dst: dst, info: root})
	err := filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == src {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := de.Info()
		if err != nil {
			return err
		}
		e := treeEntry{src: p, dst: path.Join(dst, rel), info: info}
		switch typ := de.Type(); {
		case typ.IsDir():
			pl.addDir(strings.Count(rel, "/")+1, e)
		case typ&fs.ModeSymlink != 0:
			if e.target, err = os.Readlink(p); err != nil {
				return err
			}
			pl.links = append(pl.links, e)
		case typ.IsRegular() && !strings.HasSuffix(de.Name(), partSuffix):
			pl.addFile(e, info.Size())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pl, nil
}

// run copies a tree's files and links with up to Parallel in flight. The first failure
// cancels the rest and is returned, with the source path.
//
// The workers have no recover. A panic on one would end the caller's process, but
// turning it into an error would hide a bug and keep using what it left broken (a
// handle open, a lock held, a pooled buffer still referenced). Server input is kept
// from panicking where it is read instead: every decoder checks a length before
// slicing by it (and is fuzzed), and a handle longer than the drafts allow, which
// would overrun the room data buffers keep for headers, is refused (decodeHandle).
func (t *getPutCall) run(ctx context.Context, op string, pl *treePlan,
	file func(ctx context.Context, src, dst string, fi fs.FileInfo) error,
	link func(ctx context.Context, e treeEntry) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(t.o.parallel, t.o.smallParallel))
	large := make(chan struct{}, t.o.parallel) // a place for a file that is not small
	small := semaphore.NewWeighted(smallBudget)
	for _, e := range pl.files {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if !t.isSmall(op, e.info) {
				select {
				case large <- struct{}{}:
					defer func() { <-large }()
				case <-gctx.Done():
					return pathErr(op, e.src, fmt.Errorf("sftp: %w", gctx.Err()))
				}
			} else {
				cost := smallCost(e.info.Size())
				if err := small.Acquire(gctx, cost); err != nil {
					return pathErr(op, e.src, fmt.Errorf("sftp: %w", err))
				}
				defer small.Release(cost)
			}
			return pathErr(op, e.src, file(gctx, e.src, e.dst, e.info))
		})
	}
	for _, e := range pl.links {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return pathErr(op, e.src, link(gctx, e)) })
	}
	return ctxDone(ctx, g.Wait())
}

// each runs fn on every entry, Parallel at a time; the first failure cancels the rest.
func (t *getPutCall) each(ctx context.Context, es []treeEntry, fn func(context.Context, treeEntry) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(t.o.parallel)
	for _, e := range es {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(gctx, e) })
	}
	return ctxDone(ctx, g.Wait())
}

// ctxDone makes a run that ctx cut short fail even when none of the work it started
// did: work not started is not done.
func ctxDone(ctx context.Context, err error) error {
	if err == nil && ctx.Err() != nil {
		return fmt.Errorf("sftp: %w", ctx.Err())
	}
	return err
}

// dirPerm is the mode a directory is created with: owner rwx is added, or the copy
// could not fill it. Preserve sets the exact mode once it is full.
func dirPerm(mode fs.FileMode, known bool) fs.FileMode {
	if !known {
		return 0o755
	}
	return mode.Perm() | 0o700
}

// mkdirRemote makes a remote directory whose parent exists; one already there is fine,
// but a link there is not, even to a directory: the copy would land wherever it
// points (rsync replaces such a link; refusing is the safer of the two). Servers
// report an existing name with a generic failure, so ask rather than guess.
func (t *getPutCall) mkdirRemote(ctx context.Context, name string, perm fs.FileMode) error {
	err := t.c.Mkdir(ctx, name, perm)
	if err != nil {
		if fi, lerr := t.c.Lstat(ctx, name); lerr == nil {
			switch {
			case fi.IsDir():
				return nil
			case fi.Mode()&fs.ModeSymlink != 0:
				return pathErr("mkdir", name, errLinkInTheWay)
			}
		}
	}
	return err
}

// mkdirBatch bounds the MKDIRs mkdirTree keeps in flight.
const mkdirBatch = 256

// mkdirTree makes a Put tree's remote directories where the root is not there yet:
// levels[0] holds the root. The MKDIRs go out back to back, parents before children,
// mkdirBatch at a time, without waiting for each level: a server that carries out
// requests in order (OpenSSH's does) makes them all in one round trip. Asking for a
// child before its parent is known to be made is safe only because the root was
// missing: below a directory this MKDIR made there is nothing, and so no link that
// would take the child elsewhere. Those that failed (a parent a reordering server
// had not made yet, or a name someone made meanwhile) are then made again level by
// level, parents first, the careful way (mkdirRemote, which refuses a link in the
// way).
func (t *getPutCall) mkdirTree(ctx context.Context, levels [][]treeEntry) error {
	cn := t.c.main
	failed := make([][]treeEntry, len(levels))
	type sent struct {
		depth int
		e     treeEntry
		req   pendingReq
	}
	var batch []sent
	flush := func() error {
		var first error
		for i, s := range batch {
			if first != nil {
				cn.abandon(s.req.id, s.req.ch)
				continue
			}
			r, err := cn.wait(ctx, s.req.id, s.req.ch)
			if err == nil {
				err = cn.check(expectStatus("MKDIR", &r))
				r.release()
			}
			var se *StatusError
			switch {
			case err == nil:
			case errors.As(err, &se):
				failed[s.depth] = append(failed[s.depth], s.e)
			default:
				first = pathErr("mkdir", batch[i].e.dst, err)
			}
		}
		batch = batch[:0]
		return first
	}
	for depth, level := range levels {
		for _, e := range level {
			if err := ctx.Err(); err != nil {
				flush()
				return fmt.Errorf("sftp: %w", err)
			}
			a := sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: toUnixPerm(dirPerm(e.info.Mode(), true))}
			r := pendingReq{id: cn.newID(), ch: make(chan response, 1), sent: true}
			if err := cn.send(ctx, r.id, appendStringAttrs(nil, sshfx.TypeMkdir, r.id, e.dst, &a), r.ch); err != nil {
				flush()
				return pathErr("mkdir", e.dst, err)
			}
			batch = append(batch, sent{depth, e, r})
			if len(batch) == mkdirBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	for depth, es := range failed {
		if depth == 0 {
			// The root's parents may be missing: they are the caller's path.
			for _, e := range es {
				if err := t.mkdirRemoteRoot(ctx, e.dst, dirPerm(e.info.Mode(), true)); err != nil {
					return err
				}
			}
			continue
		}
		err := t.each(ctx, es, func(ctx context.Context, d treeEntry) error {
			return t.mkdirRemote(ctx, d.dst, dirPerm(d.info.Mode(), true))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// mkdirRemoteRoot makes the root of a Put's tree, and its missing parents. The parents
// are the caller's path, taken as given; the root itself is held to mkdirRemote's rule.
func (t *getPutCall) mkdirRemoteRoot(ctx context.Context, name string, perm fs.FileMode) error {
	fi, err := t.c.Lstat(ctx, name)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return pathErr("mkdir", name, errLinkInTheWay)
	case err == nil:
		return pathErr("mkdir", name, syscall.ENOTDIR)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return t.c.MkdirAll(ctx, name, perm)
}

// symlinkRemote is localDest.symlink on the server.
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

// GetAll copies each remote file or, with Recursive, directory into the local
// directory dir, under the base name of its path as given, as one transfer: the files
// of every source share the Parallel slots and one progress report. dir is created if
// missing. Two sources with the same base name are refused before anything moves.
//
// (Stub: the tree engine gives it one shared run.)
func (c *Client) GetAll(ctx context.Context, remotes []string, dir string, opts ...TransferOption) error {
	for _, r := range remotes {
		if err := c.Get(ctx, r, filepath.Join(dir, path.Base(r)), opts...); err != nil {
			return err
		}
	}
	return nil
}

// PutAll copies each local file or, with Recursive, directory into the remote
// directory dir, under the base name of its path as given, as one transfer; see
// GetAll.
//
// (Stub: the tree engine gives it one shared run.)
func (c *Client) PutAll(ctx context.Context, locals []string, dir string, opts ...TransferOption) error {
	for _, l := range locals {
		if err := c.Put(ctx, l, path.Join(dir, filepath.Base(l)), opts...); err != nil {
			return err
		}
	}
	return nil
}

// TreeError is what a tree transfer returns when some of its files or links failed:
// every other one was copied. errors.Is and errors.As match each failure.
type TreeError struct {
	Op     string  // "get" or "put"
	Failed []error // the failures, each naming its source; the first maxTreeFailures kept
	Count  int     // how many failed in all; more than len(Failed) past maxTreeFailures
}

// maxTreeFailures bounds the failures a TreeError keeps: a tree of a million
// unreadable files must not hold a million errors.
const maxTreeFailures = 1000

func (e *TreeError) Error() string {
	if len(e.Failed) == 0 {
		return "sftp: " + e.Op + ": no failures"
	}
	if e.Count == 1 {
		return e.Failed[0].Error()
	}
	return fmt.Sprintf("sftp: %s: %d files failed; the first: %v", e.Op, e.Count, e.Failed[0])
}

// Unwrap returns the failures kept, for errors.Is and errors.As.
func (e *TreeError) Unwrap() []error { return e.Failed }
