package sftp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Path operations of Client against OpenSSH's sftp-server, each checked on the local
// file system the server serves. Relative names resolve against the server's start
// directory (-d), which is the test's directory.

func requireStatus(t testing.TB, err error, code StatusCode) {
	t.Helper()
	var se *StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, code, se.Code, "status %v", se)
}

func requirePathErr(t testing.TB, err error, op, path string) {
	t.Helper()
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, op, pe.Op)
	require.Equal(t, path, pe.Path)
}

func requireLinkErr(t testing.TB, err error, op, oldname, newname string) {
	t.Helper()
	var le *os.LinkError
	require.ErrorAs(t, err, &le)
	require.Equal(t, op, le.Op)
	require.Equal(t, oldname, le.Old)
	require.Equal(t, newname, le.New)
}

func TestIntegrationStatLstat(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	mtime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	atime := time.Date(2002, 3, 4, 5, 6, 7, 0, time.UTC)
	f := filepath.Join(dir, "f")
	writeLocal(t, f, []byte("hello"), 0o640)
	require.NoError(t, os.Chtimes(f, atime, mtime))
	require.NoError(t, os.Symlink("f", filepath.Join(dir, "l")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o750))
	require.NoError(t, os.Chmod(filepath.Join(dir, "d"), 0o750))

	fi, err := c.Stat(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "f", fi.Name())
	require.Equal(t, int64(5), fi.Size())
	require.Equal(t, fs.FileMode(0o640), fi.Mode())
	require.True(t, fi.Mode().IsRegular())
	require.False(t, fi.IsDir())
	require.True(t, mtime.Equal(fi.ModTime()), "ModTime %v, want %v", fi.ModTime(), mtime)

	st := localStat(t, f)
	fa, ok := fi.Sys().(*FileAttrs)
	require.True(t, ok, "Sys() is %T, want *FileAttrs", fi.Sys())
	require.Equal(t, AttrSize|AttrUIDGID|AttrPermissions|AttrACModTime, fa.Flags, "OpenSSH sends size, uid/gid, permissions and times")
	require.Equal(t, st.Uid, fa.UID)
	require.Equal(t, st.Gid, fa.GID)
	require.Equal(t, uint64(5), fa.Size)
	require.Equal(t, uint32(0o100640), fa.Permissions)
	require.True(t, atime.Equal(fa.ATime), "ATime %v, want %v", fa.ATime, atime)
	require.True(t, mtime.Equal(fa.MTime))

	// Stat follows the link; Lstat describes the link itself.
	fi, err = c.Stat(ctx, "l")
	require.NoError(t, err)
	require.Equal(t, "l", fi.Name())
	require.True(t, fi.Mode().IsRegular())
	require.Equal(t, int64(5), fi.Size())
	fi, err = c.Lstat(ctx, "l")
	require.NoError(t, err)
	require.Equal(t, "l", fi.Name())
	require.Equal(t, fs.ModeSymlink, fi.Mode().Type())
	require.Equal(t, int64(len("f")), fi.Size())

	fi, err = c.Stat(ctx, filepath.Join(dir, "d"))
	require.NoError(t, err)
	require.Equal(t, "d", fi.Name())
	require.True(t, fi.IsDir())
	require.Equal(t, fs.ModeDir|0o750, fi.Mode())

	// A FIFO keeps its type: neither a regular file nor a directory.
	mkfifo(t, filepath.Join(dir, "p"), 0o600)
	fi, err = c.Lstat(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, fs.ModeNamedPipe, fi.Mode().Type())

	// The start directory itself keeps a usable name.
	fi, err = c.Stat(ctx, ".")
	require.NoError(t, err)
	require.True(t, fi.IsDir())
	require.Equal(t, ".", fi.Name())
}

