package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// homeServer is a server whose home (its start directory, REALPATH ".") is home, holding
// files: a hostile server says what it likes there.
func homeServer(t *testing.T, home string, files map[string]string) *testserver.Server {
	t.Helper()
	srv := testserver.New(testserver.Options{Corrupt: func(req testserver.Request, _ []byte) [][]byte {
		if req.Type == testserver.TypeRealpath && req.Path == "." {
			return [][]byte{namePacket(req.ID, home)}
		}
		return nil
	}})
	t.Cleanup(func() { srv.Close() })
	for name, data := range files {
		require.NoError(t, srv.MkdirAll(filepath.ToSlash(filepath.Dir(name)), 0o755))
		require.NoError(t, srv.WriteFile(name, []byte(data), 0o644))
	}
	return srv
}

// Issue 26, item 3: what the server says its home is, is a path, never a pattern. A
// home of "/.[bp]*" made `get ~ DIR` match it against the server's root and replace
// DIR/.bashrc and DIR/.profile (exit 0); it names one path, which does not exist.
func TestHostileHomeIsNeverAPattern(t *testing.T) {
	srv := homeServer(t, "/.[bp]*", map[string]string{"/.bashrc": "the server's bashrc", "/.profile": "the server's profile"})
	dir := t.TempDir()
	for _, name := range []string{".bashrc", ".profile"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("mine"), 0o644))
	}
	for _, args := range [][]string{
		{"get", "~", dir}, {"get", "~", dir + "/"}, {"get", "-r", "~", dir}, {"get", "~/", dir},
		{"cat", "~"}, {"rm", "~"}, {"ls", "~"}, {"chmod", "600", "~"},
	} {
		r := runApp(t, inProcess(srv), args...)
		require.Equal(t, exitFail, r.code, "%v: stderr: %s", args, r.stderr)
		require.NotContains(t, r.stdout, "the server's", "%v", args)
	}
	for _, name := range []string{".bashrc", ".profile"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, "mine", string(got))
		_, err = srv.Lstat("/" + name)
		require.NoError(t, err, "not removed on the server either")
	}
}

// The pattern the user typed after ~ still matches, inside the home the server named,
// taken literally: a home of "/h[o]me" is that directory, not "/home".
func TestHomeWithPatternCharactersUnderAPattern(t *testing.T) {
	srv := homeServer(t, "/h[o]me", map[string]string{
		"/h[o]me/a.txt": "a", "/h[o]me/b.txt": "b", "/h[o]me/c.log": "c", "/home/evil.txt": "evil",
	})
	dir := t.TempDir()
	r := runApp(t, inProcess(srv), "get", "~/*.txt", dir+"/")
	requireOK(t, r)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"a.txt", "b.txt"}, names)

	r = runApp(t, inProcess(srv), "cat", "~/a.txt")
	requireOK(t, r)
	require.Equal(t, "a", r.stdout)
	r = runApp(t, inProcess(srv), "cat", "~/[ab].txt")
	requireOK(t, r)
	require.Equal(t, "ab", r.stdout)
}
