package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sftp/internal/localfs"
	"github.com/stretchr/testify/require"
)

// Helpers: Get and Put against OpenSSH's sftp-server over pipes.
//
// Tests of Get and Put against OpenSSH's sftp-server over pipes. The server runs on
// this machine, so a "remote" path is also a local path the test can inspect. This
// file provides getPutClient (sftpServerClient with the server's pid, for counting its
// open files), gpData (reproducible bytes a dropped, repeated or reordered piece cannot
// produce), gpWrite and gpRead. Where tests go: a single-file Get/Put here; trees in
// treeall_test.go (GetAll/PutAll, TreeError), walk_test.go (walking, its bounds in
// walk_bounds_test.go), landing_test.go (where a copy lands); Resume in resume_test.go;
// the memory account in budget_test.go; symlink order in symlink_order_test.go;
// progress and part files beside the mechanism that makes them.

// getPutClient is sftpServerClient (testenv_test.go) on dir, with the server's pid.
func getPutClient(t *testing.T, dir string) (*Client, int) {
	t.Helper()
	c, srv := sftpServerClient(t, dir, nil)
	return c, srv.pid
}

// gpData is n reproducible pseudo-random bytes: a transfer that drops, repeats or
// reorders a piece cannot produce them.
func gpData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func gpWrite(t *testing.T, name string, data []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o755))
	require.NoError(t, os.WriteFile(name, data, 0o644))
}

func gpRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return b
}

// gpDirs returns a local and a "remote" directory (the one the server serves).
func gpDirs(t *testing.T) (local, remote string) {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	local, remote = filepath.Join(d, "local"), filepath.Join(d, "remote")
	require.NoError(t, os.Mkdir(local, 0o755))
	require.NoError(t, os.Mkdir(remote, 0o755))
	return local, remote
}

// serverFDs lists the server process's open file descriptors: each open SFTP handle is
// one of them.
func serverFDs(t *testing.T, pid int) []string {
	t.Helper()
	es, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Skipf("cannot list the server's descriptors: %v", err)
	}
	var fds []string
	for _, e := range es {
		fds = append(fds, e.Name())
	}
	return fds
}

// settle waits until the clean-up a cancelled call left in the background (the CLOSEs
// and part-file cuts it stopped waiting for once its ctx ended) is done at the server.
// A round trip first: replies come in order, so every HANDLE that was still due has
// been read, and its CLOSE queued, by the time its answer is. Then the queued work is
// waited for, and one more round trip lets a CLOSE sent without waiting land.
func settle(t *testing.T, c *Client) {
	t.Helper()
	_, err := c.Stat(testCtx(t), "/")
	require.NoError(t, err)
	c.main.bg.Wait()
	_, err = c.Stat(testCtx(t), "/")
	require.NoError(t, err)
}

// listTree describes every entry under root by its relative path: kind and content
// for files, target for links.
func listTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, err := filepath.Rel(root, p)
		require.NoError(t, err)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			require.NoError(t, err)
			out[rel] = "link " + target
		case d.IsDir():
			out[rel] = "dir"
		default:
			out[rel] = "file " + string(gpRead(t, p))
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// makeTree builds nested directories holding 300 small files, one larger file, an
// empty directory and a symbolic link.
func makeTree(t *testing.T, root string) {
	t.Helper()
	for i := range 300 {
		dir := filepath.Join(root, "d"+strconv.Itoa(i%5), "sub"+strconv.Itoa(i%3))
		gpWrite(t, filepath.Join(dir, fmt.Sprintf("f%03d.txt", i)), gpData(i*7, uint64(i)))
	}
	gpWrite(t, filepath.Join(root, "big.bin"), gpData(700_001, 1))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "empty", "deeper-empty"), 0o755))
	require.NoError(t, os.Symlink("d0/sub0/f000.txt", filepath.Join(root, "link")))
	require.NoError(t, os.Symlink("/nonexistent/target", filepath.Join(root, "d1", "dangling")))
}

// events records Progress reports; OnProgress calls are serialised, which the race
// detector checks by the absence of locking here.
type events struct{ list []Progress }

func (e *events) opt() TransferOption {
	return OnProgress(func(p Progress) { e.list = append(e.list, p) })
}

