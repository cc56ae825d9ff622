package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/sluicehq/sftp"
)

// maxParallel is sftp.Parallel's upper bound, checked here so that -j out of range is
// a usage error before anything connects.
const maxParallel = 1024

// xferFlags are put's and get's own flags.
type xferFlags struct {
	recursive, resume, preserve, fsync, quiet bool
	parallel                                  int // 0: the library's default
}

func (x *xferFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&x.recursive, "r", false, "copy a directory and everything in it (symbolic links are copied as links)")
	fs.BoolVar(&x.resume, "a", false, "resume: continue the files an interrupted transfer left in its .sluice-part files")
	fs.BoolVar(&x.preserve, "p", false, "preserve permission bits and access and modification times")
	fs.BoolVar(&x.fsync, "f", false, "flush each file to stable storage before moving it into place\n(put needs the server's fsync@openssh.com)")
	fs.Var(positiveInt{p: &x.parallel, max: maxParallel}, "j", "files in flight at once in a tree copy (`n`, default 16)")
	fs.BoolVar(&x.quiet, "q", false, "quiet: no progress line and no summary")
}

func (x *xferFlags) options() []sftp.TransferOption {
	var opts []sftp.TransferOption
	if x.recursive {
		opts = append(opts, sftp.Recursive())
	}
	if x.resume {
		opts = append(opts, sftp.Resume())
	}
	if x.preserve {
		opts = append(opts, sftp.Preserve())
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
func xferCommand(synopsis string, do func(a *app, ctx context.Context, from, to string, x *xferFlags) error) command {
	return command{synopsis, 2, func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
		x := &xferFlags{}
		x.register(fs)
		return func(ctx context.Context, a *app, args []string) error { return do(a, ctx, args[0], args[1], x) }
	}}
}

func (a *app) put(ctx context.Context, local, remoteArg string, x *xferFlags) (err error) {
	r, err := a.target(remoteArg)
	if err != nil {
		return err
	}
	// Check the source before connecting: a typo should not cost an SSH handshake.
	fi, err := os.Stat(local)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	if fi.IsDir() && !x.recursive {
		return fmt.Errorf("put: %s is a directory (use -r to copy it and everything in it)", local)
	}
	s, closeFn, err := a.open(ctx, r)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	// Where the copy lands is Put's rule, repeated here for the summary of a tree (a
	// single file's reports name it) and for the check below: one STAT.
	dst := r.Path
	if fi.IsDir() || s.local {
		dst = remoteDest(ctx, s.client, local, r.Path)
	}
	if s.local {
		if err := checkOverlap("put", local, dst); err != nil {
			return err
		}
	}
	err = a.transfer("put", local, dst, x, func(opts ...sftp.TransferOption) error {
		return s.client.Put(ctx, local, r.Path, opts...)
	})
	if err != nil {
		return fmt.Errorf("put %s -> %s: %w", local, dst, err)
	}
	return nil
}

func (a *app) get(ctx context.Context, remoteArg, local string, x *xferFlags) (err error) {
	r, err := a.target(remoteArg)
	if err != nil {
		return err
	}
	s, closeFn, err := a.open(ctx, r)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	dst := localDest(r.Path, local)
	if s.local {
		if err := checkOverlap("get", r.Path, dst); err != nil {
			return err
		}
	}
	err = a.transfer("get", r.Path, dst, x, func(opts ...sftp.TransferOption) error {
		return s.client.Get(ctx, r.Path, local, opts...)
	})
	if err == nil {
		return nil
	}
	// Get refuses a directory without Recursive in the library's terms; say it in the
	// command's. Asked only on failure, so a get costs no extra round trip.
	if !x.recursive && ctx.Err() == nil {
		if fi, serr := s.client.Stat(ctx, r.Path); serr == nil && fi.IsDir() {
			return fmt.Errorf("get: %s is a directory (use -r to copy it and everything in it)", r.Path)
		}
	}
	return fmt.Errorf("get %s -> %s: %w", r.Path, dst, err)
}

// transfer runs do with x's options and, unless -q, a display fed by its progress
// reports. The display is finished before transfer returns, so an error printed next
// starts on a clean line.
func (a *app) transfer(op, src, dst string, x *xferFlags, do func(...sftp.TransferOption) error) error {
	opts := x.options()
	if x.quiet {
		return do(opts...)
	}
	d := newDisplay(a.stderr, a.live, a.cols, time.Now, op, src, dst)
	d.startTicker()
	err := do(append(opts, sftp.OnProgress(d.update))...)
	d.finish(err)
	return err
}

// remoteDest is where Put of local to remote puts it: inside remote when that is an
// existing directory, as with cp.
func remoteDest(ctx context.Context, c *sftp.Client, local, remote string) string {
	if fi, err := c.Stat(ctx, remote); err == nil && fi.IsDir() {
		return path.Join(remote, filepath.Base(local))
	}
	return remote
}

// localDest is where Get of remote to local puts it, by the same rule.
func localDest(remote, local string) string {
	if fi, err := os.Stat(local); err == nil && fi.IsDir() {
		return filepath.Join(local, path.Base(remote))
	}
	return local
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