func TestIntegrationReadDir(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	// OpenSSH answers READDIR with at most 100 names, so 250 files take several batches.
	for i := range 250 {
		writeLocal(t, filepath.Join(dir, fmt.Sprintf("f%03d", i)), []byte(fmt.Sprint(i)), 0o644)
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.Symlink("sub", filepath.Join(dir, "link")))
	mkfifo(t, filepath.Join(dir, "pipe"), 0o600)

	want, err := os.ReadDir(dir)
	require.NoError(t, err)
	got, err := c.ReadDir(ctx, ".")
	require.NoError(t, err)
	require.Len(t, got, len(want))
	require.True(t, slices.IsSortedFunc(got, func(a, b fs.DirEntry) int {
		return cmpString(a.Name(), b.Name())
	}))
	for i, e := range got {
		require.Equal(t, want[i].Name(), e.Name())
		require.Equal(t, want[i].Type(), e.Type(), "type of %s", e.Name())
		require.Equal(t, want[i].IsDir(), e.IsDir())
		info, err := e.Info()
		require.NoError(t, err)
		wantInfo, err := want[i].Info()
		require.NoError(t, err)
		require.Equal(t, wantInfo.Size(), info.Size(), "size of %s", e.Name())
		require.Equal(t, wantInfo.Mode(), info.Mode(), "mode of %s", e.Name())
	}

	// An absolute path, and an empty directory: neither "." nor ".." is returned.
	got, err = c.ReadDir(ctx, filepath.Join(dir, "sub"))
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = c.ReadDir(ctx, "f000")
	require.Error(t, err)
	requirePathErr(t, err, "readdir", "f000")
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestIntegrationMkdir(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	require.NoError(t, c.Mkdir(ctx, "d", 0o750))
	fi, err := os.Lstat(filepath.Join(dir, "d"))
	require.NoError(t, err)
	require.True(t, fi.IsDir())
	require.Equal(t, fs.FileMode(0o750)&^umask(), fi.Mode().Perm())

	err = c.Mkdir(ctx, "d", 0o755)
	requirePathErr(t, err, "mkdir", "d")
	requireStatus(t, err, StatusFailure) // EEXIST has no code of its own in v3

	err = c.Mkdir(ctx, "missing/d", 0o755)
	require.ErrorIs(t, err, fs.ErrNotExist)
	requirePathErr(t, err, "mkdir", "missing/d")
}

func TestIntegrationMkdirAll(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	require.NoError(t, c.MkdirAll(ctx, "a/b/c", 0o755))
	for _, p := range []string{"a", "a/b", "a/b/c"} {
		fi, err := os.Lstat(filepath.Join(dir, p))
		require.NoError(t, err)
		require.True(t, fi.IsDir(), p)
	}
	// Existing directories are fine, with or without a trailing slash, absolute or not.
	require.NoError(t, c.MkdirAll(ctx, "a/b/c", 0o755))
	require.NoError(t, c.MkdirAll(ctx, "a/b/", 0o755))
	require.NoError(t, c.MkdirAll(ctx, filepath.Join(dir, "a/x/y"), 0o755))
	fi, err := os.Lstat(filepath.Join(dir, "a/x/y"))
	require.NoError(t, err)
	require.True(t, fi.IsDir())

	// A file in the way is an error, both as the target and as a parent.
	writeLocal(t, filepath.Join(dir, "file"), []byte("x"), 0o644)
	err = c.MkdirAll(ctx, "file", 0o755)
	require.Error(t, err)
	require.ErrorIs(t, err, syscall.ENOTDIR)
	err = c.MkdirAll(ctx, "file/sub", 0o755)
	require.Error(t, err)
	fi, err = os.Lstat(filepath.Join(dir, "file"))
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular())
}

