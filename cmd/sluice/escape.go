package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// escapeText makes text from a server (file names, link targets, STATUS messages,
// banners) and anything that embeds it safe to print on a terminal: control
// characters, other non-printable runes and invalid UTF-8 are shown as Go escapes
// (\x1b, \u202e) instead of being sent raw, so a name cannot set the window title,
// clear the screen or hide text the way CVE-2019-6109 did to scp. Newlines and tabs are
// escaped too: one name must stay on one line. Printable text, including non-ASCII
// letters, is left alone.
//
// Every line the CLI prints that can hold server text goes through this one function.
func escapeText(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r != ' ':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// isPlain reports whether s is printable ASCII, the common case, which needs no copy.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// escapeLines escapes each line of a multi-line message of the CLI's own, keeping the
// line breaks that are its own.
func escapeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = escapeText(l)
	}
	return strings.Join(lines, "\n")
}
