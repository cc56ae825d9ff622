package sftp

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// SkipIdentical against OpenSSH's sftp-server: files whose content matches are left
// alone whatever their times; a file of the same size and other bytes is copied, as
// is one of another size.
func TestSkipIdentical(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	src := filepath.Join(local, "src")
	gpWrite(t, filepath.Join(src, "a"), gpData(3000, 1))
	gpWrite(t, filepath.Join(src, "sub", "b"), gpData(300<<10, 2))
	gpWrite(t, filepath.Join(src, "c"), gpData(10, 3))

	run := func(do func(...TransferOption) error) (moved, skipped []string) {
		t.Helper()
		var e events
		require.NoError(t, do(Recursive(), SkipIdentical(), e.opt()))
		for _, p := range e.list {
			switch {
			case !p.Done:
			case p.Skipped:
				skipped = append(skipped, filepath.Base(p.Path))
			default:
				moved = append(moved, filepath.Base(p.Path))
			}
		}
		return moved, skipped
	}
	rt, back := filepath.Join(remote, "src"), filepath.Join(local, "back", "src")
	put := func(opts ...TransferOption) error { return c.Put(ctx, src, rt, opts...) }
	get := func(opts ...TransferOption) error { return c.Get(ctx, rt, back, opts...) }

	moved, skipped := run(put)
	require.ElementsMatch(t, []string{"a", "b", "c"}, moved)
	require.Empty(t, skipped)
	moved, _ = run(get)
	require.ElementsMatch(t, []string{"a", "b", "c"}, moved)

	// Times changed, content not: nothing moves (SkipUnchanged would move them all).
	later := time.Now().Add(time.Hour)
	for _, name := range []string{"a", "sub/b", "c"} {
		require.NoError(t, os.Chtimes(filepath.Join(src, name), later, later))
		require.NoError(t, os.Chtimes(filepath.Join(back, name), later, later))
	}
	moved, skipped = run(put)
	require.Empty(t, moved)
	require.ElementsMatch(t, []string{"a", "b", "c"}, skipped)
	moved, skipped = run(get)
	require.Empty(t, moved)
	require.ElementsMatch(t, []string{"a", "b", "c"}, skipped)

	// Same size, other bytes (and the same times): copied; another size: copied.
	same := gpData(3000, 9)
	gpWrite(t, filepath.Join(src, "a"), same)
	gpWrite(t, filepath.Join(src, "c"), gpData(11, 3))
	moved, skipped = run(put)
	require.ElementsMatch(t, []string{"a", "c"}, moved)
	require.Equal(t, []string{"b"}, skipped)
	require.Equal(t, same, gpRead(t, filepath.Join(rt, "a")))
	moved, skipped = run(get)
	require.ElementsMatch(t, []string{"a", "c"}, moved)
	require.Equal(t, []string{"b"}, skipped)
	require.Equal(t, same, gpRead(t, filepath.Join(back, "a")))
}
