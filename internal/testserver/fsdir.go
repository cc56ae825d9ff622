package testserver

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"
	"time"
)

// dirFS serves a directory on disk through an os.Root, so no path or link a client
// sends resolves outside it. The operating system decides what succeeds (run as
// root, permission bits are not enforced); the server adds OpenSSH's rules where
// the system calls differ from its requests: plain RENAME never replaces, REMOVE
// never removes a directory. REALPATH is lexical (".." and "." folded, links not
// followed), and statvfs reports the in-memory tree's made-up figures.
type dirFS struct {
	root    *os.Root
	maxSize int64
}

func newDirFS(root *os.Root, maxSize int64) *dirFS { return &dirFS{root: root, maxSize: maxSize} }

// rel turns a client path into one relative to the root: "/" and "" are ".".
func rel(p string) string {
	c := path.Clean("/" + p)
	if c == "/" {
		return "."
	}
	return c[1:]
}

func (d *dirFS) close() error { return nil }

func (d *dirFS) open(p string, pflags, perm uint32) (file, error) {
	write := pflags&(OpenWrite|OpenAppend) != 0
	read := pflags&OpenRead != 0 || !write
	flag := os.O_RDONLY
	switch {
	case read && write:
		flag = os.O_RDWR
	case write:
		flag = os.O_WRONLY
	}
	if pflags&OpenAppend != 0 {
		flag |= os.O_APPEND
	}
	if pflags&OpenCreat != 0 {
		flag |= os.O_CREATE
		if pflags&OpenExcl != 0 {
			flag |= os.O_EXCL
		}
	}
	if pflags&OpenTrunc != 0 {
		flag |= os.O_TRUNC
	}
	f, err := d.root.OpenFile(rel(p), flag, fs.FileMode(perm&0o777))
	if err != nil {
		return nil, errnoOf(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, errnoOf(err)
	}
	return &dirFile{d: d, f: f, name: rel(p), dir: fi.IsDir()}, nil
}

func (d *dirFS) stat(p string, follow bool) (attrs, error) {
	var fi fs.FileInfo
	var err error
	if follow {
		fi, err = d.root.Stat(rel(p))
	} else {
		fi, err = d.root.Lstat(rel(p))
	}
	if err != nil {
		return attrs{}, errnoOf(err)
	}
	return infoAttrs(fi), nil
}

func (d *dirFS) setstat(p string, a attrs, follow bool) error {
	name := rel(p)
	fi, err := d.root.Lstat(name)
	switch {
	case err != nil:
		return errnoOf(err)
	case !follow && fi.Mode()&fs.ModeSymlink != 0:
		return eINVAL // no lchmod or ltruncate: as lsetstat without link support
	}
	if a.flags&AttrSize != 0 {
		err = d.truncate(name, a.size)
	}
	return d.setMeta(name, a, err)
}

func (d *dirFS) truncate(name string, size uint64) error {
	if size > uint64(d.maxSize) {
		return eFBIG
	}
	f, err := d.root.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return errnoOf(err)
	}
	defer f.Close()
	return errnoOf(f.Truncate(int64(size)))
}

// setMeta applies permissions, times and owner after the size, in OpenSSH's order,
// without stopping at the first failure; the last error is the one reported.
func (d *dirFS) setMeta(name string, a attrs, err error) error {
	if a.flags&AttrPermissions != 0 {
		if e := d.root.Chmod(name, unixMode(a.perm)); e != nil {
			err = errnoOf(e)
		}
	}
	if a.flags&AttrACModTime != 0 {
		if e := d.root.Chtimes(name, time.Unix(int64(a.atime), 0), time.Unix(int64(a.mtime), 0)); e != nil {
			err = errnoOf(e)
		}
	}
	if a.flags&AttrUIDGID != 0 {
		if e := d.root.Chown(name, int(a.uid), int(a.gid)); e != nil {
			err = errnoOf(e)
		}
	}
	return err
}

