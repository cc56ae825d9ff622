package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// put -r onto an 8 MiB tmpfs (mounted by the test; root only): the file that cannot
// fit fails saying the disk is full, its part file is removed, and the 20 files after
// it are copied (they all failed behind the part file before).
func TestPutTreeOntoAFullFileSystem(t *testing.T) {
	needLocalServer(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a small tmpfs needs root")
	}
	fsDir := t.TempDir()
	if err := syscall.Mount("tmpfs", fsDir, "tmpfs", 0, "size=8m"); err != nil {
		t.Skipf("skipping: cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { require.NoError(t, syscall.Unmount(fsDir, syscall.MNT_DETACH)) })
	tree := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.Mkdir(tree, 0o755))
	randomFile(t, tree, "a-big.bin", 12<<20)
	for i := range 20 {
		randomFile(t, tree, fmt.Sprintf("f%02d.bin", i), 100<<10)
	}

	r := runCLI(t, "put", "-r", "-j", "1", "-q", tree, fsDir+"/")
	require.Equal(t, exitFail, r.code)
	require.Regexp(t, `^sluice: put: 1 of 21 files failed: `+tree+`/a-big\.bin: readfrom `+fsDir+`/small/a-big\.bin: `+
		`sftp: Failure \(FAILURE\): no space left on device \(the server's file system has \d+ bytes free\)\n$`, r.stderr)
	names, err := os.ReadDir(filepath.Join(fsDir, "small"))
	require.NoError(t, err)
	require.Len(t, names, 20, "the part file was left, or files after it failed")
}
