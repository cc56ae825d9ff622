package sftp

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sftp/internal/localfs"
	"github.com/stretchr/testify/require"
)

// Put's local sources are opened as they were listed or not at all (internal/localfs, source.go).
// Each test swaps a listed file for something else between the walk and the open:
// with Parallel(1) the two files of a directory are listed together, and the second
// is opened only once the first has finished, so the first's last progress report is
// a moment when the second is listed and not yet opened.

// swapSecond runs a Put of dir with Parallel(1), calling swap on the file of dir that
// is not yet copied when the first one finishes, and returns the name swapped and the
// Put's error.
func swapSecond(t *testing.T, c *Client, dir, dst string, swap func(name string)) (string, error) {
	t.Helper()
	var swapped string
	err := c.Put(testCtx(t), dir, dst, Recursive(), Parallel(1), OnProgress(func(p Progress) {
		if !p.Done || swapped != "" {
			return
		}
		for _, name := range []string{"a", "b"} {
			if name != filepath.Base(p.Path) {
				swapped = filepath.Join(dir, name)
				swap(swapped)
			}
		}
	}))
	require.NotEmpty(t, swapped, "no file finished")
	return swapped, err
}

func TestPutSourceSwappedAfterTheWalk(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	local, remote := gpDirs(t)
	secret := filepath.Join(t.TempDir(), "id_ed25519")
	gpWrite(t, secret, []byte("-----BEGIN OPENSSH PRIVATE KEY-----"))

	for _, tc := range []struct {
		name string
		swap func(t *testing.T, name string)
		want error // what the failure matches, beside localfs.ErrSwapped's or the root's refusal
	}{
		{"link outside", func(t *testing.T, name string) {
			require.NoError(t, os.Remove(name))
			require.NoError(t, os.Symlink(secret, name))
		}, nil},
		{"link inside", func(t *testing.T, name string) {
			// To a file of the tree the walk did not list at this name.
			require.NoError(t, os.Remove(name))
			require.NoError(t, os.Symlink("sub/inside", name))
		}, localfs.ErrSwapped},
		{"fifo", func(t *testing.T, name string) {
			require.NoError(t, os.Remove(name))
			mkfifo(t, name, 0o644)
		}, localfs.ErrSwapped},
		{"hard link", func(t *testing.T, name string) {
			// Another name of the secret: a regular file, not the one listed.
			require.NoError(t, os.Remove(name))
			require.NoError(t, os.Link(secret, name))
		}, localfs.ErrSwapped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(local, strings.ReplaceAll(tc.name, " ", "-"), "dir")
			gpWrite(t, filepath.Join(src, "a"), []byte("a"))
			gpWrite(t, filepath.Join(src, "b"), []byte("b"))
			// Walked after a and b: the files of a directory go first.
			gpWrite(t, filepath.Join(src, "sub", "inside"), []byte("inside"))
			dst := filepath.Join(remote, filepath.Base(filepath.Dir(src)))
			swapped, err := swapSecond(t, c, src, dst, func(name string) { tc.swap(t, name) })
			var te *TreeError
			require.ErrorAs(t, err, &te)
			require.Equal(t, 1, te.Count)
			var pe *fs.PathError
			require.ErrorAs(t, te.Failed[0], &pe)
			require.Equal(t, swapped, pe.Path)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			require.NotErrorIs(t, err, context.Canceled)
			// The secret reached the server under no name.
			require.NoError(t, filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
				require.NoError(t, err)
				if !d.IsDir() {
					require.NotContains(t, string(gpRead(t, p)), "PRIVATE KEY", p)
				}
				return nil
			}))
			require.NoFileExists(t, filepath.Join(dst, filepath.Base(swapped)))
			require.Equal(t, []byte("inside"), gpRead(t, filepath.Join(dst, "sub", "inside")))
		})
	}
}

// A FIFO the caller names as the source is refused, not opened.
func TestPutSourceIsAFIFO(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	local, remote := gpDirs(t)
	fifo := filepath.Join(local, "fifo")
	mkfifo(t, fifo, 0o644)
	err := c.Put(testCtx(t), fifo, filepath.Join(remote, "f"))
	require.True(t, errors.Is(err, errNotRegular), "%v", err)
	require.Empty(t, dirNames(t, remote))
}
