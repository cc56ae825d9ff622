package sftp

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Where a Get writes. The caller names a local path and is trusted with it: links in
// it are followed. Everything a Get creates below it is named by the server, so it all
// goes through an *os.Root opened on the directory that receives the copy: no name
// and no link, whether the server sent it in this call or an earlier call left it
// behind, can resolve outside that directory. On top of what os.Root enforces, a Get
// never writes through a link at all: part files are created exclusively, a file
// reaches its final name by rename (which replaces a link instead of following it),
// and a link where the copy has a directory is an error.

var (
	errLinkInTheWay = errors.New("sftp: a symbolic link is where the copy has a directory; it is not followed")
	errIsDirectory  = errors.New("sftp: the destination is a directory; Get and Put name the copy itself (copy into a directory with GetAll or PutAll)")
)

// localDest is the local side of one Get: the directory that receives the copy, and
// the copy's name in it.
type localDest struct {
	root *os.Root
	dir  string // the directory root is opened on, as the caller named it
	name string // the copy's name in root: a plain name, or "." for root itself
}

// openLocalDest opens where a Get to local writes. local names the copy itself, so
// that running the same Get again lands in the same place: a file's copy is local
// (an existing directory there is an error), a tree's copy is the directory local,
// made if missing (with its parents, with perm) and merged into if present. The
// directories on the way to local are the caller's, and links among them are
// followed; the copy's own name is held to the rule of every name in the tree (a
// link there is replaced for a file and refused for a tree), except when it has no
// base name ("/", ".", ".."), when the root is opened on local itself.
func openLocalDest(local string, tree bool, perm fs.FileMode) (*localDest, error) {
	if local == "" {
		return nil, errors.New("sftp: empty local path")
	}
	clean := filepath.Clean(local) // "new/" names new, not new/new
	d := &localDest{dir: filepath.Dir(clean), name: filepath.Base(clean)}
	if !plainName(d.name) {
		d.dir, d.name = clean, "."
	}
	if !tree {
		if fi, err := os.Stat(clean); err == nil && fi.IsDir() {
			return nil, errIsDirectory
		}
	} else if err := os.MkdirAll(d.dir, perm); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(d.dir)
	if err != nil {
		return nil, err
	}
	d.root = root
	return d, nil
}

func (d *localDest) close() { d.root.Close() }

// path is name (relative to the root) as the caller would write it, for progress
// reports and errors.
func (d *localDest) path(name string) string { return filepath.Join(d.dir, name) }

// err puts the caller's directory in front of the root-relative path os.Root's errors
// carry, so they name the file the caller knows.
func (d *localDest) err(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return &fs.PathError{Op: pe.Op, Path: d.path(pe.Path), Err: pe.Err}
	case errors.As(err, &le):
		return &os.LinkError{Op: le.Op, Old: d.path(le.Old), New: d.path(le.New), Err: le.Err}
	}
	return err
}

func (d *localDest) lstat(name string) (fs.FileInfo, error) {
	fi, err := d.root.Lstat(name)
	return fi, d.err(err)
}

func (d *localDest) remove(name string) error { return d.err(d.root.Remove(name)) }

func (d *localDest) rename(from, to string) error { return d.err(d.root.Rename(from, to)) }

// setDirMeta gives the directory name its mode and, when setTimes, its times,
// through a descriptor of the directory itself (localsource.go): os.Root's Chmod and
// Chtimes follow a final link, to wherever in the root it leads.
func (d *localDest) setDirMeta(name string, mode fs.FileMode, setTimes bool, atime, mtime time.Time) error {
	if err := setDirMeta(d.root, name, mode, setTimes, atime, mtime); err != nil {
		if errors.Is(err, errSwapped) {
			return pathErr("chmod", d.path(name), errNoLongerDir)
		}
		return d.err(err)
	}
	return nil
}

// chtimes sets the times of the part file name. It follows a final link, which stays
// inside the root: the part was just created exclusively and written by this Get.
func (d *localDest) chtimes(name string, atime, mtime time.Time) error {
	return d.err(d.root.Chtimes(name, atime, mtime))
}

// createPart creates a part file for writing, never through a link: exclusively, after
// removing whatever holds the name (a part an earlier attempt left, or a link planted
// to redirect the write).
func (d *localDest) createPart(name string, perm fs.FileMode) (*os.File, error) {
	const flag = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	f, err := d.root.OpenFile(name, flag, perm)
	if errors.Is(err, fs.ErrExist) {
		// Only a file or a link is removed; anything else at the part name stops the
		// download.
		if fi, lerr := d.root.Lstat(name); lerr != nil || fi.IsDir() {
			return nil, d.err(err)
		}
		if rerr := d.root.Remove(name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return nil, d.err(rerr)
		}
		f, err = d.root.OpenFile(name, flag, perm)
	}
	return f, d.err(err)
}

// reopenPart opens for Resume the part file that fi (from lstat) describes as a
// regular file, checked to be that same file (localsource.go): a link put there
// meanwhile is refused, not written through, and a FIFO does not block the open. It is
// opened for reading too: Resume compares its bytes at the resume point with the
// source's.
func (d *localDest) reopenPart(name string, fi fs.FileInfo) (*os.File, error) {
	f, err := d.root.OpenFile(name, os.O_RDWR|localOpenFlags, 0)
	if err != nil {
		return nil, d.err(err)
	}
	if err := checkOpened(f, fi, fs.FileMode.IsRegular); err != nil {
		f.Close()
		return nil, pathErr("resume", d.path(name), err)
	}
	return f, nil
}

// mkdir makes a directory whose parent exists. One already there is fine; a link
// there, even to a directory, is not: following it would let the copy land wherever
// it points, which is how a link an earlier Get recreated would redirect this one.
func (d *localDest) mkdir(name string, perm fs.FileMode) error {
	err := d.root.Mkdir(name, perm)
	if errors.Is(err, fs.ErrExist) {
		if fi, lerr := d.root.Lstat(name); lerr == nil {
			switch {
			case fi.IsDir():
				return nil
			case fi.Mode()&fs.ModeSymlink != 0:
				return pathErr("mkdir", d.path(name), errLinkInTheWay)
			}
		}
	}
	return d.err(err)
}

// symlink makes name a link to target, replacing a file or link already there (not a
// directory), through a part name so name is never missing. Only the link itself is
// made: nothing is ever written through it.
func (d *localDest) symlink(target, name string) error {
	err := d.root.Symlink(target, name)
	if !errors.Is(err, fs.ErrExist) {
		return d.err(err)
	}
	if fi, lerr := d.root.Lstat(name); lerr != nil || fi.IsDir() {
		return d.err(err)
	}
	part := name + partSuffix
	d.root.Remove(part) // left by an earlier attempt, if at all
	if err := d.root.Symlink(target, part); err != nil {
		return d.err(err)
	}
	return d.err(d.root.Rename(part, name))
}
