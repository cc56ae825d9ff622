package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sftp"
)

// maxParallel is sftp.Parallel's upper bound, checked here so that -j out of range is
// a usage error before anything connects.
const maxParallel = 1024

// xferFlags are put's and get's own flags.
type xferFlags struct {
	recursive, resume, preserve, fsync, quiet, sync bool
	parallel                                        int // 0: the library's default
	retries                                         int
}

func (x *xferFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&x.recursive, "r", false, "copy a directory and everything in it (symbolic links are copied as links)")
	fs.BoolVar(&x.resume, "a", false, "resume: continue the files an interrupted transfer left in its .sluice-part files")
	fs.BoolVar(&x.preserve, "p", false, "preserve permission bits and access and modification times")
	fs.BoolVar(&x.fsync, "f", false, "flush each file to stable storage before moving it into place\n(put needs the server's fsync@openssh.com)")
	fs.Var(positiveInt{p: &x.parallel, max: maxParallel}, "j", "files in flight at once in a tree copy (`n`, default 16, and up to 512 small ones)")
	fs.BoolVar(&x.quiet, "q", false, "quiet: no progress line and no summary")
	fs.BoolVar(&x.sync, "sync", false, "skip files whose destination has the same size and modification time, like rclone copy;\nimplies -p, so that copies carry the times compared next time (never deletes)")
	fs.IntVar(&x.retries, "retries", 0, "after a dropped connection, reconnect up to `n` times (waiting 1 s, 2 s, 4 s... up to 30 s)\nand continue the unfinished files from their part files")
}

func (x *xferFlags) options() []sftp.TransferOption {
	var opts []sftp.TransferOption
	if x.recursive {
		opts = append(opts, sftp.Recursive())
	}
	if x.resume {
		opts = append(opts, sftp.Resume())
	}
	if x.preserve || x.sync {
		opts = append(opts, sftp.Preserve())
	}
	if x.sync {
		opts = append(opts, sftp.SkipUnchanged())
	}
	if x.fsync {
		opts = append(opts, sftp.Fsync())
	}
	if x.parallel > 0 {
		opts = append(opts, sftp.Parallel(x.parallel))
	}
	return opts
}

// xferCommand builds put's or get's command: both take the same flags.
func xferCommand(synopsis string, do func(a *app, ctx context.Context, from []string, to string, x *xferFlags) error) command {
	return command{synopsis, 2, 0, false, func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
		x := &xferFlags{}
		x.register(fs)
		return func(ctx context.Context, a *app, args []string) error {
			if x.retries < 0 {
				return usagef("--retries %d: want 0 or more", x.retries)
			}
			return do(a, ctx, args[:len(args)-1], args[len(args)-1], x)
		}
	}}
}

func (a *app) put(ctx context.Context, locals []string, remoteArg string, x *xferFlags) (err error) {
	r, err := a.target(remoteArg)
	if err != nil {
		return err
	}
	// Check the sources before connecting: a typo should not cost an SSH handshake.
	for _, local := range locals {
		fi, err := os.Stat(local)
		if err != nil {
			return fmt.Errorf("put: %w", describe(err, local))
		}
		if fi.IsDir() && !x.recursive {
			return fmt.Errorf("put: %s is a directory (use -r to copy it and everything in it)", local)
		}
	}
	c, err := a.dialRetrying(ctx, r, x)
	if err != nil {
		return err
	}
	defer closeInto(&err, c.close)
	dir, err := a.expandRemote(ctx, c.s.client, r.Path)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	isDir, err := a.checkRemoteDest(ctx, c.s.client, dir, len(locals) > 1 || strings.HasSuffix(r.Path, "/"))
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	if isDir {
		if err := checkDistinctBases("put", locals, filepath.Base); err != nil {
			return err
		}
	}
	for _, local := range locals {
		// Where the copy lands: inside an existing directory under the source's
		// name (cp's rule), else REMOTE itself. Put names the copy, so it is given
		// dst.
		dst := dir
		if isDir {
			dst = path.Join(dir, filepath.Base(local))
		}
		if c.s.local {
			if err := checkOverlap("put", local, dst); err != nil {
				return err
			}
		}
		err = a.withRetries(ctx, c, x, "put", local, dst, func(s *session, opts ...sftp.TransferOption) error {
			return s.client.Put(ctx, local, dst, opts...)
		})
		if err != nil {
			return fmt.Errorf("put %s -> %s: %w", local, dst, unwrapOp(err, "put", local))
		}
	}
	return nil
}

// checkRemoteDest looks at a put's destination before anything moves, so that a
// mistake is reported in the user's terms ("no such directory: /missing/dir") rather
// than through the part file a failed OPEN would name. mustBeDir is set when several
// sources go there or REMOTE ends in '/'. It reports whether dst is a directory.
func (a *app) checkRemoteDest(ctx context.Context, c *sftp.Client, dst string, mustBeDir bool) (bool, error) {
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
		return true, nil
	case err == nil && mustBeDir:
		return false, fmt.Errorf("not a directory: %s", dst)
	case err == nil:
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, a.timeoutError(ctx, octx, "stat "+dst, err)
	case mustBeDir:
		return false, fmt.Errorf("no such directory: %s", strings.TrimSuffix(dst, "/"))
	}
	switch {
	case errors.Is(perr, fs.ErrNotExist):
		return false, fmt.Errorf("no such directory: %s", parent)
	case perr == nil && !pfi.IsDir():
		return false, fmt.Errorf("not a directory: %s", parent)
	}
	return false, nil
}

