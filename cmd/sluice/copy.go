package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sftp"
)

// Running a put or get once its plan is made (see landing.go): one file goes through
// Get or Put under its exact name; everything else through one GetAll or PutAll, so a
// glob or several operands share one run, its parallelism and its summary line.

// direction is what differs between get and put.
type direction struct {
	op string
	// one copies a single file to exactly dst; all copies srcs into dir under their
	// base names.
	one func(ctx context.Context, c *sftp.Client, src, dst string, opts ...sftp.TransferOption) error
	all func(ctx context.Context, c *sftp.Client, srcs []string, dir string, opts ...sftp.TransferOption) error
	// mkdir makes the destination directory; link makes one link listed directly
	// under a source whose contents are copied.
	mkdir func(ctx context.Context, c *sftp.Client, dir string) error
	link  func(ctx context.Context, c *sftp.Client, p copyPair) error
}

var getDirection = direction{
	op: "get",
	one: func(ctx context.Context, c *sftp.Client, src, dst string, opts ...sftp.TransferOption) error {
		return c.Get(ctx, src, dst, opts...)
	},
	all: func(ctx context.Context, c *sftp.Client, srcs []string, dir string, opts ...sftp.TransferOption) error {
		return c.GetAll(ctx, srcs, dir, opts...)
	},
	mkdir: func(_ context.Context, _ *sftp.Client, dir string) error { return mkdirLocal(dir) },
	link:  getLink,
}

var putDirection = direction{
	op: "put",
	one: func(ctx context.Context, c *sftp.Client, src, dst string, opts ...sftp.TransferOption) error {
		return c.Put(ctx, src, dst, opts...)
	},
	all: func(ctx context.Context, c *sftp.Client, srcs []string, dir string, opts ...sftp.TransferOption) error {
		return c.PutAll(ctx, srcs, dir, opts...)
	},
	mkdir: func(ctx context.Context, c *sftp.Client, dir string) error { return c.Mkdir(ctx, dir, 0o755) },
	link:  putLink,
}

// runPlan copies what pl says. label names the sources in the summary.
func (a *app) runPlan(ctx context.Context, c *xferConn, x *xferFlags, d direction, label string, pl *copyPlan) error {
	if pl.makeDir {
		octx, cancel := a.opCtx(ctx)
		err := a.timeoutError(ctx, octx, "mkdir "+pl.dir, d.mkdir(octx, c.s.client, pl.dir))
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", d.op, err)
		}
	}
	if pl.one != nil {
		src, dst := pl.one.src, pl.one.dst
		_, err := a.withRetries(ctx, c, x, d.op, src, dst, func(s *session, opts ...sftp.TransferOption) error {
			return d.one(ctx, s.client, src, dst, opts...)
		})
		if err != nil {
			return fmt.Errorf("%s %s -> %s: %w", d.op, src, dst, unwrapOp(err, d.op, src))
		}
		return nil
	}
	var linkErrs []error
	for _, l := range pl.links {
		octx, cancel := a.opCtx(ctx)
		err := a.timeoutError(ctx, octx, "link "+l.dst, d.link(octx, c.s.client, l))
		cancel()
		if err != nil {
			if x.failFast || ctx.Err() != nil {
				return fmt.Errorf("%s: %w", d.op, err)
			}
			linkErrs = append(linkErrs, err)
		}
	}
	found, err := a.withRetries(ctx, c, x, d.op, label, pl.copyRoot, func(s *session, opts ...sftp.TransferOption) error {
		return d.all(ctx, s.client, pl.roots, pl.dir, opts...)
	})
	return a.treeOutcome(d.op, err, linkErrs, found+len(pl.links))
}

// treeFailed is a tree that copied everything but some files: each failure is listed
// on stderr, and this ends the command with their count.
type treeFailed struct {
	op            string
	failed, total int
	first         error  // shown with the count when it is the only one
	noun          string // what failed: "file" when empty
	listed        bool   // every failure is on stderr already, the only one too
}

func (e *treeFailed) Error() string {
	noun := e.noun
	if noun == "" {
		noun = "file"
	}
	if e.total != 1 {
		noun += "s"
	}
	if e.failed == 1 && !e.listed {
		return fmt.Sprintf("%s: 1 of %d %s failed: %s", e.op, e.total, noun, dropOp(e.first, e.op))
	}
	return fmt.Sprintf("%s: %d of %d %s failed (listed above)", e.op, e.failed, e.total, noun)
}

// treeOutcome turns a tree's error, and the links the CLI made that failed, into the
// command's: a *sftp.TreeError's failures are listed one per line and counted. Any
// other error (the connection lost, ctx ended, a failure with --fail-fast) is the
// command's error as it is.
func (a *app) treeOutcome(op string, err error, linkErrs []error, total int) error {
	var te *sftp.TreeError
	if err != nil && !errors.As(err, &te) {
		return withOp(op, err)
	}
	failures := linkErrs
	count := len(linkErrs)
	if te != nil {
		failures = append(failures, te.Failed...)
		count += te.Count
	}
	if count == 0 {
		return nil
	}
	total = max(total, count)
	if count > 1 {
		for _, f := range failures {
			fmt.Fprintf(a.stderr, "sluice: %s: %s\n", op, escapeText(dropOp(f, op)))
		}
		if more := count - len(failures); more > 0 {
			fmt.Fprintf(a.stderr, "sluice: %s: and %d more\n", op, more)
		}
	}
	return &treeFailed{op: op, failed: count, total: total, first: failures[0]}
}

// sourcesLabel names a command's sources in its summary line: the paths as resolved,
// separated by spaces.
func sourcesLabel(paths []string) string { return strings.Join(paths, " ") }
