package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sftp"
)

// maxParallel is sftp.Parallel's upper bound, checked here so that -j out of range is
// a usage error before anything connects.
const maxParallel = 1024

// xferFlags are put's and get's own flags.
type xferFlags struct {
	recursive, resume, preserve, fsync, quiet, sync bool
	preserveLoose                                   bool // --preserve-where-possible
	failFast                                        bool
	verify, checksum                                bool
	inPlace                                         bool // --inplace (delivery.go)
	parallel                                        int  // 0: the library's default
	retries                                         int
}

func (x *xferFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&x.recursive, "r", false, "copy a directory and everything in it (symbolic links are copied as links)")
	fs.BoolVar(&x.resume, "a", false, "resume: continue the files an interrupted transfer left in its .sluice-part files")
	fs.BoolVar(&x.preserve, "p", false, "preserve permission bits and access and modification times")
	fs.BoolVar(&x.preserveLoose, "preserve-where-possible", false, "as -p, but where the server refuses to set modes or times (object stores), copy the\nfiles without them")
	fs.BoolVar(&x.fsync, "f", false, "flush each file to stable storage before moving it into place\n(put needs the server's fsync@openssh.com)")
	fs.Var(positiveInt{p: &x.parallel, max: maxParallel}, "j", "files in flight at once in a tree copy (`n`, default 16, and up to 512 small ones)")
	fs.BoolVar(&x.quiet, "q", false, "quiet: no progress line and no summary")
	fs.BoolVar(&x.sync, "sync", false, "skip files whose destination has the same size and modification time, like rclone copy;\nimplies -p, so that copies carry the times compared next time (never deletes)")
	fs.BoolVar(&x.failFast, "fail-fast", false, "stop a tree at its first failed file (by default the other files are copied, and the\nfailures listed at the end, as scp and rsync do)")
	x.registerSums(fs)
	x.registerDelivery(fs)
	fs.IntVar(&x.retries, "retries", 0, "after a dropped connection, reconnect and go on, up to `n` times in a row without progress\n(at once after progress, else waiting 1 s, 2 s, 4 s... up to 30 s): files in place are not\ncopied again, unfinished ones continue from their part files")
}

func (x *xferFlags) options() []sftp.TransferOption {
	var opts []sftp.TransferOption
	if x.recursive {
		opts = append(opts, sftp.Recursive())
	}
	if x.resume {
		opts = append(opts, sftp.Resume())
	}
	switch {
	case x.preserveLoose:
		opts = append(opts, sftp.PreserveWherePossible())
	case x.preserve || x.sync:
		opts = append(opts, sftp.Preserve())
	}
	if x.sync {
		opts = append(opts, sftp.SkipUnchanged())
	}
	opts = append(opts, x.sumOptions()...)
	opts = append(opts, x.deliveryOptions()...)
	if x.fsync {
		opts = append(opts, sftp.Fsync())
	}
	if x.parallel > 0 {
		opts = append(opts, sftp.Parallel(x.parallel))
	}
	if x.failFast {
		opts = append(opts, sftp.StopOnError())
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

// xferRun is one put or get as the user sees it: its tries (several with --retries),
// one display across them, unless -q, fed by their progress reports, and what the
// tries have learned. The display is finished before the command's error is printed,
// so that starts on a clean line.
type xferRun struct {
	a   *app
	d   *display  // nil with -q
	log *retryLog // nil without --retries
	// journal carries from a failed try to the next how far the server had
	// acknowledged each upload's part file (sftp.KeepJournal): a part the dropped
	// connection left uncut continues from there. Nil without --retries.
	journal *sftp.Journal

	filesBefore int          // files the earlier tries completed
	filesFound  atomic.Int64 // files this try found (FilesTotal)
}

func (a *app) newXferRun(op, src, dst string, x *xferFlags) *xferRun {
	r := &xferRun{a: a}
	if x.retries > 0 {
		r.log = newRetryLog()
		r.journal = sftp.NewJournal()
	}
	if !x.quiet {
		r.d = newDisplay(a.stderr, a.live, a.cols, time.Now, op, src, dst)
		r.d.retrying = x.retries > 0
		r.d.startTicker()
	}
	return r
}

// try runs do once with opts, the run's progress report and its journal.
func (r *xferRun) try(opts []sftp.TransferOption, do func(...sftp.TransferOption) error) error {
	opts = append(opts, sftp.OnProgress(r.report))
	if r.journal != nil {
		opts = append(opts, sftp.KeepJournal(r.journal))
	}
	return do(opts...)
}

func (r *xferRun) report(p sftp.Progress) {
	r.filesFound.Store(int64(p.FilesTotal))
	r.log.record(p)
	if r.d != nil {
		r.d.update(p)
	}
	if r.a.testProgress != nil {
		r.a.testProgress(p)
	}
}

// next starts the next try.
func (r *xferRun) next() {
	r.filesBefore = r.log.completed()
	r.filesFound.Store(0)
	if r.d != nil {
		r.d.retry()
	}
}

// found is how many files the transfer found, over its tries.
func (r *xferRun) found() int { return r.filesBefore + int(r.filesFound.Load()) }

// finish ends the display after the last try returned err.
func (r *xferRun) finish(err error) {
	if r.d != nil {
		r.d.finish(err)
	}
}

// retryLog counts the files the tries of one transfer completed, so that the display
// and the summary count those of earlier tries too (a retry leaves them out, so each
// is reported done once). A nil *retryLog (no --retries) records nothing.
type retryLog struct {
	done atomic.Int64
}

func newRetryLog() *retryLog { return &retryLog{} }

func (l *retryLog) record(p sftp.Progress) {
	if l != nil && p.Done {
		l.done.Add(1)
	}
}

func (l *retryLog) completed() int {
	if l == nil {
		return 0
	}
	return int(l.done.Load())
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