func (a *app) get(ctx context.Context, remoteArgs []string, local string, x *xferFlags) (err error) {
	rs, err := a.targets(remoteArgs)
	if err != nil {
		return err
	}
	c, err := a.dialRetrying(ctx, rs[0], x)
	if err != nil {
		return err
	}
	defer closeInto(&err, c.close)
	srcs, err := a.remotePaths(ctx, c.s.client, rs)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	lfi, lerr := os.Stat(local)
	isDir := lerr == nil && lfi.IsDir()
	switch {
	case !isDir && (len(srcs) > 1 || strings.HasSuffix(local, "/")):
		if lerr == nil {
			return fmt.Errorf("get: not a directory: %s", local)
		}
		return fmt.Errorf("get: no such directory: %s", strings.TrimSuffix(local, "/"))
	case errors.Is(lerr, fs.ErrNotExist):
		if _, perr := os.Stat(filepath.Dir(local)); errors.Is(perr, fs.ErrNotExist) {
			return fmt.Errorf("get: no such directory: %s", filepath.Dir(local))
		}
	}
	if isDir {
		if err := checkDistinctBases("get", srcs, path.Base); err != nil {
			return err
		}
	}
	for _, src := range srcs {
		dst := local
		if isDir {
			dst = filepath.Join(local, path.Base(src))
		}
		if c.s.local {
			if err := checkOverlap("get", src, dst); err != nil {
				return err
			}
		}
		err = a.withRetries(ctx, c, x, "get", src, dst, func(s *session, opts ...sftp.TransferOption) error {
			return s.client.Get(ctx, src, dst, opts...)
		})
		if err == nil {
			continue
		}
		// Get refuses a directory without Recursive in the library's terms, and a
		// missing source in the server's; say both in the command's. Asked only on
		// failure, so a get costs no extra round trip.
		if ctx.Err() == nil {
			octx, cancel := a.opCtx(ctx)
			fi, serr := c.s.client.Stat(octx, src)
			cancel()
			switch {
			case serr == nil && fi.IsDir() && !x.recursive:
				return fmt.Errorf("get: %s is a directory (use -r to copy it and everything in it)", src)
			case errors.Is(serr, fs.ErrNotExist):
				return fmt.Errorf("get: no such file or directory: %s", src)
			}
		}
		return fmt.Errorf("get %s -> %s: %w", src, dst, unwrapOp(err, "get", src))
	}
	return nil
}

// transfer runs do with x's options and, unless -q, a display fed by its progress
// reports. The display is finished before transfer returns, so an error printed next
// starts on a clean line.
func (a *app) transfer(op, src, dst string, x *xferFlags, opts []sftp.TransferOption, do func(...sftp.TransferOption) error) error {
	if x.quiet {
		if a.testProgress != nil {
			opts = append(opts, sftp.OnProgress(a.testProgress))
		}
		return do(opts...)
	}
	d := newDisplay(a.stderr, a.live, a.cols, time.Now, op, src, dst)
	d.startTicker()
	update := d.update
	if a.testProgress != nil {
		update = func(p sftp.Progress) { d.update(p); a.testProgress(p) }
	}
	err := do(append(opts, sftp.OnProgress(update))...)
	d.finish(err)
	return err
}

// checkOverlap refuses to copy a file onto itself, or a directory into itself, like
// cp. It is only meaningful with the local sftp-server, which shares this process's
// file system and working directory, so both paths can be looked at here. The copy
// would not destroy the file (it goes through a part file), but it is never what was
// meant, and a directory copied into itself nests a copy of itself.
func checkOverlap(op, src, dst string) error {
	sfi, err := os.Stat(src)
	if err != nil {
		return nil // the transfer reports it
	}
	if !sfi.IsDir() {
		if dfi, err := os.Stat(dst); err == nil && os.SameFile(sfi, dfi) {
			return fmt.Errorf("%s: %s and %s are the same file", op, src, dst)
		}
		return nil
	}
	// dst need not exist yet: look at it and each of its parents.
	abs, err := filepath.Abs(dst)
	if err != nil {
		return nil
	}
	for p := abs; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && os.SameFile(sfi, fi) {
			return fmt.Errorf("%s: cannot copy the directory %s into itself (%s)", op, src, dst)
		}
		if filepath.Dir(p) == p {
			return nil
		}
	}
}

// unwrapOp drops the library's "put NAME:" or "get NAME:" around err when the
// message already begins with the same words.
func unwrapOp(err error, op, name string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == op && pe.Path == name && err == error(pe) {
		return pe.Err
	}
	return err
}

// checkDistinctBases refuses sources that would land on the same name in the
// destination directory ('box:*/log.txt' out/ matches a/log.txt and b/log.txt): the
// later copy would silently replace the earlier one. Checked before anything is copied.
func checkDistinctBases(op string, srcs []string, base func(string) string) error {
	first := make(map[string]string, len(srcs))
	for _, src := range srcs {
		b := base(src)
		if prev, ok := first[b]; ok {
			return fmt.Errorf("%s: %s and %s would both be copied to %s in the destination; copy them separately",
				op, escapeText(prev), escapeText(src), escapeText(b))
		}
		first[b] = src
	}
	return nil
}
