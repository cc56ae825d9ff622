package sftp

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// An exclusive create of a name that exists matches fs.ErrExist, as os.OpenFile's does
// (issue 30, item 4), whatever is at the name: a file, a directory, a link to a file,
// a dangling link. The server's FAILURE is kept beside it, the file is left alone, and
// what is not an existing name (a missing parent) says what it is.
func TestOpenFileExclusiveOfAnExistingNameMatchesErrExist(t *testing.T) {
	dir := t.TempDir()
	writeLocal(t, filepath.Join(dir, "file"), []byte("kept"), 0o644)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	require.NoError(t, os.Symlink("file", filepath.Join(dir, "link")))
	require.NoError(t, os.Symlink("nowhere", filepath.Join(dir, "dangling")))
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	for _, flag := range []int{os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC} {
		for _, name := range []string{"file", "d", "link", "dangling"} {
			f, err := c.OpenFile(ctx, name, flag|os.O_CREATE|os.O_EXCL, 0o600)
			require.Nil(t, f)
			require.ErrorIs(t, err, fs.ErrExist, name)
			requireStatus(t, err, StatusFailure)
			requirePathErr(t, err, "open", name)
		}
	}
	require.Equal(t, "kept", string(readLocal(t, filepath.Join(dir, "file"))))
	require.NoFileExists(t, filepath.Join(dir, "nowhere"), "nothing made through the dangling link")

	_, err := c.OpenFile(ctx, "missing/new", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.False(t, errors.Is(err, fs.ErrExist))
	f, err := c.OpenFile(ctx, "new", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	// Without O_EXCL an existing name is no failure, and no LSTAT is asked.
	f, err = c.OpenFile(ctx, "new", os.O_WRONLY|os.O_CREATE, 0o600)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// A FAILURE of an exclusive create with nothing at the name stays a plain FAILURE,
// and a FAILURE of an OPEN that does not ask for an exclusive create sends no LSTAT.
func TestOpenFileBareFailureStaysFailure(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Fail: func(r testserver.Request) uint32 {
		if r.Type == testserver.TypeOpen && r.Path == "/refused" {
			return uint32(StatusFailure)
		}
		return 0
	}})
	ctx := testCtx(t)
	_, err := c.OpenFile(ctx, "/refused", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	require.ErrorIs(t, err, &StatusError{Code: StatusFailure})
	require.False(t, errors.Is(err, fs.ErrExist))
	require.Equal(t, 1, srv.Requests(testserver.TypeLstat), "asked once whether the name exists")

	require.NoError(t, srv.WriteFile("/refused", []byte("x"), 0o644))
	_, err = c.OpenFile(ctx, "/refused", os.O_WRONLY|os.O_CREATE, 0o600)
	require.ErrorIs(t, err, &StatusError{Code: StatusFailure})
	require.False(t, errors.Is(err, fs.ErrExist), "not an exclusive create: the name existing says nothing")
	require.Equal(t, 1, srv.Requests(testserver.TypeLstat), "no LSTAT for an OPEN without O_EXCL")
	requireWorks(t, c)
}
