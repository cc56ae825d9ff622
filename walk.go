package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// MaxWalkDepth is how many directory levels below its root WalkDir and Walk descend.
// A real tree is never this deep (a path of that many levels passes PATH_MAX), but a
// server can serve a directory that contains itself forever; past the limit fn is
// called with the directory and an error matching ErrWalkTooDeep instead of its
// entries, and the walk goes on with the directory's siblings.
const MaxWalkDepth = 1024

// A walk holds, for each directory on its current path, its path and its listing
// until its subtrees are walked, all charged to the call's memory account
// (WithMemoryLimit) page by page as the listings arrive. A directory is held whole,
// and walked in lexical order, while its listing takes at most half of what the call
// may still hold; a larger one is walked in the server's order instead: the entries
// read by then first, then a page at a time, its handle open meanwhile and each page
// given back once walked. So a walk gets through a directory of any size, and holds
// at most the limit however deep the tree: fn gets a directory with an error matching
// ErrListingTooLarge only when not even its next page fits, which takes a hostile
// server or a limit set very low, and the walk then goes on with its siblings.

// ErrWalkTooDeep is what WalkDir and Walk pass to fn for a directory past
// MaxWalkDepth.
var ErrWalkTooDeep = errors.New("sftp: the tree is deeper than MaxWalkDepth")

// WalkOption configures WalkDir and Walk.
type WalkOption func(*walkOptions)

type walkOptions struct {
	follow bool
	// dropExtended drops every entry's extended pairs as its page arrives, for a
	// walk whose fn never sees the entries' attributes (RemoveAll's).
	dropExtended bool
}

// WalkFollowSymlinks makes the walk follow symbolic links: the root, and every link
// met on the way, is visited as what it points to, and a link to a directory is
// descended. A link that leads back to a directory the walk reached through a link on
// the current path is not descended again: fn gets it with an error instead. Without
// this option links are reported as links and never followed, as in fs.WalkDir.
func WalkFollowSymlinks() WalkOption { return func(o *walkOptions) { o.follow = true } }

// walkDropExtended is RemoveAll's walk option: its fn sees no attributes.
func walkDropExtended(o *walkOptions) { o.dropExtended = true }

// WalkDir walks the remote tree at root in the manner of fs.WalkDir: fn is called for
// root and for everything below it, in lexical order within each directory, with
// paths that begin with root. fs.SkipDir and fs.SkipAll returned by fn work as in
// fs.WalkDir. root is looked up with Lstat, so a root that is a symbolic link is
// reported as one and not descended, unless WalkFollowSymlinks is given.
//
// Each directory is read as ReadDir reads it (a name that is not a plain name fails
// that directory's listing), and a listing error is passed to fn for that directory,
// after the entries read before it when the directory was walked a page at a time.
// Every request is bounded by ctx; once ctx ends, WalkDir returns its error without
// calling fn again. The walk descends at most MaxWalkDepth levels, and holds at most
// the Client's memory limit at once (WithMemoryLimit): a directory too large to hold
// whole within it is walked in the server's order, a page at a time, rather than
// refused. The entries fn gets carry all their attributes, extended pairs included
// (Info().Sys()), as ReadDir's do, and are charged for them.
func (c *Client) WalkDir(ctx context.Context, root string, fn fs.WalkDirFunc, opts ...WalkOption) error {
	return c.walkDir(ctx, root, fn, nil, opts)
}

