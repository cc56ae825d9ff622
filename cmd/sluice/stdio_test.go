package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 26, item 1: `put - FILE` uploads to a part name created exclusively, as every
// upload does. A co-tenant's link at .FILE.sluice-part is replaced, never written
// through, and the rename moves the upload into place, not the link.
func TestPutStdinNeverWritesThroughAPlantedLink(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	victim := filepath.Join(dir, "authorized_keys")
	const owners = "ssh-ed25519 AAAAC3Nz the owner's key\n"
	require.NoError(t, os.WriteFile(victim, []byte(owners), 0o600))
	part := filepath.Join(dir, ".file.sluice-part")
	require.NoError(t, os.Symlink(victim, part))

	const upload = "ssh-ed25519 AAAAC3Nz someone else's key\n"
	r := runApp(t, func(a *app) { a.stdin = strings.NewReader(upload) }, "put", "-", filepath.Join(dir, "file"))
	requireOK(t, r)

	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, owners, string(got), "the link's target is untouched")
	fi, err := os.Lstat(filepath.Join(dir, "file"))
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular(), "the upload is in place, not the link: %v", fi.Mode())
	got, err = os.ReadFile(filepath.Join(dir, "file"))
	require.NoError(t, err)
	require.Equal(t, upload, string(got))
	_, err = os.Lstat(part)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// failingReader yields data, then fails.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// A stream that fails part way leaves the destination as it was and no part file: a
// stream cannot be resumed, so what it sent is of no use.
func TestPutStdinThatFailsLeavesNothing(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	dst := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(dst, []byte("before"), 0o644))
	errRead := errors.New("the pipe broke")
	for _, size := range []int{10, 600 << 10} {
		src := &failingReader{data: make([]byte, size), err: errRead}
		r := runApp(t, func(a *app) { a.stdin = src }, "put", "-", dst)
		require.Equal(t, exitFail, r.code)
		require.Contains(t, r.stderr, "the pipe broke")
		got, err := os.ReadFile(dst)
		require.NoError(t, err)
		require.Equal(t, "before", string(got))
		_, err = os.Lstat(filepath.Join(dir, ".file.sluice-part"))
		require.ErrorIs(t, err, fs.ErrNotExist, "size %d", size)
	}
}
