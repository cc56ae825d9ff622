package sftp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Progress's counters and SkipFiles, against OpenSSH's sftp-server over pipes
// (getput_test.go's helpers): what a skipped, a failed and a canceled file count as,
// and that an upload's bytes are the server's acknowledgements.

// lastReports is each file's last report, by source path.
func (e *events) lastReports() map[string]Progress {
	last := map[string]Progress{}
	for _, p := range e.list {
		last[p.Path] = p
	}
	return last
}

// A file SkipUnchanged leaves alone is counted as done and skipped, and its bytes
// are in neither TotalBytes nor TotalSize: a run that moves nothing reports 0 of 0.
func TestProgressSkippedFilesLeaveTheTotals(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	src := filepath.Join(local, "src")
	gpWrite(t, filepath.Join(src, "a"), gpData(3000, 1))
	gpWrite(t, filepath.Join(src, "sub", "b"), gpData(300_000, 2))
	rt := filepath.Join(remote, "src")
	put := func() Progress {
		t.Helper()
		var e events
		require.NoError(t, c.Put(ctx, src, rt, Recursive(), Preserve(), SkipUnchanged(), e.opt()))
		return e.list[len(e.list)-1]
	}
	first := put()
	require.EqualValues(t, 303_000, first.TotalBytes)
	require.EqualValues(t, 303_000, first.TotalSize)
	require.Equal(t, 2, first.Files)
	require.Zero(t, first.FilesSkipped)

	again := put()
	require.Zero(t, again.TotalBytes, "skipped files counted as moved")
	require.Zero(t, again.TotalSize)
	require.Equal(t, 2, again.Files)
	require.Equal(t, 2, again.FilesSkipped)
	require.Equal(t, 2, again.FilesTotal)

	gpWrite(t, filepath.Join(src, "a"), gpData(3001, 3))
	one := put()
	require.EqualValues(t, 3001, one.TotalBytes)
	require.EqualValues(t, 3001, one.TotalSize)
	require.Equal(t, 2, one.Files)
	require.Equal(t, 1, one.FilesSkipped)

	// A single file too: 0 of 0, done and skipped.
	var e events
	back := filepath.Join(local, "a.back")
	require.NoError(t, c.Get(ctx, filepath.Join(rt, "a"), back, Preserve(), SkipUnchanged()))
	require.NoError(t, c.Get(ctx, filepath.Join(rt, "a"), back, Preserve(), SkipUnchanged(), e.opt()))
	require.Len(t, e.list, 1)
	p := e.list[0]
	require.True(t, p.Done && p.Skipped)
	require.EqualValues(t, 3001, p.Bytes)
	require.Zero(t, p.TotalBytes)
	require.Zero(t, p.TotalSize)
	require.Equal(t, 1, p.FilesSkipped)
}

// A file stopped by the call (its ctx canceled) ends with Canceled and counts as
// canceled; a file that fails of itself counts as failed; under StopOnError the
// failure is failed and the files it stopped are canceled.
func TestProgressCanceledIsNotFailed(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	tree := filepath.Join(local, "tree")
	for i := range 40 {
		gpWrite(t, filepath.Join(tree, fmt.Sprintf("f%02d", i)), gpData(512<<10, uint64(i)))
	}

	t.Run("canceled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var e events
		err := c.Put(cctx, tree, filepath.Join(remote, "canceled"), Recursive(), Parallel(4), e.opt(),
			OnProgress(func(p Progress) {
				e.list = append(e.list, p)
				if p.TotalBytes >= 2<<20 {
					cancel()
				}
			}))
		require.ErrorIs(t, err, context.Canceled)
		canceled := 0
		for _, p := range e.lastReports() {
			if p.Err != nil {
				require.True(t, p.Canceled, "%s: %v", p.Path, p.Err)
				canceled++
			}
		}
		last := e.list[len(e.list)-1]
		require.Positive(t, canceled)
		require.Equal(t, canceled, last.FilesCanceled)
		require.Zero(t, last.FilesFailed)
	})

	// f25's name is taken by a non-empty directory: its rename fails.
	for _, stopOnError := range []bool{false, true} {
		t.Run(fmt.Sprintf("failed/StopOnError=%v", stopOnError), func(t *testing.T) {
			dst := filepath.Join(remote, fmt.Sprintf("failed-%v", stopOnError))
			gpWrite(t, filepath.Join(dst, "f25", "x"), nil)
			var e events
			opts := []TransferOption{Recursive(), Parallel(8), e.opt()}
			if stopOnError {
				opts = append(opts, StopOnError())
			}
			require.Error(t, c.Put(ctx, tree, dst, opts...))
			canceled := 0
			for path, p := range e.lastReports() {
				switch {
				case filepath.Base(path) == "f25":
					require.Error(t, p.Err)
					require.False(t, p.Canceled, "the failure itself counted as canceled")
				case p.Err != nil:
					require.True(t, stopOnError, "%s failed: %v", path, p.Err)
					require.True(t, p.Canceled, "%s: %v", path, p.Err)
					canceled++
				}
			}
			last := e.list[len(e.list)-1]
			require.Equal(t, 1, last.FilesFailed)
			require.Equal(t, canceled, last.FilesCanceled)
			if !stopOnError {
				require.Equal(t, 39, last.Files)
			}
		})
	}
}

