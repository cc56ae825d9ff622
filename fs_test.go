package sftp

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"
)

// Helpers: the io/fs view (fs.go) against OpenSSH's sftp-server over pipes.
//
// This file provides fsTestClient (sftpServerClient, also asserting the server's clean
// exit) and fsTree (a tree testing/fstest.TestFS walks). Tests of Client.FS, its files
// and directories go here; model_fs_test.go runs fstest.TestFS and iotest.TestReader
// over the same view on every real server of the cross-server suite.

// fsTestClient is sftpServerClient (testenv_test.go) on dir; the server must also exit
// cleanly once the Client is closed.
func fsTestClient(t *testing.T, dir string, opts ...Option) *Client {
	t.Helper()
	var srv *startedServer
	// Registered first, so it runs after sftpServerClient's cleanup has reaped the server.
	t.Cleanup(func() {
		if srv != nil {
			require.NoError(t, srv.exit, "sftp-server's exit")
		}
	})
	c, srv := sftpServerClient(t, dir, opts)
	return c
}

// fsTree builds the test tree and returns its directory and the names TestFS must
// find in it.
func fsTree(t *testing.T) (string, []string) { return fsTreeSized(t, 300_001, 70_000) }

// fsTreeSized is fsTree with the sizes of its two larger files chosen: TestFS reads
// every file one byte per ReadAt, a round trip each, so it gets smaller ones.
func fsTreeSized(t *testing.T, big, mid int) (string, []string) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	files := map[string][]byte{
		"a.txt":               []byte("hello, sftp\n"),
		"empty.txt":           nil,
		"big.bin":             random(big),
		"~tilde.txt":          []byte("not a home directory\n"),
		"dir/mid.bin":         random(mid),
		"dir/nested/deep.txt": []byte("deep\n"),
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, data, 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "emptydir"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(dir, "a.txt"), filepath.Join(dir, "link-abs")))
	require.NoError(t, os.Symlink("../a.txt", filepath.Join(dir, "dir", "rel")))
	require.NoError(t, os.Symlink("dir", filepath.Join(dir, "dirlink")))
	return dir, []string{
		"a.txt", "empty.txt", "big.bin", "~tilde.txt", "emptydir", "link-abs", "dirlink",
		"dir", "dir/mid.bin", "dir/rel", "dir/nested", "dir/nested/deep.txt",
	}
}

func TestFSConformance(t *testing.T) {
	dir, names := fsTreeSized(t, 5_001, 1_500)
	fsys := fsTestClient(t, dir).FS()
	require.NoError(t, fstest.TestFS(fsys, names...))

	// With the smallest READs the larger files take many each, so reads that span
	// packets, and read-ahead across them, are checked too.
	small := fsTestClient(t, dir, WithMaxPacket(minDataSize)).FS()
	require.NoError(t, fstest.TestFS(small, names...))

	// TestFS tries one Sub itself; this one nests two levels.
	sub, err := fs.Sub(fsys, "dir/nested")
	require.NoError(t, err)
	require.NoError(t, fstest.TestFS(sub, "deep.txt"))
	empty, err := fs.Sub(fsys, "emptydir")
	require.NoError(t, err)
	require.NoError(t, fstest.TestFS(empty))
}

func TestFSImplements(t *testing.T) {
	dir, _ := fsTree(t)
	fsys := fsTestClient(t, dir).FS()
	require.Implements(t, (*fs.StatFS)(nil), fsys)
	require.Implements(t, (*fs.ReadDirFS)(nil), fsys)
	require.Implements(t, (*fs.ReadFileFS)(nil), fsys)
	require.Implements(t, (*fs.ReadLinkFS)(nil), fsys)
	require.Implements(t, (*fs.SubFS)(nil), fsys)

	sub, err := fs.Sub(fsys, "dir")
	require.NoError(t, err)
	require.IsType(t, fsys, sub, "fs.Sub must use the FS's own Sub")
	same, err := fs.Sub(fsys, ".")
	require.NoError(t, err)
	require.Same(t, fsys, same)
}

