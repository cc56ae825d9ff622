package sftp

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Error paths against OpenSSH's sftp-server: missing files, a read-only server (-R),
// requests the server denies (-P), and extensions the client must do without. The
// tests run as root, whom permission bits do not stop, so denials come from -R and -P.

func TestIntegrationMissingErrors(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	writeLocal(t, filepath.Join(dir, "f"), []byte("x"), 0o644)
	when := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

	const m = "missing"
	pathOps := []struct {
		op   string
		path string
		call func() error
	}{
		{"stat", m, func() error { _, err := c.Stat(ctx, m); return err }},
		{"lstat", m, func() error { _, err := c.Lstat(ctx, m); return err }},
		{"open", m, func() error { _, err := c.Open(ctx, m); return err }},
		{"open", m + "/f", func() error { _, err := c.Create(ctx, m+"/f"); return err }},
		{"open", m, func() error { _, err := c.OpenFile(ctx, m, os.O_RDWR, 0); return err }},
		{"open", m, func() error { _, err := c.ReadFile(ctx, m); return err }},
		{"open", m + "/f", func() error { return c.WriteFile(ctx, m+"/f", nil, 0o644) }},
		{"readdir", m, func() error { _, err := c.ReadDir(ctx, m); return err }},
		{"mkdir", m + "/d", func() error { return c.Mkdir(ctx, m+"/d", 0o755) }},
		{"remove", m, func() error { return c.Remove(ctx, m) }},
		{"chmod", m, func() error { return c.Chmod(ctx, m, 0o644) }},
		{"chown", m, func() error { return c.Chown(ctx, m, 0, 0) }},
		{"chtimes", m, func() error { return c.Chtimes(ctx, m, when, when) }},
		{"lchtimes", m, func() error { return c.Lchtimes(ctx, m, when, when) }},
		{"truncate", m, func() error { return c.Truncate(ctx, m, 0) }},
		{"readlink", m, func() error { _, err := c.Readlink(ctx, m); return err }},
		{"realpath", m + "/x", func() error { _, err := c.RealPath(ctx, m+"/x"); return err }},
		{"statvfs", m, func() error { _, err := c.StatVFS(ctx, m); return err }},
		// A file used as a directory is "missing" too (ENOTDIR maps to NO_SUCH_FILE).
		{"stat", "f/x", func() error { _, err := c.Stat(ctx, "f/x"); return err }},
	}
	for _, tc := range pathOps {
		err := tc.call()
		require.ErrorIs(t, err, fs.ErrNotExist, "%s %s", tc.op, tc.path)
		requirePathErr(t, err, tc.op, tc.path)
		requireStatus(t, err, StatusNoSuchFile)
	}

	linkOps := []struct {
		op, oldname, newname string
		call                 func() error
	}{
		{"rename", m, "new", func() error { return c.Rename(ctx, m, "new") }},
		{"link", m, "new", func() error { return c.Link(ctx, m, "new") }},
		{"symlink", "f", m + "/l", func() error { return c.Symlink(ctx, "f", m+"/l") }},
	}
	for _, tc := range linkOps {
		err := tc.call()
		require.ErrorIs(t, err, fs.ErrNotExist, tc.op)
		requireLinkErr(t, err, tc.op, tc.oldname, tc.newname)
	}
	require.NoFileExists(t, filepath.Join(dir, "new"))
}

