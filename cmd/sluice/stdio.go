package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sluicehq/sftp"
)

// "-" as get's LOCAL is standard output and as put's only LOCAL standard input, as in
// tar or curl: a stream, so nothing in the tree and resume flags applies. A download
// to stdout is written as it arrives (no part file: a pipe has no name to rename);
// an upload from stdin is the library's PutReader: a part name created exclusively,
// renamed into place once complete, as every put, so a reader of the remote file
// never sees half of it.

// stdioRefused are the put and get flags that mean nothing for a stream.
func (x *xferFlags) stdioRefused() string {
	switch {
	case x.recursive:
		return "-r"
	case x.resume:
		return "-a"
	case x.preserve:
		return "-p"
	case x.preserveLoose:
		return "--preserve-where-possible"
	case x.sync:
		return "--sync"
	case x.retries > 0:
		return "--retries"
	case x.failFast:
		return "--fail-fast"
	case x.checksum:
		return "--checksum"
	}
	return ""
}

// getToStdout writes each remote file to standard output in turn, like cat.
func (a *app) getToStdout(ctx context.Context, rs []remote, x *xferFlags) (err error) {
	if f := x.stdioRefused(); f != "" {
		return usagef("get: %s does not apply when LOCAL is - (standard output)", f)
	}
	if x.fsync {
		return usagef("get: -f does not apply when LOCAL is - (standard output)")
	}
	s, closeFn, err := a.open(ctx, rs[0])
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	return a.catFiles(ctx, s.client, rs, "get", x.verify)
}

// catFiles copies the remote files rs name (globs matched) to standard output; with
// verify, each is then checked against the server's hash (it is written already).
func (a *app) catFiles(ctx context.Context, c *sftp.Client, rs []remote, op string, verify bool) error {
	paths, err := a.remotePaths(ctx, c, rs)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	for _, p := range paths {
		if err := a.catOne(ctx, c, p, verify); err != nil {
			return fmt.Errorf("%s: %w", op, describe(err, p))
		}
	}
	return nil
}

// catOne streams one remote file to standard output. The open is bounded by
// --timeout; the copy by ctx (Ctrl-C), as a transfer is.
func (a *app) catOne(ctx context.Context, c *sftp.Client, p string, verify bool) error {
	octx, cancel := a.opCtx(ctx)
	f, err := c.Open(octx, p)
	err = a.timeoutError(ctx, octx, "open "+p, err)
	cancel()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = f.Close() })
	chk := newStreamCheck(verify)
	_, err = f.WriteTo(chk.writer(a.stdout))
	if !stop() {
		return ctx.Err()
	}
	if err = errors.Join(err, f.Close()); err == nil {
		err = chk.check(ctx, c, "get", p, p, "")
	}
	return err
}

// putFromStdin uploads standard input to r, which must name a file.
func (a *app) putFromStdin(ctx context.Context, r remote, x *xferFlags) (err error) {
	if f := x.stdioRefused(); f != "" {
		return usagef("put: %s does not apply when LOCAL is - (standard input)", f)
	}
	c, closeFn, err := a.open(ctx, r)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	dst, err := a.expandRemote(ctx, c.client, r.Path)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	_, isDir, err := a.checkRemoteDest(ctx, c.client, dst, false)
	switch {
	case err != nil:
		return fmt.Errorf("put: %w", err)
	case isDir:
		return fmt.Errorf("put: %s is a directory: standard input has no name, give the file's", escapeText(dst))
	}
	opts := x.deliveryOptions()
	if x.fsync {
		opts = append(opts, sftp.Fsync())
	}
	if x.verify {
		opts = append(opts, sftp.Verify())
	}
	// Read as a stream even when standard input is a regular file: a failed upload
	// then leaves no part file, which put - could never resume (-a is refused).
	if _, err := c.client.PutReader(ctx, struct{ io.Reader }{a.stdin}, dst, opts...); err != nil {
		return fmt.Errorf("put - -> %s: %w", dst, err)
	}
	return nil
}

// cat writes remote files to standard output, one after another.
func (a *app) cat(ctx context.Context, args []string) (err error) {
	rs, s, closeFn, err := a.openTargets(ctx, args)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	return a.catFiles(ctx, s.client, rs, "cat", false)
}
