package sftp

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

func TestMkdirOfAnExistingPathMatchesErrExist(t *testing.T) {
	dir := t.TempDir()
	writeLocal(t, filepath.Join(dir, "file"), []byte("x"), 0o644)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	for _, name := range []string{"d", "file"} {
		err := c.Mkdir(ctx, name, 0o755)
		require.ErrorIs(t, err, fs.ErrExist, name)
		var se *StatusError
		require.ErrorAs(t, err, &se, "the server's own answer is kept")
		require.Equal(t, StatusFailure, se.Code)
		var pe *fs.PathError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "mkdir", pe.Op)
		require.Equal(t, name, pe.Path)
	}
	// (A FAILURE for another reason: TestBareFailuresStayFailures.)
	require.ErrorIs(t, c.Mkdir(ctx, "missing/new", 0o755), fs.ErrNotExist)
	require.NoError(t, c.Mkdir(ctx, "new", 0o755))
}

func TestRemoveOfANonEmptyDirectoryMatchesENOTEMPTY(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "full"), 0o755))
	writeLocal(t, filepath.Join(dir, "full", "f"), nil, 0o644)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	err := c.Remove(ctx, "full")
	require.ErrorIs(t, err, syscall.ENOTEMPTY)
	var se *StatusError
	require.ErrorAs(t, err, &se)
	require.FileExists(t, filepath.Join(dir, "full", "f"))

	require.NoError(t, c.Remove(ctx, "empty"))
	require.NoDirExists(t, filepath.Join(dir, "empty"))
	require.ErrorIs(t, c.Remove(ctx, "empty"), fs.ErrNotExist)
	require.NoError(t, c.RemoveAll(ctx, "full"))
	require.NoDirExists(t, filepath.Join(dir, "full"))
}

// On the fault server a FAILURE from MKDIR or RMDIR with nothing behind it stays a
// plain FAILURE: the follow-up look finds no reason to say more.
func TestBareFailuresStayFailures(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Fail: func(r testserver.Request) uint32 {
		if r.Type == testserver.TypeMkdir || r.Type == testserver.TypeRmdir {
			return uint32(StatusFailure)
		}
		return 0
	}})
	ctx := testCtx(t)
	require.NoError(t, srv.Mkdir("/empty", 0o755))
	err := c.Mkdir(ctx, "/new", 0o755)
	require.ErrorIs(t, err, &StatusError{Code: StatusFailure})
	require.False(t, errors.Is(err, fs.ErrExist))
	err = c.Remove(ctx, "/empty")
	require.ErrorIs(t, err, &StatusError{Code: StatusFailure})
	require.False(t, errors.Is(err, syscall.ENOTEMPTY))
	requireWorks(t, c)
}