func TestIntegrationRemove(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := func(p string) string { return filepath.Join(dir, p) }

	writeLocal(t, local("f"), []byte("x"), 0o644)
	require.NoError(t, c.Remove(ctx, "f"))
	_, err := os.Lstat(local("f"))
	require.ErrorIs(t, err, fs.ErrNotExist)

	require.NoError(t, os.Mkdir(local("empty"), 0o755))
	require.NoError(t, c.Remove(ctx, "empty"))
	_, err = os.Lstat(local("empty"))
	require.ErrorIs(t, err, fs.ErrNotExist)

	require.NoError(t, os.Mkdir(local("full"), 0o755))
	writeLocal(t, local("full/f"), []byte("x"), 0o644)
	err = c.Remove(ctx, "full")
	requirePathErr(t, err, "remove", "full")
	requireStatus(t, err, StatusFailure)
	require.FileExists(t, local("full/f"))

	// A symlink to a directory is removed as a link; its target stays.
	require.NoError(t, os.Symlink("full", local("dirlink")))
	require.NoError(t, c.Remove(ctx, "dirlink"))
	_, err = os.Lstat(local("dirlink"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.FileExists(t, local("full/f"))

	err = c.Remove(ctx, "missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	requirePathErr(t, err, "remove", "missing")
}

func TestIntegrationRemoveAll(t *testing.T) {
	dir := serverDir(t)
	outside := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := func(p string) string { return filepath.Join(dir, p) }

	require.NoError(t, os.MkdirAll(local("tree/a/b/c"), 0o755))
	require.NoError(t, os.MkdirAll(local("tree/empty"), 0o755))
	for i := range 120 { // more than one READDIR batch
		writeLocal(t, local(fmt.Sprintf("tree/a/f%03d", i)), []byte("x"), 0o644)
	}
	writeLocal(t, local("tree/a/b/c/deep"), []byte("x"), 0o600)
	// A link to a directory elsewhere must be removed, not followed.
	writeLocal(t, filepath.Join(outside, "keep"), []byte("keep"), 0o644)
	require.NoError(t, os.Symlink(outside, local("tree/a/out")))

	require.NoError(t, c.RemoveAll(ctx, "tree"))
	_, err := os.Lstat(local("tree"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Equal(t, []byte("keep"), readLocal(t, filepath.Join(outside, "keep")))

	require.NoError(t, c.RemoveAll(ctx, "missing"))
	require.NoError(t, c.RemoveAll(ctx, "missing/deeper"))

	writeLocal(t, local("file"), []byte("x"), 0o644)
	require.NoError(t, c.RemoveAll(ctx, "file"))
	_, err = os.Lstat(local("file"))
	require.ErrorIs(t, err, fs.ErrNotExist)

	require.Error(t, c.RemoveAll(ctx, "/"))
	require.Error(t, c.RemoveAll(ctx, "."))
	require.DirExists(t, dir)
}

func TestIntegrationRename(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := func(p string) string { return filepath.Join(dir, p) }
	require.True(t, c.hasExt(extPosixRename), "OpenSSH offers posix-rename")

	writeLocal(t, local("a"), []byte("A"), 0o644)
	require.NoError(t, c.Rename(ctx, "a", "b"))
	require.NoFileExists(t, local("a"))
	require.Equal(t, []byte("A"), readLocal(t, local("b")))

	// posix-rename replaces an existing target, as rename(2) does.
	writeLocal(t, local("c"), []byte("C"), 0o644)
	require.NoError(t, c.Rename(ctx, "b", "c"))
	require.NoFileExists(t, local("b"))
	require.Equal(t, []byte("A"), readLocal(t, local("c")))

	require.NoError(t, os.MkdirAll(local("d1/sub"), 0o755))
	require.NoError(t, c.Rename(ctx, "d1", filepath.Join(dir, "d2")))
	require.DirExists(t, local("d2/sub"))

	err := c.Rename(ctx, "missing", "x")
	require.ErrorIs(t, err, fs.ErrNotExist)
	requireLinkErr(t, err, "rename", "missing", "x")
}

func TestIntegrationRenameWithoutPosixRename(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := func(p string) string { return filepath.Join(dir, p) }
	delete(c.exts, extPosixRename)

	writeLocal(t, local("a"), []byte("A"), 0o644)
	require.NoError(t, c.Rename(ctx, "a", "b"))
	require.Equal(t, []byte("A"), readLocal(t, local("b")))

	// Plain RENAME never replaces: OpenSSH links then unlinks, and the link fails.
	writeLocal(t, local("c"), []byte("C"), 0o644)
	err := c.Rename(ctx, "b", "c")
	requireLinkErr(t, err, "rename", "b", "c")
	requireStatus(t, err, StatusFailure)
	require.Equal(t, []byte("A"), readLocal(t, local("b")))
	require.Equal(t, []byte("C"), readLocal(t, local("c")))
}

func TestIntegrationChmodChownChtimes(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	f := filepath.Join(dir, "f")
	writeLocal(t, f, []byte("x"), 0o644)

	require.NoError(t, c.Chmod(ctx, "f", 0o600))
	fi, err := os.Lstat(f)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), fi.Mode())
	require.NoError(t, c.Chmod(ctx, "f", fs.ModeSetuid|fs.ModeSticky|0o751))
	fi, err = os.Lstat(f)
	require.NoError(t, err)
	require.Equal(t, fs.ModeSetuid|fs.ModeSticky|0o751, fi.Mode())

	require.NoError(t, c.Chown(ctx, "f", os.Getuid(), os.Getgid()))
	st := localStat(t, f)
	require.Equal(t, uint32(os.Getuid()), st.Uid)
	require.Equal(t, uint32(os.Getgid()), st.Gid)
	if os.Getuid() == 0 { // only root can give a file away, which shows the ids really travel
		require.NoError(t, c.Chown(ctx, "f", 65534, 65533))
		st = localStat(t, f)
		require.Equal(t, uint32(65534), st.Uid)
		require.Equal(t, uint32(65533), st.Gid)
	}
	require.ErrorIs(t, c.Chown(ctx, "f", -1, 0), syscall.EINVAL)

	atime := time.Date(1999, 12, 31, 23, 59, 58, 0, time.UTC)
	mtime := time.Date(2038, 1, 19, 3, 14, 9, 0, time.UTC) // past int32 seconds
	require.NoError(t, c.Chtimes(ctx, "f", atime, mtime))
	st = localStat(t, f)
	require.Equal(t, atime.Unix(), st.Atim.Sec)
	require.Equal(t, mtime.Unix(), st.Mtim.Sec)

	// Times SFTP v3 cannot carry are refused before anything is sent.
	before := time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)
	err = c.Chtimes(ctx, "f", before, mtime)
	requirePathErr(t, err, "chtimes", "f")
	var se *StatusError
	require.False(t, errors.As(err, &se), "refused by the server rather than the client: %v", err)
	err = c.Chtimes(ctx, "f", atime, time.Date(2107, 1, 1, 0, 0, 0, 0, time.UTC))
	require.Error(t, err)
	require.False(t, errors.As(err, &se))
	st = localStat(t, f)
	require.Equal(t, atime.Unix(), st.Atim.Sec)
	require.Equal(t, mtime.Unix(), st.Mtim.Sec)
}

func TestIntegrationTruncate(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	f := filepath.Join(dir, "f")
	writeLocal(t, f, []byte("hello world"), 0o644)

	require.NoError(t, c.Truncate(ctx, "f", 5))
	require.Equal(t, []byte("hello"), readLocal(t, f))
	require.NoError(t, c.Truncate(ctx, "f", 8))
	require.Equal(t, []byte("hello\x00\x00\x00"), readLocal(t, f))
	require.NoError(t, c.Truncate(ctx, "f", 0))
	require.Empty(t, readLocal(t, f))

	require.ErrorIs(t, c.Truncate(ctx, "f", -1), syscall.EINVAL)
	err := c.Truncate(ctx, "missing", 0)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoFileExists(t, filepath.Join(dir, "missing"))
}

func TestIntegrationSymlinkReadlink(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := func(p string) string { return filepath.Join(dir, p) }
	writeLocal(t, local("target"), []byte("T"), 0o644)

	// Like os.Symlink(oldname, newname): newname is the link, pointing at oldname.
	require.NoError(t, c.Symlink(ctx, "target", "link"))
	got, err := os.Readlink(local("link"))
	require.NoError(t, err)
	require.Equal(t, "target", got)
	require.Equal(t, []byte("T"), readLocal(t, local("link")))

	// The target is stored verbatim, even when it does not exist.
	require.NoError(t, c.Symlink(ctx, "/no/such/place", "dangling"))
	got, err = os.Readlink(local("dangling"))
	require.NoError(t, err)
	require.Equal(t, "/no/such/place", got)

	s, err := c.Readlink(ctx, "link")
	require.NoError(t, err)
	require.Equal(t, "target", s)
	s, err = c.Readlink(ctx, local("dangling"))
	require.NoError(t, err)
	require.Equal(t, "/no/such/place", s)

	err = c.Symlink(ctx, "target", "link")
	require.Error(t, err, "newname exists")
	requireLinkErr(t, err, "symlink", "target", "link")

	_, err = c.Readlink(ctx, "target")
	require.Error(t, err, "not a link")
	requirePathErr(t, err, "readlink", "target")
	_, err = c.Readlink(ctx, "missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestIntegrationLink(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := func(p string) string { return filepath.Join(dir, p) }
	writeLocal(t, local("a"), []byte("A"), 0o644)

	require.NoError(t, c.Link(ctx, "a", "b"))
	fa, err := os.Lstat(local("a"))
	require.NoError(t, err)
	fb, err := os.Lstat(local("b"))
	require.NoError(t, err)
	require.True(t, os.SameFile(fa, fb), "b is a hard link to a")
	require.True(t, fb.Mode().IsRegular(), "a hard link, not a symlink")

	err = c.Link(ctx, "a", "b")
	requireLinkErr(t, err, "link", "a", "b")
	requireStatus(t, err, StatusFailure)

	err = c.Link(ctx, "missing", "c")
	require.ErrorIs(t, err, fs.ErrNotExist)
	requireLinkErr(t, err, "link", "missing", "c")
}

func TestIntegrationRealPathGetwdHomeDir(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.Symlink("sub", filepath.Join(dir, "link")))

	wd, err := c.Getwd(ctx)
	require.NoError(t, err)
	require.Equal(t, dir, wd, "sftp-server -d sets the start directory")

	p, err := c.RealPath(ctx, "sub/../link/.")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "sub"), p, "RealPath resolves .., . and links")
	p, err = c.RealPath(ctx, dir+"//sub/")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "sub"), p)

	_, err = c.RealPath(ctx, "missing/x")
	require.ErrorIs(t, err, fs.ErrNotExist)
	requirePathErr(t, err, "realpath", "missing/x")

	// "~user" is the home directory from the password database, not $HOME.
	u, err := user.Current()
	require.NoError(t, err)
	home, err := filepath.EvalSymlinks(u.HomeDir)
	require.NoError(t, err)
	require.NotEqual(t, dir, home, "the test needs a start directory other than home")
	p, err = c.RealPath(ctx, "~"+u.Username)
	require.NoError(t, err)
	require.Equal(t, home, p)
	// OpenSSH expands a bare "~" to the start directory, where sessions normally begin.
	p, err = c.RealPath(ctx, "~")
	require.NoError(t, err)
	require.Equal(t, dir, p, "~ goes through expand-path")
	p, err = c.RealPath(ctx, "~/sub")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "sub"), p)

	// home-directory with the empty name (the current user) is refused by some OpenSSH
	// releases (9.2 does getpwnam("")); HomeDir then falls back on expand-path of "~".
	wantHome := home
	_, herr := c.nameCall(ctx, extHomeDirectory, func(dst []byte, id uint32) []byte {
		return appendExtended(dst, id, extHomeDirectory, "")
	})
	if herr != nil {
		requireStatus(t, herr, StatusFailure)
		wantHome = dir
	}
	h, err := c.HomeDir(ctx)
	require.NoError(t, err)
	require.Equal(t, wantHome, h)

	// Without home-directory, HomeDir uses expand-path; without that either, the start
	// directory.
	delete(c.exts, extHomeDirectory)
	h, err = c.HomeDir(ctx)
	require.NoError(t, err)
	require.Equal(t, dir, h)
	delete(c.exts, extExpandPath)
	h, err = c.HomeDir(ctx)
	require.NoError(t, err)
	require.Equal(t, dir, h)
	// Without expand-path "~" is an ordinary name, relative to the start directory.
	p, err = c.RealPath(ctx, "~")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "~"), p)
}

