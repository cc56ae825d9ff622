package sftp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sftp/internal/testserver"
	"github.com/stretchr/testify/require"
)

// Tests of the round trips a listing and a tree transfer save by sending requests
// together: that the requests really go out before the replies they could have
// waited for, that the order and bounds still hold, and that every handle is closed
// on success, failure and cancel.

// TestReadDirAsksTwoPagesAtOnce: a whole listing sends its first two READDIRs back to
// back, so a one-page directory's page and EOF come in one round trip.
func TestReadDirAsksTwoPagesAtOnce(t *testing.T) {
	var on atomic.Bool
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallTypes(&on, testserver.TypeReaddir)})
	for _, n := range []string{"/d/a", "/d/b", "/d/c"} {
		require.NoError(t, srv.MkdirAll("/d", 0o755))
		require.NoError(t, srv.WriteFile(n, []byte(n), 0o644))
	}
	on.Store(true)
	done := tsGo(func() []string {
		es, err := c.ReadDir(testCtx(t), "/d")
		if err != nil {
			return []string{err.Error()}
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	})
	tsWaitStalled(t, srv, 2)
	require.Equal(t, 2, srv.Requests(testserver.TypeReaddir), "both READDIRs sent before either was answered")
	on.Store(false)
	srv.ReleaseStalled()
	require.Equal(t, []string{"a", "b", "c"}, tsRecv(t, done, "ReadDir"))
	requireWorks(t, c) // ReadDir does not wait for its CLOSE; this round trip does
	require.Zero(t, srv.OpenHandles())
}

// TestReadDirKeepsAPageAnsweredAfterEOF: a server that carried out the two READDIRs
// of a batch in the other order answers the first with EOF and the second with the
// page. The page must not be lost: the listing keeps it and goes on to a real end.
func TestReadDirKeepsAPageAnsweredAfterEOF(t *testing.T) {
	page := []testserver.ListEntry{{Name: "x", Mode: 0o100644}, {Name: "y", Mode: 0o100644}}
	var (
		mu      sync.Mutex
		seen    int
		held    []byte
		swapped bool
	)
	c, srv := newTestServerClient(t, testserver.Options{
		Listing: func(p string) testserver.Lister {
			if p != "/swapped" {
				return nil
			}
			return func(n int) []testserver.ListEntry {
				if n == 0 {
					return page
				}
				return nil
			}
		},
		// The first READDIR's reply (the page) is held back and sent after the
		// second's (EOF), with their ids exchanged.
		Corrupt: func(req testserver.Request, reply []byte) [][]byte {
			if req.Type != testserver.TypeReaddir {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			seen++
			switch seen {
			case 1:
				held = slices.Clone(reply)
				return [][]byte{}
			case 2:
				eof := slices.Clone(reply)
				a, b := binary.BigEndian.Uint32(held[5:9]), binary.BigEndian.Uint32(eof[5:9])
				binary.BigEndian.PutUint32(held[5:9], b)
				binary.BigEndian.PutUint32(eof[5:9], a)
				swapped = true
				return [][]byte{eof, held}
			}
			return nil
		},
	})
	require.NoError(t, srv.Mkdir("/swapped", 0o755))
	es, err := c.ReadDir(testCtx(t), "/swapped")
	require.NoError(t, err)
	mu.Lock()
	require.True(t, swapped)
	mu.Unlock()
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"x", "y"}, names)
	requireWorks(t, c) // ReadDir does not wait for its CLOSE; this round trip does
	require.Zero(t, srv.OpenHandles())
}

// TestReadDirManyPagesOpenSSH: a directory of many READDIR pages (OpenSSH sends 100
// names a page) is listed whole and in order with batches of READDIRs in flight,
// by ReadDir and by a recursive Get, and no handle stays open on the server.
func TestReadDirManyPagesOpenSSH(t *testing.T) {
	dir := t.TempDir()
	c, pid := getPutClient(t, dir)
	ctx := testCtx(t)
	before := serverFDs(t, pid)
	big := filepath.Join(dir, "big")
	var want []string
	for i := range 1050 {
		n := fmt.Sprintf("f%04d", i)
		want = append(want, n)
		gpWrite(t, filepath.Join(big, n), []byte(n))
	}
	es, err := c.ReadDir(ctx, big)
	require.NoError(t, err)
	var got []string
	for _, e := range es {
		got = append(got, e.Name())
	}
	require.Equal(t, want, got)
	back := filepath.Join(t.TempDir(), "back")
	require.NoError(t, c.Get(ctx, big, back, Recursive()))
	local, err := os.ReadDir(back)
	require.NoError(t, err)
	require.Len(t, local, len(want))
	require.Equal(t, []byte("f1049"), gpRead(t, filepath.Join(back, "f1049")))
	require.Equal(t, before, serverFDs(t, pid))
}

