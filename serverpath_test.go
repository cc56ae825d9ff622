package sftp

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// quoteGlobSeeds are names with every character path.Match gives a meaning to.
var quoteGlobSeeds = []string{"", "plain", "/.[bp]*", `a\b`, `a\\*`, "[", "]", "[!a-z]?", "*?[\\", "h[o]me/dir", "日本*語", "a-b^c!"}

// QuoteGlob's pattern matches the name it quoted, whatever it holds.
func FuzzQuoteGlob(f *testing.F) {
	for _, s := range quoteGlobSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ok, err := path.Match(QuoteGlob(s), s)
		if err != nil || !ok {
			t.Fatalf("QuoteGlob(%q) = %q: Match = %v, %v", s, QuoteGlob(s), ok, err)
		}
	})
}

// A quoted name matches itself only, and nothing its characters would match as syntax.
func TestQuoteGlob(t *testing.T) {
	for _, s := range quoteGlobSeeds {
		ok, err := path.Match(QuoteGlob(s), s)
		require.NoError(t, err, s)
		require.True(t, ok, s)
	}
	require.Equal(t, "plain/name", QuoteGlob("plain/name"))
	require.Equal(t, `/.\[bp]\*`, QuoteGlob("/.[bp]*"))
	for _, other := range []string{"/.bashrc", "/.profile", "/.b"} {
		ok, err := path.Match(QuoteGlob("/.[bp]*"), other)
		require.NoError(t, err)
		require.False(t, ok, other)
	}
}

// Issue 26, item 3, the library's part: Glob of a pattern whose fixed part came from
// the server (a home of "/h[o]me"), quoted, lists that directory and no other; Glob
// never takes a name it listed as a pattern (a directory named "[d]" is listed as
// itself, not as "d").
func TestGlobOfAQuotedServerPath(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{})
	for _, name := range []string{"/h[o]me/a.log", "/h[o]me/b.log", "/home/evil.log", "/[d]/in.log", "/d/evil.log"} {
		require.NoError(t, srv.MkdirAll(path.Dir(name), 0o755))
		require.NoError(t, srv.WriteFile(name, []byte("x"), 0o644))
	}
	ctx := testCtx(t)
	got, err := c.Glob(ctx, path.Join(QuoteGlob("/h[o]me"), "*.log"))
	require.NoError(t, err)
	require.Equal(t, []string{"/h[o]me/a.log", "/h[o]me/b.log"}, got)

	got, err = c.Glob(ctx, "/h[o]me/*.log")
	require.NoError(t, err)
	require.Equal(t, []string{"/home/evil.log"}, got, "unquoted, the brackets are syntax")

	got, err = c.Glob(ctx, "/*/in.log")
	require.NoError(t, err)
	require.Equal(t, []string{"/[d]/in.log"}, got, "a listed name is a path, not matched again")
}

// A name the server listed is a path even when it starts with "~": WalkDir following
// links in the start directory resolves a link listed as "~nosuchuser" as that link,
// not as expand-path's home of a user (which failed the walk).
func TestWalkFollowsALinkNamedLikeAHome(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "target"), 0o755))
	writeLocal(t, filepath.Join(dir, "target", "f"), []byte("x"), 0o644)
	require.NoError(t, os.Symlink("target", filepath.Join(dir, "~nosuchuser")))
	c := newServerClient(t, dir)
	require.True(t, c.hasExt(extExpandPath), "OpenSSH's sftp-server offers expand-path")
	var seen []string
	err := c.WalkDir(testCtx(t), ".", func(name string, _ fs.DirEntry, err error) error {
		seen = append(seen, name)
		return err
	}, WalkFollowSymlinks())
	require.NoError(t, err)
	require.Contains(t, seen, "~nosuchuser/f")
}
