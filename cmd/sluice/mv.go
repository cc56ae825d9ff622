package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
)

// mv renames remote files and directories, as mv(1) does: onto a name, which it
// replaces where the server allows (posix-rename@openssh.com), or into an existing
// directory under the source's typed or listed name. Several sources, or a glob, need
// a directory. A source with no base name of its own (~, ., ..) has no name to take
// into a directory, and is refused there.
func (a *app) mv(ctx context.Context, args []string) (err error) {
	rs, s, closeFn, err := a.openTargets(ctx, args)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	c := s.client
	srcs, _, several, err := a.remoteSources(ctx, c, rs[:len(rs)-1])
	if err != nil {
		return fmt.Errorf("mv: %w", err)
	}
	last := rs[len(rs)-1]
	dst, err := a.expandRemote(ctx, c, last.Path)
	if err != nil {
		return fmt.Errorf("mv: %w", err)
	}
	octx, cancel := a.opCtx(ctx)
	fi, serr := c.Stat(octx, dst)
	serr = a.timeoutError(ctx, octx, "stat "+dst, serr)
	cancel()
	dstDir := serr == nil && fi.IsDir()
	switch {
	case serr != nil && !errors.Is(serr, fs.ErrNotExist):
		return fmt.Errorf("mv: %w", serr)
	case several && !dstDir:
		return fmt.Errorf("mv: not a directory: %s", dst)
	}
	for _, src := range srcs {
		to := dst
		if dstDir {
			if src.name == "" {
				return fmt.Errorf("mv: %s %v", src.path, errNoName)
			}
			to = path.Join(dst, src.name)
		}
		octx, cancel := a.opCtx(ctx)
		err := a.timeoutError(ctx, octx, "rename "+src.path, c.Rename(octx, src.path, to))
		cancel()
		if err != nil {
			return fmt.Errorf("mv: %w", describe(err, src.path))
		}
	}
	return nil
}
