package sftp

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// TestTreeStopsWhenTheConnectionDies: once the connection is gone nothing more can
// move, so the tree stops with that error rather than recording every remaining file
// as failed.
func TestTreeStopsWhenTheConnectionDies(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{DropAfterRequests: 60})
	for i := range 100 {
		require.NoError(t, srv.MkdirAll("/t/d"+strconv.Itoa(i%3), 0o755))
		require.NoError(t, srv.WriteFile(fmt.Sprintf("/t/d%d/f%03d", i%3, i), gpData(100, uint64(i)), 0o644))
	}
	err := c.Get(testCtx(t), "/t", filepath.Join(t.TempDir(), "t"), Recursive())
	require.ErrorIs(t, err, net.ErrClosed)
	var te *TreeError
	if errors.As(err, &te) {
		// Failures recorded before the connection was known dead may be listed;
		// the death itself stopped the tree.
		require.ErrorIs(t, te.Stopped, net.ErrClosed)
		require.Less(t, te.Count, 10)
	}
}

// TestGetAllPutAllOneTransfer: several sources, files and trees, move as one
// transfer: the files of every source share the Parallel slots, one progress stream
// counts them all, and each lands in the directory under its base name. A failure
// of one source is recorded and the others go on.
func TestGetAllPutAllOneTransfer(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	var srcs []string
	for i := range 3 {
		dir := filepath.Join(local, "src", "tree"+strconv.Itoa(i))
		for j := range 20 {
			gpWrite(t, filepath.Join(dir, "sub", fmt.Sprintf("f%02d", j)), gpData(50_000, uint64(100*i+j)))
		}
		srcs = append(srcs, dir)
	}
	for i := range 4 {
		name := filepath.Join(local, "src", "file"+strconv.Itoa(i))
		gpWrite(t, name, gpData(1000*i, uint64(i)))
		srcs = append(srcs, name)
	}
	const files = 3*20 + 4
	var size int64
	for i := range 4 {
		size += int64(1000 * i)
	}
	size += 3 * 20 * 50_000

	var up events
	dst := filepath.Join(remote, "up") // made, as it is missing
	require.NoError(t, c.PutAll(ctx, srcs, dst, Recursive(), Parallel(4), up.opt()))
	up.check(t, files, size)
	require.LessOrEqual(t, maxInProgress(&up), 4)
	require.Equal(t, listTree(t, filepath.Join(local, "src")), listTree(t, dst))

	var remotes []string
	for _, s := range srcs {
		remotes = append(remotes, filepath.Join(dst, filepath.Base(s)))
	}
	var down events
	back := filepath.Join(local, "back")
	require.NoError(t, c.GetAll(ctx, remotes, back, Recursive(), Parallel(4), down.opt()))
	down.check(t, files, size)
	require.LessOrEqual(t, maxInProgress(&down), 4)
	require.Equal(t, listTree(t, filepath.Join(local, "src")), listTree(t, back))

	// A missing source and a directory without Recursive fail alone.
	err := c.GetAll(ctx, append([]string{filepath.Join(dst, "missing")}, remotes...), filepath.Join(local, "again"))
	var te *TreeError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 4, te.Count, "the missing source and the three trees")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorIs(t, err, errNeedRecursive)
	for i := range 4 {
		require.Equal(t, gpData(1000*i, uint64(i)), gpRead(t, filepath.Join(local, "again", "file"+strconv.Itoa(i))))
	}
}

// TestGetAllPutAllRefuseSameBaseName: two sources that would land at the same name
// are refused before anything moves.
func TestGetAllPutAllRefuseSameBaseName(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	gpWrite(t, filepath.Join(local, "a", "f"), []byte("a"))
	gpWrite(t, filepath.Join(local, "b", "f"), []byte("b"))
	gpWrite(t, filepath.Join(remote, "a", "f"), []byte("a"))
	gpWrite(t, filepath.Join(remote, "b", "f"), []byte("b"))
	err := c.PutAll(ctx, []string{filepath.Join(local, "a", "f"), filepath.Join(local, "b", "f")}, filepath.Join(remote, "dst"))
	require.ErrorContains(t, err, "same base name")
	require.NoDirExists(t, filepath.Join(remote, "dst"))
	err = c.GetAll(ctx, []string{filepath.Join(remote, "a", "f"), filepath.Join(remote, "b", "f")}, filepath.Join(local, "dst"))
	require.ErrorContains(t, err, "same base name")
	require.NoDirExists(t, filepath.Join(local, "dst"))
	// A source without a base name has none to give its copy.
	require.ErrorContains(t, c.GetAll(ctx, []string{"."}, filepath.Join(local, "dst"), Recursive()), "no base name")
	require.NoDirExists(t, filepath.Join(local, "dst"))
	_, err = os.Stat(filepath.Join(remote, "dst"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func maxInProgress(ev *events) int {
	m := 0
	for _, p := range ev.list {
		m = max(m, p.InProgress)
	}
	return m
}

// TestProgressWalkedAtTheEnd: a tree's reports count the files found so far, with
// Walked unset, until the walk has ended. Here the listing of a subdirectory is held
// back until the root's file has finished: that file's reports say one file, not
// walked.
func TestProgressWalkedAtTheEnd(t *testing.T) {
	var hold atomic.Bool
	hold.Store(true)
	c, srv := newTestServerClient(t, testserver.Options{Stall: func(r testserver.Request) bool {
		return hold.Load() && r.Type == testserver.TypeOpendir && r.Path == "/t/sub"
	}})
	require.NoError(t, srv.MkdirAll("/t/sub", 0o755))
	require.NoError(t, srv.WriteFile("/t/a", []byte("a"), 0o644))
	require.NoError(t, srv.WriteFile("/t/sub/b", []byte("bb"), 0o644))
	aDone := make(chan struct{})
	var ev events
	done := tsGo(func() error {
		return c.Get(testCtx(t), "/t", filepath.Join(t.TempDir(), "t"), Recursive(), OnProgress(func(p Progress) {
			ev.list = append(ev.list, p)
			if p.Done && p.Path == "/t/a" {
				close(aDone)
			}
		}))
	})
	tsWaitStalled(t, srv, 1)
	tsRecv(t, tsGo(func() struct{} { <-aDone; return struct{}{} }), "the first file")
	hold.Store(false)
	srv.ReleaseStalled()
	require.NoError(t, tsRecv(t, done, "Get"))
	ev.check(t, 2, 3)
	for _, p := range ev.list {
		if p.Path == "/t/a" {
			require.False(t, p.Walked)
			require.Equal(t, 1, p.FilesTotal)
			require.Equal(t, int64(1), p.TotalSize)
		}
	}
}