func (d *dirFS) opendir(p string) (dirList, error) {
	f, err := d.root.Open(rel(p))
	if err != nil {
		return nil, errnoOf(err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, errnoOf(err)
	}
	list := []string{".", ".."}
	for _, e := range ents {
		list = append(list, e.Name())
	}
	slices.Sort(list[2:])
	return &dirEntries{d: d, dir: rel(p), list: list}, nil
}

func (d *dirFS) remove(p string) error {
	fi, err := d.root.Lstat(rel(p))
	switch {
	case err != nil:
		return errnoOf(err)
	case fi.IsDir():
		return eISDIR
	}
	return errnoOf(d.root.Remove(rel(p)))
}

func (d *dirFS) mkdir(p string, perm uint32) error {
	return errnoOf(d.root.Mkdir(rel(p), unixMode(perm)))
}

func (d *dirFS) rmdir(p string) error {
	if lastIsDot(p) {
		return eINVAL
	}
	fi, err := d.root.Lstat(rel(p))
	switch {
	case err != nil:
		return errnoOf(err)
	case rel(p) == ".":
		return eBUSY
	case !fi.IsDir():
		return eNOTDIR
	}
	return errnoOf(d.root.Remove(rel(p)))
}

func (d *dirFS) realpath(p string) (string, error) {
	if p == "" {
		p = "."
	}
	return path.Clean("/" + p), nil
}

func (d *dirFS) rename(oldp, newp string, overwrite bool) error {
	if lastIsDot(oldp) || lastIsDot(newp) {
		return eINVAL
	}
	if _, err := d.root.Lstat(rel(oldp)); err != nil {
		return errnoOf(err)
	}
	if !overwrite {
		if _, err := d.root.Lstat(rel(newp)); err == nil {
			return eEXIST
		}
	}
	return errnoOf(d.root.Rename(rel(oldp), rel(newp)))
}

func (d *dirFS) readlink(p string) (string, error) {
	t, err := d.root.Readlink(rel(p))
	return t, errnoOf(err)
}

func (d *dirFS) symlink(target, linkp string) error {
	if target == "" {
		return eNOENT
	}
	return errnoOf(d.root.Symlink(target, rel(linkp)))
}

func (d *dirFS) link(oldp, newp string) error {
	return errnoOf(d.root.Link(rel(oldp), rel(newp)))
}

func (d *dirFS) statvfs() [11]uint64 { return (&fsys{}).statvfs() }

func (d *dirFS) writeFile(p string, data []byte, perm uint32) error {
	_, statErr := d.root.Stat(rel(p))
	if err := d.root.WriteFile(rel(p), data, unixMode(perm)); err != nil {
		return errnoOf(err)
	}
	if statErr != nil { // created: perm as given, whatever the umask
		return errnoOf(d.root.Chmod(rel(p), unixMode(perm)))
	}
	return nil
}

func (d *dirFS) readFile(p string) ([]byte, error) {
	b, err := d.root.ReadFile(rel(p))
	return b, errnoOf(err)
}

// dirFile is a file open in a dirFS.
type dirFile struct {
	d    *dirFS
	f    *os.File
	name string
	dir  bool
}

func (f *dirFile) isDir() bool { return f.dir }

func (f *dirFile) appendRead(b []byte, off, want uint64) ([]byte, bool, error) {
	if off > uint64(f.d.maxSize) {
		return b, true, nil
	}
	b = slices.Grow(b, int(want))
	n, err := f.f.ReadAt(b[len(b):len(b)+int(want)], int64(off))
	if n == 0 && err == io.EOF {
		return b, true, nil
	}
	if err != nil && err != io.EOF {
		return b, false, errnoOf(err)
	}
	return b[:len(b)+n], false, nil
}

func (f *dirFile) writeAt(off uint64, data []byte, appendMode bool) error {
	end := off + uint64(len(data))
	if off > uint64(f.d.maxSize) || end > uint64(f.d.maxSize) {
		return eFBIG
	}
	var err error
	if appendMode {
		_, err = f.f.Write(data)
	} else {
		_, err = f.f.WriteAt(data, int64(off))
	}
	return errnoOf(err)
}

func (f *dirFile) attrs() (attrs, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return attrs{}, errnoOf(err)
	}
	return infoAttrs(fi), nil
}

