package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"syscall"
)

// FS returns a read-only view of the server's file system as an fs.FS, rooted at the
// server's start directory: the name "a/b" is the remote path "a/b" relative to it,
// and "." is the start directory itself. It is DirFS(""); see DirFS for what the view
// implements and how it behaves.
func (c *Client) FS() fs.FS { return &remoteFS{c: c} }

// DirFS returns a read-only view of the remote directory root as an fs.FS: the name
// "a/b" is the remote path root+"/a/b", and "." is root itself. root may be absolute
// ("/srv") or relative to the start directory; "" is the start directory. Like
// os.DirFS it does not check that root exists: calls on the result fail instead. The
// result also implements fs.StatFS, fs.ReadDirFS, fs.ReadFileFS, fs.ReadLinkFS and
// fs.SubFS, so fs.WalkDir, fs.Glob, fs.Sub and os.CopyFS work on it.
//
// fs.FS methods take no context, so every call runs under context.Background(): it
// ends when the server answers or the Client is closed, never earlier. Use the
// Client's own methods (ReadDir, WalkDir, Glob, Open) where a call must be bounded.
//
// Errors are *fs.PathError carrying the fs name, not the remote path. As with
// os.DirFS, symbolic links are followed wherever the server follows them, so the view
// is no barrier against links that lead out of it. Directory listings come from the
// same reader as Client.ReadDir: a name from the server that is not one plain name
// (empty, or containing "/" or NUL) fails the listing with ErrInvalidEntryName, and a
// whole listing (ReadDir, an open directory's ReadDir(n) with n <= 0) is bounded by
// the Client's memory limit, each call on its own (WithMemoryLimit; past it an error
// matching ErrListingTooLarge); an open directory's ReadDir(n) with n > 0 streams, in
// the server's order, one page at a time. The view implements fs.GlobFS with
// Client.Glob's rules: fs.Glob holds names only, reads each directory a page at a
// time, and fails with ErrListingTooLarge past the memory limit rather than leaving
// out what it could not hold. fs.WalkDir, being the standard library's, holds a whole
// listing at every level of its path with no bound on the depth: against a server you
// do not trust, walk with Client.WalkDir. Opening a named pipe fails with an error
// matching errors.ErrUnsupported: the server would block in open(2) until a writer
// appeared, stalling every request of the session meanwhile.
func (c *Client) DirFS(root string) fs.FS {
	if trimmed := strings.TrimRight(root, "/"); trimmed != "" || root == "" {
		root = trimmed
	} else {
		root = "/"
	}
	return &remoteFS{c: c, root: root}
}

// remoteFS names remote files relative to root. The start directory ("") is not
// resolved to an absolute path: the server resolves relative paths against it anyway,
// and this costs no round trip and survives a start directory that cannot be resolved.
type remoteFS struct {
	c    *Client
	root string // a remote path; "" for the start directory
}

var (
	_ fs.StatFS     = (*remoteFS)(nil)
	_ fs.ReadDirFS  = (*remoteFS)(nil)
	_ fs.ReadFileFS = (*remoteFS)(nil)
	_ fs.ReadLinkFS = (*remoteFS)(nil)
	_ fs.SubFS      = (*remoteFS)(nil)
	_ fs.GlobFS     = (*remoteFS)(nil)
)

var errNamedPipe = fmt.Errorf("sftp: opening a named pipe would block the server: %w", errors.ErrUnsupported)

// maxPrealloc bounds the buffer ReadFile allocates up front from the size the server
// reports, so a sparse or misreported size cannot allocate on its own; past it the
// buffer grows with the data actually received.
const maxPrealloc = 64 << 20

// remote checks name and returns the remote path for it.
func (f *remoteFS) remote(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	switch {
	case f.root == "":
		// A leading "~" is a plain character in an fs name, but some servers expand
		// it as a home directory; "./" keeps it literal everywhere.
		return literalPath(name), nil
	case name == ".":
		return f.root, nil
	case f.root == "/":
		return "/" + name, nil
	}
	return f.root + "/" + name, nil
}

