package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
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

// attrsCall is a round trip on the main channel answered by ATTRS (STAT, LSTAT,
// FSTAT).
func (c *Client) attrsCall(ctx context.Context, op string, enc func(dst []byte, id uint32) []byte) (a sshfx.Attrs, err error) {
	err = c.main.do(ctx, enc, func(r response) (err error) {
		a, err = decodeAttrs(op, &r)
		return err
	})
	return a, err
}

// nameCall is a round trip on the main channel answered by a NAME with one entry
// (REALPATH, READLINK, expand-path, home-directory).
func (c *Client) nameCall(ctx context.Context, op string, enc func(dst []byte, id uint32) []byte) (s string, err error) {
	err = c.main.do(ctx, enc, func(r response) (err error) {
		s, err = decodeOneName(op, &r)
		return err
	})
	return s, err
}

// openHandle sends OPEN or OPENDIR on cn and returns the handle.
func (c *Client) openHandle(ctx context.Context, cn *conn, op string, enc func(dst []byte, id uint32) []byte) (h string, err error) {
	err = cn.do(ctx, enc, func(r response) (err error) {
		h, err = decodeHandle(op, &r)
		return err
	})
	return h, err
}

// Mkdir creates a directory with perm (before the server's umask). When name exists
// already the error matches fs.ErrExist: SFTP v3 servers answer only FAILURE there,
// so after a FAILURE Mkdir asks with Lstat, and reports what it learned together with
// the server's *StatusError.
func (c *Client) Mkdir(ctx context.Context, name string, perm fs.FileMode) error {
	a := sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: toUnixPerm(perm)}
	err := c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendStringAttrs(dst, sshfx.TypeMkdir, id, name, &a)
	}, status("MKDIR"))
	return pathErr("mkdir", name, c.existError(ctx, name, err))
}

// MkdirAll creates a directory and any missing parents, like os.MkdirAll.
func (c *Client) MkdirAll(ctx context.Context, name string, perm fs.FileMode) error {
	var fi fs.FileInfo
	var err error
	c.withPhantomProbe(ctx, name, func() { fi, err = c.Stat(ctx, name) }) // removedir.go
	if err == nil {
		if fi.IsDir() {
			if c.phantomDirs(ctx, name) {
				return c.mkdirPhantom(ctx, name, perm) // removedir.go
			}
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

// Remove removes a file or an empty directory, like os.Remove. Removing a directory
// that is not empty fails with an error matching syscall.ENOTEMPTY, and nothing is
// removed: RMDIR goes out only after the directory's listing showed no entry, since
// some servers' RMDIR removes everything below (removedir.go). A directory that
// cannot be listed is not removed.
func (c *Client) Remove(ctx context.Context, name string) error {
	err := c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendString1(dst, sshfx.TypeRemove, id, name)
	}, status("REMOVE"))
	if err == nil || errors.Is(err, fs.ErrNotExist) || c.main.failed() != nil {
		return pathErr("remove", name, err)
	}
	// REMOVE refuses directories; which error to report depends on what name is, so ask
	// rather than guess from codes that servers assign differently.
	return pathErr("remove", name, c.removeDir(ctx, name, err)) // removedir.go
}

// rmdir removes the directory name. A FAILURE on a directory that still has entries
// comes back matching syscall.ENOTEMPTY, after a look at its first page of entries.
func (c *Client) rmdir(ctx context.Context, name string) error {
	err := c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendString1(dst, sshfx.TypeRmdir, id, name)
	}, status("RMDIR"))
	if isBareFailure(err) && c.hasEntries(ctx, name) {
		err = fmt.Errorf("%w (%w)", syscall.ENOTEMPTY, err)
	}
	return err
}

// hasEntries reports whether the directory name lists any entry besides "." and "..".
func (c *Client) hasEntries(ctx context.Context, name string) bool {
	d, err := c.openDir(ctx, name)
	if err != nil {
		return false
	}
	defer d.close(ctx)
	page, err := d.ReadDirContext(ctx, 1)
	return err == nil && len(page) > 0
}