func TestIntegrationStatVFS(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	s, err := c.StatVFS(ctx, ".")
	require.NoError(t, err)
	st := localStatfs(t, dir)
	require.Equal(t, st.Bsize, s.BlockSize)
	require.Equal(t, st.Blocks, s.Blocks)
	require.Equal(t, st.Files, s.Files)
	require.Equal(t, st.Namelen, s.NameMax)
	frsize := st.Frsize
	if frsize == 0 {
		frsize = st.Bsize
	}
	require.Equal(t, frsize, s.FragmentSize)
	require.Equal(t, frsize*st.Blocks, s.TotalSpace())
	require.LessOrEqual(t, s.BlocksAvail, s.BlocksFree)
	require.LessOrEqual(t, s.FreeSpace(), s.TotalSpace())

	_, err = c.StatVFS(ctx, "missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	requirePathErr(t, err, "statvfs", "missing")
}

func TestIntegrationReadFileWriteFile(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := func(p string) string { return filepath.Join(dir, p) }

	for _, n := range []int{0, 1, 4096, maxDataSize + 1, 3<<20 + 5} {
		name := fmt.Sprintf("f%d", n)
		data := randBytes(n, 1)
		require.NoError(t, c.WriteFile(ctx, name, data, 0o640))
		require.Equal(t, data, readLocal(t, local(name)), "size %d", n)
		fi, err := os.Lstat(local(name))
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o640)&^umask(), fi.Mode().Perm())

		got, err := c.ReadFile(ctx, name)
		require.NoError(t, err)
		require.Equal(t, len(data), len(got))
		require.Equal(t, data, got, "size %d", n)
	}

	// WriteFile truncates an existing file and leaves its mode alone.
	writeLocal(t, local("old"), []byte("a much longer old content"), 0o600)
	require.NoError(t, c.WriteFile(ctx, "old", []byte("new"), 0o644))
	require.Equal(t, []byte("new"), readLocal(t, local("old")))
	fi, err := os.Lstat(local("old"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())

	_, err = c.ReadFile(ctx, "missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	requirePathErr(t, err, "open", "missing")
	err = c.WriteFile(ctx, "missing/f", []byte("x"), 0o644)
	require.ErrorIs(t, err, fs.ErrNotExist)

	require.NoError(t, os.Mkdir(local("d"), 0o755))
	_, err = c.ReadFile(ctx, "d")
	require.Error(t, err, "reading a directory")
}

func TestIntegrationExtensionsLimits(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)

	exts := c.Extensions()
	for name, version := range map[string]string{
		extPosixRename: "1", extStatVFS: "2", extFstatVFS: "2", extHardlink: "1",
		extFsync: "1", extLsetstat: "1", extLimits: "1", extExpandPath: "1",
		"copy-data": "1", extHomeDirectory: "1",
	} {
		require.Equal(t, version, exts[name], "extension %s", name)
	}
	exts[extHardlink] = "changed"
	delete(exts, extFsync)
	require.True(t, c.hasExt(extHardlink), "Extensions returns a copy")
	require.True(t, c.hasExt(extFsync))

	// OpenSSH 8.6+ publishes limits@openssh.com: 256 KiB packets, 261120 data bytes.
	lim := c.Limits()
	require.Equal(t, 256<<10, lim.MaxPacket)
	require.Equal(t, 261120, lim.MaxRead)
	require.Equal(t, 261120, lim.MaxWrite)
	require.Positive(t, lim.MaxOpenHandles)

	// A smaller WithMaxPacket lowers the request sizes, not the server's packet limit.
	c2, _ := startServer(t, dir, []Option{WithMaxPacket(32768)})
	lim = c2.Limits()
	require.Equal(t, 256<<10, lim.MaxPacket)
	require.Equal(t, 32768, lim.MaxRead)
	require.Equal(t, 32768, lim.MaxWrite)
	data := randBytes(100000, 2)
	ctx := testCtx(t)
	require.NoError(t, c2.WriteFile(ctx, "small", data, 0o644))
	got, err := c2.ReadFile(ctx, "small")
	require.NoError(t, err)
	require.Equal(t, data, got)
}

