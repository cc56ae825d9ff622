package sftp

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Path operations. Each returns *fs.PathError (or *os.LinkError for two paths) around
// the server's *StatusError, a *ProtocolError, or a connection error.

func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

func linkErr(op, oldname, newname string, err error) error {
	if err == nil {
		return nil
	}
	return &os.LinkError{Op: op, Old: oldname, New: newname, Err: err}
}

// Stat returns information about the named file, following symbolic links.
func (c *Client) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	return c.stat(ctx, "stat", sshfx.TypeStat, name)
}

// Lstat returns information about the named file without following a final symlink.
func (c *Client) Lstat(ctx context.Context, name string) (fs.FileInfo, error) {
	return c.stat(ctx, "lstat", sshfx.TypeLstat, name)
}

func (c *Client) stat(ctx context.Context, op string, t sshfx.PacketType, name string) (fs.FileInfo, error) {
	a, err := c.attrsCall(ctx, op, func(dst []byte, id uint32) []byte { return appendString1(dst, t, id, name) })
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	return newFileInfo(baseName(name), &a, 0), nil
}

// attrsCall sends a request answered by ATTRS (STAT, LSTAT, FSTAT).
func (c *Client) attrsCall(ctx context.Context, op string, enc func(dst []byte, id uint32) []byte) (sshfx.Attrs, error) {
	r, err := c.main.roundTripBuf(ctx, enc)
	if err != nil {
		return sshfx.Attrs{}, err
	}
	defer r.release()
	a, err := decodeAttrs(op, &r)
	return a, c.main.check(err)
}

// nameCall sends a request answered by a NAME with one entry (REALPATH, READLINK,
// expand-path, home-directory).
func (c *Client) nameCall(ctx context.Context, op string, enc func(id uint32) []byte) (string, error) {
	r, err := c.main.roundTrip(ctx, enc)
	if err != nil {
		return "", err
	}
	defer r.release()
	s, err := decodeOneName(op, &r)
	return s, c.main.check(err)
}

// ReadDir reads the named directory and returns its entries sorted by name, without
// "." and "..".
func (c *Client) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	entries, err := c.readDir(ctx, c.main, name)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	out := make([]fs.DirEntry, len(entries))
	for i, fi := range entries {
		out[i] = fs.FileInfoToDirEntry(fi)
	}
	return out, nil
}

func (c *Client) readDir(ctx context.Context, cn *conn, name string) ([]fs.FileInfo, error) {
	h, err := c.openHandle(ctx, cn, "opendir", func(id uint32) []byte {
		return appendString1(nil, sshfx.TypeOpendir, id, name)
	})
	if err != nil {
		return nil, err
	}
	var out []fs.FileInfo
	for {
		r, err := cn.roundTrip(ctx, func(id uint32) []byte { return appendString1(nil, sshfx.TypeReaddir, id, h) })
		if err != nil {
			c.closeHandle(cn, h)
			return nil, err
		}
		names, err := decodeName("READDIR", &r)
		r.release()
		if err == io.EOF {
			break
		}
		if err != nil {
			c.closeHandle(cn, h)
			return nil, cn.check(err)
		}
		for _, e := range names {
			if e.name == "." || e.name == ".." {
				continue
			}
			out = append(out, newFileInfo(e.name, &e.attrs, typeFromLongname(e.longname)))
		}
	}
	if err := c.closeHandleCtx(ctx, cn, h); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b fs.FileInfo) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// openHandle sends OPEN or OPENDIR and returns the handle.
func (c *Client) openHandle(ctx context.Context, cn *conn, op string, enc func(id uint32) []byte) (string, error) {
	r, err := cn.roundTrip(ctx, enc)
	if err != nil {
		return "", err
	}
	defer r.release()
	h, err := decodeHandle(op, &r)
	return h, cn.check(err)
}

func (c *Client) closeHandleCtx(ctx context.Context, cn *conn, h string) error {
	r, err := cn.roundTrip(ctx, func(id uint32) []byte { return appendString1(nil, sshfx.TypeClose, id, h) })
	if err != nil {
		return err
	}
	defer r.release()
	return cn.check(expectStatus("CLOSE", &r))
}

// closeHandle closes h on a path where an error is already being returned: the CLOSE
// goes out, but nobody waits for its reply, so that return is not held up.
func (c *Client) closeHandle(cn *conn, h string) {
	cn.closeOrphanLater(h)
}

// Mkdir creates a directory with perm (before the server's umask).
func (c *Client) Mkdir(ctx context.Context, name string, perm fs.FileMode) error {
	a := sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: toUnixPerm(perm)}
	return pathErr("mkdir", name, c.statusCall(ctx, "MKDIR", func(id uint32) []byte {
		return appendStringAttrs(nil, sshfx.TypeMkdir, id, name, &a)
	}))
}