// TestFSWalkDir checks a walk of the remote view against a walk of the same tree
// through os.DirFS: same names, same types, same file contents.
func TestFSWalkDir(t *testing.T) {
	dir, _ := fsTree(t)
	fsys := fsTestClient(t, dir).FS()

	walk := func(fsys fs.FS) map[string]fs.FileMode {
		got := map[string]fs.FileMode{}
		require.NoError(t, fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			require.NoError(t, err, p)
			got[p] = d.Type()
			return nil
		}))
		return got
	}
	want := walk(os.DirFS(dir))
	got := walk(fsys)
	require.Equal(t, want, got)
	require.Equal(t, fs.ModeSymlink, got["dir/rel"])
	require.Equal(t, fs.ModeDir, got["emptydir"])

	for p, typ := range want {
		if !typ.IsRegular() {
			continue
		}
		local, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		require.NoError(t, err)
		remote, err := fs.ReadFile(fsys, p)
		require.NoError(t, err, p)
		require.True(t, bytes.Equal(local, remote), "%s: contents differ", p)
	}

	// SkipDir prunes the subtree; the walk goes on with the next entry.
	var seen []string
	require.NoError(t, fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		seen = append(seen, p)
		if p == "dir" {
			return fs.SkipDir
		}
		return nil
	}))
	require.Contains(t, seen, "dir")
	require.Contains(t, seen, "emptydir")
	for _, p := range seen {
		require.False(t, strings.HasPrefix(p, "dir/"), "walked into skipped %s", p)
	}
}

func TestFSSub(t *testing.T) {
	dir, _ := fsTree(t)
	fsys := fsTestClient(t, dir).FS()

	sub, err := fs.Sub(fsys, "dir")
	require.NoError(t, err)
	data, err := fs.ReadFile(sub, "nested/deep.txt")
	require.NoError(t, err)
	require.Equal(t, "deep\n", string(data))

	// The relative link resolves against its own directory on the server, so it
	// reaches out of the subtree (as it would through os.DirFS).
	data, err = fs.ReadFile(sub, "rel")
	require.NoError(t, err)
	require.Equal(t, "hello, sftp\n", string(data))
	target, err := fs.ReadLink(sub, "rel")
	require.NoError(t, err)
	require.Equal(t, "../a.txt", target)

	fi, err := fs.Stat(sub, ".")
	require.NoError(t, err)
	require.True(t, fi.IsDir())
	require.Equal(t, "dir", fi.Name())

	nested, err := fs.Sub(sub, "nested")
	require.NoError(t, err)
	entries, err := fs.ReadDir(nested, ".")
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "deep.txt", entries[0].Name())

	// Errors name the file as the sub view knows it.
	_, err = fs.Stat(nested, "missing")
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "missing", pe.Path)
	require.ErrorIs(t, err, fs.ErrNotExist)

	// A File opened through a sub view reports errors under its sub name too.
	f, err := sub.Open("mid.bin")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	err = f.Close()
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "mid.bin", pe.Path)
	require.ErrorIs(t, err, fs.ErrClosed)
	_, err = f.Stat()
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "mid.bin", pe.Path)

	// A sub view of a missing directory is made; using it fails.
	gone, err := fs.Sub(fsys, "nope")
	require.NoError(t, err)
	_, err = gone.Open(".")
	require.ErrorIs(t, err, fs.ErrNotExist)

	_, err = fs.Sub(fsys, "../x")
	require.ErrorIs(t, err, fs.ErrInvalid)
	_, err = fsys.(fs.SubFS).Sub("/abs")
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "/abs", pe.Path)
	require.ErrorIs(t, err, fs.ErrInvalid)
}

func TestFSSymlinks(t *testing.T) {
	dir, _ := fsTree(t)
	require.NoError(t, os.Symlink("does-not-exist", filepath.Join(dir, "dangling")))
	fsys := fsTestClient(t, dir).FS()

	target, err := fs.ReadLink(fsys, "link-abs")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "a.txt"), target)
	target, err = fs.ReadLink(fsys, "dir/rel")
	require.NoError(t, err)
	require.Equal(t, "../a.txt", target)

	li, err := fs.Lstat(fsys, "dir/rel")
	require.NoError(t, err)
	require.Equal(t, fs.ModeSymlink, li.Mode().Type())
	require.Equal(t, "rel", li.Name())
	si, err := fs.Stat(fsys, "dir/rel")
	require.NoError(t, err)
	require.True(t, si.Mode().IsRegular())
	require.Equal(t, int64(len("hello, sftp\n")), si.Size())

	// Open follows links, to files and to directories.
	data, err := fs.ReadFile(fsys, "link-abs")
	require.NoError(t, err)
	require.Equal(t, "hello, sftp\n", string(data))
	f, err := fsys.Open("dirlink")
	require.NoError(t, err)
	_, ok := f.(fs.ReadDirFile)
	require.True(t, ok, "a link to a directory opens as a directory")
	require.NoError(t, f.Close())

	// A dangling link can be listed and read, not followed.
	li, err = fs.Lstat(fsys, "dangling")
	require.NoError(t, err)
	require.Equal(t, fs.ModeSymlink, li.Mode().Type())
	target, err = fs.ReadLink(fsys, "dangling")
	require.NoError(t, err)
	require.Equal(t, "does-not-exist", target)
	_, err = fsys.Open("dangling")
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = fs.Stat(fsys, "dangling")
	require.ErrorIs(t, err, fs.ErrNotExist)

	// ReadLink of something that is not a link fails with a PathError.
	_, err = fs.ReadLink(fsys, "a.txt")
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "readlink", pe.Op)
	require.Equal(t, "a.txt", pe.Path)
}

