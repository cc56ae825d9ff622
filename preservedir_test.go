package sftp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Preserve sets a directory's mode and times last, once everything below it is
// copied. A directory swapped for a link to another in between must not have the
// link's target changed. The swap is made in the last progress report of the
// directory's only file, which comes before the directory is finished.

// swapDirAtFileEnd returns a progress option that, when file finishes, renames dir
// away and puts a link to target in its place.
func swapDirAtFileEnd(t *testing.T, file, dir, target string) TransferOption {
	return OnProgress(func(p Progress) {
		if p.Done && p.Path == file {
			require.NoError(t, os.Rename(dir, dir+"-moved"))
			require.NoError(t, os.Symlink(target, dir))
		}
	})
}

func TestPreservePutDirSwappedForALink(t *testing.T) {
	for _, lsetstat := range []bool{true, false} {
		name := "lsetstat"
		if !lsetstat {
			name = "lstat then setstat"
		}
		t.Run(name, func(t *testing.T) {
			c, _ := getPutClient(t, t.TempDir())
			if !lsetstat {
				delete(c.exts, extLsetstat)
			}
			require.Equal(t, lsetstat, c.hasExt(extLsetstat))
			local, remote := gpDirs(t)
			victim, untouched := victimDir(t)
			src := filepath.Join(local, "tree")
			gpWrite(t, filepath.Join(src, "sub", "f"), []byte("f"))
			require.NoError(t, os.Chmod(filepath.Join(src, "sub"), 0o777))
			dst := filepath.Join(remote, "tree")
			err := c.Put(testCtx(t), src, dst, Recursive(), Preserve(),
				swapDirAtFileEnd(t, filepath.Join(src, "sub", "f"), filepath.Join(dst, "sub"), victim))
			var te *TreeError
			require.ErrorAs(t, err, &te)
			require.Equal(t, 1, te.Count, "%v", err)
			require.ErrorContains(t, err, filepath.Join(src, "sub"))
			untouched()
			require.Equal(t, []byte("f"), gpRead(t, filepath.Join(dst, "sub-moved", "f")))
		})
	}
}

// The local side goes through the destination's os.Root, which keeps a link from
// leading outside it but follows one inside it (Root.Chmod does): the victim here is a
// directory of the destination that the copy does not include.
func TestPreserveGetDirSwappedForALink(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	local, remote := gpDirs(t)
	src := filepath.Join(remote, "tree")
	gpWrite(t, filepath.Join(src, "sub", "f"), []byte("f"))
	require.NoError(t, os.Chmod(filepath.Join(src, "sub"), 0o777))
	back := filepath.Join(local, "back")
	victim := filepath.Join(back, "private")
	require.NoError(t, os.MkdirAll(victim, 0o700))
	require.NoError(t, os.Chmod(victim, 0o700))
	untouched := func() {
		t.Helper()
		fi, err := os.Stat(victim)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the link's target was chmodded")
	}
	err := c.Get(testCtx(t), src, back, Recursive(), Preserve(),
		swapDirAtFileEnd(t, filepath.Join(src, "sub", "f"), filepath.Join(back, "sub"), "private"))
	var te *TreeError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 1, te.Count, "%v", err)
	require.ErrorIs(t, err, errNoLongerDir)
	untouched()
	require.Equal(t, []byte("f"), gpRead(t, filepath.Join(back, "sub-moved", "f")))
	// The directories that were not swapped have their modes.
	fi, err := os.Stat(filepath.Join(back, "sub-moved"))
	require.NoError(t, err)
	require.NotEqual(t, os.FileMode(0o777), fi.Mode().Perm(), "the swapped directory was given its mode after all")
}