func (f *dirFile) setattrs(a attrs, writable bool) error {
	var err error
	if a.flags&AttrSize != 0 {
		switch {
		case f.dir:
			err = eISDIR
		case !writable:
			err = eINVAL
		case a.size > uint64(f.d.maxSize):
			err = eFBIG
		default:
			err = errnoOf(f.f.Truncate(int64(a.size)))
		}
	}
	return f.d.setMeta(f.name, a, err)
}

func (f *dirFile) close() error { return f.f.Close() }

// dirEntries is an open directory of a dirFS.
type dirEntries struct {
	d    *dirFS
	dir  string
	list []string
}

func (e *dirEntries) names() []string { return e.list }

func (e *dirEntries) entry(name string) (attrs, string, bool) {
	p := path.Join(e.dir, name)
	if name == ".." && e.dir == "." {
		p = "." // the root is its own parent
	}
	fi, err := e.d.root.Lstat(p)
	if err != nil {
		return attrs{}, "", false
	}
	a := infoAttrs(fi)
	return a, longname(name, a, 1), true
}

func (e *dirEntries) close() {}

// infoAttrs reports a file as OpenSSH's STAT does: flags 0x0f, the whole st_mode.
func infoAttrs(fi fs.FileInfo) attrs {
	uid, gid, atime := ownerAndAtime(fi)
	return attrs{
		flags: AttrSize | AttrUIDGID | AttrPermissions | AttrACModTime,
		size:  uint64(fi.Size()),
		uid:   uid, gid: gid,
		perm:  modeBits(fi.Mode()),
		atime: atime, mtime: uint32(fi.ModTime().Unix()),
	}
}

// modeBits is st_mode for an fs.FileMode.
func modeBits(m fs.FileMode) uint32 {
	p := unixPerm(m)
	switch {
	case m.IsDir():
		p |= sIFDIR
	case m&fs.ModeSymlink != 0:
		p |= sIFLNK
	case m.IsRegular():
		p |= sIFREG
	default:
		p |= 0o010000 // a FIFO or another special file: not a regular one
	}
	return p
}

// unixMode is the fs.FileMode for permission bits of st_mode.
func unixMode(perm uint32) fs.FileMode {
	m := fs.FileMode(perm & 0o777)
	if perm&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if perm&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if perm&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// errnoOf maps an error from the os package to the errno the server reports.
func errnoOf(err error) error {
	if err == nil {
		return nil
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		for _, m := range errnoMap {
			if en == m.sys {
				return m.e
			}
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return eNOENT
	case errors.Is(err, fs.ErrExist):
		return eEXIST
	case errors.Is(err, fs.ErrPermission):
		return eACCES
	}
	return err // reported as FAILURE
}

var errnoMap = []struct {
	sys syscall.Errno
	e   errno
}{
	{syscall.ENOENT, eNOENT}, {syscall.ENOTDIR, eNOTDIR}, {syscall.ELOOP, eLOOP},
	{syscall.EPERM, ePERM}, {syscall.EACCES, eACCES}, {syscall.EINVAL, eINVAL},
	{syscall.ENAMETOOLONG, eNAMETOOLONG}, {syscall.EEXIST, eEXIST}, {syscall.ENOTEMPTY, eNOTEMPTY},
	{syscall.EISDIR, eISDIR}, {syscall.EBUSY, eBUSY}, {syscall.EFBIG, eFBIG}, {syscall.EMFILE, eMFILE},
}
