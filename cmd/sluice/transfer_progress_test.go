package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sftp"
	"github.com/stretchr/testify/require"
)

// The progress a put shows is what the server acknowledged: each report's bytes are in
// the part file already (the local sftp-server shares this file system). Counting
// what was read from the source ran up to a window (16 MiB) ahead, so the rate shown
// with --limit started far above the limit.
func TestPutProgressCountsAcknowledgedBytes(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	src, _ := randomFile(t, dir, "src.bin", 24<<20)
	dst := filepath.Join(dir, "dst.bin")
	part := filepath.Join(dir, ".dst.bin.sluice-part")
	checked := 0
	r := runApp(t, func(a *app) {
		a.testProgress = func(p sftp.Progress) {
			if p.Done {
				return
			}
			fi, err := os.Stat(part)
			require.NoError(t, err)
			require.GreaterOrEqual(t, fi.Size(), p.TotalBytes, "progress ahead of the server")
			checked++
		}
	}, "put", "--limit", "64M", src, dst)
	requireOK(t, r)
	require.Greater(t, checked, 10)
}
