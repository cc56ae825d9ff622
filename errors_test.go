package sftp

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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

// TestCtxErrorKeepsALifeEnd: the one normaliser of a wait's end returns a File's or a
// Dir's own reason as it is, also through a ctx derived from the life, and labels any
// other ctx's end, which errors.Is still matches.
func TestCtxErrorKeepsALifeEnd(t *testing.T) {
	live := context.Background()
	require.NoError(t, ctxError(live, ""))

	cancelled, cancel := context.WithCancel(live)
	cancel()
	require.EqualError(t, ctxError(cancelled, ""), "sftp: context canceled")
	require.EqualError(t, ctxError(cancelled, "walk"), "sftp: walk: context canceled")
	require.ErrorIs(t, ctxError(cancelled, ""), context.Canceled)

	closed := newFileLife()
	closed.end()
	derived, stop := context.WithCancel(closed)
	defer stop()
	for _, ctx := range []context.Context{closed, derived} {
		err := ctxError(ctx, "")
		require.Equal(t, errFileClosed, err)
		require.ErrorIs(t, err, fs.ErrClosed)
		require.False(t, errors.Is(err, context.Canceled), "Close is not the caller's cancellation")
	}

	late := newFileLife()
	require.True(t, late.setDeadline(time.Unix(1, 0)))
	derived, stop = context.WithCancel(late)
	defer stop()
	for _, ctx := range []context.Context{late, derived} {
		err := ctxError(ctx, "")
		require.Equal(t, errDeadline, err)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	}
	require.True(t, late.setDeadline(time.Time{}))
	require.NoError(t, ctxError(late, ""), "a later deadline revives the life")
	require.Equal(t, errDeadline, ctxError(derived, ""), "what was derived stays ended")

	read, stopRead := context.WithCancelCause(live)
	stopRead(errDirClosed)
	require.Equal(t, errDirClosed, ctxError(read, ""))
}

// TestWaitWithin: fn's answer counts while ctx lasts; once ctx ends first the wait
// returns ctx's error, and what fn delivers after goes to late, unless it failed. On
// a conn the goroutine is counted: closing the conn waits for it.
func TestWaitWithin(t *testing.T) {
	v, ok, err := waitWithin(testCtx(t), "op", nil, func() (int, error) { return 7, nil }, nil)
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, 7, v)

	for _, fails := range []bool{false, true} {
		c := mustPipeConn(t, func(p *scriptPeer) { p.expectEOF() })
		ctx, cancel := context.WithCancel(context.Background())
		release := make(chan struct{})
		lateGot := make(chan int, 1)
		type result struct {
			ok  bool
			err error
		}
		res := make(chan result, 1)
		go func() {
			_, ok, err := waitWithin(ctx, "opening", c, func() (int, error) {
				<-release
				if fails {
					return 0, errors.New("failed")
				}
				return 8, nil
			}, func(v int) { lateGot <- v })
			res <- result{ok, err}
		}()
		cancel()
		r := recv(t, res)
		require.False(t, r.ok)
		err := r.err
		require.ErrorIs(t, err, context.Canceled)
		require.EqualError(t, err, "sftp: opening: context canceled")
		close(release)
		c.close() // waits for the goroutine waitWithin started on c
		if fails {
			require.Empty(t, lateGot, "a result that failed is nobody's to discard")
		} else {
			require.Equal(t, 8, recv(t, lateGot))
		}
	}
}
