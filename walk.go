package sftp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
)

// MaxWalkDepth is how many directory levels below its root WalkDir and Walk descend.
// A real tree is never this deep (a path of that many levels passes PATH_MAX), but a
// server can serve a directory that contains itself forever; past the limit fn is
// called with the directory and an error matching ErrWalkTooDeep instead of its
// entries, and the walk goes on with the directory's siblings.
const MaxWalkDepth = 1024

// A walk holds the listings of the directories on its current path, each until its
// subtrees are walked, and each level's path. MaxWalkHeldEntries and MaxWalkHeldBytes
// bound what it holds at once, in entries and in bytes of names, paths and extended
// attributes the server chose. A real tree is far below them; a server serving deep
// trees of huge directories would otherwise make the walk hold MaxReadDirEntries and
// MaxReadDirBytes at every level. The bytes are counted page by page as a listing
// is read, so the walk stops as soon as a bound is passed, not after the listing:
// fn then gets the directory with an error matching ErrListingTooLarge, and the
// walk goes on with its siblings.
const (
	MaxWalkHeldEntries = 2 * MaxReadDirEntries
	MaxWalkHeldBytes   = 2 * MaxReadDirBytes
)

// walkBound is what a walk may hold at once.
type walkBound struct{ entries, bytes int }

var defaultWalkBound = walkBound{entries: MaxWalkHeldEntries, bytes: MaxWalkHeldBytes}

// ErrWalkTooDeep is what WalkDir and Walk pass to fn for a directory past
// MaxWalkDepth.
var ErrWalkTooDeep = errors.New("sftp: the tree is deeper than MaxWalkDepth")

// WalkOption configures WalkDir and Walk.
type WalkOption func(*walkOptions)

type walkOptions struct{ follow bool }

// WalkFollowSymlinks makes the walk follow symbolic links: the root, and every link
// met on the way, is visited as what it points to, and a link to a directory is
// descended. A link that leads back to a directory the walk reached through a link on
// the current path is not descended again: fn gets it with an error instead. Without
// this option links are reported as links and never followed, as in fs.WalkDir.
func WalkFollowSymlinks() WalkOption { return func(o *walkOptions) { o.follow = true } }

// WalkDir walks the remote tree at root in the manner of fs.WalkDir: fn is called for
// root and for everything below it, in lexical order within each directory, with
// paths that begin with root. fs.SkipDir and fs.SkipAll returned by fn work as in
// fs.WalkDir. root is looked up with Lstat, so a root that is a symbolic link is
// reported as one and not descended, unless WalkFollowSymlinks is given.
//
// Each directory is read with ReadDir (sorted, bounded by MaxReadDirEntries; a name
// that is not a plain name fails that directory's listing), and its error is passed to
// fn for that directory. Every request is bounded by ctx; once ctx ends, WalkDir
// returns its error without calling fn again. The walk descends at most MaxWalkDepth
// levels, and holds at most MaxWalkHeldEntries and MaxWalkHeldBytes at once.
func (c *Client) WalkDir(ctx context.Context, root string, fn fs.WalkDirFunc, opts ...WalkOption) error {
	return c.walkDir(ctx, root, fn, nil, defaultWalkBound, opts)
}

// walkDir is WalkDir holding at most what bound allows at once. post, when not nil,
// is called for each directory after its entries (RemoveAll's order); an error from
// it ends the walk.
func (c *Client) walkDir(ctx context.Context, root string, fn fs.WalkDirFunc, post func(name string) error, bound walkBound, opts []WalkOption) error {
	w := &walker{c: c, fn: fn, post: post, bound: bound}
	for _, o := range opts {
		if o != nil {
			o(&w.o)
		}
	}
	info, err := w.lookup(ctx, root)
	if cerr := walkCtxErr(ctx); cerr != nil {
		return cerr
	}
	if err != nil {
		err = fn(root, nil, err)
	} else {
		err = w.walk(ctx, root, fs.FileInfoToDirEntry(info), 0, nil)
	}
	if err == fs.SkipDir || err == fs.SkipAll {
		return nil
	}
	return err
}

