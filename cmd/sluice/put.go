package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sftp"
)

func (a *app) put(ctx context.Context, locals []string, remoteArg string, x *xferFlags) (err error) {
	r, err := a.target(remoteArg)
	if err != nil {
		return err
	}
	if len(locals) == 1 && locals[0] == "-" {
		return a.putFromStdin(ctx, r, x)
	}
	// Look at the sources before connecting: a typo should not cost an SSH handshake.
	srcs, err := localSources(locals, x.recursive)
	if err != nil {
		return err
	}
	several := len(srcs) > 1
	c, err := a.dialRetrying(ctx, r, x)
	if err != nil {
		return err
	}
	defer closeInto(&err, c.close)
	dir, err := a.expandRemote(ctx, c.s.client, r.Path)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	dst := destInfo{path: cleanRemote(dir), slash: strings.HasSuffix(r.Path, "/")}
	dst.exists, dst.isDir, err = a.checkRemoteDest(ctx, c.s.client, dst.path, several || dst.slash)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	pl, err := planCopy("put", srcs, several, dst, joinRemote, listLocal)
	if err != nil {
		return err
	}
	if c.s.local {
		if err := checkOverlaps("put", srcs, pl); err != nil {
			return err
		}
	}
	return a.runPlan(ctx, c, x, putDirection, sourcesLabel(locals), pl)
}

// localSources looks at put's sources: each must exist (a link is followed, as Put
// follows it), and a directory needs -r.
func localSources(locals []string, recursive bool) ([]source, error) {
	srcs := make([]source, 0, len(locals))
	for _, l := range locals {
		fi, err := os.Stat(l)
		if err != nil {
			return nil, fmt.Errorf("put: %w", describe(err, l))
		}
		if fi.IsDir() && !recursive {
			return nil, fmt.Errorf("put: %s is a directory (use -r to copy it and everything in it)", l)
		}
		name, slash := localBase(l)
		srcs = append(srcs, source{path: l, name: name, slash: slash, dir: fi.IsDir()})
	}
	return srcs, nil
}

// cleanRemote is a remote destination without doubled or trailing slashes, so the
// names joined to it (and shown in messages) are clean; "" (the login directory)
// stays "".
func cleanRemote(p string) string {
	if p == "" {
		return p
	}
	return path.Clean(p)
}

// listLocal lists a local directory whose contents land in the remote DST.
func listLocal(dir string) ([]listedEntry, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("put: %w", err)
	}
	var out []listedEntry
	for _, de := range des {
		if keepListed(de.Name(), de.Type()) {
			out = append(out, listedEntry{src: filepath.Join(dir, de.Name()), name: de.Name(), link: de.Type()&fs.ModeSymlink != 0})
		}
	}
	return out, nil
}

// putLink makes the remote link p.dst with the target of the local link p.src. A link
// already there (an earlier run's) is replaced; anything else there is not.
func putLink(ctx context.Context, c *sftp.Client, p copyPair) error {
	target, err := os.Readlink(p.src)
	if err != nil {
		return err
	}
	if fi, err := c.Lstat(ctx, p.dst); err == nil {
		if fi.Mode()&fs.ModeSymlink == 0 {
			return fmt.Errorf("%s: exists and is not a link; not replaced by the link %s", escapeText(p.dst), p.src)
		}
		if err := c.Remove(ctx, p.dst); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return c.Symlink(ctx, target, p.dst)
}

// checkRemoteDest looks at a put's destination before anything moves, so that a
// mistake is reported in the user's terms ("no such directory: /missing") rather
// than through the part file a failed OPEN would name. mustBeDir is set when several
// sources go there or REMOTE ends in '/'. A missing dst is made by the copy, so its
// parent must be a directory. It reports whether dst exists and whether it is a
// directory.
func (a *app) checkRemoteDest(ctx context.Context, c *sftp.Client, dst string, mustBeDir bool) (exists, isDir bool, err error) {
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	// The parent is asked about at the same time, in case dst is missing: one round
	// trip rather than two.
	parent := path.Dir(dst)
	var (
		pfi  fs.FileInfo
		perr error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		pfi, perr = c.Stat(octx, parent)
	}()
	fi, err := c.Stat(octx, dst)
	<-done
	switch {
	case err == nil && fi.IsDir():
		return true, true, nil
	case err == nil && mustBeDir:
		return true, false, fmt.Errorf("not a directory: %s", dst)
	case err == nil:
		return true, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, false, a.timeoutError(ctx, octx, "stat "+dst, err)
	}
	switch {
	case errors.Is(perr, fs.ErrNotExist):
		return false, false, fmt.Errorf("no such directory: %s", parent)
	case perr == nil && !pfi.IsDir():
		return false, false, fmt.Errorf("not a directory: %s", parent)
	}
	return false, false, nil
}