func TestIntegrationReadOnlyServer(t *testing.T) {
	dir := serverDir(t)
	local := func(p string) string { return filepath.Join(dir, p) }
	writeLocal(t, local("f"), []byte("content"), 0o644)
	require.NoError(t, os.Mkdir(local("d"), 0o755))
	require.NoError(t, os.Symlink("f", local("l")))
	c := newServerClient(t, dir, "-R")
	ctx := testCtx(t)
	when := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

	writes := map[string]func() error{
		"Create":          func() error { _, err := c.Create(ctx, "new"); return err },
		"Create existing": func() error { _, err := c.Create(ctx, "f"); return err },
		"OpenFile WRONLY": func() error { _, err := c.OpenFile(ctx, "f", os.O_WRONLY, 0); return err },
		"OpenFile RDWR":   func() error { _, err := c.OpenFile(ctx, "f", os.O_RDWR, 0); return err },
		"OpenFile TRUNC":  func() error { _, err := c.OpenFile(ctx, "f", os.O_WRONLY|os.O_TRUNC, 0); return err },
		"WriteFile":       func() error { return c.WriteFile(ctx, "f", []byte("new"), 0o644) },
		"Mkdir":           func() error { return c.Mkdir(ctx, "nd", 0o755) },
		"MkdirAll":        func() error { return c.MkdirAll(ctx, "nd/x", 0o755) },
		"Remove":          func() error { return c.Remove(ctx, "f") },
		"Remove dir":      func() error { return c.Remove(ctx, "d") },
		"RemoveAll":       func() error { return c.RemoveAll(ctx, "d") },
		"Rename":          func() error { return c.Rename(ctx, "f", "g") },
		"Chmod":           func() error { return c.Chmod(ctx, "f", 0o600) },
		"Chown":           func() error { return c.Chown(ctx, "f", os.Getuid(), os.Getgid()) },
		"Chtimes":         func() error { return c.Chtimes(ctx, "f", when, when) },
		"Truncate":        func() error { return c.Truncate(ctx, "f", 0) },
		"Symlink":         func() error { return c.Symlink(ctx, "f", "l2") },
	}
	for name, call := range writes {
		err := call()
		require.ErrorIs(t, err, fs.ErrPermission, name)
		requireStatus(t, err, StatusPermissionDenied)
	}
	// A read-only OpenSSH server does not advertise the extensions that write.
	require.NotContains(t, c.Extensions(), extPosixRename)
	require.ErrorIs(t, c.Link(ctx, "f", "h"), errors.ErrUnsupported)
	require.ErrorIs(t, c.Lchtimes(ctx, "l", when, when), errors.ErrUnsupported)

	// Nothing changed, and reading still works.
	require.Equal(t, []byte("content"), readLocal(t, local("f")))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 3)
	fi, err := os.Lstat(local("f"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o644), fi.Mode())

	b, err := c.ReadFile(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, []byte("content"), b)
	f, err := c.Open(ctx, "l")
	require.NoError(t, err)
	b, err = io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, []byte("content"), b)
	_, err = f.Stat()
	require.NoError(t, err)
	require.NoError(t, f.Close())
	des, err := c.ReadDir(ctx, ".")
	require.NoError(t, err)
	require.Len(t, des, 3)
	_, err = c.Stat(ctx, "d")
	require.NoError(t, err)
	s, err := c.Readlink(ctx, "l")
	require.NoError(t, err)
	require.Equal(t, "f", s)
	_, err = c.StatVFS(ctx, ".")
	require.NoError(t, err)
	require.NoError(t, c.MkdirAll(ctx, "d", 0o755), "an existing directory needs no write")
}

func TestIntegrationDeniedOpen(t *testing.T) {
	dir := serverDir(t)
	writeLocal(t, filepath.Join(dir, "f"), []byte("x"), 0o644)
	c := newServerClient(t, dir, "-P", "open")
	ctx := testCtx(t)

	_, err := c.Open(ctx, "f")
	require.ErrorIs(t, err, fs.ErrPermission)
	requirePathErr(t, err, "open", "f")
	_, err = c.ReadFile(ctx, "f")
	require.ErrorIs(t, err, fs.ErrPermission)
	_, err = c.Create(ctx, "new")
	require.ErrorIs(t, err, fs.ErrPermission)
	require.NoFileExists(t, filepath.Join(dir, "new"))
	// Directories are opened with OPENDIR, which is still allowed.
	des, err := c.ReadDir(ctx, ".")
	require.NoError(t, err)
	require.Len(t, des, 1)
}

func TestIntegrationDeniedRemove(t *testing.T) {
	dir := serverDir(t)
	writeLocal(t, filepath.Join(dir, "f"), []byte("x"), 0o644)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	c := newServerClient(t, dir, "-P", "remove")
	ctx := testCtx(t)

	err := c.Remove(ctx, "f")
	require.ErrorIs(t, err, fs.ErrPermission)
	requirePathErr(t, err, "remove", "f")
	require.FileExists(t, filepath.Join(dir, "f"))
	// A directory goes through RMDIR, which is not denied.
	require.NoError(t, c.Remove(ctx, "d"))
	require.NoDirExists(t, filepath.Join(dir, "d"))
}