// check asserts what holds of every run's reports: per-file and total bytes never go
// backwards, every started file ends, and the final totals are the bytes and files
// moved.
func (e *events) check(t *testing.T, files int, bytes int64) {
	t.Helper()
	require.NotEmpty(t, e.list)
	perFile := map[string]int64{}
	ended := map[string]bool{}
	var total int64
	filesTotal := 0
	for _, p := range e.list {
		require.GreaterOrEqual(t, p.TotalBytes, total, "total went backwards")
		total = p.TotalBytes
		require.False(t, ended[p.Path], "report after the end of %s", p.Path)
		if last, ok := perFile[p.Path]; ok {
			require.GreaterOrEqual(t, p.Bytes, last, "bytes of %s went backwards", p.Path)
		}
		perFile[p.Path] = p.Bytes
		// A tree is copied as it is walked: its totals count what was found so far,
		// and are final once Walked is set.
		require.GreaterOrEqual(t, p.FilesTotal, filesTotal, "FilesTotal went backwards")
		filesTotal = p.FilesTotal
		require.LessOrEqual(t, p.FilesTotal, files)
		require.LessOrEqual(t, p.TotalSize, bytes)
		if p.Walked {
			require.Equal(t, files, p.FilesTotal)
			require.Equal(t, bytes, p.TotalSize)
		}
		require.LessOrEqual(t, p.Bytes, p.Size)
		if p.Done || p.Err != nil {
			ended[p.Path] = true
			require.True(t, p.Done != (p.Err != nil))
			require.Equal(t, p.Size, p.Bytes, "finished %s", p.Path)
		}
	}
	last := e.list[len(e.list)-1]
	// Every file was found before the last one ended, the walk's end maybe not.
	require.Equal(t, files, last.FilesTotal)
	require.Equal(t, bytes, last.TotalSize)
	require.Equal(t, bytes, last.TotalBytes)
	require.Equal(t, files, last.Files)
	require.Zero(t, last.InProgress)
	require.Len(t, ended, files)
}

func TestGetPutSingleFile(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	for _, size := range []int{0, 1, 261121, 3<<20 + 1} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			ctx := testCtx(t)
			local, remote := gpDirs(t)
			data := gpData(size, 7)
			src := filepath.Join(local, "src.bin")
			gpWrite(t, src, data)

			var up events
			require.NoError(t, c.Put(ctx, src, filepath.Join(remote, "up.bin"), up.opt()))
			require.Equal(t, data, gpRead(t, filepath.Join(remote, "up.bin")))
			up.check(t, 1, int64(size))

			var down events
			back := filepath.Join(local, "back.bin")
			require.NoError(t, c.Get(ctx, filepath.Join(remote, "up.bin"), back, down.opt()))
			require.Equal(t, data, gpRead(t, back))
			down.check(t, 1, int64(size))

			// Only the finished files are left: the part files were renamed away.
			require.Equal(t, []string{"up.bin"}, dirNames(t, remote))
			require.Equal(t, []string{"back.bin", "src.bin"}, dirNames(t, local))
		})
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestGetPutReplacesExisting(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	gpWrite(t, filepath.Join(local, "f"), gpData(1000, 1))
	gpWrite(t, filepath.Join(remote, "f"), gpData(5000, 2)) // longer: a replacement, not an overwrite
	require.NoError(t, c.Put(ctx, filepath.Join(local, "f"), filepath.Join(remote, "f")))
	require.Equal(t, gpData(1000, 1), gpRead(t, filepath.Join(remote, "f")))

	gpWrite(t, filepath.Join(remote, "g"), gpData(10, 3))
	gpWrite(t, filepath.Join(local, "g"), gpData(9000, 4))
	require.NoError(t, c.Get(ctx, filepath.Join(remote, "g"), filepath.Join(local, "g")))
	require.Equal(t, gpData(10, 3), gpRead(t, filepath.Join(local, "g")))
}

// TestGetPutNamesTheCopy: the destination is the copy itself, never a directory to
// put it in; relative remote paths resolve against the server's start directory.
func TestGetPutNamesTheCopy(t *testing.T) {
	serveDir := t.TempDir()
	c, _ := getPutClient(t, serveDir)
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	data := gpData(12345, 3)
	gpWrite(t, filepath.Join(local, "a.txt"), data)

	// A file onto an existing directory is an error, both ways, and nothing moves.
	require.ErrorIs(t, c.Put(ctx, filepath.Join(local, "a.txt"), remote), localfs.ErrIsDirectory)
	require.Empty(t, dirNames(t, remote))
	require.NoError(t, c.Put(ctx, filepath.Join(local, "a.txt"), filepath.Join(remote, "a.txt")))
	require.Equal(t, data, gpRead(t, filepath.Join(remote, "a.txt")))
	into := filepath.Join(local, "into")
	require.NoError(t, os.Mkdir(into, 0o755))
	require.ErrorIs(t, c.Get(ctx, filepath.Join(remote, "a.txt"), into), localfs.ErrIsDirectory)
	require.Empty(t, dirNames(t, into))
	require.NoError(t, c.Get(ctx, filepath.Join(remote, "a.txt"), filepath.Join(into, "a.txt")))
	require.Equal(t, data, gpRead(t, filepath.Join(into, "a.txt")))

	// "." is the server's start directory, a directory like any other.
	require.ErrorIs(t, c.Put(ctx, filepath.Join(local, "a.txt"), "."), localfs.ErrIsDirectory)
	require.NoError(t, c.Put(ctx, filepath.Join(local, "a.txt"), "rel.txt"))
	require.Equal(t, data, gpRead(t, filepath.Join(serveDir, "rel.txt")))
	require.NoError(t, c.Get(ctx, "rel.txt", filepath.Join(local, "rel-back.txt")))
	require.Equal(t, data, gpRead(t, filepath.Join(local, "rel-back.txt")))
}

