package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// ls of several operands lists every one it can and reports the others, as ls(1):
// exit 1, the missing ones named on stderr, the rest on stdout.
func TestLsReportsTheMissingAndListsTheRest(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.Mkdir(a, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(a, "in-a"), nil, 0o644))
	require.NoError(t, os.WriteFile(b, []byte("b"), 0o644))
	missing, gone := filepath.Join(dir, "missing"), filepath.Join(dir, "gone")

	r := runCLI(t, "ls", a, missing, b)
	require.Equal(t, exitFail, r.code)
	require.Equal(t, b+"\n\n"+a+":\nin-a\n", r.stdout)
	require.Equal(t, "sluice: ls: no such file or directory: "+missing+"\n", r.stderr)

	r = runCLI(t, "ls", missing, a, gone)
	require.Equal(t, exitFail, r.code)
	require.Equal(t, a+":\nin-a\n", r.stdout) // headed, as ls(1) heads each of several operands
	require.Equal(t, "sluice: ls: no such file or directory: "+missing+"\n"+
		"sluice: ls: no such file or directory: "+gone+"\n"+
		"sluice: ls: 2 of 3 operands failed (listed above)\n", r.stderr)

	r = runCLI(t, "ls", a, b)
	requireOK(t, r)
	require.Empty(t, r.stderr)
}

// cat of a directory says so, rather than pass on the server's bare FAILURE.
func TestCatOfADirectory(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	r := runCLI(t, "cat", dir)
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: cat: "+dir+" is a directory\n", r.stderr)
	require.Empty(t, r.stdout)
}