// TestGetTreeListsOnWhileClosesAreUnanswered: a recursive Get does not wait for each
// directory's CLOSE before listing the next level, but it does wait for them all
// before it returns.
func TestGetTreeListsOnWhileClosesAreUnanswered(t *testing.T) {
	var on atomic.Bool
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallTypes(&on, testserver.TypeClose)})
	require.NoError(t, srv.MkdirAll("/t/a/c", 0o755))
	require.NoError(t, srv.MkdirAll("/t/b", 0o755))
	on.Store(true)
	local := filepath.Join(t.TempDir(), "t")
	done := tsGo(func() error { return c.Get(testCtx(t), "/t", local, Recursive()) })
	// /t's CLOSE is unanswered while /t/a, /t/b and /t/a/c are listed.
	tsWaitStalled(t, srv, 4)
	require.Equal(t, 4, srv.Requests(testserver.TypeOpendir))
	select {
	case err := <-done:
		t.Fatalf("Get returned (%v) before its CLOSEs were answered", err)
	default:
	}
	on.Store(false)
	srv.ReleaseStalled()
	require.NoError(t, tsRecv(t, done, "Get"))
	require.Zero(t, srv.OpenHandles())
	fi, err := os.Stat(filepath.Join(local, "a", "c"))
	require.NoError(t, err)
	require.True(t, fi.IsDir())
}

// TestGetTreeFailureAndCancelCloseDirs: whether a recursive Get fails on a file or
// is cancelled in its walk, every directory handle it opened is closed: at once when
// it returns with an error of its own, and in the background once ctx ended.
func TestGetTreeFailureAndCancelCloseDirs(t *testing.T) {
	t.Run("failure", func(t *testing.T) {
		c, srv := newTestServerClient(t, testserver.Options{Fail: func(r testserver.Request) uint32 {
			if r.Type == testserver.TypeOpen && r.Path == "/t/b/f" {
				return testserver.StatusPermissionDenied
			}
			return 0
		}})
		require.NoError(t, srv.MkdirAll("/t/a", 0o755))
		require.NoError(t, srv.MkdirAll("/t/b", 0o755))
		require.NoError(t, srv.WriteFile("/t/b/f", []byte("x"), 0o644))
		err := c.Get(testCtx(t), "/t", filepath.Join(t.TempDir(), "t"), Recursive())
		require.ErrorIs(t, err, fs.ErrPermission)
		require.Zero(t, srv.OpenHandles())
	})
	t.Run("cancel", func(t *testing.T) {
		var on atomic.Bool
		c, srv := newTestServerClient(t, testserver.Options{Stall: func(r testserver.Request) bool {
			return on.Load() && r.Type == testserver.TypeReaddir && r.Seq > 4
		}})
		require.NoError(t, srv.MkdirAll("/t/a", 0o755))
		require.NoError(t, srv.MkdirAll("/t/b", 0o755))
		on.Store(true)
		ctx, cancel := context.WithCancel(testCtx(t))
		done := tsGo(func() error { return c.Get(ctx, "/t", filepath.Join(t.TempDir(), "t"), Recursive()) })
		tsWaitStalled(t, srv, 1)
		cancel()
		require.ErrorIs(t, tsRecv(t, done, "Get"), context.Canceled)
		on.Store(false)
		srv.ReleaseStalled()
		settle(t, c) // the CLOSEs ctx's end left to the background are done
		require.Zero(t, srv.OpenHandles())
	})
}

// TestGetRecursiveOpensTheRootWithItsStat: the root's OPENDIR goes out before the
// Stat is answered; when the root turns out to be a file, or missing, that handle is
// closed all the same.
func TestGetRecursiveOpensTheRootWithItsStat(t *testing.T) {
	var on atomic.Bool
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallTypes(&on, testserver.TypeStat, testserver.TypeOpendir)})
	require.NoError(t, srv.MkdirAll("/t", 0o755))
	require.NoError(t, srv.WriteFile("/t/f", []byte("data"), 0o644))
	on.Store(true)
	local := filepath.Join(t.TempDir(), "t")
	done := tsGo(func() error { return c.Get(testCtx(t), "/t", local, Recursive()) })
	tsWaitStalled(t, srv, 2)
	require.Equal(t, 1, srv.Requests(testserver.TypeStat))
	require.Equal(t, 1, srv.Requests(testserver.TypeOpendir))
	on.Store(false)
	srv.ReleaseStalled()
	require.NoError(t, tsRecv(t, done, "Get"))
	require.Equal(t, []byte("data"), gpRead(t, filepath.Join(local, "f")))
	require.Zero(t, srv.OpenHandles())

	// A file: the OPENDIR fails or its handle is closed.
	require.NoError(t, c.Get(testCtx(t), "/t/f", filepath.Join(t.TempDir(), "f"), Recursive()))
	require.Zero(t, srv.OpenHandles())
	// Missing.
	require.ErrorIs(t, c.Get(testCtx(t), "/none", filepath.Join(t.TempDir(), "n"), Recursive()), fs.ErrNotExist)
	require.Zero(t, srv.OpenHandles())
}

