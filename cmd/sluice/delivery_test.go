package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// put --inplace writes the name itself (InPlace): the file arrives whole, over an
// existing one, and -a (which continues a part file) is refused with it; get refuses
// the flag.
func TestPutInPlace(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src", 300_000)
	remote := filepath.Join(dir, "remote")
	require.NoError(t, os.WriteFile(remote, []byte("old"), 0o644))

	requireOK(t, runCLI(t, "put", "--inplace", src, remote))
	got, err := os.ReadFile(remote)
	require.NoError(t, err)
	require.Equal(t, data, got)

	r := runCLI(t, "put", "--inplace", "-a", src, remote)
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "InPlace")

	r = runCLI(t, "get", "--inplace", remote, filepath.Join(dir, "back"))
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--inplace is for put")
	require.NoFileExists(t, filepath.Join(dir, "back"))
}

// A server that refuses to set modes and times (sftp-server -P, as an object store's
// front does): put -p fails saying so and names the way out; with
// --preserve-where-possible the file is copied, and -v reports what was refused.
func TestPutPreserveRefused(t *testing.T) {
	server := needLocalServer(t)
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src", 100_000)
	D := server + " -P setstat,fsetstat"
	dst := filepath.Join(dir, "dst")

	r := runCLI(t, "-D", D, "put", "-p", src, dst)
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "refused SETSTAT of mode or times")
	require.Contains(t, r.stderr, "PreserveWherePossible")
	require.NoFileExists(t, dst)

	r = runCLI(t, "-D", D, "-v", "put", "--preserve-where-possible", src, dst)
	requireOK(t, r)
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.Contains(t, r.stderr, "sluice: server: refused: SETSTAT of mode or times")
}