// RemoveAll removes name and everything it contains, like os.RemoveAll: a missing name
// is not an error. It walks the tree as WalkDir does, without following links, and
// within WalkDir's bounds, keeping no attributes but the entries' types: a directory
// of any size is removed (one too large to hold whole is read a page at a time), a
// tree deeper than MaxWalkDepth fails with an error matching ErrWalkTooDeep, and one
// whose paths and listings on the current path would pass the memory limit
// (WithMemoryLimit) with one matching ErrListingTooLarge, after removing what it
// reached.
func (c *Client) RemoveAll(ctx context.Context, name string) error {
	if name == "" || name == "." || name == "/" {
		return pathErr("removeall", name, syscall.EINVAL)
	}
	// Files go as they are met; a directory once its entries are gone (post).
	remove := func(p string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // removed meanwhile, or never there
		case err != nil:
			return err
		case d.IsDir():
			return nil
		}
		if err := c.Remove(ctx, p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	rmdir := func(p string) error {
		rm := c.rmdir
		if p == name {
			rm = c.rmdirAlone // the entries below are the call's to remove, its neighbours are not
		}
		if err := rm(ctx, p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return pathErr("removeall", p, err)
		}
		return nil
	}
	return c.walkDir(ctx, name, remove, rmdir, []WalkOption{walkDropExtended})
}

// Rename renames oldname to newname, replacing newname where the server allows it
// (posix-rename@openssh.com), like os.Rename. Without that extension plain RENAME is
// used, which on most servers fails when newname exists.
//
// pkg/sftp's Rename always sent plain RENAME, so on OpenSSH it refused to replace an
// existing newname; its PosixRename is this Rename. Code that relied on the refusal
// not to overwrite can Link oldname to newname (hardlink@openssh.com), which fails
// when newname exists, and then Remove oldname.
func (c *Client) Rename(ctx context.Context, oldname, newname string) error {
	var err error
	if c.hasExt(extPosixRename) {
		err = c.main.do(ctx, func(dst []byte, id uint32) []byte {
			return appendExtended(dst, id, extPosixRename, oldname, newname)
		}, status(extPosixRename))
	} else {
		err = c.main.do(ctx, func(dst []byte, id uint32) []byte {
			return appendString2(dst, sshfx.TypeRename, id, oldname, newname)
		}, status("RENAME"))
	}
	return linkErr("rename", oldname, newname, err)
}

// setstat sends SETSTAT for name with a.
func (c *Client) setstat(ctx context.Context, op, name string, a *sshfx.Attrs) error {
	return pathErr(op, name, c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendStringAttrs(dst, sshfx.TypeSetstat, id, name, a)
	}, status("SETSTAT")))
}

// Chmod changes the mode of the named file (permissions, setuid, setgid, sticky).
func (c *Client) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	return c.setstat(ctx, "chmod", name, &sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: toUnixPerm(mode)})
}

// Chown changes the numeric uid and gid of the named file. Unlike os.Chown, a uid or
// gid of -1 does not mean "leave it unchanged": SFTP v3 has no such value, so -1 is
// refused with an error matching syscall.EINVAL. Stat the file to pass the id to keep.
func (c *Client) Chown(ctx context.Context, name string, uid, gid int) error {
	a, err := ownerAttrs(uid, gid)
	if err != nil {
		return pathErr("chown", name, err)
	}
	return c.setstat(ctx, "chown", name, a)
}

// Chtimes changes the access and modification times (whole seconds, 1970 to 2106).
func (c *Client) Chtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	a, err := timesAttrs(atime, mtime)
	if err != nil {
		return pathErr("chtimes", name, err)
	}
	return c.setstat(ctx, "chtimes", name, a)
}

// ownerAttrs is the ATTRS of a chown: ids must fit the protocol's 32 bits. The bound is
// compared as int64, so it compiles where int has 32 bits too.
func ownerAttrs(uid, gid int) (*sshfx.Attrs, error) {
	if uid < 0 || gid < 0 || int64(uid) > math.MaxUint32 || int64(gid) > math.MaxUint32 {
		return nil, syscall.EINVAL
	}
	return &sshfx.Attrs{Flags: sshfx.AttrUIDGID, UID: uint32(uid), GID: uint32(gid)}, nil
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
	s, err := c.nameCall(ctx, "READLINK", func(dst []byte, id uint32) []byte {
		return appendString1(dst, sshfx.TypeReadlink, id, name)
	})
	return s, pathErr("readlink", name, err)
}

