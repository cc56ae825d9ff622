package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A mode of digits that is not octal is an invalid mode, not a symbolic one missing
// its operator.
func TestChmodInvalidMode(t *testing.T) {
	t.Parallel()
	for mode, want := range map[string]string{
		"999":   "invalid mode 999: an octal mode has only the digits 0 to 7",
		"0648":  "invalid mode 0648: an octal mode has only the digits 0 to 7",
		"77777": "invalid mode 77777: want at most 7777",
		"u~x":   `mode "u~x": "u~x" has no +, - or =`,
	} {
		_, err := parseMode(mode)
		require.ErrorContains(t, err, want, mode)
	}
	for _, mode := range []string{"644", "0755", "u+x", "go-w,a+r"} {
		_, err := parseMode(mode)
		require.NoError(t, err, mode)
	}
}

func TestChmodInvalidModeCommand(t *testing.T) {
	needLocalServer(t)
	f := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	r := runCLI(t, "chmod", "999", f)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "sluice: chmod: invalid mode 999: an octal mode has only the digits 0 to 7\n")
	fi, err := os.Stat(f)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
}