// fsOps calls every name-taking method of fsys, for the error tests.
func fsOps(fsys fs.FS) map[string]func(name string) error {
	return map[string]func(string) error{
		"Open": func(n string) error {
			f, err := fsys.Open(n)
			if err == nil {
				f.Close()
			}
			return err
		},
		"Stat":     func(n string) error { _, err := fsys.(fs.StatFS).Stat(n); return err },
		"Lstat":    func(n string) error { _, err := fsys.(fs.ReadLinkFS).Lstat(n); return err },
		"ReadLink": func(n string) error { _, err := fsys.(fs.ReadLinkFS).ReadLink(n); return err },
		"ReadDir":  func(n string) error { _, err := fsys.(fs.ReadDirFS).ReadDir(n); return err },
		"ReadFile": func(n string) error { _, err := fsys.(fs.ReadFileFS).ReadFile(n); return err },
		"Sub":      func(n string) error { _, err := fsys.(fs.SubFS).Sub(n); return err },
	}
}

func TestFSInvalidNames(t *testing.T) {
	dir, _ := fsTree(t)
	root := fsTestClient(t, dir).FS()
	sub, err := fs.Sub(root, "dir")
	require.NoError(t, err)

	bad := []string{"", "/", "/a.txt", "a.txt/", "./a.txt", "a.txt/.", "dir/../a.txt", "..", "dir//mid.bin", "dir/./mid.bin"}
	for _, fsys := range []fs.FS{root, sub} {
		for op, call := range fsOps(fsys) {
			for _, name := range bad {
				err := call(name)
				var pe *fs.PathError
				require.ErrorAs(t, err, &pe, "%s(%q)", op, name)
				require.Equal(t, name, pe.Path, "%s(%q)", op, name)
				require.ErrorIs(t, err, fs.ErrInvalid, "%s(%q)", op, name)
			}
		}
	}
}

func TestFSMissingNames(t *testing.T) {
	dir, _ := fsTree(t)
	fsys := fsTestClient(t, dir).FS()
	for op, call := range fsOps(fsys) {
		if op == "Sub" {
			continue // Sub does not look at the server
		}
		for _, name := range []string{"nope", "dir/nope", "nope/deeper", "~nope"} {
			err := call(name)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe, "%s(%q)", op, name)
			require.Equal(t, name, pe.Path, "%s(%q): the fs name, not the remote path", op, name)
			require.ErrorIs(t, err, fs.ErrNotExist, "%s(%q)", op, name)
			var se *StatusError
			require.ErrorAs(t, err, &se, "%s(%q): the server's status is kept", op, name)
		}
	}
}

func TestFSDirFile(t *testing.T) {
	dir, _ := fsTree(t)
	fsys := fsTestClient(t, dir).FS()

	f, err := fsys.Open(".")
	require.NoError(t, err)
	d, ok := f.(fs.ReadDirFile)
	require.True(t, ok)
	fi, err := d.Stat()
	require.NoError(t, err)
	require.True(t, fi.IsDir())

	_, err = d.Read(make([]byte, 1))
	require.ErrorIs(t, err, syscall.EISDIR)

	var names []string
	for {
		batch, err := d.ReadDir(3)
		if err == io.EOF {
			require.Empty(t, batch)
			break
		}
		require.NoError(t, err)
		require.NotEmpty(t, batch)
		require.LessOrEqual(t, len(batch), 3)
		for _, e := range batch {
			names = append(names, e.Name())
		}
	}
	// An open directory streams in the server's order, as os.File's ReadDir does.
	require.ElementsMatch(t, []string{"a.txt", "big.bin", "dir", "dirlink", "empty.txt", "emptydir", "link-abs", "~tilde.txt"}, names)

	rest, err := d.ReadDir(-1)
	require.NoError(t, err)
	require.Empty(t, rest)
	_, err = d.ReadDir(1)
	require.ErrorIs(t, err, io.EOF)

	require.NoError(t, d.Close())
	_, err = d.ReadDir(0)
	require.ErrorIs(t, err, fs.ErrClosed)
	_, err = d.Stat()
	require.ErrorIs(t, err, fs.ErrClosed)
	require.ErrorIs(t, d.Close(), fs.ErrClosed)

	// ReadDir(n) after a partial ReadDir(-1)-free read hands out only the rest.
	f, err = fsys.Open("dir")
	require.NoError(t, err)
	d = f.(fs.ReadDirFile)
	first, err := d.ReadDir(1)
	require.NoError(t, err)
	require.Len(t, first, 1)
	rest, err = d.ReadDir(0)
	require.NoError(t, err)
	require.Len(t, rest, 2)
	require.ElementsMatch(t, []string{"mid.bin", "nested", "rel"}, []string{first[0].Name(), rest[0].Name(), rest[1].Name()})
	require.NoError(t, d.Close())

	// The directory vanishing between Open and ReadDir is reported by ReadDir.
	f, err = fsys.Open("emptydir")
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, "emptydir")))
	_, err = f.(fs.ReadDirFile).ReadDir(-1)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "emptydir", pe.Path)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, f.Close())

	_, err = fs.ReadFile(fsys, "dir")
	require.ErrorIs(t, err, syscall.EISDIR)
}

