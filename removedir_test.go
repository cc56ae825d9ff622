package sftp

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// requestLog records every request a testserver received, as its Fail hook (which
// fails none).
type requestLog struct {
	mu   sync.Mutex
	seen []testserver.Request
}

func (l *requestLog) fail(req testserver.Request) uint32 {
	l.mu.Lock()
	l.seen = append(l.seen, req)
	l.mu.Unlock()
	return 0
}

// count is how many requests of type typ came.
func (l *requestLog) count(typ uint8) int { return len(l.of(typ)) }

// of returns the requests of type typ, in the order they came.
func (l *requestLog) of(typ uint8) []testserver.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []testserver.Request
	for _, r := range l.seen {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

// reset forgets what came so far.
func (l *requestLog) reset() {
	l.mu.Lock()
	l.seen = nil
	l.mu.Unlock()
}

// A server whose REMOVE refuses a directory and whose RMDIR removes all below it:
// Remove of a full directory fails with ENOTEMPTY and sends no RMDIR; Remove of an
// empty one sends it.
func TestRemoveRecursiveRmdir(t *testing.T) {
	var log requestLog
	c, srv := newTestServerClient(t, testserver.Options{
		Quirks: &testserver.Quirks{Name: "recursive RMDIR", RmdirRemovesPrefix: true},
		Fail:   log.fail,
	})
	require.NoError(t, srv.MkdirAll("/full/sub", 0o755))
	require.NoError(t, srv.WriteFile("/full/sub/g", []byte("g"), 0o644))
	require.NoError(t, srv.Mkdir("/empty", 0o755))
	ctx := testCtx(t)

	err := c.Remove(ctx, "full")
	require.ErrorIs(t, err, syscall.ENOTEMPTY)
	var se *StatusError
	require.ErrorAs(t, err, &se, "the REMOVE's status is kept")
	require.Zero(t, log.count(testserver.TypeRmdir), "no RMDIR for a directory listed with entries")
	_, err = srv.Stat("/full/sub/g")
	require.NoError(t, err)

	require.NoError(t, c.Remove(ctx, "empty"))
	require.Equal(t, 1, log.count(testserver.TypeRmdir))
	_, err = srv.Stat("/empty")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.False(t, c.Capabilities().PhantomDirs)
}

// A directory Remove cannot list is not removed: nothing would show what an RMDIR
// there removes.
func TestRemoveUnlistableDir(t *testing.T) {
	var log requestLog
	c, srv := newTestServerClient(t, testserver.Options{
		Quirks: &testserver.Quirks{Name: "recursive RMDIR", RmdirRemovesPrefix: true},
		Fail: func(req testserver.Request) uint32 {
			log.fail(req)
			if req.Type == testserver.TypeOpendir {
				return testserver.StatusPermissionDenied
			}
			return 0
		},
	})
	require.NoError(t, srv.MkdirAll("/d", 0o755))
	require.NoError(t, srv.WriteFile("/d/f", []byte("f"), 0o644))
	err := c.Remove(testCtx(t), "d")
	require.ErrorIs(t, err, fs.ErrPermission)
	require.ErrorContains(t, err, "could not be listed")
	require.Zero(t, log.count(testserver.TypeRmdir))
	_, err = srv.Stat("/d/f")
	require.NoError(t, err)
}

// On a server that reports directories at missing names and removes by prefix,
// Remove of an empty directory does not send the RMDIR that would take a neighbour
// with it, nor RemoveAll for its root; without a neighbour both go ahead.
func TestRemovePrefixNeighbours(t *testing.T) {
	var log requestLog
	c, srv := newTestServerClient(t, testserver.Options{
		Quirks: &testserver.Quirks{Name: "prefix RMDIR", RmdirRemovesPrefix: true, MissingIsDir: true},
		Fail:   log.fail,
	})
	for _, d := range []string{"/a", "/t/u"} {
		require.NoError(t, srv.MkdirAll(d, 0o755))
	}
	require.NoError(t, srv.WriteFile("/ab", []byte("x"), 0o644))
	require.NoError(t, srv.WriteFile("/t/u/f", []byte("f"), 0o644))
	require.NoError(t, srv.WriteFile("/tt", []byte("x"), 0o644))
	ctx := testCtx(t)

	err := c.Remove(ctx, "a")
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.ErrorContains(t, err, `"ab"`)
	require.True(t, c.Capabilities().PhantomDirs)
	err = c.RemoveAll(ctx, "t")
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.ErrorContains(t, err, `"tt"`)
	for _, kept := range []string{"/ab", "/tt", "/a", "/t"} {
		_, err := srv.Stat(kept)
		require.NoError(t, err, kept)
	}
	_, err = srv.Stat("/t/u")
	require.ErrorIs(t, err, fs.ErrNotExist, "what is below the root is RemoveAll's to remove")

	require.NoError(t, c.Remove(ctx, "ab"))
	require.NoError(t, c.Remove(ctx, "tt"))
	require.NoError(t, c.Remove(ctx, "a"))
	require.NoError(t, c.RemoveAll(ctx, "t"))
	for _, gone := range []string{"/a", "/t"} {
		_, err := srv.Stat(gone)
		require.ErrorIs(t, err, fs.ErrNotExist, gone)
	}
}

// OpenSSH's sftp-server: an empty directory goes, a full one stays with ENOTEMPTY and
// the server's FAILURE, and the server was asked once whether missing names are
// directories (they are not).
func TestRemoveDirOpenSSH(t *testing.T) {
	dir := t.TempDir()
	c := newServerClient(t, dir)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "full", "sub"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "emptyish"), nil, 0o644))
	ctx := testCtx(t)
	err := c.Remove(ctx, filepath.Join(dir, "full"))
	require.ErrorIs(t, err, syscall.ENOTEMPTY)
	requireStatus(t, err, StatusFailure)
	require.DirExists(t, filepath.Join(dir, "full", "sub"))
	require.NoError(t, c.Remove(ctx, filepath.Join(dir, "empty")))
	require.NoDirExists(t, filepath.Join(dir, "empty"))
	require.FileExists(t, filepath.Join(dir, "emptyish"))
	require.NoError(t, c.RemoveAll(ctx, filepath.Join(dir, "full")))
	require.NoDirExists(t, filepath.Join(dir, "full"))
	require.EqualValues(t, phantomNo, c.facts.phantom.Load())
}
