package sftp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Bounds must not fail honest work: a directory too large for the memory limit is
// still listed by DirEntries, walked by WalkDir and removed by RemoveAll (a page at a
// time, in the server's order); only a whole listing (ReadDir) refuses it, and says
// what lists it anyway.

// honestEntries is the size of the honest directory the child process serves;
// SLUICE_TEST_HONEST_ENTRIES changes it, to measure a larger one by hand.
func honestEntries() int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_TEST_HONEST_ENTRIES")); err == nil && n > 0 {
		return n
	}
	return 200_000
}

// honestEvery: every honestEvery-th entry of the honest directory is a subdirectory
// of honestSub files.
const honestEvery, honestSub = 50_000, 100

// honestRemoved is the size of the honest directory RemoveAll removes: a REMOVE
// per entry, one at a time, is what takes long.
const honestRemoved = 12_000

// honestListing serves /big: honestEntries() entries named f0000000, f0000001, ...
// in pages of 100 as OpenSSH sends them, every honestEvery-th a directory of
// honestSub files; and /rm, the same with honestRemoved entries.
func honestListing(p string) testserver.Lister {
	total := honestEntries()
	if p == "/rm" {
		p, total = "/big", honestRemoved
	}
	switch {
	case p == "/big":
		return func(page int) []testserver.ListEntry {
			first := page * 100
			if first >= total {
				return nil
			}
			out := make([]testserver.ListEntry, 0, 100)
			for i := first; i < min(first+100, total); i++ {
				mode := uint32(0o100644)
				if i%honestEvery == 0 {
					mode = 0o040755
				}
				out = append(out, testserver.ListEntry{Name: numberedName(i), Mode: mode})
			}
			return out
		}
	case strings.HasPrefix(p, "/big/") || strings.HasPrefix(p, "/rm/"):
		return numbered(honestSub, 100)
	}
	return nil
}

// TestHonestLargeDirectory: with a memory limit of 16 MiB, a directory of 200,000
// entries (32 MB held whole) is refused by ReadDir, which says what lists it, and is
// listed by DirEntries and walked by WalkDir, in bounded heap; with the least limit
// (1 MiB), RemoveAll removes one of 12,000 entries (2 MB held whole). The server runs
// in a child process, so the heap is the client's.
func TestHonestLargeDirectory(t *testing.T) {
	limit := testMemoryLimit(16 << 20)
	var peak heapPeak
	c := newHostileClient(t, "honest", limit, &peak)
	ctx := testCtx(t)
	total := honestEntries()
	subdirs := (total + honestEvery - 1) / honestEvery

	_, err := c.ReadDir(ctx, "/big")
	require.ErrorIs(t, err, ErrListingTooLarge)
	require.ErrorContains(t, err, "DirEntries")
	require.ErrorContains(t, err, "WithMemoryLimit")

	peak.reset()
	n := 0
	for de, err := range c.DirEntries(ctx, "/big") {
		require.NoError(t, err)
		if de.Name() != numberedName(n) {
			require.Equal(t, numberedName(n), de.Name())
		}
		n++
	}
	require.Equal(t, total, n)
	t.Logf("DirEntries: %d entries, heap grew by %.1f MiB at most", n, float64(peak.growth())/(1<<20))
	require.Less(t, peak.growth(), int64(16<<20))

	peak.reset()
	seen := make([]bool, total)
	inSub := 0
	err = c.WalkDir(ctx, "/big", func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		dir, name := filepath.Split(p)
		switch dir {
		case "/big/":
			i, err := strconv.Atoi(name[1:])
			require.NoError(t, err)
			require.False(t, seen[i], "%s walked twice", p)
			seen[i] = true
			require.Equal(t, i%honestEvery == 0, d.IsDir())
		case "/":
		default:
			inSub++
		}
		return nil
	})
	require.NoError(t, err)
	require.NotContains(t, seen, false, "every entry is walked")
	require.Equal(t, subdirs*honestSub, inSub, "every subdirectory is walked")
	t.Logf("WalkDir: heap grew by %.1f MiB at most (limit %d MiB)", float64(peak.growth())/(1<<20), limit>>20)
	require.LessOrEqual(t, peak.growth(), hostileFactor*limit+hostileSlack)

	requireChildHandlesClosed(t, c)

	var rmPeak heapPeak
	c = newHostileClient(t, "honest", minMemoryLimit, &rmPeak)
	_, err = c.ReadDir(ctx, "/rm")
	require.ErrorIs(t, err, ErrListingTooLarge)
	rmPeak.reset()
	require.NoError(t, c.RemoveAll(ctx, "/rm"))
	_, err = c.Lstat(ctx, "/rm")
	require.ErrorIs(t, err, fs.ErrNotExist, "RemoveAll went to the end: the directory was removed")
	fi, err := c.Stat(ctx, removesPath)
	require.NoError(t, err)
	require.Equal(t, int64(honestRemoved-(honestRemoved+honestEvery-1)/honestEvery+(honestRemoved+honestEvery-1)/honestEvery*honestSub), fi.Size(),
		"every file was removed once, the subdirectories' too")
	t.Logf("RemoveAll: heap grew by %.1f MiB at most (limit %d MiB)", float64(rmPeak.growth())/(1<<20), minMemoryLimit>>20)
	require.LessOrEqual(t, rmPeak.growth(), int64(hostileFactor*minMemoryLimit+hostileSlack))
	requireChildHandlesClosed(t, c)
}

// TestHonestLargeDirectoryOnSFTPServer: OpenSSH's sftp-server, and a directory too
// large for a whole listing within the memory limit (1 MiB): WalkDir walks every entry
// once, a page at a time while the server goes on reading the directory, and
// RemoveAll removes it all, files deleted while the directory they are in is being
// read.
func TestHonestLargeDirectoryOnSFTPServer(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	require.NoError(t, os.Mkdir(big, 0o755))
	const files = 4000
	for i := range files {
		name := fmt.Sprintf("file-%05d-%s", i, strings.Repeat("x", 89)) // 100 bytes
		require.NoError(t, os.WriteFile(filepath.Join(big, name), nil, 0o644))
	}
	sub := filepath.Join(big, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	for i := range 10 {
		require.NoError(t, os.WriteFile(filepath.Join(sub, fmt.Sprint(i)), nil, 0o644))
	}
	c, _ := startServer(t, dir, []Option{WithMemoryLimit(minMemoryLimit)})
	ctx := testCtx(t)

	_, err := c.ReadDir(ctx, "big")
	require.ErrorIs(t, err, ErrListingTooLarge, "4,000 entries of 100-byte names take more than 1 MiB held whole")
	seen := map[string]bool{}
	err = c.WalkDir(ctx, "big", func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		require.False(t, seen[p], "%s walked twice", p)
		seen[p] = true
		return nil
	})
	require.NoError(t, err)
	require.Len(t, seen, 1+files+1+10)

	require.NoError(t, c.RemoveAll(ctx, "big"))
	_, err = os.Stat(big)
	require.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
	requireNoOpenHandles(t, c)
}
