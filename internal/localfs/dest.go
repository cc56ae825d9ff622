package localfs

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
	// ErrNoLongerDir is the failure of a directory replaced by something else (a link,
	// say) before its mode and times were set: they are not set on what replaced it.
	ErrNoLongerDir  = errors.New("sftp: the directory was replaced since it was made; its mode and times are not set")
	ErrLinkInTheWay = errors.New("sftp: a symbolic link is where the copy has a directory; it is not followed")
	ErrIsDirectory  = errors.New("sftp: the destination is a directory; Get and Put name the copy itself (copy into a directory with GetAll or PutAll)")
)

// Dest is the local side of one Get: the directory that receives the copy, and
// the copy's name in it.
type Dest struct {
	Root *os.Root
	Dir  string // the directory Root is opened on, as the caller named it
	Name string // the copy's name in Root: a plain name, or "." for Root itself
}

// OpenDest opens where a Get to local writes. local names the copy itself, so
// that running the same Get again lands in the same place: a file's copy is local
// (an existing directory there is an error), a tree's copy is the directory local,
// made if missing (with its parents, with perm) and merged into if present. The
// directories on the way to local are the caller's, and links among them are
// followed; the copy's own name is held to the rule of every name in the tree (a
// link there is replaced for a file and refused for a tree), except when it has no
// base name ("/", ".", ".."), when the root is opened on local itself.
func OpenDest(local string, tree bool, perm fs.FileMode) (*Dest, error) {
	if local == "" {
		return nil, errors.New("sftp: empty local path")
	}
	clean := filepath.Clean(local) // "new/" names new, not new/new
	d := &Dest{Dir: filepath.Dir(clean), Name: filepath.Base(clean)}
	if !PlainName(d.Name) {
		d.Dir, d.Name = clean, "."
	}
	if !tree {
		if fi, err := os.Stat(clean); err == nil && fi.IsDir() {
			return nil, ErrIsDirectory
		}
	} else if err := os.MkdirAll(d.Dir, perm); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(d.Dir)
	if err != nil {
		return nil, err
	}
	d.Root = root
	return d, nil
}

func (d *Dest) Close() { d.Root.Close() }

// path is name (relative to the root) as the caller would write it, for progress
// reports and errors.
func (d *Dest) Path(name string) string { return filepath.Join(d.Dir, name) }

// Err puts the caller's directory in front of the root-relative path os.Root's errors
// carry, so they name the file the caller knows.
func (d *Dest) Err(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return &fs.PathError{Op: pe.Op, Path: d.Path(pe.Path), Err: pe.Err}
	case errors.As(err, &le):
		return &os.LinkError{Op: le.Op, Old: d.Path(le.Old), New: d.Path(le.New), Err: le.Err}
	}
	return err
}

func (d *Dest) Lstat(name string) (fs.FileInfo, error) {
	fi, err := d.Root.Lstat(name)
	return fi, d.Err(err)
}

func (d *Dest) Remove(name string) error { return d.Err(d.Root.Remove(name)) }

func (d *Dest) Rename(from, to string) error { return d.Err(d.Root.Rename(from, to)) }

// SetDirMeta gives the directory name its mode and, when setTimes, its times,
// through a descriptor of the directory itself (source.go): os.Root's Chmod and
// Chtimes follow a final link, to wherever in the root it leads.
func (d *Dest) SetDirMeta(name string, mode fs.FileMode, setTimes bool, atime, mtime time.Time) error {
	if err := SetDirMeta(d.Root, name, mode, setTimes, atime, mtime); err != nil {
		if errors.Is(err, ErrSwapped) {
			return pathErr("chmod", d.Path(name), ErrNoLongerDir)
		}
		return d.Err(err)
	}
	return nil
}

// chtimes sets the times of the part file name. It follows a final link, which stays
// inside the root: the part was just created exclusively and written by this Get.
func (d *Dest) Chtimes(name string, atime, mtime time.Time) error {
	return d.Err(d.Root.Chtimes(name, atime, mtime))
}

// createPart creates a part file for writing, never through a link: exclusively, after
// removing whatever holds the name (a part an earlier attempt left, or a link planted
// to redirect the write).
func (d *Dest) CreatePart(name string, perm fs.FileMode) (*os.File, error) {
	const flag = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	f, err := d.Root.OpenFile(name, flag, perm)
	if errors.Is(err, fs.ErrExist) {
		// Only a file or a link is removed; anything else at the part name stops the
		// download.
		if fi, lerr := d.Root.Lstat(name); lerr != nil || fi.IsDir() {
			return nil, d.Err(err)
		}
		if rerr := d.Root.Remove(name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return nil, d.Err(rerr)
		}
		f, err = d.Root.OpenFile(name, flag, perm)
	}
	return f, d.Err(err)
}

// reopenPart opens for Resume the part file that fi (from lstat) describes as a
// regular file, checked to be that same file (source.go): a link put there
// meanwhile is refused, not written through, and a FIFO does not block the open. It is
// opened for reading too: Resume compares its bytes at the resume point with the
// source's.
func (d *Dest) ReopenPart(name string, fi fs.FileInfo) (*os.File, error) {
	f, err := d.Root.OpenFile(name, os.O_RDWR|OpenFlags, 0)
	if err != nil {
		return nil, d.Err(err)
	}
	if err := CheckOpened(f, fi, fs.FileMode.IsRegular); err != nil {
		f.Close()
		return nil, pathErr("resume", d.Path(name), err)
	}
	return f, nil
}

// mkdir makes a directory whose parent exists. One already there is fine; a link
// there, even to a directory, is not: following it would let the copy land wherever
// it points, which is how a link an earlier Get recreated would redirect this one.
func (d *Dest) Mkdir(name string, perm fs.FileMode) error {
	err := d.Root.Mkdir(name, perm)
	if errors.Is(err, fs.ErrExist) {
		if fi, lerr := d.Root.Lstat(name); lerr == nil {
			switch {
			case fi.IsDir():
				return nil
			case fi.Mode()&fs.ModeSymlink != 0:
				return pathErr("mkdir", d.Path(name), ErrLinkInTheWay)
			}
		}
	}
	return d.Err(err)
}

// Symlink makes name a link to target, replacing a file or link already there (not a
// directory), through the name part so name is never missing. Only the link itself is
// made: nothing is ever written through it.
func (d *Dest) Symlink(target, name, part string) error {
	err := d.Root.Symlink(target, name)
	if !errors.Is(err, fs.ErrExist) {
		return d.Err(err)
	}
	if fi, lerr := d.Root.Lstat(name); lerr != nil || fi.IsDir() {
		return d.Err(err)
	}
	d.Root.Remove(part) // left by an earlier attempt, if at all
	if err := d.Root.Symlink(target, part); err != nil {
		return d.Err(err)
	}
	return d.Err(d.Root.Rename(part, name))
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}
