package sftp

import "strings"

// What the server says is data, never syntax. Paths and names from the server (a
// listing, RealPath, HomeDir) are used as paths: never as a pattern (QuoteGlob, for
// callers who build one from them), and never with a leading "~", which RealPath
// sends as expand-path@openssh.com's home-directory syntax (literalPath).

// globQuoter puts a backslash before each character path.Match gives a meaning to.
var globQuoter = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)

// QuoteGlob returns a pattern that matches s and nothing else, for Glob and
// path.Match: each of * ? [ and \ in s is escaped with a backslash.
//
// A path the server gave (HomeDir, Getwd, RealPath, a listed name) is data: put into
// a pattern as it is, its characters become syntax, and the server chooses what the
// pattern matches (a home directory of "/.[bp]*" would match the server's /.bashrc and
// /.profile). Quote it, and join the part that is meant as a pattern after it:
//
//	home, err := c.HomeDir(ctx)
//	matches, err := c.Glob(ctx, path.Join(sftp.QuoteGlob(home), "*.log"))
func QuoteGlob(s string) string {
	if !hasMeta(s) {
		return s
	}
	return globQuoter.Replace(s)
}

// literalPath is p, a path built from names the server listed, in a form RealPath
// takes as a path: a leading "~" is expand-path's syntax (the home of the user named
// after it), so a name listed as "~root" in the start directory is sent as "./~root".
func literalPath(p string) string {
	if strings.HasPrefix(p, "~") {
		return "./" + p
	}
	return p
}
