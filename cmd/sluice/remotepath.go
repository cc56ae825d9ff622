package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/sluicehq/sftp"
)

// opCtx bounds one metadata call (stat, listing, mkdir, remove, realpath) by
// --timeout, so that a server that never finishes one cannot hold the command.
func (a *app) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if a.cfg.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, a.cfg.timeout)
}

// timeoutError says which call ran out of --timeout, when one did.
func (a *app) timeoutError(ctx, octx context.Context, what string, err error) error {
	if err != nil && ctx.Err() == nil && errors.Is(octx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: the server did not answer within %v (--timeout)", what, a.cfg.timeout)
	}
	return err
}

// expandHome resolves a leading "~" or "~/" of a remote path to the login directory on
// the server (home-directory or expand-path@openssh.com, else the start directory,
// where OpenSSH's server starts), and "~user/..." with expand-path@openssh.com.
func (a *app) expandRemote(ctx context.Context, c *sftp.Client, p string) (string, error) {
	if !strings.HasPrefix(p, "~") {
		return p, nil
	}
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	first, rest, _ := strings.Cut(p, "/")
	if first == "~" {
		home, err := c.HomeDir(octx)
		if err != nil {
			return "", a.timeoutError(ctx, octx, "finding the home directory", err)
		}
		if rest == "" {
			return home, nil
		}
		return path.Join(home, rest), nil
	}
	if _, ok := c.Extensions()["expand-path@openssh.com"]; !ok {
		return "", fmt.Errorf("%s: the server cannot expand ~user (no expand-path@openssh.com); give the full path", p)
	}
	dir, err := c.RealPath(octx, first)
	if err != nil {
		return "", a.timeoutError(ctx, octx, "expanding "+first, err)
	}
	if rest == "" {
		return dir, nil
	}
	return path.Join(dir, rest), nil
}

// hasGlob reports whether p has a pattern character path.Match acts on.
func hasGlob(p string) bool { return strings.ContainsAny(p, "*?[") }

// maxGlobMatches bounds what a pattern may expand to, so that a server listing
// without end (or a pattern over a huge tree) cannot grow the command's memory.
const maxGlobMatches = 100000

// glob expands a remote pattern component by component with path.Match, as OpenSSH's
// sftp does: a '*' does not match a leading '.' and never crosses a '/'. The matches
// come sorted. A pattern without matches is an error naming it.
func (a *app) glob(ctx context.Context, c *sftp.Client, pattern string) ([]string, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, fmt.Errorf("bad pattern %s: %v", pattern, err)
	}
	var prefix string
	parts := strings.Split(pattern, "/")
	if strings.HasPrefix(pattern, "/") {
		prefix, parts = "/", parts[1:]
	}
	cur := []string{prefix}
	for i, part := range parts {
		if part == "" {
			continue
		}
		last := i == len(parts)-1
		var next []string
		for _, dir := range cur {
			if !hasGlob(part) {
				next = append(next, joinRemote(dir, part))
				continue
			}
			listDir := dir
			if listDir == "" {
				listDir = "."
			}
			octx, cancel := a.opCtx(ctx)
			entries, err := c.ReadDir(octx, listDir)
			err = a.timeoutError(ctx, octx, "listing "+listDir, err)
			cancel()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
					continue
				}
				return nil, err
			}
			for _, e := range entries {
				name := e.Name()
				if strings.HasPrefix(name, ".") && !strings.HasPrefix(part, ".") {
					continue
				}
				if ok, _ := path.Match(part, name); !ok {
					continue
				}
				if !last && !e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
					continue
				}
				next = append(next, joinRemote(dir, name))
				if len(next) > maxGlobMatches {
					return nil, fmt.Errorf("%s matches more than %d names", pattern, maxGlobMatches)
				}
			}
		}
		cur = next
	}
	if len(cur) == 0 {
		return nil, fmt.Errorf("no match for %s", pattern)
	}
	return cur, nil
}

func joinRemote(dir, name string) string {
	switch dir {
	case "":
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
		p, err := a.expandRemote(ctx, c, r.Path)
		if err != nil {
			return nil, err
		}
		if !hasGlob(p) {
			out = append(out, p)
			continue
		}
		m, err := a.glob(ctx, c, p)
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}
