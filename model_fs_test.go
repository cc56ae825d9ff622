//go:build linux

package sftp

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// fstest.TestFS over DirFS and iotest.TestReader over a File, on every real server of
// the cross-server suite. READs of minDataSize bytes make the larger files span
// several, so reads that cross packets (and the read-ahead across them) are checked;
// the files stay small because TestFS reads each one byte per ReadAt, a round trip
// each. Symbolic links are in the tree where the server serves them as a local file
// system would; elsewhere the documented difference (docs/servers.md) is asserted on a
// link outside the tree.

// fsModelFiles are the regular files of the tree, by path.
var fsModelFiles = map[string]int{
	"a.txt": 12, "empty.txt": 0, "big.bin": 3*minDataSize + 77, "dir/mid.bin": minDataSize + 1, "dir/nested/deep.txt": 5,
}

// fsLinkQuirks are the servers whose links differ from a local file system's, and the
// assertion of how, on q/rel (a link to ../t/a.txt) and q/dirlink (a link to ../t/dir).
var fsLinkQuirks = map[string]func(t *testing.T, fsys fs.FS){
	// READLINK of a relative link fails.
	xsAsyncSSH: func(t *testing.T, fsys fs.FS) {
		_, err := fs.ReadLink(fsys, "q/rel")
		require.ErrorIs(t, err, fs.ErrNotExist)
	},
	// Lstat follows links.
	xsProFTPD: func(t *testing.T, fsys fs.FS) {
		fi, err := fs.Lstat(fsys, "q/dirlink")
		require.NoError(t, err)
		require.True(t, fi.IsDir(), "ProFTPD's Lstat reports the target: %v", fi.Mode())
	},
	// Links are hidden.
	xsRclone:       fsLinksHidden,
	xsRcloneWrites: fsLinksHidden,
}

func fsLinksHidden(t *testing.T, fsys fs.FS) {
	entries, err := fs.ReadDir(fsys, "q")
	require.NoError(t, err)
	require.Empty(t, entries, "rclone lists no links")
}

func TestModelFSConformance(t *testing.T) {
	for _, srv := range xsServers {
		t.Run(srv.name, func(t *testing.T) {
			run := srv.begin(t)
			dir := run.dir(t)
			tree := filepath.Join(dir, "t")
			names := []string{"dir", "dir/nested", "emptydir"}
			for name, n := range fsModelFiles {
				p := filepath.Join(tree, filepath.FromSlash(name))
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				writeLocal(t, p, xsData(n), 0o644)
				names = append(names, name)
			}
			require.NoError(t, os.Mkdir(filepath.Join(tree, "emptydir"), 0o755))
			links := tree
			quirk := fsLinkQuirks[srv.name]
			if quirk != nil {
				links = filepath.Join(dir, "q")
				require.NoError(t, os.Mkdir(links, 0o755))
			} else {
				names = append(names, "rel", "dirlink")
			}
			require.NoError(t, os.Symlink("../t/a.txt", filepath.Join(links, "rel")))
			require.NoError(t, os.Symlink("../t/dir", filepath.Join(links, "dirlink")))

			c := run.start(t, dir, &xsTap{}, WithMaxPacket(minDataSize))
			within(t, func() { require.NoError(t, fstest.TestFS(c.DirFS("t"), names...)) })
			if quirk != nil {
				within(t, func() { quirk(t, c.FS()) })
			}

			f, err := c.Open(testCtx(t), "t/big.bin")
			require.NoError(t, err)
			defer f.Close()
			within(t, func() { require.NoError(t, iotest.TestReader(f, xsData(fsModelFiles["big.bin"]))) })
		})
	}
}
