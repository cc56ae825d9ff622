package sftp

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Open, Create and OpenFile with the os flag combinations that map onto different SFTP
// pflags, against OpenSSH's sftp-server.

func TestIntegrationOpenReadOnly(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	writeLocal(t, filepath.Join(dir, "f"), []byte("hello"), 0o644)

	f, err := c.Open(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "f", f.Name())
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, []byte("hello"), b)

	// The server opened it O_RDONLY, so a write fails there.
	_, err = f.WriteAt([]byte("X"), 0)
	require.Error(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, []byte("hello"), readLocal(t, filepath.Join(dir, "f")))

	_, err = c.Open(ctx, "missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	requirePathErr(t, err, "open", "missing")
	requireStatus(t, err, StatusNoSuchFile)
}

func TestIntegrationCreate(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := func(p string) string { return filepath.Join(dir, p) }

	f, err := c.Create(ctx, "new")
	require.NoError(t, err)
	_, err = f.WriteString("abc")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, []byte("abc"), readLocal(t, local("new")))
	fi, err := os.Lstat(local("new"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o666)&^umask(), fi.Mode().Perm())

	// Create truncates, and opens write-only: reading fails on the server.
	writeLocal(t, local("old"), []byte("old content"), 0o600)
	f, err = c.Create(ctx, "old")
	require.NoError(t, err)
	require.Empty(t, readLocal(t, local("old")))
	_, err = f.ReadAt(make([]byte, 1), 0)
	require.Error(t, err)
	require.NotErrorIs(t, err, io.EOF)
	require.NoError(t, f.Close())
	fi, err = os.Lstat(local("old"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), fi.Mode().Perm(), "an existing file keeps its mode")
}

func TestIntegrationOpenFileFlags(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := func(p string) string { return filepath.Join(dir, p) }

	t.Run("WRONLY|CREATE|TRUNC", func(t *testing.T) {
		f, err := c.OpenFile(ctx, "wct", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
		require.NoError(t, err)
		_, err = f.Write([]byte("first"))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		fi, err := os.Lstat(local("wct"))
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o640)&^umask(), fi.Mode().Perm())

		f, err = c.OpenFile(ctx, "wct", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		require.NoError(t, err)
		require.Empty(t, readLocal(t, local("wct")), "truncated at open")
		_, err = f.Write([]byte("2nd"))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.Equal(t, []byte("2nd"), readLocal(t, local("wct")))
	})

	t.Run("WRONLY without CREATE", func(t *testing.T) {
		_, err := c.OpenFile(ctx, "nocreate", os.O_WRONLY, 0o644)
		require.ErrorIs(t, err, fs.ErrNotExist)
		require.NoFileExists(t, local("nocreate"))
	})

	t.Run("RDWR", func(t *testing.T) {
		writeLocal(t, local("rdwr"), []byte("0123456789"), 0o644)
		f, err := c.OpenFile(ctx, "rdwr", os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		_, err = f.WriteAt([]byte("ab"), 2)
		require.NoError(t, err)
		b := make([]byte, 10)
		n, err := f.ReadAt(b, 0)
		require.Equal(t, 10, n)
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
		}
		require.Equal(t, []byte("01ab456789"), b)
		require.Equal(t, []byte("01ab456789"), readLocal(t, local("rdwr")), "RDWR does not truncate")
	})

	t.Run("RDWR|CREATE", func(t *testing.T) {
		f, err := c.OpenFile(ctx, "rdwrc", os.O_RDWR|os.O_CREATE, 0o600)
		require.NoError(t, err)
		_, err = f.Write([]byte("xyz"))
		require.NoError(t, err)
		_, err = f.Seek(0, io.SeekStart)
		require.NoError(t, err)
		b, err := io.ReadAll(f)
		require.NoError(t, err)
		require.Equal(t, []byte("xyz"), b)
		require.NoError(t, f.Close())
		// Opening again without TRUNC keeps the content.
		f, err = c.OpenFile(ctx, "rdwrc", os.O_RDWR|os.O_CREATE, 0o600)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.Equal(t, []byte("xyz"), readLocal(t, local("rdwrc")))
	})

	t.Run("APPEND", func(t *testing.T) {
		writeLocal(t, local("app"), []byte("hello"), 0o644)
		f, err := c.OpenFile(ctx, "app", os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		defer f.Close()
		// Whatever the offset, writes land at the end.
		_, err = f.Seek(0, io.SeekStart)
		require.NoError(t, err)
		_, err = f.Write([]byte(" world"))
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("!"), 0)
		require.NoError(t, err)
		require.Equal(t, []byte("hello world!"), readLocal(t, local("app")))

		// A pipelined upload of many packets still appends in order: the server
		// handles a channel's requests one after another.
		big := randBytes(3*maxDataSize+17, 3)
		n, err := f.ReadFrom(onlyReader{bytes.NewReader(big)})
		require.NoError(t, err)
		require.Equal(t, int64(len(big)), n)
		require.Equal(t, append([]byte("hello world!"), big...), readLocal(t, local("app")))
	})

	t.Run("RDWR|APPEND reads anywhere", func(t *testing.T) {
		writeLocal(t, local("app2"), []byte("abc"), 0o644)
		f, err := c.OpenFile(ctx, "app2", os.O_RDWR|os.O_APPEND, 0)
		require.NoError(t, err)
		defer f.Close()
		_, err = f.WriteAt([]byte("d"), 1)
		require.NoError(t, err)
		b := make([]byte, 2)
		_, err = f.ReadAt(b, 1)
		require.NoError(t, err)
		require.Equal(t, []byte("bc"), b)
		require.Equal(t, []byte("abcd"), readLocal(t, local("app2")))
	})

	t.Run("CREATE|EXCL", func(t *testing.T) {
		f, err := c.OpenFile(ctx, "excl", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.FileExists(t, local("excl"))

		writeLocal(t, local("excl"), []byte("keep"), 0o600)
		_, err = c.OpenFile(ctx, "excl", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		requirePathErr(t, err, "open", "excl")
		requireStatus(t, err, StatusFailure) // EEXIST has no code of its own in v3
		_, err = c.OpenFile(ctx, "excl", os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_TRUNC, 0o600)
		requireStatus(t, err, StatusFailure)
		require.Equal(t, []byte("keep"), readLocal(t, local("excl")), "a refused open changes nothing")
	})

	t.Run("TRUNC without CREATE", func(t *testing.T) {
		writeLocal(t, local("trunc"), []byte("some content"), 0o644)
		f, err := c.OpenFile(ctx, "trunc", os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		require.Empty(t, readLocal(t, local("trunc")))
		_, err = f.Write([]byte("new"))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.Equal(t, []byte("new"), readLocal(t, local("trunc")))

		// Without CREATE a missing file stays missing: TRUNC must not create it.
		_, err = c.OpenFile(ctx, "trunc-missing", os.O_WRONLY|os.O_TRUNC, 0o644)
		require.ErrorIs(t, err, fs.ErrNotExist)
		requirePathErr(t, err, "open", "trunc-missing")
		require.NoFileExists(t, local("trunc-missing"))
	})
}

// onlyReader hides every method but Read, so io.Copy and ReadFrom cannot take a
// shortcut around the path under test.
type onlyReader struct{ io.Reader }

// onlyWriter hides every method but Write.
type onlyWriter struct{ io.Writer }