// MkdirAll creates a directory and any missing parents, like os.MkdirAll.
func (c *Client) MkdirAll(ctx context.Context, name string, perm fs.FileMode) error {
	fi, err := c.Stat(ctx, name)
	if err == nil {
		if fi.IsDir() {
			return nil
		}
		return pathErr("mkdir", name, syscall.ENOTDIR)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := path.Dir(strings.TrimRight(name, "/")); parent != name && parent != "." && parent != "/" {
		if err := c.MkdirAll(ctx, parent, perm); err != nil {
			return err
		}
	}
	if err := c.Mkdir(ctx, name, perm); err != nil {
		// Someone else may have made it meanwhile; that counts as success, as in os.
		if fi, serr := c.Lstat(ctx, name); serr == nil && fi.IsDir() {
			return nil
		}
		return err
	}
	return nil
}

// Remove removes a file or an empty directory, like os.Remove.
func (c *Client) Remove(ctx context.Context, name string) error {
	err := c.statusCall(ctx, "REMOVE", func(id uint32) []byte {
		return appendString1(nil, sshfx.TypeRemove, id, name)
	})
	if err == nil || errors.Is(err, fs.ErrNotExist) || c.main.failed() != nil {
		return pathErr("remove", name, err)
	}
	// REMOVE refuses directories; which error to report depends on what name is, so ask
	// rather than guess from codes that servers assign differently.
	if fi, serr := c.Lstat(ctx, name); serr == nil && fi.IsDir() {
		err = c.rmdir(ctx, name)
	}
	return pathErr("remove", name, err)
}

func (c *Client) rmdir(ctx context.Context, name string) error {
	return c.statusCall(ctx, "RMDIR", func(id uint32) []byte {
		return appendString1(nil, sshfx.TypeRmdir, id, name)
	})
}

// RemoveAll removes name and everything it contains, like os.RemoveAll: a missing name
// is not an error.
func (c *Client) RemoveAll(ctx context.Context, name string) error {
	if name == "" || name == "." || name == "/" {
		return pathErr("removeall", name, syscall.EINVAL)
	}
	fi, err := c.Lstat(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		err := c.Remove(ctx, name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	entries, err := c.readDir(ctx, c.main, name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return pathErr("removeall", name, err)
	}
	for _, e := range entries {
		if err := c.RemoveAll(ctx, path.Join(name, e.Name())); err != nil {
			return err
		}
	}
	if err := c.rmdir(ctx, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return pathErr("removeall", name, err)
	}
	return nil
}

// Rename renames oldname to newname, replacing newname where the server allows it
// (posix-rename@openssh.com). Without that extension plain RENAME is used, which on
// most servers fails when newname exists.
func (c *Client) Rename(ctx context.Context, oldname, newname string) error {
	var err error
	if c.hasExt(extPosixRename) {
		err = c.statusCall(ctx, extPosixRename, func(id uint32) []byte {
			return appendExtended(nil, id, extPosixRename, oldname, newname)
		})
	} else {
		err = c.statusCall(ctx, "RENAME", func(id uint32) []byte {
			return appendString2(nil, sshfx.TypeRename, id, oldname, newname)
		})
	}
	return linkErr("rename", oldname, newname, err)
}

// setstat sends SETSTAT for name with a.
func (c *Client) setstat(ctx context.Context, op, name string, a *sshfx.Attrs) error {
	return pathErr(op, name, c.statusCall(ctx, "SETSTAT", func(id uint32) []byte {
		return appendStringAttrs(nil, sshfx.TypeSetstat, id, name, a)
	}))
}

// Chmod changes the mode of the named file (permissions, setuid, setgid, sticky).
func (c *Client) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	return c.setstat(ctx, "chmod", name, &sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: toUnixPerm(mode)})
}

// Chown changes the numeric uid and gid of the named file.
func (c *Client) Chown(ctx context.Context, name string, uid, gid int) error {
	if uid < 0 || gid < 0 || uid > 1<<32-1 || gid > 1<<32-1 {
		return pathErr("chown", name, syscall.EINVAL)
	}
	return c.setstat(ctx, "chown", name, &sshfx.Attrs{Flags: sshfx.AttrUIDGID, UID: uint32(uid), GID: uint32(gid)})
}

// Chtimes changes the access and modification times (whole seconds, 1970 to 2106).
func (c *Client) Chtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	a, err := timesAttrs(atime, mtime)
	if err != nil {
		return pathErr("chtimes", name, err)
	}
	return c.setstat(ctx, "chtimes", name, a)
}

func timesAttrs(atime, mtime time.Time) (*sshfx.Attrs, error) {
	at, err := unixTime(atime)
	if err != nil {
		return nil, err
	}
	mt, err := unixTime(mtime)
	if err != nil {
		return nil, err
	}
	return &sshfx.Attrs{Flags: sshfx.AttrACModTime, ATime: at, MTime: mt}, nil
}