func TestFSRegularFile(t *testing.T) {
	dir, _ := fsTree(t)
	fsys := fsTestClient(t, dir).FS()
	want, err := os.ReadFile(filepath.Join(dir, "big.bin"))
	require.NoError(t, err)

	f, err := fsys.Open("big.bin")
	require.NoError(t, err)
	defer f.Close()
	require.Implements(t, (*io.ReaderAt)(nil), f)
	require.Implements(t, (*io.Seeker)(nil), f)
	require.Implements(t, (*io.WriterTo)(nil), f)
	_, isDir := f.(fs.ReadDirFile)
	require.False(t, isDir)
	_, writable := f.(io.Writer)
	require.False(t, writable, "an fs.File is read-only")

	var buf bytes.Buffer
	n, err := io.Copy(&buf, f)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), n)
	require.True(t, bytes.Equal(want, buf.Bytes()))

	p := make([]byte, 1000)
	k, err := f.(io.ReaderAt).ReadAt(p, 250_000)
	require.NoError(t, err)
	require.Equal(t, len(p), k)
	require.Equal(t, want[250_000:251_000], p)

	off, err := f.(io.Seeker).Seek(-10, io.SeekEnd)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)-10), off)
	tail, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, want[len(want)-10:], tail)

	fi, err := f.Stat()
	require.NoError(t, err)
	require.Equal(t, "big.bin", fi.Name())
	require.Equal(t, int64(len(want)), fi.Size())
	require.True(t, fi.Mode().IsRegular())

	// Empty files read as empty, not nil-with-error.
	data, err := fs.ReadFile(fsys, "empty.txt")
	require.NoError(t, err)
	require.Empty(t, data)
}

func TestFSNamedPipe(t *testing.T) {
	dir := t.TempDir()
	mkfifo(t, filepath.Join(dir, "fifo"), 0o644)
	fsys := fsTestClient(t, dir).FS()

	// Each of these would hang the server if it sent an OPEN. Should one do so, the
	// wait gives up and a writer is opened to release the server, so the test fails
	// instead of hanging.
	bounded := func(call func() error) error {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			w, err := os.OpenFile(filepath.Join(dir, "fifo"), os.O_RDWR, 0)
			require.NoError(t, err)
			w.Close()
			<-done
			t.Fatal("the call opened the named pipe on the server")
			return nil
		}
	}
	err := bounded(func() error {
		f, err := fsys.Open("fifo")
		if err == nil {
			f.Close()
		}
		return err
	})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	err = bounded(func() error { _, err := fs.ReadFile(fsys, "fifo"); return err })
	require.ErrorIs(t, err, errors.ErrUnsupported)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "fifo", pe.Path)

	// It is still listed and statted, and the session still answers.
	fi, err := fs.Stat(fsys, "fifo")
	require.NoError(t, err)
	require.Equal(t, fs.ModeNamedPipe, fi.Mode().Type())
	entries, err := fs.ReadDir(fsys, ".")
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

func TestFSClosedClient(t *testing.T) {
	dir, _ := fsTree(t)
	c := fsTestClient(t, dir)
	fsys := c.FS()
	f, err := fsys.Open("a.txt")
	require.NoError(t, err)
	require.NoError(t, c.Close())

	_, err = fs.Stat(fsys, "a.txt")
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "a.txt", pe.Path)
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = fs.ReadFile(fsys, "a.txt")
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = io.ReadAll(f)
	require.Error(t, err)
	require.Error(t, f.Close())
}