func TestIntegrationDeniedExtensions(t *testing.T) {
	dir := serverDir(t)
	local := func(p string) string { return filepath.Join(dir, p) }
	writeLocal(t, local("a"), []byte("A"), 0o644)
	writeLocal(t, local("b"), []byte("B"), 0o644)
	require.NoError(t, os.Symlink("a", local("l")))
	c := newServerClient(t, dir, "-P", "posix-rename,hardlink,statvfs,fsync,lsetstat,expand-path,home-directory,limits")
	ctx := testCtx(t)
	when := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

	// OpenSSH does not advertise the extensions it denies, so the client must do
	// without them.
	exts := c.Extensions()
	for _, name := range []string{extPosixRename, extHardlink, extStatVFS, extFsync, extLsetstat, extExpandPath, extHomeDirectory, extLimits} {
		require.NotContains(t, exts, name)
	}

	// Rename falls back on plain RENAME: fine for a new name, refused onto an
	// existing one.
	require.NoError(t, c.Rename(ctx, "a", "a2"))
	require.Equal(t, []byte("A"), readLocal(t, local("a2")))
	err := c.Rename(ctx, "a2", "b")
	requireLinkErr(t, err, "rename", "a2", "b")
	requireStatus(t, err, StatusFailure)
	require.Equal(t, []byte("A"), readLocal(t, local("a2")))
	require.Equal(t, []byte("B"), readLocal(t, local("b")))
	require.NoError(t, c.Rename(ctx, "a2", "a"))

	err = c.Link(ctx, "a", "h")
	require.ErrorIs(t, err, errors.ErrUnsupported)
	requireLinkErr(t, err, "link", "a", "h")
	require.NoFileExists(t, local("h"))

	_, err = c.StatVFS(ctx, ".")
	require.ErrorIs(t, err, errors.ErrUnsupported)
	requirePathErr(t, err, "statvfs", ".")

	f, err := c.OpenFile(ctx, "a", os.O_RDWR, 0)
	require.NoError(t, err)
	err = f.Sync()
	require.ErrorIs(t, err, errors.ErrUnsupported)
	requirePathErr(t, err, "sync", "a")
	require.NoError(t, f.Close())

	err = c.Lchtimes(ctx, "l", when, when)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.NotEqual(t, when.Unix(), localStat(t, local("l")).Mtim.Sec)

	// Without expand-path "~" is an ordinary name; without either home extension
	// HomeDir is the start directory.
	p, err := c.RealPath(ctx, "~")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "~"), p)
	h, err := c.HomeDir(ctx)
	require.NoError(t, err)
	require.Equal(t, dir, h)

	// Without limits@openssh.com the sizes are the draft's safe defaults.
	lim := c.Limits()
	require.Equal(t, defaultDataSize, lim.MaxRead)
	require.Equal(t, defaultDataSize, lim.MaxWrite)
	require.Zero(t, lim.MaxOpenHandles)
	data := randBytes(3*defaultDataSize+5, 10)
	require.NoError(t, c.WriteFile(ctx, "big", data, 0o644))
	got, err := c.ReadFile(ctx, "big")
	require.NoError(t, err)
	require.Equal(t, data, got)

	// A server that advertises an extension and then refuses it gets its refusal
	// reported as is: the client does not quietly switch to RENAME, whose semantics
	// differ. OpenSSH answers a denied extension PERMISSION_DENIED.
	c.exts[extPosixRename] = "1"
	err = c.Rename(ctx, "a", "b")
	require.ErrorIs(t, err, fs.ErrPermission)
	requireLinkErr(t, err, "rename", "a", "b")
	require.Equal(t, []byte("A"), readLocal(t, local("a")))
	c.exts[extHardlink] = "1"
	require.ErrorIs(t, c.Link(ctx, "a", "h"), fs.ErrPermission)
	c.exts[extHomeDirectory] = "1"
	h, err = c.HomeDir(ctx)
	require.NoError(t, err, "a refused home-directory is not the end")
	require.Equal(t, dir, h)
}

func TestIntegrationDeniedStatDuringTransfer(t *testing.T) {
	// Downloads must not depend on FSTAT, which they send only as a size hint.
	dir := serverDir(t)
	data := randBytes(2*maxDataSize+99, 11)
	writeLocal(t, filepath.Join(dir, "f"), data, 0o644)
	c := newServerClient(t, dir, "-P", "fstat")
	ctx := testCtx(t)

	got, err := c.ReadFile(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, data, got)
	f, err := c.Open(ctx, "f")
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, data, b)
	_, err = f.Seek(0, io.SeekEnd)
	require.ErrorIs(t, err, fs.ErrPermission, "SeekEnd needs FSTAT")
	_, err = f.Stat()
	require.ErrorIs(t, err, fs.ErrPermission)
}