// Truncate changes the size of the named file.
func (c *Client) Truncate(ctx context.Context, name string, size int64) error {
	if size < 0 {
		return pathErr("truncate", name, syscall.EINVAL)
	}
	return c.setstat(ctx, "truncate", name, &sshfx.Attrs{Flags: sshfx.AttrSize, Size: uint64(size)})
}

// Readlink returns the target of the named symbolic link.
func (c *Client) Readlink(ctx context.Context, name string) (string, error) {
	s, err := c.nameCall(ctx, "READLINK", func(id uint32) []byte {
		return appendString1(nil, sshfx.TypeReadlink, id, name)
	})
	return s, pathErr("readlink", name, err)
}

// Symlink creates newname as a symbolic link to oldname, like os.Symlink. OpenSSH's
// server takes the two paths in the reverse of the draft's order, and nearly every
// server followed it; a server that uses the draft's order says so with
// symlink-order@rjk.greenend.org.uk.
func (c *Client) Symlink(ctx context.Context, oldname, newname string) error {
	first, second := oldname, newname
	if c.exts[extSymlinkOrder] == "linkpath-targetpath" {
		first, second = newname, oldname
	}
	return linkErr("symlink", oldname, newname, c.statusCall(ctx, "SYMLINK", func(id uint32) []byte {
		return appendString2(nil, sshfx.TypeSymlink, id, first, second)
	}))
}

// Link creates newname as a hard link to oldname (hardlink@openssh.com).
func (c *Client) Link(ctx context.Context, oldname, newname string) error {
	if !c.hasExt(extHardlink) {
		return linkErr("link", oldname, newname, errUnsupportedExt(extHardlink))
	}
	return linkErr("link", oldname, newname, c.statusCall(ctx, extHardlink, func(id uint32) []byte {
		return appendExtended(nil, id, extHardlink, oldname, newname)
	}))
}

// RealPath returns the canonical absolute form of name. A leading "~" or "~user" is
// expanded when the server offers expand-path@openssh.com.
func (c *Client) RealPath(ctx context.Context, name string) (string, error) {
	var s string
	var err error
	if strings.HasPrefix(name, "~") && c.hasExt(extExpandPath) {
		s, err = c.nameCall(ctx, extExpandPath, func(id uint32) []byte {
			return appendExtended(nil, id, extExpandPath, name)
		})
	} else {
		s, err = c.nameCall(ctx, "REALPATH", func(id uint32) []byte {
			return appendString1(nil, sshfx.TypeRealpath, id, name)
		})
	}
	return s, pathErr("realpath", name, err)
}

// Getwd returns the server's start directory, against which relative paths resolve.
func (c *Client) Getwd(ctx context.Context) (string, error) { return c.RealPath(ctx, ".") }

// HomeDir returns the user's home directory on the server: home-directory when
// offered, then expand-path of "~", and the start directory as a last resort (OpenSSH
// starts sessions there).
func (c *Client) HomeDir(ctx context.Context) (string, error) {
	if c.hasExt(extHomeDirectory) {
		s, err := c.nameCall(ctx, extHomeDirectory, func(id uint32) []byte {
			return appendExtended(nil, id, extHomeDirectory, "")
		})
		// The empty name means "the current user", but some OpenSSH releases (9.2
		// among them) look it up with getpwnam("") and answer FAILURE. The other ways
		// still answer there, so a refusal is no reason to give up.
		var se *StatusError
		if !errors.As(err, &se) {
			return s, pathErr("homedir", "~", err)
		}
	}
	if c.hasExt(extExpandPath) {
		return c.RealPath(ctx, "~")
	}
	return c.Getwd(ctx)
}

// StatVFS returns file system information for the file system holding name
// (statvfs@openssh.com).
func (c *Client) StatVFS(ctx context.Context, name string) (*StatVFS, error) {
	if !c.hasExt(extStatVFS) {
		return nil, pathErr("statvfs", name, errUnsupportedExt(extStatVFS))
	}
	r, err := c.main.roundTrip(ctx, func(id uint32) []byte { return appendExtended(nil, id, extStatVFS, name) })
	if err != nil {
		return nil, pathErr("statvfs", name, err)
	}
	defer r.release()
	s, err := decodeStatVFS(&r)
	return s, pathErr("statvfs", name, c.main.check(err))
}

// Lchmod-like operations on the link itself: lsetstat@openssh.com changes a symlink's
// own times or mode rather than its target's, where the server offers it.

// LChtimes changes the times of name without following a final symbolic link.
func (c *Client) LChtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	if !c.hasExt(extLsetstat) {
		return pathErr("lchtimes", name, errUnsupportedExt(extLsetstat))
	}
	a, err := timesAttrs(atime, mtime)
	if err != nil {
		return pathErr("lchtimes", name, err)
	}
	return pathErr("lchtimes", name, c.statusCall(ctx, extLsetstat, func(id uint32) []byte {
		return appendLsetstat(nil, id, name, a)
	}))
}