// Walk walks the remote tree at root in the manner of filepath.Walk, calling fn with
// each file's fs.FileInfo; it costs no more than WalkDir, since READDIR brings every
// entry's attributes. Everything else is as for WalkDir.
func (c *Client) Walk(ctx context.Context, root string, fn filepath.WalkFunc, opts ...WalkOption) error {
	return c.WalkDir(ctx, root, func(p string, d fs.DirEntry, err error) error {
		if d == nil {
			return fn(p, nil, err)
		}
		info, ierr := d.Info()
		if err == nil {
			err = ierr
		}
		return fn(p, info, err)
	}, opts...)
}

type walker struct {
	c     *Client
	fn    fs.WalkDirFunc
	post  func(name string) error
	o     walkOptions
	held  walkBound // what the listings and paths on the current path hold
	bound walkBound
}

func (w *walker) lookup(ctx context.Context, name string) (fs.FileInfo, error) {
	if w.o.follow {
		return w.c.Stat(ctx, name)
	}
	return w.c.Lstat(ctx, name)
}

func walkCtxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sftp: walk: %w", err)
	}
	return nil
}

// walk visits name, described by d, and what is below it. linked holds the real
// paths of the directories on the current path that were reached through a link.
func (w *walker) walk(ctx context.Context, name string, d fs.DirEntry, depth int, linked []string) error {
	if err := w.fn(name, d, nil); err != nil || !d.IsDir() {
		if err == fs.SkipDir && d.IsDir() {
			err = nil
		}
		return err
	}
	entries, cost, err := w.list(ctx, name, depth)
	defer w.release(cost)
	if cerr := walkCtxErr(ctx); cerr != nil {
		return cerr
	}
	if err != nil {
		if err = w.fn(name, d, err); err != nil {
			if err == fs.SkipDir {
				err = nil
			}
			return err
		}
	}
	if err := w.walkEntries(ctx, name, entries, depth, linked); err != nil {
		return err
	}
	if w.post != nil {
		return w.post(name)
	}
	return nil
}

// walkEntries walks the entries of the directory name, in order.
func (w *walker) walkEntries(ctx context.Context, name string, entries []fs.DirEntry, depth int, linked []string) error {
	for _, e := range entries {
		if err := walkCtxErr(ctx); err != nil {
			return err
		}
		child := path.Join(name, e.Name())
		e, sub, err := w.follow(ctx, child, e, linked)
		if err != nil {
			if err := w.fn(child, e, err); err != nil && err != fs.SkipDir {
				return err
			}
			continue
		}
		if err := w.walk(ctx, child, e, depth+1, sub); err != nil {
			if err == fs.SkipDir {
				break
			}
			return err
		}
	}
	return nil
}

// list reads the directory name, charging its path and entries to w.held page by
// page. cost is what it charged and stays held until release: the listing, or on an
// error only the path.
func (w *walker) list(ctx context.Context, name string, depth int) (entries []fs.DirEntry, cost walkBound, err error) {
	cost.bytes = len(name)
	w.held.bytes += cost.bytes
	if depth >= MaxWalkDepth {
		return nil, cost, pathErr("walk", name, ErrWalkTooDeep)
	}
	var charged walkBound
	entries, err = w.c.readDir(ctx, name, func(page []fs.DirEntry) error {
		n := 0
		for _, e := range page {
			n += entrySize(e)
		}
		charged.entries += len(page)
		charged.bytes += n
		w.held.entries += len(page)
		w.held.bytes += n
		if w.held.entries > w.bound.entries || w.held.bytes > w.bound.bytes {
			return fmt.Errorf("%w: the walk would hold more than %d entries or %d bytes of names", ErrListingTooLarge, w.bound.entries, w.bound.bytes)
		}
		return nil
	})
	if err != nil {
		w.release(charged)
		return nil, cost, err
	}
	cost.entries += charged.entries
	cost.bytes += charged.bytes
	return entries, cost, nil
}

// release gives back what list charged.
func (w *walker) release(cost walkBound) {
	w.held.entries -= cost.entries
	w.held.bytes -= cost.bytes
}

// follow resolves a symbolic link entry when links are followed: it returns the entry
// as what the link points to, and the linked set for below it. An error comes with the
// link's own entry.
func (w *walker) follow(ctx context.Context, name string, e fs.DirEntry, linked []string) (fs.DirEntry, []string, error) {
	if !w.o.follow || e.Type()&fs.ModeSymlink == 0 {
		return e, linked, nil
	}
	fi, err := w.c.Stat(ctx, name)
	if err != nil {
		return e, linked, err
	}
	if !fi.IsDir() {
		return fs.FileInfoToDirEntry(fi), linked, nil
	}
	real, err := w.c.RealPath(ctx, name)
	if err != nil {
		return e, linked, err
	}
	for _, p := range linked {
		if p == real {
			return e, linked, pathErr("walk", name, fmt.Errorf("sftp: the link leads back to %s, a directory above it", real))
		}
	}
	return fs.FileInfoToDirEntry(fi), append(linked[:len(linked):len(linked)], real), nil
}