func TestIntegrationDeniedReadWrite(t *testing.T) {
	dir := serverDir(t)
	writeLocal(t, filepath.Join(dir, "f"), []byte("content"), 0o644)

	c := newServerClient(t, dir, "-P", "read")
	ctx := testCtx(t)
	f, err := c.Open(ctx, "f")
	require.NoError(t, err)
	_, err = f.Read(make([]byte, 4))
	require.ErrorIs(t, err, fs.ErrPermission, "a refused READ is an error, not EOF")
	requirePathErr(t, err, "read", "f")
	_, err = f.ReadAt(make([]byte, 4), 0)
	require.ErrorIs(t, err, fs.ErrPermission)
	n, err := f.WriteTo(io.Discard)
	require.ErrorIs(t, err, fs.ErrPermission)
	require.Zero(t, n)
	require.NoError(t, f.Close())
	_, err = c.ReadFile(ctx, "f")
	require.ErrorIs(t, err, fs.ErrPermission)

	c = newServerClient(t, dir, "-P", "write")
	f, err = c.OpenFile(ctx, "f", os.O_WRONLY, 0)
	require.NoError(t, err)
	n2, err := f.Write([]byte("XY"))
	require.ErrorIs(t, err, fs.ErrPermission)
	require.Zero(t, n2)
	n, err = f.ReadFrom(onlyReader{io.LimitReader(zeroReader{}, 3*maxDataSize)})
	require.ErrorIs(t, err, fs.ErrPermission)
	require.Zero(t, n, "nothing was acknowledged")
	require.NoError(t, f.Close())
	require.Equal(t, []byte("content"), readLocal(t, filepath.Join(dir, "f")))
}

func TestIntegrationDeniedFsetstat(t *testing.T) {
	// O_TRUNC without O_CREATE truncates with FSETSTAT after the open; when that is
	// refused, the open fails and the file is untouched.
	dir := serverDir(t)
	writeLocal(t, filepath.Join(dir, "f"), []byte("content"), 0o644)
	c := newServerClient(t, dir, "-P", "fsetstat")
	ctx := testCtx(t)

	_, err := c.OpenFile(ctx, "f", os.O_WRONLY|os.O_TRUNC, 0)
	require.ErrorIs(t, err, fs.ErrPermission)
	requirePathErr(t, err, "open", "f")
	require.Equal(t, []byte("content"), readLocal(t, filepath.Join(dir, "f")))
	// SETSTAT by name is a different request and still allowed.
	require.NoError(t, c.Truncate(ctx, "f", 3))
	require.Equal(t, []byte("con"), readLocal(t, filepath.Join(dir, "f")))
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestIntegrationUnsupportedExtensions(t *testing.T) {
	dir := serverDir(t)
	local := func(p string) string { return filepath.Join(dir, p) }
	writeLocal(t, local("a"), []byte("A"), 0o644)
	require.NoError(t, os.Symlink("a", local("l")))
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	when := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

	// An extension with a version this client does not know counts as absent.
	c.exts[extHardlink] = "2"
	err := c.Link(ctx, "a", "h")
	require.ErrorIs(t, err, errors.ErrUnsupported)
	requireLinkErr(t, err, "link", "a", "h")
	delete(c.exts, extHardlink)
	require.ErrorIs(t, c.Link(ctx, "a", "h"), errors.ErrUnsupported)
	require.NoFileExists(t, local("h"))

	delete(c.exts, extStatVFS)
	_, err = c.StatVFS(ctx, ".")
	require.ErrorIs(t, err, errors.ErrUnsupported)
	requirePathErr(t, err, "statvfs", ".")

	delete(c.exts, extLsetstat)
	err = c.Lchtimes(ctx, "l", when, when)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	requirePathErr(t, err, "lchtimes", "l")

	// A request the server does not know comes back OP_UNSUPPORTED.
	err = c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendExtended(dst, id, "no-such-extension@example.com", "x")
	}, status("probe"))
	require.ErrorIs(t, err, errors.ErrUnsupported)
	requireStatus(t, err, StatusOpUnsupported)
	_, err = c.Stat(ctx, "a")
	require.NoError(t, err, "the channel survives")
}