// walkDir is WalkDir with post, when not nil, called for each directory after its
// entries (RemoveAll's order); an error from it ends the walk.
func (c *Client) walkDir(ctx context.Context, root string, fn fs.WalkDirFunc, post func(name string) error, opts []WalkOption) error {
	w := &walker{c: c, fn: fn, post: post, b: c.newBudget()}
	for _, o := range opts {
		if o != nil {
			o(&w.o)
		}
	}
	info, err := w.lookup(ctx, root)
	if cerr := ctxError(ctx, "walk"); cerr != nil {
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
	c    *Client
	fn   fs.WalkDirFunc
	post func(name string) error
	o    walkOptions
	b    *budget // what the paths and listings on the current path hold
}

func (w *walker) lookup(ctx context.Context, name string) (fs.FileInfo, error) {
	if w.o.follow {
		return w.c.Stat(ctx, name)
	}
	return w.c.Lstat(ctx, name)
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
	held := w.b.newHold()
	defer held.drop()
	l, err := w.list(ctx, name, depth, held)
	defer l.close(ctx)
	for err == nil {
		skip, werr := w.walkEntries(ctx, name, l.entries, depth, linked)
		if werr != nil {
			return werr
		}
		if skip || l.rest == nil {
			break
		}
		err = l.next(ctx, held, w.charge(held))
	}
	if err == nil {
		err = l.close(ctx)
	}
	if cerr := ctxError(ctx, "walk"); cerr != nil {
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
	if w.post != nil {
		return w.post(name)
	}
	return nil
}

// walkEntries walks entries of the directory name, in order. skip reports that fn
// skipped the rest of the directory.
func (w *walker) walkEntries(ctx context.Context, name string, entries []fs.DirEntry, depth int, linked []string) (skip bool, err error) {
	for _, e := range entries {
		if err := ctxError(ctx, "walk"); err != nil {
			return false, err
		}
		child := path.Join(name, e.Name())
		e, sub, err := w.follow(ctx, child, e, linked)
		if err != nil {
			if err := w.fn(child, e, err); err != nil && err != fs.SkipDir {
				return false, err
			}
			continue
		}
		if err := w.walk(ctx, child, e, depth+1, sub); err != nil {
			if err == fs.SkipDir {
				return true, nil
			}
			return false, err
		}
	}
	return false, nil
}

// walkList is a directory's entries as a walk holds them: the whole listing, sorted;
// or, for a directory too large for that, the entries read so far in the server's
// order, with the open Dir to read the rest from a page at a time.
type walkList struct {
	entries []fs.DirEntry
	cost    int64 // what entries were charged, when read a page at a time
	rest    *Dir
}

// list charges the path name to held and reads the directory, charging its pages to
// held as they arrive. It holds the listing whole while it takes at most half of what
// the call may still hold; past that, it stops reading once no READDIR is in flight
// and leaves the rest to be read a page at a time.
func (w *walker) list(ctx context.Context, name string, depth int, held *hold) (*walkList, error) {
	l := &walkList{}
	if err := held.add(pathCost(name)); err != nil {
		return l, pathErr("walk", name, err)
	}
	if depth >= MaxWalkDepth {
		return l, pathErr("walk", name, ErrWalkTooDeep)
	}
	d, err := w.c.openDir(ctx, name)
	if err != nil {
		return l, pathErr("readdir", name, err)
	}
	wholeUpTo := held.n + w.b.free()/2
	d.mu.Lock()
	pages, whole, err := d.readPages(ctx, w.charge(held), func() bool { return held.n > wholeUpTo })
	d.mu.Unlock()
	if err != nil {
		d.close(ctx) // waits for the CLOSE while ctx allows; the listing's error wins
		return l, pathErr("readdir", name, err)
	}
	l.entries = joinPages(pages)
	if !whole {
		l.cost = held.n - pathCost(name)
		l.rest = d
		return l, nil
	}
	if err := d.close(ctx); err != nil {
		return l, err
	}
	slices.SortFunc(l.entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return l, nil
}

// charge is the walk's charge for a page it holds.
func (w *walker) charge(held *hold) func(page []fs.DirEntry) error {
	return func(page []fs.DirEntry) error {
		if w.o.dropExtended {
			for _, e := range page {
				if de, ok := e.(dirEntry); ok {
					de.fi.attrs.Extended = nil
				}
			}
		}
		return held.addPage(page)
	}
}

// next gives back what the entries walked cost and reads the next page of the
// directory read a page at a time into l.entries, charging it; at the end of the
// directory it closes it, and l.entries is left empty.
func (l *walkList) next(ctx context.Context, held *hold, charge func(page []fs.DirEntry) error) error {
	l.entries = nil
	held.sub(l.cost)
	l.cost = 0
	page, err := l.rest.ReadDirContext(ctx, math.MaxInt)
	if err == io.EOF {
		return l.close(ctx)
	}
	if err != nil {
		return err
	}
	before := held.n
	err = charge(page)
	l.cost = held.n - before
	if err != nil {
		return pathErr("readdir", l.rest.name, err)
	}
	l.entries = page
	return nil
}

// close closes the directory read a page at a time, if it is still open.
func (l *walkList) close(ctx context.Context) error {
	if l.rest == nil {
		return nil
	}
	d := l.rest
	l.rest = nil
	return d.close(ctx)
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
	real, err := w.c.RealPath(ctx, literalPath(name))
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
// Glob takes the names it lists as data: a match is used as a path, never matched
// again as a pattern, whatever characters it holds. The pattern is the caller's: a
// part of it that came from the server (a home directory, a RealPath) must be quoted
// with QuoteGlob, or its characters act as syntax.
//
// Glob holds its matches, names only, and reads each directory a page at a time, so
// a directory of any size is searched. What it holds (the matches, each charged its
// path, and the page being matched) is bounded by the Client's memory limit
// (WithMemoryLimit): a pattern matching more (a "*/*" over a server's directories of
// a million entries each could match a million million names) fails with an error
// matching ErrListingTooLarge.
func (c *Client) Glob(ctx context.Context, pattern string) ([]string, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, err
	}
	g := &globber{c: c, b: c.newBudget()}
	matches, err := g.glob(ctx, pattern, 0)
	if errors.Is(err, ErrListingTooLarge) {
		return nil, pathErr("glob", pattern, err)
	}
	return matches, err
}

// globMaxDepth bounds the recursion on the pattern's directories; path.Split always
// shortens a pattern, so only a pattern longer than this could reach it.
const globMaxDepth = 10000

// globber matches a pattern against names in one name space: remote paths
// (Client.Glob), or the names of an io/fs view, which remote maps to remote paths.
type globber struct {
	c *Client
	b *budget // the matches held, and the page being matched
	// remote maps a name to its remote path; nil when names are remote paths. An
	// error means the name names nothing (an invalid fs name).
	remote func(name string) (string, error)
	// stat checks a pattern without meta characters with Stat, as fs.Glob does,
	// rather than Lstat, as filepath.Glob does.
	stat bool
}

// glob matches pattern. The matches it returns are charged to g.b.
func (g *globber) glob(ctx context.Context, pattern string, depth int) ([]string, error) {
	if depth > globMaxDepth {
		return nil, path.ErrBadPattern
	}
	if !hasMeta(pattern) {
		return g.literal(ctx, pattern)
	}
	dir, file := path.Split(pattern)
	dir = cleanGlobDir(dir)
	if !hasMeta(dir) {
		return g.globDir(ctx, dir, file, nil)
	}
	if dir == pattern {
		return nil, path.ErrBadPattern
	}
	dirs, err := g.glob(ctx, dir, depth+1)
	if err != nil {
		return nil, err
	}
	defer g.release(dirs) // dropped once their matches are in
	var matches []string
	for _, d := range dirs {
		if matches, err = g.globDir(ctx, d, file, matches); err != nil {
			return nil, err
		}
	}
	return matches, nil
}

// literal matches a pattern without meta characters: itself, when it exists.
func (g *globber) literal(ctx context.Context, name string) ([]string, error) {
	p, err := g.path(name)
	if err != nil {
		return nil, nil
	}
	if g.stat {
		_, err = g.c.Stat(ctx, p)
	} else {
		_, err = g.c.Lstat(ctx, p)
	}
	if err != nil {
		return nil, passable(err)
	}
	if err := g.b.charge(pathCost(name)); err != nil {
		return nil, err
	}
	return []string{name}, nil
}

// path is the remote path of name.
func (g *globber) path(name string) (string, error) {
	if g.remote == nil {
		return name, nil
	}
	return g.remote(name)
}

// release gives back what matches were charged.
func (g *globber) release(matches []string) {
	for _, m := range matches {
		g.b.release(pathCost(m))
	}
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

// globDir appends to matches the names in dir that match pattern, sorted. A directory
// that is absent or unreadable adds none.
func (g *globber) globDir(ctx context.Context, dir, pattern string, matches []string) ([]string, error) {
	p, err := g.path(dir)
	if err != nil {
		return matches, nil
	}
	fi, err := g.c.Stat(ctx, p)
	if err != nil {
		return matches, passable(err)
	}
	if !fi.IsDir() {
		return matches, nil
	}
	first := len(matches)
	matches, err = g.matchDir(ctx, dir, p, pattern, matches)
	if err != nil {
		if err := passable(err); err != nil {
			return nil, err
		}
		g.release(matches[first:])
		return matches[:first], nil
	}
	slices.Sort(matches[first:])
	return matches, nil
}

// matchDir reads the directory dir (remote path p) a page at a time, each page
// charged while it is matched, and appends the names that match pattern. It returns
// what it appended even with an error.
func (g *globber) matchDir(ctx context.Context, dir, p, pattern string, matches []string) ([]string, error) {
	d, err := g.c.openDir(ctx, p)
	if err != nil {
		return matches, pathErr("readdir", p, err)
	}
	defer func() {
		if d != nil {
			d.close(ctx)
		}
	}()
	page := g.b.newHold()
	defer page.drop()
	for {
		entries, err := d.ReadDirContext(ctx, math.MaxInt)
		if err == io.EOF {
			break
		}
		page.drop()
		if err == nil {
			err = page.addPage(entries)
		}
		if err != nil {
			return matches, err
		}
		for _, e := range entries {
			ok, err := path.Match(pattern, e.Name())
			if err != nil {
				return matches, err
			}
			if !ok {
				continue
			}
			m := joinGlob(dir, e.Name())
			if err := g.b.charge(pathCost(m)); err != nil {
				return matches, err
			}
			matches = append(matches, m)
		}
	}
	err = d.close(ctx)
	d = nil
	return matches, err
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
