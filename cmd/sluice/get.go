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

func (a *app) get(ctx context.Context, remoteArgs []string, local string, x *xferFlags) (err error) {
	rs, err := a.targets(remoteArgs)
	if err != nil {
		return err
	}
	if local == "-" {
		return a.getToStdout(ctx, rs, x)
	}
	c, err := a.dialRetrying(ctx, rs[0], x)
	if err != nil {
		return err
	}
	defer closeInto(&err, c.close)
	srcs, operands, several, err := a.remoteSources(ctx, c.s.client, rs)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	dst, err := lookLocalDest(local, several)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	pl, err := a.planGet(ctx, c.s.client, srcs, several, dst, x.recursive)
	if err != nil {
		return err
	}
	if c.s.local {
		if err := checkOverlaps("get", srcs, pl); err != nil {
			return err
		}
	}
	return a.runPlan(ctx, c, x, getDirection, sourcesLabel(operands), pl)
}

// destInfo is what the destination is before anything is copied.
type destInfo struct {
	path   string
	exists bool
	isDir  bool
	slash  bool // typed with a trailing separator: it must be a directory
}

// lookLocalDest looks at a get's destination, and refuses one that cannot be what the
// sources need: a directory for several sources or a trailing slash, and a parent
// that exists for a new name (a missing directory is made, its parents are not).
func lookLocalDest(local string, several bool) (destInfo, error) {
	d := destInfo{path: filepath.Clean(local), slash: strings.HasSuffix(local, "/") || strings.HasSuffix(local, string(filepath.Separator))}
	fi, err := os.Stat(local)
	d.exists, d.isDir = err == nil, err == nil && fi.IsDir()
	switch {
	case d.isDir:
		return d, nil
	case d.exists && (several || d.slash):
		return d, fmt.Errorf("not a directory: %s", d.path)
	case d.exists:
		return d, nil
	case !errors.Is(err, fs.ErrNotExist):
		return d, err
	}
	parent := filepath.Dir(d.path)
	if _, err := os.Stat(parent); errors.Is(err, fs.ErrNotExist) {
		return d, fmt.Errorf("no such directory: %s", parent)
	}
	return d, nil
}

// remoteSources turns REMOTE operands into sources: ~ expanded, patterns matched. A
// pattern's matches are named by the listing, and make the command one of several
// sources whatever their number. It returns the operands expanded too, which name
// the sources in the summary, and several, which says DST must be a directory.
func (a *app) remoteSources(ctx context.Context, c *sftp.Client, rs []remote) (srcs []source, operands []string, several bool, err error) {
	several = len(rs) > 1
	for _, r := range rs {
		p, pattern, err := a.expandOperand(ctx, c, r.Path)
		if err != nil {
			return nil, nil, false, err
		}
		operands = append(operands, p)
		if pattern == "" {
			name, slash := remoteBase(r.Path)
			srcs = append(srcs, source{path: p, name: name, slash: slash})
			continue
		}
		matches, err := a.glob(ctx, c, pattern)
		if err != nil {
			return nil, nil, false, err
		}
		several = true
		for _, m := range matches {
			name := path.Base(m)
			if !plainListedName(name) {
				return nil, nil, false, fmt.Errorf("%s: the server listed a name that is not a plain file name: %q", escapeText(p), m)
			}
			srcs = append(srcs, source{path: m, name: name})
		}
	}
	return srcs, operands, several, nil
}

// planGet looks at the sources whose type decides their landing (one STAT each: a
// single source, or one with a trailing slash or no base name), then applies the rule.
func (a *app) planGet(ctx context.Context, c *sftp.Client, srcs []source, several bool, dst destInfo, recursive bool) (*copyPlan, error) {
	for i := range srcs {
		if s := &srcs[i]; !several || s.slash || s.name == "" {
			if err := a.statSource(ctx, c, s, recursive); err != nil {
				return nil, err
			}
		}
	}
	return planCopy("get", srcs, several, dst, joinLocal, func(dir string) ([]listedEntry, error) {
		return a.listContents(ctx, c, dir)
	})
}

// statSource looks at a remote source: whether it is a directory, in the user's terms
// when it is missing or a directory without -r.
func (a *app) statSource(ctx context.Context, c *sftp.Client, s *source, recursive bool) error {
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	fi, err := c.Stat(octx, s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("get: no such file or directory: %s", s.path)
	case err != nil:
		return fmt.Errorf("get: %w", a.timeoutError(ctx, octx, "stat "+s.path, err))
	case fi.IsDir() && !recursive:
		return fmt.Errorf("get: %s is a directory (use -r to copy it and everything in it)", s.path)
	}
	s.dir = fi.IsDir()
	return nil
}

// listContents lists a remote directory whose contents land in DST. As in a tree,
// links are copied as links, special files and .sluice-part files are left out, and
// a name that is not one plain name fails the listing (ReadDir refuses it).
func (a *app) listContents(ctx context.Context, c *sftp.Client, dir string) ([]listedEntry, error) {
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	des, err := c.ReadDir(octx, dir)
	if err != nil {
		return nil, fmt.Errorf("get: %w", a.timeoutError(ctx, octx, "listing "+dir, err))
	}
	var out []listedEntry
	for _, de := range des {
		e := listedEntry{src: joinRemote(dir, de.Name()), name: de.Name(), link: de.Type()&fs.ModeSymlink != 0}
		if keepListed(e.name, de.Type()) {
			out = append(out, e)
		}
	}
	return out, nil
}

// getLink makes the local link p.dst with the target of the remote link p.src. A
// link already there (an earlier run's) is replaced; anything else there is not.
func getLink(ctx context.Context, c *sftp.Client, p copyPair) error {
	target, err := c.Readlink(ctx, p.src)
	if err != nil {
		return err
	}
	if fi, err := os.Lstat(p.dst); err == nil {
		if fi.Mode()&fs.ModeSymlink == 0 {
			return fmt.Errorf("%s: exists and is not a link; not replaced by the link %s", p.dst, escapeText(p.src))
		}
		if err := os.Remove(p.dst); err != nil {
			return err
		}
	}
	return os.Symlink(target, p.dst)
}

// mkdirLocal makes a get's destination directory.
func mkdirLocal(dir string) error { return os.Mkdir(dir, 0o777) }

// checkOverlaps refuses a copy onto its own source (see checkOverlap), for each place
// a plan copies to: only meaningful with the local sftp-server.
func checkOverlaps(op string, srcs []source, pl *copyPlan) error {
	if pl.one != nil {
		return checkOverlap(op, pl.one.src, pl.one.dst)
	}
	for _, s := range srcs {
		dst := pl.dir
		if s.name != "" && !s.slash {
			dst = filepath.Join(pl.dir, s.name)
		}
		if err := checkOverlap(op, s.path, dst); err != nil {
			return err
		}
	}
	return nil
}

func joinLocal(dir, name string) string { return filepath.Join(dir, name) }