// Symlink creates newname as a symbolic link to oldname, like os.Symlink. OpenSSH's
// server takes the two paths in the reverse of the draft's order, and nearly every
// server followed it; a server that uses the draft's order says so with
// symlink-order@rjk.greenend.org.uk, except asyncssh's: over SSH the client knows it
// by its version string and uses the draft's order; over a pipe it cannot tell.
func (c *Client) Symlink(ctx context.Context, oldname, newname string) error {
	first, second := oldname, newname
	if c.exts[extSymlinkOrder] == "linkpath-targetpath" || c.draftSymlink {
		first, second = newname, oldname
	}
	return linkErr("symlink", oldname, newname, c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendString2(dst, sshfx.TypeSymlink, id, first, second)
	}, status("SYMLINK")))
}

// asyncsshDraftSymlink reports whether an SSH server, known by the version strings of
// the connection, reads SYMLINK's paths in the draft's order. asyncssh's SFTP server
// does, unless the client's SSH version names OpenSSH or paramiko: then it takes them
// in OpenSSH's order, assuming the client is one of those. It advertises neither, so
// over a pipe (no SSH versions) the client cannot tell.
func asyncsshDraftSymlink(serverVersion, clientVersion []byte) bool {
	if !bytes.Contains(serverVersion, []byte("AsyncSSH")) {
		return false
	}
	return !bytes.Contains(clientVersion, []byte("OpenSSH")) && !bytes.Contains(clientVersion, []byte("paramiko"))
}

// Link creates newname as a hard link to oldname (hardlink@openssh.com).
func (c *Client) Link(ctx context.Context, oldname, newname string) error {
	if !c.hasExt(extHardlink) {
		return linkErr("link", oldname, newname, errUnsupportedExt(extHardlink))
	}
	return linkErr("link", oldname, newname, c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendExtended(dst, id, extHardlink, oldname, newname)
	}, status(extHardlink)))
}

// RealPath returns the canonical absolute form of name. A leading "~" or "~user" is
// expanded when the server offers expand-path@openssh.com: a name a listing gave,
// which may start with "~", is resolved as itself when prefixed with "./".
func (c *Client) RealPath(ctx context.Context, name string) (string, error) {
	var s string
	var err error
	if strings.HasPrefix(name, "~") && c.hasExt(extExpandPath) {
		s, err = c.nameCall(ctx, extExpandPath, func(dst []byte, id uint32) []byte {
			return appendExtended(dst, id, extExpandPath, name)
		})
	} else {
		s, err = c.nameCall(ctx, "REALPATH", func(dst []byte, id uint32) []byte {
			return appendString1(dst, sshfx.TypeRealpath, id, name)
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
		s, err := c.nameCall(ctx, extHomeDirectory, func(dst []byte, id uint32) []byte {
			return appendExtended(dst, id, extHomeDirectory, "")
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
	var s *StatVFS
	err := c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendExtended(dst, id, extStatVFS, name)
	}, func(r response) (err error) {
		s, err = decodeStatVFS(&r)
		return err
	})
	if err != nil {
		return nil, pathErr("statvfs", name, err)
	}
	return s, nil
}

// Lchmod-like operations on the link itself: lsetstat@openssh.com changes a symlink's
// own times or mode rather than its target's, where the server offers it.

// Lchtimes changes the times of name without following a final symbolic link.
func (c *Client) Lchtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	if !c.hasExt(extLsetstat) {
		return pathErr("lchtimes", name, errUnsupportedExt(extLsetstat))
	}
	a, err := timesAttrs(atime, mtime)
	if err != nil {
		return pathErr("lchtimes", name, err)
	}
	return pathErr("lchtimes", name, c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendLsetstat(dst, id, name, a)
	}, status(extLsetstat)))
}
