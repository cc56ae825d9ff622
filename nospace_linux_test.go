package sftp

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// smallTmpfs mounts an 8 MiB tmpfs on a new directory for the test, or skips: it needs
// root (CAP_SYS_ADMIN) and a kernel that lets the test mount.
func smallTmpfs(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=8m"); err != nil {
		t.Skipf("skipping: cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { require.NoError(t, syscall.Unmount(dir, syscall.MNT_DETACH)) })
	return dir
}

// A Put onto a full file system fails saying so (statvfs@openssh.com: the server's
// FAILURE alone says nothing), and its part file, which cannot grow, is removed rather
// than kept for Resume: the files after it in a tree still fit.
func TestPutOntoAFullFileSystem(t *testing.T) {
	fsDir := smallTmpfs(t)
	c, _ := sftpServerClient(t, fsDir, nil)
	ctx := testCtx(t)
	local := t.TempDir()
	big := filepath.Join(local, "big")
	gpWrite(t, big, gpData(12<<20, 1))

	err := c.Put(ctx, big, filepath.Join(fsDir, "big"))
	require.ErrorIs(t, err, syscall.ENOSPC)
	var se *StatusError
	require.ErrorAs(t, err, &se, "the server's own answer is kept")
	require.Equal(t, StatusFailure, se.Code)
	require.ErrorContains(t, err, "no space left on device (the server's file system has ")
	require.Empty(t, dirNames(t, fsDir), "the part file was left")

	// A tree, one file at a time: the big one first, then 20 that fit.
	tree := filepath.Join(local, "tree")
	gpWrite(t, filepath.Join(tree, "a-big"), gpData(12<<20, 2))
	for i := range 20 {
		gpWrite(t, filepath.Join(tree, fmt.Sprintf("f%02d", i)), gpData(100<<10, uint64(i)))
	}
	err = c.Put(ctx, tree, filepath.Join(fsDir, "tree"), Recursive(), Parallel(1))
	var te *TreeError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 1, te.Count)
	require.ErrorIs(t, te.Failed[0], syscall.ENOSPC)
	names := dirNames(t, filepath.Join(fsDir, "tree"))
	require.Len(t, names, 20)
	require.NotContains(t, names, ".a-big"+partSuffix)
	for i := range 20 {
		require.Equal(t, gpData(100<<10, uint64(i)), gpRead(t, filepath.Join(fsDir, "tree", fmt.Sprintf("f%02d", i))))
	}
}