// relabel turns an error from a Client call on a remote path into one about the fs
// name, keeping what the server or the connection said.
func relabel(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if pe, ok := err.(*fs.PathError); ok {
		err = pe.Err
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// Open opens name for reading. A directory yields an fs.ReadDirFile; a regular file
// yields an fs.File that is also an io.ReaderAt, io.Seeker and io.WriterTo, so
// io.Copy from it keeps many READs in flight.
func (f *remoteFS) Open(name string) (fs.File, error) {
	ctx := context.Background()
	p, fi, err := f.statToOpen(ctx, name)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return &fsDir{c: f.c, name: name, remote: p}, nil
	}
	file, err := f.c.Open(ctx, p)
	if err != nil {
		return nil, relabel("open", name, err)
	}
	return &fsFile{f: file, name: name}, nil
}

// statToOpen resolves name and STATs it before it is opened: an OPEN cannot tell a
// directory apart (OpenSSH's server opens one without complaint), which the caller
// handles, and would hang on a named pipe, which is refused here. The STAT costs what
// an FSTAT after the OPEN would.
func (f *remoteFS) statToOpen(ctx context.Context, name string) (string, fs.FileInfo, error) {
	p, err := f.remote("open", name)
	if err != nil {
		return "", nil, err
	}
	fi, err := f.c.Stat(ctx, p)
	if err != nil {
		return "", nil, relabel("open", name, err)
	}
	if fi.Mode()&fs.ModeNamedPipe != 0 {
		return "", nil, &fs.PathError{Op: "open", Path: name, Err: errNamedPipe}
	}
	return p, fi, nil
}

// Stat returns information about name, following symbolic links.
func (f *remoteFS) Stat(name string) (fs.FileInfo, error) {
	p, err := f.remote("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := f.c.Stat(context.Background(), p)
	return fi, relabel("stat", name, err)
}

// Lstat returns information about name without following a final symbolic link.
func (f *remoteFS) Lstat(name string) (fs.FileInfo, error) {
	p, err := f.remote("lstat", name)
	if err != nil {
		return nil, err
	}
	fi, err := f.c.Lstat(context.Background(), p)
	return fi, relabel("lstat", name, err)
}

// ReadLink returns the target of the symbolic link name exactly as stored, which may
// be absolute on the server or relative to the link's directory.
func (f *remoteFS) ReadLink(name string) (string, error) {
	p, err := f.remote("readlink", name)
	if err != nil {
		return "", err
	}
	s, err := f.c.Readlink(context.Background(), p)
	return s, relabel("readlink", name, err)
}

// ReadDir returns the entries of the directory name sorted by name, within the
// Client's memory limit, as Client.ReadDir.
func (f *remoteFS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := f.remote("readdir", name)
	if err != nil {
		return nil, err
	}
	entries, err := f.c.ReadDir(context.Background(), p)
	return entries, relabel("readdir", name, err)
}

// Glob returns the names matching pattern, as fs.Glob does, within the Client's
// memory limit: see Client.Glob. Besides path.ErrBadPattern, it fails (rather than
// returning fewer names) when the connection is lost or the matches would pass the
// limit (ErrListingTooLarge).
func (f *remoteFS) Glob(pattern string) ([]string, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, err
	}
	g := &globber{c: f.c, b: f.c.newBudget(), stat: true,
		remote: func(name string) (string, error) { return f.remote("glob", name) }}
	matches, err := g.glob(context.Background(), pattern, 0)
	switch {
	case err == path.ErrBadPattern:
		return nil, err
	case err != nil:
		return nil, relabel("glob", pattern, err)
	}
	return matches, nil
}

// ReadFile returns the contents of name, read with many READs in flight.
func (f *remoteFS) ReadFile(name string) ([]byte, error) {
	ctx := context.Background()
	p, fi, err := f.statToOpen(ctx, name)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EISDIR}
	}
	file, err := f.c.Open(ctx, p)
	if err != nil {
		return nil, relabel("open", name, err)
	}
	// The data is complete once WriteTo returns; as with os.ReadFile, a failed close
	// of a read-only handle does not make it wrong.
	defer file.Close()
	buf := bytes.NewBuffer(make([]byte, 0, min(fi.Size(), maxPrealloc)))
	if _, err := file.WriteTo(buf); err != nil {
		return nil, relabel("read", name, err)
	}
	return buf.Bytes(), nil
}

