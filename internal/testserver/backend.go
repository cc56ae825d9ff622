package testserver

// backend is the file tree a Server serves: the in-memory tree (fsys, the default)
// or a directory on disk (dirFS, Options.Root). Paths are the client's, absolute
// from "/" or relative to it (the start directory is "/"). Errors are errno values,
// so both map to status codes the same way (errno.go).
type backend interface {
	open(p string, pflags, perm uint32) (file, error)
	stat(p string, follow bool) (attrs, error)
	setstat(p string, a attrs, follow bool) error
	opendir(p string) (dirList, error)
	remove(p string) error
	mkdir(p string, perm uint32) error
	rmdir(p string) error
	realpath(p string) (string, error)
	rename(oldp, newp string, overwrite bool) error
	readlink(p string) (string, error)
	symlink(target, linkp string) error
	link(oldp, newp string) error
	statvfs() [11]uint64

	// writeFile and readFile serve the Server's test helpers: perm is applied as
	// given (no umask) when the file is created, and symlinks are followed.
	writeFile(p string, data []byte, perm uint32) error
	readFile(p string) ([]byte, error)
	close() error
}

// file is an open file (or a directory opened read-only, which OPEN allows).
type file interface {
	isDir() bool
	// appendRead appends up to want bytes read at off to b. At or past the end it
	// returns b unchanged and eof set.
	appendRead(b []byte, off, want uint64) (_ []byte, eof bool, _ error)
	// writeAt stores data at off, or at the end for an APPEND handle.
	writeAt(off uint64, data []byte, appendMode bool) error
	attrs() (attrs, error)
	// setattrs is FSETSTAT: writable is false for a handle not opened for
	// writing, where ftruncate(2) gives EINVAL.
	setattrs(a attrs, writable bool) error
	close() error
}

// dirList is an open directory: its names, snapshotted at OPENDIR (sorted, after
// "." and ".."), each looked up again when its batch is sent, so names removed in
// between are skipped rather than reported stale.
type dirList interface {
	names() []string
	// entry returns what READDIR reports for name: lstat attributes and an ls -l
	// style longname; ok is false when the name has gone away.
	entry(name string) (a attrs, long string, ok bool)
	close()
}
