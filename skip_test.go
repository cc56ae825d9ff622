package sftp

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// SkipUnchanged against OpenSSH's sftp-server: a second Preserve run over a tree moves
// nothing, a changed file moves again, and a link standing where the copy goes is never
// taken for an unchanged copy.
func TestGetPutSkipUnchanged(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	src := filepath.Join(local, "src")
	gpWrite(t, filepath.Join(src, "a"), gpData(3000, 1))
	gpWrite(t, filepath.Join(src, "sub", "b"), gpData(5000, 2))

	run := func(do func(...TransferOption) error) (moved, skippedFiles []string) {
		t.Helper()
		var e events
		require.NoError(t, do(Recursive(), Preserve(), SkipUnchanged(), e.opt()))
		for _, p := range e.list {
			if !p.Done {
				continue
			}
			if p.Skipped {
				skippedFiles = append(skippedFiles, filepath.Base(p.Path))
			} else {
				moved = append(moved, filepath.Base(p.Path))
			}
		}
		return moved, skippedFiles
	}
	// The destination names the copy, so every run lands in the same place.
	rt, back := filepath.Join(remote, "src"), filepath.Join(local, "back", "src")
	put := func(opts ...TransferOption) error { return c.Put(ctx, src, rt, opts...) }
	get := func(opts ...TransferOption) error { return c.Get(ctx, rt, back, opts...) }

	moved, skippedFiles := run(put)
	require.ElementsMatch(t, []string{"a", "b"}, moved)
	require.Empty(t, skippedFiles)
	moved, skippedFiles = run(put)
	require.Empty(t, moved, "an unchanged tree moved again")
	require.ElementsMatch(t, []string{"a", "b"}, skippedFiles)

	moved, _ = run(get)
	require.ElementsMatch(t, []string{"a", "b"}, moved)
	moved, skippedFiles = run(get)
	require.Empty(t, moved)
	require.ElementsMatch(t, []string{"a", "b"}, skippedFiles)

	// A source changed in size or mtime moves again, in both directions.
	gpWrite(t, filepath.Join(src, "a"), gpData(3001, 3))
	moved, skippedFiles = run(put)
	require.Equal(t, []string{"a"}, moved)
	require.Equal(t, []string{"b"}, skippedFiles)
	require.Equal(t, gpData(3001, 3), gpRead(t, filepath.Join(rt, "a")))
	mt := time.Date(2003, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, os.Chtimes(filepath.Join(rt, "sub", "b"), mt, mt))
	moved, _ = run(get)
	require.ElementsMatch(t, []string{"a", "b"}, moved)

	// A link at the copy's name, to a file of the same size and mtime, is not the
	// copy: the file is copied and the link replaced, its target untouched.
	victim := filepath.Join(local, "victim")
	gpWrite(t, victim, gpData(5000, 9))
	rfi, err := os.Stat(filepath.Join(rt, "sub", "b"))
	require.NoError(t, err)
	require.NoError(t, os.Chtimes(victim, rfi.ModTime(), rfi.ModTime()))
	lb := filepath.Join(back, "sub", "b")
	require.NoError(t, os.Remove(lb))
	require.NoError(t, os.Symlink(victim, lb))
	moved, _ = run(get)
	require.Equal(t, []string{"b"}, moved)
	lfi, err := os.Lstat(lb)
	require.NoError(t, err)
	require.True(t, lfi.Mode().IsRegular(), "the link was kept")
	require.Equal(t, gpData(5000, 9), gpRead(t, victim), "the link's target changed")
	require.Equal(t, gpRead(t, filepath.Join(rt, "sub", "b")), gpRead(t, lb))
}