// TestGetLocalNames: where a Get puts its copy, now that local writes go through a
// root on the directory that receives it.
func TestGetLocalNames(t *testing.T) {
	serveDir := t.TempDir()
	c, _ := getPutClient(t, serveDir)
	ctx := testCtx(t)
	local, _ := gpDirs(t)
	gpWrite(t, filepath.Join(serveDir, "tree", "f"), []byte("f"))
	want := listTree(t, filepath.Join(serveDir, "tree"))

	// A trailing slash on a new name still names the copy itself.
	require.NoError(t, c.Get(ctx, "tree", filepath.Join(local, "new")+"/", Recursive()))
	require.Equal(t, want, listTree(t, filepath.Join(local, "new")))
	// Missing parents of a tree's copy are made.
	require.NoError(t, c.Get(ctx, "tree", filepath.Join(local, "a", "b", "c"), Recursive()))
	require.Equal(t, want, listTree(t, filepath.Join(local, "a", "b", "c")))
	// The copy of "." is the directory named, as for any other tree: merged into
	// when it exists.
	into := filepath.Join(local, "into")
	require.NoError(t, os.Mkdir(into, 0o755))
	require.NoError(t, c.Get(ctx, ".", into, Recursive()))
	require.Equal(t, want, listTree(t, filepath.Join(into, "tree")))
	// A local path with no base name is the directory it names.
	require.NoError(t, c.Get(ctx, "tree", filepath.Join(into, "tree", "."), Recursive()))
	require.Equal(t, want, listTree(t, filepath.Join(into, "tree")))
	// A single file's copy needs its parent, and an empty local name is refused.
	require.Error(t, c.Get(ctx, "tree/f", filepath.Join(local, "missing", "f")))
	require.Error(t, c.Get(ctx, "tree/f", ""))
}

