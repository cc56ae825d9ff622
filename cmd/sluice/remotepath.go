package main

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/sluicehq/sftp"
)

// expandRemote resolves a leading "~" or "~/" of a remote path to the login directory
// on the server (home-directory or expand-path@openssh.com, else the start directory,
// where OpenSSH's server starts), and "~user/..." with expand-path@openssh.com. The
// result is a path, to be used as one: see expandOperand for an operand that may be a
// pattern.
func (a *app) expandRemote(ctx context.Context, c *sftp.Client, p string) (string, error) {
	home, rest, err := a.expandHome(ctx, c, p)
	if err != nil {
		return "", err
	}
	return joinHome(home, rest), nil
}

// expandOperand is expandRemote for an operand that may be a pattern: it returns the
// path, and, when what the user typed after ~ holds pattern characters, the pattern to
// match (else ""). What the server said ~ is goes into the pattern quoted: it is a
// path, never syntax (a home the server calls "/.[bp]*" names that one directory, and
// must not match /.bashrc and /.profile). The ~ or ~user itself is a name to expand,
// never a pattern.
func (a *app) expandOperand(ctx context.Context, c *sftp.Client, p string) (lit, pattern string, err error) {
	home, rest, err := a.expandHome(ctx, c, p)
	if err != nil {
		return "", "", err
	}
	lit = joinHome(home, rest)
	if hasGlob(rest) {
		pattern = joinHome(sftp.QuoteGlob(home), rest)
	}
	return lit, pattern, nil
}

// expandHome splits p into the server's expansion of its leading ~ or ~user (home,
// "" when p has none) and the rest, as typed.
func (a *app) expandHome(ctx context.Context, c *sftp.Client, p string) (home, rest string, err error) {
	if !strings.HasPrefix(p, "~") {
		return "", p, nil
	}
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	first, rest, _ := strings.Cut(p, "/")
	if first == "~" {
		home, err := c.HomeDir(octx)
		if err != nil {
			return "", "", a.timeoutError(ctx, octx, "finding the home directory", err)
		}
		return home, rest, nil
	}
	if _, ok := c.Extensions()["expand-path@openssh.com"]; !ok {
		return "", "", fmt.Errorf("%s: the server cannot expand ~user (no expand-path@openssh.com); give the full path", p)
	}
	dir, err := c.RealPath(octx, first)
	if err != nil {
		return "", "", a.timeoutError(ctx, octx, "expanding "+first, err)
	}
	return dir, rest, nil
}

// joinHome puts an operand back together from expandHome's parts.
func joinHome(home, rest string) string {
	switch {
	case home == "":
		return rest
	case rest == "":
		return home
	}
	return path.Join(home, rest)
}

// hasGlob reports whether p has a character path.Match acts on, the escape '\' too.
// It is the library Glob's own test (hasMeta in walk.go), so what sluice takes as a
// literal path Glob would take literally too: a\b is a pattern matching "ab" for
// both, and a name with a real backslash is written a\\b.
func hasGlob(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// glob expands a remote pattern with the library's Glob (path.Match on each
// directory's listing, given up when the server is silent for --timeout), then applies the shell's
// rule that OpenSSH's sftp follows too: a '*' or '?' does not match a leading '.', so
// "*" leaves hidden files alone unless the pattern's element starts with '.'. A
// pattern without matches is an error naming it.
func (a *app) glob(ctx context.Context, c *sftp.Client, pattern string) ([]string, error) {
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	matches, err := c.Glob(octx, pattern)
	if err != nil {
		if errors.Is(err, path.ErrBadPattern) {
			return nil, fmt.Errorf("bad pattern %s", pattern)
		}
		return nil, a.timeoutError(ctx, octx, "matching "+pattern, err)
	}
	pparts := strings.Split(pattern, "/")
	kept := matches[:0]
	for _, m := range matches {
		if !hidesDotNames(pparts, strings.Split(m, "/")) {
			kept = append(kept, m)
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("no match for %s", pattern)
	}
	return kept, nil
}

// hidesDotNames reports whether a match has a name starting with '.' where the
// pattern's element has meta characters and does not start with '.'. The two are
// compared element by element from the end, where Glob keeps them aligned.
func hidesDotNames(pattern, match []string) bool {
	for i, j := len(pattern)-1, len(match)-1; i >= 0 && j >= 0; i, j = i-1, j-1 {
		if hasGlob(pattern[i]) && !strings.HasPrefix(pattern[i], ".") && strings.HasPrefix(match[j], ".") {
			return true
		}
	}
	return false
}

// joinRemote names an entry of a listed directory. It joins without cleaning, so the
// name keeps the form the user gave the directory, like the library's joinGlob
// (walk.go), whose rule it follows: "." (and "") add nothing, "/" no second slash.
func joinRemote(dir, name string) string {
	switch dir {
	case "", ".":
		return name
	case "/":
		return "/" + name
	}
	return dir + "/" + name
}

// remotePaths turns REMOTE operands into paths on the server: ~ expanded and
// patterns matched.
func (a *app) remotePaths(ctx context.Context, c *sftp.Client, rs []remote) ([]string, error) {
	var out []string
	for _, r := range rs {
		p, pattern, err := a.expandOperand(ctx, c, r.Path)
		if err != nil {
			return nil, err
		}
		if pattern == "" {
			out = append(out, p)
			continue
		}
		m, err := a.glob(ctx, c, pattern)
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}
