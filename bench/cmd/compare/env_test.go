package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClosedAncestor(t *testing.T) {
	closed := filepath.Join(workDir(t), "closed")
	require.NoError(t, os.Mkdir(closed, 0o700))
	open := filepath.Join(closed, "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	require.Equal(t, closed, closedAncestor(open), "the closed parent is found")
	require.Equal(t, filepath.Join(open, "absent"), closedAncestor(filepath.Join(open, "absent")), "a missing directory cannot be entered")
	require.Empty(t, closedAncestor(workDir(t)))
	require.Empty(t, closedAncestor("/"))
}