// TestPutTreeSendsItsMkdirsTogether: a Put of a tree whose root is missing sends every
// MKDIR, parents before children, before any is answered.
func TestPutTreeSendsItsMkdirsTogether(t *testing.T) {
	var on atomic.Bool
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallTypes(&on, testserver.TypeMkdir)})
	src := filepath.Join(t.TempDir(), "src")
	for _, d := range []string{"a/b/c", "d"} {
		require.NoError(t, os.MkdirAll(filepath.Join(src, filepath.FromSlash(d)), 0o755))
	}
	gpWrite(t, filepath.Join(src, "a", "b", "c", "f"), []byte("deep"))
	on.Store(true)
	done := tsGo(func() error { return c.Put(testCtx(t), src, "/dst", Recursive()) })
	tsWaitStalled(t, srv, 5) // /dst, a, d, a/b, a/b/c
	require.Equal(t, 5, srv.Requests(testserver.TypeMkdir))
	on.Store(false)
	srv.ReleaseStalled()
	require.NoError(t, tsRecv(t, done, "Put"))
	got, err := srv.ReadFile("/dst/a/b/c/f")
	require.NoError(t, err)
	require.Equal(t, []byte("deep"), got)
	_, err = srv.Stat("/dst/d")
	require.NoError(t, err)
	require.Zero(t, srv.OpenHandles())
}

// TestPutTreeMkdirAgainAfterAReorderedParent: a server that carried out a child's
// MKDIR before its parent's fails it; the Put makes it again once the parent is
// there, and the tree comes out whole.
func TestPutTreeMkdirAgainAfterAReorderedParent(t *testing.T) {
	var failed atomic.Bool
	c, srv := newTestServerClient(t, testserver.Options{Fail: func(r testserver.Request) uint32 {
		if r.Type == testserver.TypeMkdir && r.Path == "/dst/a/b" && failed.CompareAndSwap(false, true) {
			return testserver.StatusNoSuchFile
		}
		return 0
	}})
	src := filepath.Join(t.TempDir(), "src")
	require.NoError(t, os.MkdirAll(filepath.Join(src, "a", "b"), 0o755))
	gpWrite(t, filepath.Join(src, "a", "b", "f"), []byte("f"))
	require.NoError(t, c.Put(testCtx(t), src, "/dst", Recursive()))
	require.True(t, failed.Load())
	got, err := srv.ReadFile("/dst/a/b/f")
	require.NoError(t, err)
	require.Equal(t, []byte("f"), got)
	require.Equal(t, 4, srv.Requests(testserver.TypeMkdir))
}

// TestPutTreeMkdirFailureStops: a MKDIR the server refuses for good fails the Put,
// naming the directory, and nothing is left open.
func TestPutTreeMkdirFailureStops(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Fail: func(r testserver.Request) uint32 {
		if r.Type == testserver.TypeMkdir && r.Path == "/dst/a" {
			return testserver.StatusPermissionDenied
		}
		return 0
	}})
	src := filepath.Join(t.TempDir(), "src")
	require.NoError(t, os.MkdirAll(filepath.Join(src, "a", "b"), 0o755))
	gpWrite(t, filepath.Join(src, "a", "b", "f"), []byte("f"))
	err := c.Put(testCtx(t), src, "/dst", Recursive())
	require.ErrorIs(t, err, fs.ErrPermission)
	require.ErrorContains(t, err, "/dst/a")
	_, err = srv.Stat("/dst/a/b/f")
	require.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
	require.Zero(t, srv.OpenHandles())
}

// TestSmallFilesInFlightBound: a tree of many tiny files keeps at most
// defaultSmallParallel of them open at once.
func TestSmallFilesInFlightBound(t *testing.T) {
	var on atomic.Bool
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallTypes(&on, testserver.TypeOpen)})
	n := defaultSmallParallel + 40
	for i := range n {
		require.NoError(t, srv.MkdirAll("/t", 0o755))
		require.NoError(t, srv.WriteFile(fmt.Sprintf("/t/f%04d", i), []byte{byte(i)}, 0o644))
	}
	on.Store(true)
	local := filepath.Join(t.TempDir(), "t")
	done := tsGo(func() error { return c.Get(testCtx(t), "/t", local, Recursive()) })
	tsWaitStalled(t, srv, defaultSmallParallel)
	require.Equal(t, defaultSmallParallel, srv.Requests(testserver.TypeOpen))
	on.Store(false)
	srv.ReleaseStalled()
	require.NoError(t, tsRecv(t, done, "Get"))
	es, err := os.ReadDir(local)
	require.NoError(t, err)
	require.Len(t, es, n)
	require.Zero(t, srv.OpenHandles())
}

// TestSmallCostBoundsBytes: small files are charged their size (and their probe's)
// against smallBudget, so files of a full WRITE each are fewer in flight than tiny ones.
func TestSmallCostBoundsBytes(t *testing.T) {
	require.Equal(t, int64(4<<10+smallProbe), smallCost(0))
	require.Equal(t, int64(4<<10+smallProbe+100), smallCost(100))
	require.Equal(t, int64(4<<10+smallProbe), smallCost(-1))
	require.Equal(t, int64(smallBudget), smallCost(1<<40))
	require.LessOrEqual(t, int64(smallBudget)/smallCost(maxDataSize), int64(128))
}
