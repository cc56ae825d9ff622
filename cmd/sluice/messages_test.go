package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// One prefix per message: a failure that names its operation and path keeps them,
// and the caller's less precise prefix is dropped.
func TestOnePrefixPerMessage(t *testing.T) {
	t.Parallel()
	own := &fs.PathError{Op: "put", Path: "/tree/f", Err: errors.New("open /up/tree/.f.sluice-part: Failure")}
	other := &fs.PathError{Op: "stat", Path: "/x", Err: fs.ErrNotExist}
	plain := errors.New("connection lost")

	require.Equal(t, "put /tree/f: open /up/tree/f: Failure", prefixed("put", "put /tree", own))
	require.Equal(t, "put /tree: stat /x: file does not exist", prefixed("put", "put /tree", other))
	require.Equal(t, "connecting: connection lost", prefixed("", "connecting", plain))

	require.Equal(t, "/tree/f: open /up/tree/f: Failure", dropOp(own, "put"))
	require.Equal(t, "stat /x: file does not exist", dropOp(other, "put"))

	require.Same(t, own, withOp("put", own))
	require.Equal(t, "put: connection lost", withOp("put", plain).Error())
	require.Nil(t, withOp("put", nil))
	// Wrapped, the prefix is someone else's: kept.
	require.Equal(t, "put: x: put /tree/f: open /up/tree/.f.sluice-part: Failure", withOp("put", fmt.Errorf("x: %w", own)).Error())
}

// A tree's failures, listed, and a --fail-fast failure carry one "put" each.
func TestTreeFailuresOnePrefix(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	require.NoError(t, os.Mkdir(tree, 0o755))
	for _, n := range []string{"f1", "f2", "f3"} {
		randomFile(t, tree, n, 100)
	}
	up := filepath.Join(dir, "up")
	for _, n := range []string{"f1", "f2"} { // names taken by non-empty directories: the renames fail
		require.NoError(t, os.MkdirAll(filepath.Join(up, "tree", n, "in"), 0o755))
	}
	r := runCLI(t, "put", "-r", "-q", tree, up)
	require.Equal(t, exitFail, r.code)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	require.Len(t, lines, 3, r.stderr)
	for _, l := range lines[:2] {
		require.Regexp(t, `^sluice: put: `+tree+`/f[12]: rename `, l)
	}
	require.Equal(t, "sluice: put: 2 of 3 files failed (listed above)", lines[2])

	r = runCLI(t, "put", "-r", "-q", "-j", "1", "--fail-fast", tree, up)
	require.Equal(t, exitFail, r.code)
	require.Regexp(t, `^sluice: put `+tree+`/f1: rename [^\n]*\n$`, r.stderr)
}