func TestGetPutDirectoryNeedsRecursive(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	err := c.Put(ctx, local, filepath.Join(remote, "x"))
	require.ErrorIs(t, err, errNeedRecursive)
	require.ErrorContains(t, err, "Recursive")
	err = c.Get(ctx, remote, filepath.Join(local, "x"))
	require.ErrorIs(t, err, errNeedRecursive)
	require.Empty(t, dirNames(t, local))
	require.Empty(t, dirNames(t, remote))

	err = c.Get(ctx, filepath.Join(remote, "missing"), filepath.Join(local, "x"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	err = c.Put(ctx, filepath.Join(local, "missing"), filepath.Join(remote, "x"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestGetPutTree(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	src := filepath.Join(local, "tree")
	makeTree(t, src)
	want := listTree(t, src)
	var size int64
	for _, v := range want {
		if len(v) >= 5 && v[:5] == "file " {
			size += int64(len(v) - 5)
		}
	}

	// To a new name: the copy is made under that name.
	var up events
	require.NoError(t, c.Put(ctx, src, filepath.Join(remote, "copy"), Recursive(), up.opt()))
	require.Equal(t, want, listTree(t, filepath.Join(remote, "copy")))
	up.check(t, 301, size)

	// Again: the copy is merged into what the first made, files and links already
	// there replaced, nothing nested inside it.
	require.NoError(t, c.Put(ctx, src, filepath.Join(remote, "copy"), Recursive()))
	require.Equal(t, want, listTree(t, filepath.Join(remote, "copy")))

	var down events
	back := filepath.Join(local, "back")
	require.NoError(t, c.Get(ctx, filepath.Join(remote, "copy"), back, Recursive(), down.opt()))
	require.Equal(t, want, listTree(t, back))
	down.check(t, 301, size)

	require.NoError(t, c.Get(ctx, filepath.Join(remote, "copy"), back, Recursive()))
	require.Equal(t, want, listTree(t, back))
}

func TestGetPutTreeThroughLink(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	gpWrite(t, filepath.Join(local, "real", "sub", "f"), []byte("data"))
	require.NoError(t, os.Symlink("real", filepath.Join(local, "via")))
	want := listTree(t, filepath.Join(local, "real"))

	// A link given as the source is followed.
	require.NoError(t, c.Put(ctx, filepath.Join(local, "via"), filepath.Join(remote, "via"), Recursive()))
	require.Equal(t, want, listTree(t, filepath.Join(remote, "via")))
	require.NoError(t, os.Symlink("via", filepath.Join(remote, "rvia")))
	require.NoError(t, c.Get(ctx, filepath.Join(remote, "rvia"), filepath.Join(local, "back"), Recursive()))
	require.Equal(t, want, listTree(t, filepath.Join(local, "back")))
}

func TestGetPutTreeOntoFile(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	gpWrite(t, filepath.Join(local, "tree", "f"), []byte("x"))
	gpWrite(t, filepath.Join(remote, "file"), []byte("keep"))
	gpWrite(t, filepath.Join(local, "file"), []byte("keep"))
	require.Error(t, c.Put(ctx, filepath.Join(local, "tree"), filepath.Join(remote, "file"), Recursive()))
	require.Equal(t, []byte("keep"), gpRead(t, filepath.Join(remote, "file")))

	require.NoError(t, os.Mkdir(filepath.Join(remote, "rtree"), 0o755))
	require.Error(t, c.Get(ctx, filepath.Join(remote, "rtree"), filepath.Join(local, "file"), Recursive()))
	require.Equal(t, []byte("keep"), gpRead(t, filepath.Join(local, "file")))
}

func TestGetPutPreserve(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	mtime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	atime := time.Date(2002, 3, 4, 5, 6, 7, 0, time.UTC)

	src := filepath.Join(local, "tree")
	gpWrite(t, filepath.Join(src, "sub", "f"), gpData(5000, 5))
	require.NoError(t, os.Chmod(filepath.Join(src, "sub", "f"), 0o741))
	require.NoError(t, os.Chtimes(filepath.Join(src, "sub", "f"), atime, mtime))
	require.NoError(t, os.Chmod(filepath.Join(src, "sub"), 0o751))
	require.NoError(t, os.Chtimes(filepath.Join(src, "sub"), atime, mtime.Add(time.Hour)))

	requireMeta := func(name string, mode fs.FileMode, mtime, atime time.Time) {
		t.Helper()
		fi, err := os.Stat(name)
		require.NoError(t, err)
		require.Equal(t, mode, fi.Mode()&modeBits, name)
		require.True(t, mtime.Equal(fi.ModTime()), "%s: mtime %v, want %v", name, fi.ModTime(), mtime)
		require.True(t, atime.Equal(localAtime(fi)), "%s: atime %v, want %v", name, localAtime(fi), atime)
	}

	require.NoError(t, c.Put(ctx, filepath.Join(src, "sub", "f"), filepath.Join(remote, "f"), Preserve()))
	requireMeta(filepath.Join(remote, "f"), 0o741, mtime, atime)

	// Reading the source may have moved its atime (relatime): set it again.
	require.NoError(t, os.Chtimes(filepath.Join(src, "sub", "f"), atime, mtime))
	require.NoError(t, c.Put(ctx, src, filepath.Join(remote, "tree"), Recursive(), Preserve()))
	requireMeta(filepath.Join(remote, "tree", "sub", "f"), 0o741, mtime, atime)
	requireMeta(filepath.Join(remote, "tree", "sub"), 0o751, mtime.Add(time.Hour), atime)

	// Now the other way, from files given their metadata on the server's side.
	require.NoError(t, os.Chmod(filepath.Join(remote, "f"), 0o604))
	require.NoError(t, os.Chtimes(filepath.Join(remote, "f"), atime.Add(time.Minute), mtime.Add(time.Minute)))
	require.NoError(t, c.Get(ctx, filepath.Join(remote, "f"), filepath.Join(local, "f"), Preserve()))
	requireMeta(filepath.Join(local, "f"), 0o604, mtime.Add(time.Minute), atime.Add(time.Minute))

	require.NoError(t, c.Get(ctx, filepath.Join(remote, "tree"), filepath.Join(local, "back"), Recursive(), Preserve()))
	requireMeta(filepath.Join(local, "back", "sub", "f"), 0o741, mtime, atime)
	requireMeta(filepath.Join(local, "back", "sub"), 0o751, mtime.Add(time.Hour), atime)

	// Without Preserve the times are the copy's own and the mode is the source's bits.
	require.NoError(t, c.Get(ctx, filepath.Join(remote, "f"), filepath.Join(local, "plain")))
	fi, err := os.Stat(filepath.Join(local, "plain"))
	require.NoError(t, err)
	require.False(t, fi.ModTime().Equal(mtime.Add(time.Minute)))
	require.Zero(t, fi.Mode().Perm()&^(0o604|0o200))
}

func TestGetPutResume(t *testing.T) {
	c := resumeClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	const size, k = 1<<20 + 17, 300_001
	data := gpData(size, 9)
	src := filepath.Join(local, "src")
	gpWrite(t, src, data)
	// The part holds the source's bytes below the resume point and others above it:
	// a transfer that continued from anywhere past the proven point, the part's end
	// say, would leave them in the copy.
	holed := slices.Clone(data[:k])
	clear(holed[resumedFrom(k):])
	// The part holds different bytes than the source's, so the result shows whether
	// the transfer continued or started over.
	stale := gpData(k, 10)

	t.Run("put", func(t *testing.T) {
		// A part holding the source's first bytes is continued from the proven point.
		part := filepath.Join(remote, ".dst"+partSuffix)
		gpWrite(t, part, holed)
		var ev events
		require.NoError(t, c.Put(ctx, src, filepath.Join(remote, "dst"), Resume(), ev.opt()))
		require.Equal(t, data, gpRead(t, filepath.Join(remote, "dst")))
		require.NoFileExists(t, part)
		require.Equal(t, resumedFrom(k), ev.list[0].Bytes)
		ev.check(t, 1, size)
	})
	t.Run("put stale part", func(t *testing.T) {
		// One whose end differs from the source's bytes there is not what Resume
		// takes it for: it is replaced, and the upload starts over.
		part := filepath.Join(remote, ".stale"+partSuffix)
		gpWrite(t, part, stale)
		var ev events
		require.NoError(t, c.Put(ctx, src, filepath.Join(remote, "stale"), Resume(), ev.opt()))
		require.Equal(t, data, gpRead(t, filepath.Join(remote, "stale")))
		require.NoFileExists(t, part)
		require.Zero(t, ev.list[0].Bytes)
		ev.check(t, 1, size)
	})
	gpWrite(t, filepath.Join(remote, "g"), data)
	t.Run("get", func(t *testing.T) {
		dst := filepath.Join(local, "g")
		gpWrite(t, dst+partSuffix, holed)
		var ev events
		require.NoError(t, c.Get(ctx, filepath.Join(remote, "g"), dst, Resume(), ev.opt()))
		require.Equal(t, data, gpRead(t, dst))
		require.NoFileExists(t, dst+partSuffix)
		require.Equal(t, resumedFrom(k), ev.list[0].Bytes)
		ev.check(t, 1, size)
	})
	t.Run("get stale part", func(t *testing.T) {
		// A part whose bytes at the resume point are not the remote file's (an older
		// version of it, say) is replaced, and the download starts over.
		dst := filepath.Join(local, "gstale")
		gpWrite(t, dst+partSuffix, stale)
		var ev events
		require.NoError(t, c.Get(ctx, filepath.Join(remote, "g"), dst, Resume(), ev.opt()))
		require.Equal(t, data, gpRead(t, dst))
		require.NoFileExists(t, dst+partSuffix)
		require.Zero(t, ev.list[0].Bytes)
		ev.check(t, 1, size)
	})
	t.Run("without resume the part is ignored", func(t *testing.T) {
		part := filepath.Join(remote, ".plain"+partSuffix)
		gpWrite(t, part, stale)
		require.NoError(t, c.Put(ctx, src, filepath.Join(remote, "plain"), Resume()))
		require.NoError(t, c.Put(ctx, src, filepath.Join(remote, "plain")))
		require.Equal(t, data, gpRead(t, filepath.Join(remote, "plain")))
	})
	t.Run("complete part", func(t *testing.T) {
		part := filepath.Join(remote, ".whole"+partSuffix)
		gpWrite(t, part, data)
		require.NoError(t, c.Put(ctx, src, filepath.Join(remote, "whole"), Resume()))
		require.Equal(t, data, gpRead(t, filepath.Join(remote, "whole")))
	})
	t.Run("part longer than the source", func(t *testing.T) {
		long := append(slices.Clone(data), 1)
		part := filepath.Join(remote, ".long"+partSuffix)
		gpWrite(t, part, long)
		err := c.Put(ctx, src, filepath.Join(remote, "long"), Resume())
		require.ErrorContains(t, err, "more than")
		require.NoFileExists(t, filepath.Join(remote, "long"))
		require.Equal(t, long, gpRead(t, part))

		dst := filepath.Join(local, "long")
		gpWrite(t, dst+partSuffix, long)
		err = c.Get(ctx, filepath.Join(remote, "g"), dst, Resume())
		require.ErrorContains(t, err, "more than")
		require.NoFileExists(t, dst)
		require.Equal(t, long, gpRead(t, dst+partSuffix))
	})
	t.Run("tree", func(t *testing.T) {
		tree := filepath.Join(local, "rtree")
		gpWrite(t, filepath.Join(tree, "a"), data)
		gpWrite(t, filepath.Join(tree, "b", "c"), data)
		gpWrite(t, filepath.Join(remote, "rtree", "b", ".c"+partSuffix), holed)
		var ev events
		require.NoError(t, c.Put(ctx, tree, filepath.Join(remote, "rtree"), Recursive(), Resume(), ev.opt()))
		require.Equal(t, data, gpRead(t, filepath.Join(remote, "rtree", "a")))
		require.Equal(t, data, gpRead(t, filepath.Join(remote, "rtree", "b", "c")))
		for _, p := range ev.list {
			if p.Path == filepath.Join(tree, "b", "c") {
				require.Equal(t, resumedFrom(k), p.Bytes, "the part was not continued")
				break
			}
		}
	})
}

func TestGetPutAtomic(t *testing.T) {
	c, pid := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	before := serverFDs(t, pid)
	old := []byte("the old content")
	data := gpData(8<<20, 11)
	src := filepath.Join(local, "src")
	gpWrite(t, src, data)

	t.Run("put blocked part", func(t *testing.T) {
		dst := filepath.Join(remote, "dst")
		gpWrite(t, dst, old)
		// Something that is not a file at the part name: the upload cannot start.
		require.NoError(t, os.Mkdir(filepath.Join(remote, ".dst"+partSuffix), 0o755))
		require.Error(t, c.Put(ctx, src, dst))
		require.Equal(t, old, gpRead(t, dst))
		require.DirExists(t, filepath.Join(remote, ".dst"+partSuffix))
	})
	t.Run("get blocked part", func(t *testing.T) {
		gpWrite(t, filepath.Join(remote, "g"), data)
		dst := filepath.Join(local, "g")
		gpWrite(t, dst, old)
		require.NoError(t, os.Mkdir(dst+partSuffix, 0o755))
		require.Error(t, c.Get(ctx, filepath.Join(remote, "g"), dst))
		require.Equal(t, old, gpRead(t, dst))
	})
	t.Run("put cancelled midway", func(t *testing.T) {
		dst := filepath.Join(remote, "mid")
		gpWrite(t, dst, old)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		err := c.Put(cctx, src, dst, OnProgress(func(p Progress) {
			if p.Bytes > 1<<20 {
				cancel()
			}
		}))
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, old, gpRead(t, dst))
		settle(t, c)
		require.Equal(t, before, serverFDs(t, pid))
		// What the server acknowledged stays for Resume, and nothing past it: the
		// part is a prefix of the source (none at all if nothing was acknowledged).
		part := filepath.Join(remote, ".mid"+partSuffix)
		if got, err := os.ReadFile(part); err == nil {
			require.Equal(t, data[:len(got)], got)
		} else {
			require.ErrorIs(t, err, fs.ErrNotExist)
		}
		require.NoError(t, c.Put(ctx, src, dst, Resume()))
		require.Equal(t, data, gpRead(t, dst))
		require.NoFileExists(t, part)
	})
	t.Run("empty part removed", func(t *testing.T) {
		// Failures before any data moved: no part file is left behind.
		dst := filepath.Join(remote, "early")
		gpWrite(t, dst, old)
		empty := filepath.Join(local, "empty")
		gpWrite(t, empty, nil)
		// SFTP v3 cannot carry a time before 1970, which fails Preserve after the
		// (empty) data.
		require.NoError(t, os.Chtimes(empty, time.Unix(-100, 0), time.Unix(-100, 0)))
		require.Error(t, c.Put(ctx, empty, dst, Preserve()))
		require.Equal(t, old, gpRead(t, dst))
		require.NoFileExists(t, filepath.Join(remote, ".early"+partSuffix))

		cancelAtStart := func() (context.Context, TransferOption) {
			cctx, cancel := context.WithCancel(ctx)
			t.Cleanup(cancel)
			return cctx, OnProgress(func(Progress) { cancel() })
		}
		cctx, opt := cancelAtStart()
		require.ErrorIs(t, c.Put(cctx, src, dst, opt), context.Canceled)
		require.Equal(t, old, gpRead(t, dst))
		settle(t, c)
		require.NoFileExists(t, filepath.Join(remote, ".early"+partSuffix))

		gdst := filepath.Join(local, "early")
		gpWrite(t, gdst, old)
		cctx, opt = cancelAtStart()
		require.ErrorIs(t, c.Get(cctx, filepath.Join(remote, "g"), gdst, opt), context.Canceled)
		require.Equal(t, old, gpRead(t, gdst))
		require.NoFileExists(t, gdst+partSuffix)
		settle(t, c)
		require.Equal(t, before, serverFDs(t, pid))
	})
}

func TestGetPutCancel(t *testing.T) {
	c, pid := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	data := gpData(16<<20, 12)
	gpWrite(t, filepath.Join(local, "big"), data)
	gpWrite(t, filepath.Join(remote, "big"), data)
	tree := filepath.Join(local, "tree")
	for i := range 40 {
		gpWrite(t, filepath.Join(tree, strconv.Itoa(i)), data[:256<<10])
		gpWrite(t, filepath.Join(remote, "rtree", strconv.Itoa(i)), data[:256<<10])
	}
	before := serverFDs(t, pid)

	cancelAfter := func(ctx context.Context, n int64) (context.Context, TransferOption) {
		cctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		return cctx, OnProgress(func(p Progress) {
			if p.TotalBytes >= n {
				cancel()
			}
		})
	}
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, opt TransferOption) error
	}{
		{"get", func(ctx context.Context, opt TransferOption) error {
			return c.Get(ctx, filepath.Join(remote, "big"), filepath.Join(local, "got"), opt)
		}},
		{"put", func(ctx context.Context, opt TransferOption) error {
			return c.Put(ctx, filepath.Join(local, "big"), filepath.Join(remote, "put"), opt)
		}},
		{"put tree", func(ctx context.Context, opt TransferOption) error {
			return c.Put(ctx, tree, filepath.Join(remote, "tree"), Recursive(), Parallel(4), opt)
		}},
		{"get tree", func(ctx context.Context, opt TransferOption) error {
			return c.Get(ctx, filepath.Join(remote, "rtree"), filepath.Join(local, "tree-back"), Recursive(), Parallel(4), opt)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cctx, opt := cancelAfter(ctx, 2<<20)
			err := tc.run(cctx, opt)
			require.ErrorIs(t, err, context.Canceled)
			// The call returned without waiting for the server once ctx ended, but
			// every handle it opened is closed once the CLOSEs it sent are answered.
			settle(t, c)
			require.Equal(t, before, serverFDs(t, pid))
		})
	}
	// Already cancelled: nothing is opened at all.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, c.Get(cctx, filepath.Join(remote, "big"), filepath.Join(local, "never")), context.Canceled)
	require.NoFileExists(t, filepath.Join(local, "never"))
	require.NoFileExists(t, filepath.Join(local, "never"+partSuffix))
	// The client still works afterwards.
	require.NoError(t, c.Get(ctx, filepath.Join(remote, "big"), filepath.Join(local, "after")))
	require.True(t, bytes.Equal(data, gpRead(t, filepath.Join(local, "after"))))
}

// TestPutTreeGoesOnPastAFailure: one destination name of 50 is taken by a non-empty
// directory, so that file's rename fails. The other 49 are copied and the Put returns
// a *TreeError with that one; its data, all sent, stays under the part name, which a
// listing does not take for a finished file and Resume continues. StopOnError stops
// at it instead and returns its failure alone.
func TestPutTreeGoesOnPastAFailure(t *testing.T) {
	// W (maxSpan) below the files' size, so that Resume has a proven point in them.
	const span = 16 << 10
	c, srv := sftpServerClient(t, t.TempDir(), []Option{WithMaxPacket(span / 4), withSpan(span)})
	pid := srv.pid
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	tree := filepath.Join(local, "tree")
	for i := range 50 {
		gpWrite(t, filepath.Join(tree, fmt.Sprintf("f%02d", i)), gpData(40_000, uint64(i)))
	}
	gpWrite(t, filepath.Join(remote, "tree", "f25", "x"), nil)
	before := serverFDs(t, pid)
	err := c.Put(ctx, tree, filepath.Join(remote, "tree"), Recursive(), Parallel(8))
	var te *TreeError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 1, te.Count)
	var pe *fs.PathError
	require.ErrorAs(t, te.Failed[0], &pe)
	require.Equal(t, "put", pe.Op)
	require.Equal(t, filepath.Join(tree, "f25"), pe.Path)
	require.NotErrorIs(t, err, context.Canceled)
	require.Equal(t, before, serverFDs(t, pid))
	for i := range 50 {
		if i != 25 {
			require.Equal(t, gpData(40_000, uint64(i)), gpRead(t, filepath.Join(remote, "tree", fmt.Sprintf("f%02d", i))))
		}
	}
	part := filepath.Join(remote, "tree", ".f25"+partSuffix)
	require.Equal(t, gpData(40_000, 25), gpRead(t, part))

	// A Get of the copy does not take the part for a file.
	back := filepath.Join(local, "back")
	require.NoError(t, c.Get(ctx, filepath.Join(remote, "tree"), back, Recursive()))
	require.NoFileExists(t, filepath.Join(back, ".f25"+partSuffix))
	require.NoFileExists(t, filepath.Join(back, "f25"+partSuffix))

	require.NoError(t, os.RemoveAll(filepath.Join(remote, "tree", "f25")))
	var ev events
	require.NoError(t, c.Put(ctx, tree, filepath.Join(remote, "tree"), Recursive(), Resume(), ev.opt()))
	require.Equal(t, gpData(40_000, 25), gpRead(t, filepath.Join(remote, "tree", "f25")))
	require.NoFileExists(t, part)
	for _, p := range ev.list {
		if p.Path == filepath.Join(tree, "f25") {
			require.Equal(t, int64(40_000-span), p.Bytes, "the part was not continued")
			break
		}
	}

	gpWrite(t, filepath.Join(remote, "stop", "f25", "x"), nil)
	err = c.Put(ctx, tree, filepath.Join(remote, "stop"), Recursive(), Parallel(8), StopOnError())
	require.ErrorAs(t, err, &pe)
	require.Equal(t, filepath.Join(tree, "f25"), pe.Path)
	require.False(t, errors.As(err, &te), "StopOnError returned a TreeError")
	require.NotErrorIs(t, err, context.Canceled)
	settle(t, c)
	require.Equal(t, before, serverFDs(t, pid))
}

func TestGetPutParallel(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	tree := filepath.Join(local, "tree")
	for i := range 64 {
		gpWrite(t, filepath.Join(tree, strconv.Itoa(i)), gpData(100_000, uint64(i)))
	}
	maxInProgress := func(ev *events) int {
		m := 0
		for _, p := range ev.list {
			m = max(m, p.InProgress)
		}
		return m
	}
	var serial events
	require.NoError(t, c.Put(ctx, tree, filepath.Join(remote, "serial"), Recursive(), Parallel(1), serial.opt()))
	require.Equal(t, 1, maxInProgress(&serial))

	var up events
	require.NoError(t, c.Put(ctx, tree, filepath.Join(remote, "tree"), Recursive(), Parallel(8), up.opt()))
	require.Greater(t, maxInProgress(&up), 1)
	require.LessOrEqual(t, maxInProgress(&up), 8)
	up.check(t, 64, 64*100_000)

	var down events
	require.NoError(t, c.Get(ctx, filepath.Join(remote, "tree"), filepath.Join(local, "back"), Recursive(), Parallel(8), down.opt()))
	require.Greater(t, maxInProgress(&down), 1)
	require.LessOrEqual(t, maxInProgress(&down), 8)
	require.Equal(t, listTree(t, tree), listTree(t, filepath.Join(local, "back")))
}

func TestGetPutFsync(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	data := gpData(100_000, 13)
	gpWrite(t, filepath.Join(local, "f"), data)
	require.NoError(t, c.Put(ctx, filepath.Join(local, "f"), filepath.Join(remote, "f"), Fsync(), Preserve()))
	require.Equal(t, data, gpRead(t, filepath.Join(remote, "f")))
	require.NoError(t, c.Get(ctx, filepath.Join(remote, "f"), filepath.Join(local, "g"), Fsync()))
	require.Equal(t, data, gpRead(t, filepath.Join(local, "g")))
}

func TestTransferOptionsValidate(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	gpWrite(t, filepath.Join(local, "f"), []byte("x"))
	for _, opt := range []TransferOption{Parallel(0), Parallel(-1), Parallel(1025), OnProgress(nil)} {
		require.Error(t, c.Put(ctx, filepath.Join(local, "f"), filepath.Join(remote, "f"), opt))
		require.Error(t, c.Get(ctx, filepath.Join(local, "f"), filepath.Join(local, "g"), opt))
	}
	require.Empty(t, dirNames(t, remote))
}

func TestPlainName(t *testing.T) {
	for _, name := range []string{"a", "a.b", "..a", "a..", " ", "-"} {
		require.True(t, localfs.PlainName(name), name)
	}
	for _, name := range []string{"", ".", "..", "a/b", "/a", "../a", "a/"} {
		require.False(t, localfs.PlainName(name), name)
	}
}

// TestProgressSerialised runs many files at once with a callback that would race if
// two calls overlapped; -race reports it.
func TestProgressSerialised(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	tree := filepath.Join(local, "tree")
	for i := range 32 {
		gpWrite(t, filepath.Join(tree, strconv.Itoa(i)), gpData(300_000, uint64(i)))
	}
	var inside sync.Mutex // TryLock fails only if two calls overlap
	overlaps := 0
	calls := 0
	err := c.Put(ctx, tree, remote, Recursive(), Parallel(16), OnProgress(func(Progress) {
		if !inside.TryLock() {
			overlaps++
			return
		}
		calls++
		inside.Unlock()
	}))
	require.NoError(t, err)
	require.Zero(t, overlaps)
	require.Greater(t, calls, 64)
}