// Glob returns the remote names matching pattern, with path.Match's syntax, in the
// manner of filepath.Glob: each directory is listed only where the pattern has meta
// characters, matches come sorted within each directory, and a pattern without meta
// characters matches itself when it exists. The only error about the pattern is
// path.ErrBadPattern.
//
// Unlike filepath.Glob, only the errors that say a name is absent or unreadable
// (fs.ErrNotExist, fs.ErrPermission) are passed over: a lost connection, ctx ending
// or a listing the server got wrong fails the Glob, rather than shortening its result
// without a word.
//
// The result is held in memory, so it is bounded: a pattern matching more than
// MaxGlobMatches names (a "*/*" over a server's directories of a million entries
// each could otherwise match a million million) fails with an error matching
// ErrListingTooLarge. Each directory listed is bounded as ReadDir is.
func (c *Client) Glob(ctx context.Context, pattern string) ([]string, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, err
	}
	return c.glob(ctx, pattern, 0, MaxGlobMatches)
}

// MaxGlobMatches is the most names a Glob returns; past it Glob fails with an error
// matching ErrListingTooLarge.
const MaxGlobMatches = MaxReadDirEntries

// globMaxDepth bounds the recursion on the pattern's directories; path.Split always
// shortens a pattern, so only a pattern longer than this could reach it.
const globMaxDepth = 10000

// glob matches pattern, failing past maxMatches names.
func (c *Client) glob(ctx context.Context, pattern string, depth, maxMatches int) ([]string, error) {
	if depth > globMaxDepth {
		return nil, path.ErrBadPattern
	}
	if !hasMeta(pattern) {
		if _, err := c.Lstat(ctx, pattern); err != nil {
			return nil, passable(err)
		}
		return []string{pattern}, nil
	}
	dir, file := path.Split(pattern)
	dir = cleanGlobDir(dir)
	if !hasMeta(dir) {
		return c.globDir(ctx, dir, file, nil, maxMatches)
	}
	if dir == pattern {
		return nil, path.ErrBadPattern
	}
	dirs, err := c.glob(ctx, dir, depth+1, maxMatches)
	if err != nil {
		return nil, err
	}
	var matches []string
	for _, d := range dirs {
		if matches, err = c.globDir(ctx, d, file, matches, maxMatches); err != nil {
			return nil, err
		}
	}
	return matches, nil
}

// passable turns the errors a Glob passes over into nil.
func passable(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return nil
	}
	return err
}

func cleanGlobDir(dir string) string {
	switch dir {
	case "":
		return "."
	case "/":
		return dir
	}
	return dir[:len(dir)-1]
}

// globDir appends to matches the names in dir that match pattern, failing once
// matches would hold more than maxMatches.
func (c *Client) globDir(ctx context.Context, dir, pattern string, matches []string, maxMatches int) ([]string, error) {
	fi, err := c.Stat(ctx, dir)
	if err != nil {
		return matches, passable(err)
	}
	if !fi.IsDir() {
		return matches, nil
	}
	entries, err := c.ReadDir(ctx, dir)
	if err != nil {
		return matches, passable(err)
	}
	for _, e := range entries {
		ok, err := path.Match(pattern, e.Name())
		if err != nil {
			return matches, err
		}
		if !ok {
			continue
		}
		if len(matches) >= maxMatches {
			return nil, fmt.Errorf("sftp: glob: %w: the pattern matches more than %d names", ErrListingTooLarge, maxMatches)
		}
		matches = append(matches, joinGlob(dir, e.Name()))
	}
	return matches, nil
}

// joinGlob joins without cleaning, so matches keep the form the pattern gave them
// (as filepath.Glob's do), except that "." adds nothing.
func joinGlob(dir, name string) string {
	switch dir {
	case ".":
		return name
	case "/":
		return "/" + name
	}
	return dir + "/" + name
}

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }
