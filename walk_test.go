package sftp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

func TestDirFSConformanceAtAbsolutePath(t *testing.T) {
	dir, names := fsTreeSized(t, 5_001, 1_500)
	c := newServerClient(t, t.TempDir()) // started elsewhere: only the absolute root counts
	fsys := c.DirFS(dir)
	require.NoError(t, fstest.TestFS(fsys, names...))

	// fs.WalkDir on an absolute remote path, the case that failed on FS().
	var walked []string
	require.NoError(t, fs.WalkDir(c.DirFS(dir+"/dir/"), ".", func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		walked = append(walked, p)
		return nil
	}))
	require.Equal(t, []string{".", "mid.bin", "nested", "nested/deep.txt", "rel"}, walked)

	sub, err := fs.Sub(fsys, "dir/nested")
	require.NoError(t, err)
	require.NoError(t, fstest.TestFS(sub, "deep.txt"))

	// "/" as the root: names are absolute paths without the leading slash.
	data, err := fs.ReadFile(c.DirFS("/"), dir[1:]+"/a.txt")
	require.NoError(t, err)
	require.Equal(t, "hello, sftp\n", string(data))
	_, err = fs.Stat(c.DirFS(dir), "../a.txt")
	require.ErrorIs(t, err, fs.ErrInvalid)
}

// walkTree builds a/b/c files, a link to a file, a link to a directory and a link loop.
func walkTree(t *testing.T) string {
	dir := t.TempDir()
	for _, f := range []string{"a/1.txt", "a/b/2.txt", "a/b/c/3.txt", "z.txt"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755))
		writeLocal(t, filepath.Join(dir, f), []byte(f), 0o644)
	}
	require.NoError(t, os.Symlink("../z.txt", filepath.Join(dir, "a", "zlink")))
	require.NoError(t, os.Symlink("b", filepath.Join(dir, "a", "blink")))
	require.NoError(t, os.Symlink("..", filepath.Join(dir, "a", "b", "up")))
	return dir
}

func TestWalkDir(t *testing.T) {
	dir := walkTree(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	var got []string
	err := c.WalkDir(ctx, dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		if d.Type()&fs.ModeSymlink != 0 {
			rel += "@"
		} else if d.IsDir() {
			rel += "/"
		}
		got = append(got, rel)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"./", "a/", "a/1.txt", "a/b/", "a/b/2.txt", "a/b/c/", "a/b/c/3.txt", "a/b/up@", "a/blink@", "a/zlink@", "z.txt"}, got,
		"lexical order, links reported and not followed")

	// Relative roots keep their form in the paths fn sees.
	got = nil
	require.NoError(t, c.WalkDir(ctx, "a/b/c", func(p string, d fs.DirEntry, err error) error {
		got = append(got, p)
		return err
	}))
	require.Equal(t, []string{"a/b/c", "a/b/c/3.txt"}, got)

	// SkipDir on a directory skips it; on a file, the rest of its directory.
	got = nil
	require.NoError(t, c.WalkDir(ctx, "a", func(p string, d fs.DirEntry, err error) error {
		got = append(got, p)
		switch p {
		case "a/b":
			return fs.SkipDir
		case "a/blink":
			return fs.SkipDir
		}
		return err
	}))
	require.Equal(t, []string{"a", "a/1.txt", "a/b", "a/blink"}, got)

	// SkipAll ends the walk with a nil error.
	got = nil
	require.NoError(t, c.WalkDir(ctx, ".", func(p string, d fs.DirEntry, err error) error {
		got = append(got, p)
		if p == "a/b/2.txt" {
			return fs.SkipAll
		}
		return err
	}))
	require.Equal(t, []string{".", "a", "a/1.txt", "a/b", "a/b/2.txt"}, got)

	// Another error from fn ends the walk with it.
	stop := errors.New("stop")
	require.ErrorIs(t, c.WalkDir(ctx, ".", func(string, fs.DirEntry, error) error { return stop }), stop)

	// A missing root is reported to fn.
	var rootErr error
	require.NoError(t, c.WalkDir(ctx, "missing", func(p string, d fs.DirEntry, err error) error {
		require.Nil(t, d)
		rootErr = err
		return nil
	}))
	require.ErrorIs(t, rootErr, fs.ErrNotExist)

	// Walk hands out FileInfo from the listing.
	sizes := map[string]int64{}
	require.NoError(t, c.Walk(ctx, "a/b", func(p string, info fs.FileInfo, err error) error {
		require.NoError(t, err)
		if info.Mode().IsRegular() {
			sizes[p] = info.Size()
		}
		return nil
	}))
	require.Equal(t, map[string]int64{"a/b/2.txt": 9, "a/b/c/3.txt": 11}, sizes)
}

func TestWalkDirFollowingSymlinks(t *testing.T) {
	dir := walkTree(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	var got []string
	var loops []string
	err := c.WalkDir(ctx, "a", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			loops = append(loops, p)
			return nil
		}
		got = append(got, p)
		return nil
	}, WalkFollowSymlinks())
	require.NoError(t, err)
	// a/b/up leads to a: walked once through the link, then refused as a loop.
	require.Contains(t, got, "a/zlink")
	require.Contains(t, got, "a/blink/c/3.txt", "a link to a directory is descended")
	require.Contains(t, got, "a/b/up/1.txt", "a link is descended once")
	require.NotEmpty(t, loops, "a link loop is reported, not walked forever")
	for _, p := range loops {
		require.Contains(t, []string{"up", "blink"}, path.Base(p), "only links can close a loop")
	}
	for _, p := range got {
		fi, err := c.Lstat(ctx, p)
		require.NoError(t, err, p)
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := c.Stat(ctx, p)
			require.NoError(t, err)
			require.False(t, target.Mode()&fs.ModeSymlink != 0)
		}
	}
}

func TestWalkDirStopsWhenCtxEnds(t *testing.T) {
	dir := walkTree(t)
	c := newServerClient(t, dir)
	ctx, cancel := context.WithCancel(testCtx(t))
	var got []string
	err := c.WalkDir(ctx, ".", func(p string, d fs.DirEntry, err error) error {
		got = append(got, p)
		if p == "a/1.txt" {
			cancel()
		}
		return err
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []string{".", "a", "a/1.txt"}, got, "fn is not called once ctx has ended")
}

// A server that serves a directory containing itself forever: the walk stops at
// MaxWalkDepth instead of descending without end.
func TestWalkDirStopsAtMaxDepth(t *testing.T) {
	self := func(page int) []testserver.ListEntry {
		if page > 0 {
			return nil
		}
		return []testserver.ListEntry{{Name: "d", Mode: 0o040755}}
	}
	c, _ := newTestServerClient(t, testserver.Options{Listing: func(string) testserver.Lister { return self }})
	ctx := testCtx(t)
	require.NoError(t, c.Mkdir(ctx, "/loop", 0o755))
	depth, deepest := 0, ""
	err := c.WalkDir(ctx, "/loop", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			deepest = p
			return err
		}
		depth++
		return nil
	})
	require.ErrorIs(t, err, ErrWalkTooDeep)
	require.Equal(t, MaxWalkDepth+1, depth)
	require.Len(t, deepest, len("/loop")+2*MaxWalkDepth)
}

func TestGlob(t *testing.T) {
	dir := walkTree(t)
	writeLocal(t, filepath.Join(dir, "a", "b", "x.txt"), nil, 0o644)
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"*.txt", []string{"z.txt"}},
		{"a/*", []string{"a/1.txt", "a/b", "a/blink", "a/zlink"}},
		{"a/*/*.txt", []string{"a/b/2.txt", "a/b/x.txt", "a/blink/2.txt", "a/blink/x.txt"}},
		{"a/b/[0-9].txt", []string{"a/b/2.txt"}},
		{"a/?/c/3.txt", []string{"a/b/c/3.txt"}},
		{"a/1.txt", []string{"a/1.txt"}},
		{"nothing*", nil},
		{"missing/*", nil},
		{"z.txt/*", nil},
		{dir + "/a/b/*.txt", []string{dir + "/a/b/2.txt", dir + "/a/b/x.txt"}},
	} {
		got, err := c.Glob(ctx, tc.pattern)
		require.NoError(t, err, tc.pattern)
		require.Equal(t, tc.want, got, tc.pattern)
		// The same as path.Match over the local tree, which filepath.Glob gives.
		if !filepath.IsAbs(tc.pattern) {
			local, err := filepath.Glob(filepath.Join(dir, tc.pattern))
			require.NoError(t, err)
			require.Len(t, got, len(local), tc.pattern)
		}
	}
	_, err := c.Glob(ctx, "a/[")
	require.ErrorIs(t, err, path.ErrBadPattern)

	// Errors other than absence are not passed over.
	require.NoError(t, c.Close())
	_, err = c.Glob(ctx, "a/*")
	requireClosedConn(t, err)
}

// A server serving a deep tree of large directories: the walk holds the listings on
// its current path, and stops descending once they would pass the memory limit. The
// names are short (4 KiB a level): what stops the walk is what each entry costs held,
// its fileInfo and slots, not its name's bytes alone.
func TestWalkDirBoundsTheEntriesItHolds(t *testing.T) {
	page := []testserver.ListEntry{{Name: "d", Mode: 0o040755}}
	for i := range 999 {
		page = append(page, testserver.ListEntry{Name: fmt.Sprintf("f%03d", i), Mode: 0o100644})
	}
	wide := func(n int) []testserver.ListEntry {
		if n > 0 {
			return nil
		}
		return page
	}
	const limit = 1 << 20
	c, _ := newTestServerClient(t, testserver.Options{Listing: func(string) testserver.Lister { return wide }}, WithMemoryLimit(limit))
	ctx := testCtx(t)
	require.NoError(t, c.Mkdir(ctx, "/w", 0o755))
	dirs := 0
	var tooLarge []string
	err := c.WalkDir(ctx, "/w", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			require.ErrorIs(t, err, ErrListingTooLarge)
			tooLarge = append(tooLarge, p)
			return fs.SkipDir
		}
		if d.IsDir() {
			dirs++
		}
		return nil
	})
	require.NoError(t, err)
	opened, refused := walkRefusal(limit, "/w", "d", page)
	require.Equal(t, []string{refused}, tooLarge)
	require.Equal(t, "/w/d/d/d/d/d/d", refused, "six listings of 1000 are held; the seventh is refused")
	require.Equal(t, opened, dirs)
}
