package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEscapeText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain name.txt":         "plain name.txt",
		"caf\u00e9 \u65e5\u672c": "caf\u00e9 \u65e5\u672c",
		"\x1b]0;pwned\x07":       `\x1b]0;pwned\x07`,
		"\x1b[2J\x1b[H":          `\x1b[2J\x1b[H`,
		"a\nb\rc\td":             `a\x0ab\x0dc\x09d`,
		"\x9b31m":                `\x9b31m`, // invalid UTF-8 byte (a C1 CSI in Latin-1)
		"\u009b31m":              `\u009b31m`,
		"evil\u202etxt.exe":      `evil\u202etxt.exe`,
		"del\x7f":                `del\x7f`,
	} {
		require.Equal(t, want, escapeText(in), "%q", in)
	}
	require.Equal(t, "line one\nline \\x1b two", escapeLines("line one\nline \x1b two"))
}