// An upload's progress counts what the server acknowledged: every report's bytes are
// in the part file on the server already. Counting what was read from the source ran
// a window (up to 16 MiB) ahead of it.
func TestProgressPutCountsAcknowledged(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	const size = 24 << 20
	gpWrite(t, filepath.Join(local, "big"), gpData(size, 5))
	dst := filepath.Join(remote, "big")
	part := filepath.Join(remote, ".big"+partSuffix)
	var reports, checked int
	require.NoError(t, c.Put(ctx, filepath.Join(local, "big"), dst, OnProgress(func(p Progress) {
		reports++
		if p.Done {
			return
		}
		fi, err := os.Stat(part)
		require.NoError(t, err)
		require.GreaterOrEqual(t, fi.Size(), p.Bytes, "progress ran ahead of what the server has")
		checked++
	})))
	require.Greater(t, checked, 10)
	require.Equal(t, gpData(size, 5), gpRead(t, dst))
}

// SkipFiles leaves files out of a tree: not copied, not reported, not counted; the
// directories are still made. A skipped single file is a nil call with nothing done.
func TestSkipFiles(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	src := filepath.Join(local, "src")
	gpWrite(t, filepath.Join(src, "keep1"), gpData(1000, 1))
	gpWrite(t, filepath.Join(src, "skip1"), gpData(2000, 2))
	gpWrite(t, filepath.Join(src, "sub", "keep2"), gpData(400_000, 3))
	gpWrite(t, filepath.Join(src, "sub", "skip2"), gpData(500_000, 4))
	gpWrite(t, filepath.Join(src, "only", "skip3"), gpData(10, 5))
	var offered atomic.Int32
	skip := SkipFiles(func(p string, fi fs.FileInfo) bool {
		offered.Add(1)
		require.True(t, fi.Mode().IsRegular(), "offered %s, not a file", p)
		return strings.HasPrefix(filepath.Base(p), "skip")
	})
	check := func(e *events, root string) {
		t.Helper()
		for _, p := range e.list {
			require.NotContains(t, filepath.Base(p.Path), "skip")
		}
		last := e.list[len(e.list)-1]
		require.Equal(t, 2, last.FilesTotal)
		require.EqualValues(t, 401_000, last.TotalSize)
		require.EqualValues(t, 401_000, last.TotalBytes)
		var names []string
		for rel := range listTree(t, root) {
			names = append(names, rel)
		}
		require.ElementsMatch(t, []string{".", "keep1", "sub", filepath.Join("sub", "keep2"), "only"}, names)
	}

	var up events
	rt := filepath.Join(remote, "src")
	require.NoError(t, c.Put(ctx, src, rt, Recursive(), skip, up.opt()))
	require.EqualValues(t, 5, offered.Load())
	check(&up, rt)

	var down events
	back := filepath.Join(local, "back")
	require.NoError(t, c.Get(ctx, rt, back, Recursive(), skip, down.opt()))
	check(&down, back)

	var one events
	require.NoError(t, c.Put(ctx, filepath.Join(src, "skip1"), filepath.Join(remote, "skip1"), skip, one.opt()))
	require.NoError(t, c.Get(ctx, filepath.Join(src, "skip1"), filepath.Join(local, "skip1"), skip, one.opt()))
	require.Empty(t, one.list)
	require.NoFileExists(t, filepath.Join(remote, "skip1"))
	require.NoFileExists(t, filepath.Join(local, "skip1"))

	err := c.Put(ctx, src, rt, SkipFiles(nil))
	require.Error(t, err)
	require.False(t, errors.Is(err, fs.ErrNotExist))
}
