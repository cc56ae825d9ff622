package localfs

import (
	"path/filepath"
	"strings"
)

// Names a server lists become parts of local paths (Get of a tree), so whether a name
// is safe to join to a local directory depends on the local system, not the server's:
// "a\b" is one harmless name on Unix, and a path two levels deep on Windows. The check
// is a pure function of the separator so that both readings are tested on any OS.

// PlainNameOn reports whether name, from a remote directory listing, names exactly one
// entry of the local directory it is joined to, on a local system whose path separator
// is sep ('/' for Unix, '\\' for Windows). Refused are "", "." and "..", any name with
// a '/' (a separator everywhere) or a NUL, and where sep is '\\' also:
//   - a name with '\\' (a separator) or ':' (a drive, "C:x", or a data stream, "f:s");
//   - a name ending in '.' or ' ', which Windows strips, so that "x." would write "x"
//     and ".. " would be "..";
//   - the device names Windows reserves in every directory (CON, NUL, COM1, ...),
//     with or without an extension.
func PlainNameOn(name string, sep byte) bool {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return false
	}
	if sep != '\\' {
		return true
	}
	if strings.ContainsAny(name, `\:`) || strings.HasSuffix(name, ".") || strings.HasSuffix(name, " ") {
		return false
	}
	return !windowsDeviceName(name)
}

// windowsDeviceName reports whether name is one Windows maps to a device in any
// directory: the part before the first '.', less trailing spaces, is CON, PRN, AUX,
// NUL, COM0-9, LPT0-9 (the superscript digits ¹²³ too), CONIN$ or CONOUT$, in any case.
func windowsDeviceName(name string) bool {
	base, _, _ := strings.Cut(name, ".")
	base = strings.ToUpper(strings.TrimRight(base, " "))
	switch base {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$":
		return true
	}
	if len(base) < 4 || (base[:3] != "COM" && base[:3] != "LPT") {
		return false
	}
	switch digit := base[3:]; digit {
	case "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "¹", "²", "³":
		return true
	}
	return false
}

// PlainName reports whether a name from a remote listing names an entry of the local
// directory it is joined to, and nothing else: not "..", not "a/b", not "C:x". The rules
// are PlainNameOn's for this system's separator; filepath.IsLocal has the OS's own say
// on top.
func PlainName(name string) bool {
	return PlainNameOn(name, filepath.Separator) && filepath.IsLocal(name)
}