func TestIntegrationLchtimes(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := func(p string) string { return filepath.Join(dir, p) }
	targetTime := time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC)
	writeLocal(t, local("target"), []byte("T"), 0o644)
	require.NoError(t, os.Chtimes(local("target"), targetTime, targetTime))
	require.NoError(t, os.Symlink("target", local("link")))

	atime := time.Date(2005, 5, 5, 5, 5, 5, 0, time.UTC)
	mtime := time.Date(2006, 6, 6, 6, 6, 6, 0, time.UTC)
	require.NoError(t, c.Lchtimes(ctx, "link", atime, mtime))
	st := localStat(t, local("link"))
	require.Equal(t, atime.Unix(), st.Atim.Sec)
	require.Equal(t, mtime.Unix(), st.Mtim.Sec)
	st = localStat(t, local("target"))
	require.Equal(t, targetTime.Unix(), st.Mtim.Sec, "the target is untouched")
	require.Equal(t, targetTime.Unix(), st.Atim.Sec)

	// On a plain file it is Chtimes.
	require.NoError(t, c.Lchtimes(ctx, "target", atime, mtime))
	st = localStat(t, local("target"))
	require.Equal(t, mtime.Unix(), st.Mtim.Sec)

	err := c.Lchtimes(ctx, "link", time.Unix(-1, 0), mtime)
	requirePathErr(t, err, "lchtimes", "link")
	var se *StatusError
	require.False(t, errors.As(err, &se), "refused by the client: %v", err)

	err = c.Lchtimes(ctx, "missing", atime, mtime)
	require.ErrorIs(t, err, fs.ErrNotExist)
	requirePathErr(t, err, "lchtimes", "missing")
}
