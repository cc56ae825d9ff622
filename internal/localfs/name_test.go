package localfs

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlainNameOn checks how a name from a remote listing is read by each kind of
// local system, whichever OS runs the test: the same name may be plain on Unix and a
// path (or a device) on Windows.
func TestPlainNameOn(t *testing.T) {
	tests := []struct {
		name          string
		unix, windows bool
	}{
		{"a", true, true},
		{"a.b", true, true},
		{"..a", true, true},
		{".hidden", true, true},
		{"-", true, true},
		{"COM10", true, true},   // only one digit makes a device
		{"CONSOLE", true, true}, // only the exact stem does
		{"nul-ish.txt", true, true},
		{"", false, false},
		{".", false, false},
		{"..", false, false},
		{"a/b", false, false},
		{"../a", false, false},
		{"/a", false, false},
		{"a\x00b", false, false},
		// Plain on Unix, where '\' and ':' are ordinary bytes; not on Windows.
		{`a\b`, true, false},
		{`..\..\evil`, true, false},
		{`\evil`, true, false},
		{`C:evil`, true, false},
		{"C:", true, false},
		{"file:stream", true, false},
		// Windows strips these, so they would name another entry.
		{"x.", true, false},
		{"x ", true, false},
		{".. ", true, false},
		{"...", true, false},
		// Devices in every directory on Windows, in any case, with any extension.
		{"CON", true, false},
		{"nul", true, false},
		{"Aux.txt", true, false},
		{"prn .log", true, false},
		{"COM1", true, false},
		{"lpt9.tar.gz", true, false},
		{"COM²", true, false},
		{"CONOUT$", true, false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.unix, PlainNameOn(tt.name, '/'), "%q on Unix", tt.name)
		require.Equal(t, tt.windows, PlainNameOn(tt.name, '\\'), "%q on Windows", tt.name)
	}
}

// TestPlainNameWindowsJoin maps remote names into a Windows destination the way Get
// does (the directory, a separator, the name) and checks where each lands: a name
// PlainNameOn accepts adds exactly one path element, and every name that would climb
// out, change drive or add levels is among those it refuses.
func TestPlainNameWindowsJoin(t *testing.T) {
	const dst = `C:\Users\me\Downloads\tree`
	elems := func(p string) []string {
		return strings.FieldsFunc(p, func(r rune) bool { return r == '\\' || r == '/' })
	}
	base := elems(dst)
	for _, name := range []string{"report.pdf", "a b", "..a", `..\..\Windows\evil.dll`, `sub\x`, `\x`, "D:x", "a/b", ".."} {
		joined := dst + `\` + name
		got := elems(joined)
		onePlainElement := len(got) == len(base)+1 && got[len(base)] == name &&
			name != ".." && !strings.Contains(name, ":")
		require.Equal(t, onePlainElement, PlainNameOn(name, '\\'), "%q joined is %q", name, joined)
	}
}

// TestPlainNameThisSystem: PlainName, used on real listings, follows PlainNameOn for
// this system's separator.
func TestPlainNameThisSystem(t *testing.T) {
	for _, name := range []string{"a", `a\b`, "C:x", "CON", "x.", "..", "a/b"} {
		if !PlainNameOn(name, filepath.Separator) {
			require.False(t, PlainName(name), name)
		}
	}
	require.True(t, PlainName("a"))
	require.Equal(t, filepath.Separator == '/', PlainName(`a\b`), "one name on Unix, two on Windows")
}