// Sub returns the view of the subtree at dir. Like os.DirFS it does not check that dir
// exists: calls on the result fail instead.
func (f *remoteFS) Sub(dir string) (fs.FS, error) {
	if dir == "." {
		return f, nil
	}
	root, err := f.remote("sub", dir)
	if err != nil {
		return nil, err
	}
	return &remoteFS{c: f.c, root: root}, nil
}

// fsFile is an open regular file of a remoteFS. It exposes the read side of *File
// only: the handle is read-only, and the fs.File contract has no writes.
type fsFile struct {
	f    *File
	name string // fs name; f.Name() is the remote path
}

// err relabels the File's own errors with the fs name. Errors of a WriteTo
// destination come back bare or with their own path, and are left alone.
func (f *fsFile) err(err error) error {
	if pe, ok := err.(*fs.PathError); ok && pe.Path == f.f.Name() && f.name != pe.Path {
		return &fs.PathError{Op: pe.Op, Path: f.name, Err: pe.Err}
	}
	return err
}

func (f *fsFile) Stat() (fs.FileInfo, error) {
	fi, err := f.f.Stat()
	return fi, f.err(err)
}

func (f *fsFile) Read(p []byte) (int, error) {
	n, err := f.f.Read(p)
	return n, f.err(err)
}

func (f *fsFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(p, off)
	return n, f.err(err)
}

func (f *fsFile) Seek(offset int64, whence int) (int64, error) {
	n, err := f.f.Seek(offset, whence)
	return n, f.err(err)
}

func (f *fsFile) WriteTo(w io.Writer) (int64, error) {
	n, err := f.f.WriteTo(w)
	return n, f.err(err)
}

func (f *fsFile) Close() error { return f.err(f.f.Close()) }

// fsDir is an open directory of a remoteFS. Open costs no handle: the first ReadDir
// opens one (a Dir), and later calls read on from it, a page at a time.
type fsDir struct {
	c      *Client
	name   string
	remote string

	mu     sync.Mutex
	dir    *Dir // nil until the first ReadDir
	closed bool
}

func (d *fsDir) Stat() (fs.FileInfo, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, &fs.PathError{Op: "stat", Path: d.name, Err: fs.ErrClosed}
	}
	fi, err := d.c.Stat(context.Background(), d.remote)
	return fi, relabel("stat", d.name, err)
}

func (d *fsDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: syscall.EISDIR}
}

// ReadDir returns the next n entries in the server's order, or all that remain when
// n <= 0 (within the Client's memory limit, as Client.ReadDir). With n > 0 it returns
// io.EOF once none remain; with n <= 0, an empty slice and nil.
func (d *fsDir) ReadDir(n int) ([]fs.DirEntry, error) {
	dir, err := d.open()
	if err != nil {
		return nil, err
	}
	// Read outside mu, so that Close can interrupt the read.
	entries, err := dir.ReadDir(n)
	if err == io.EOF {
		return entries, err
	}
	if n <= 0 && entries == nil && err == nil {
		entries = []fs.DirEntry{}
	}
	return entries, relabel("readdir", d.name, err)
}

// open returns the directory's Dir, opening it on first use.
func (d *fsDir) open() (*Dir, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, &fs.PathError{Op: "readdir", Path: d.name, Err: fs.ErrClosed}
	}
	if d.dir == nil {
		dir, err := d.c.openDir(context.Background(), d.remote)
		if err != nil {
			return nil, relabel("readdir", d.name, err)
		}
		d.dir = dir
	}
	return d.dir, nil
}

// Close closes the directory handle, if one was opened, ending a ReadDir in progress.
// A second Close returns an error matching fs.ErrClosed, as os.File does.
func (d *fsDir) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return &fs.PathError{Op: "close", Path: d.name, Err: fs.ErrClosed}
	}
	d.closed = true
	dir := d.dir
	d.mu.Unlock()
	if dir == nil {
		return nil
	}
	return relabel("close", d.name, dir.Close())
}
