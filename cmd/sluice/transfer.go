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

// transfer is one file to copy, with the names already resolved (a directory target
// has had the file's base name appended). Recursive copies will walk a tree into many
// of these and parallel ones will hand them to workers, so a transfer carries
// everything its copy and its report need.
type transfer struct {
	op     string // "put" or "get"
	local  string
	remote string // path on the server
}

func (t *transfer) from() string {
	if t.op == "put" {
		return t.local
	}
	return t.remote
}

func (t *transfer) to() string {
	if t.op == "put" {
		return t.remote
	}
	return t.local
}

// run copies t and reports it. The copy stops promptly when ctx is cancelled because
// run's caller closes the session then (File.ReadFrom and WriteTo take no context).
func (t *transfer) run(ctx context.Context, c *sftp.Client, rep *reporter) error {
	began := rep.start(t)
	var n int64
	var err error
	if t.op == "put" {
		n, err = putFile(ctx, c, t.local, t.remote)
	} else {
		n, err = getFile(ctx, c, t.remote, t.local)
	}
	if err != nil {
		return fmt.Errorf("%s %s -> %s: %w", t.op, t.from(), t.to(), err)
	}
	rep.done(t, n, began)
	return nil
}

// putFile uploads local to remote, creating or truncating it. The *os.File goes to
// ReadFrom unwrapped so the library can see what it is reading from.
func putFile(ctx context.Context, c *sftp.Client, local, remote string) (n int64, err error) {
	src, err := os.Open(local)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	dst, err := c.Create(ctx, remote)
	if err != nil {
		return 0, err
	}
	n, err = dst.ReadFrom(src)
	// CLOSE is where a server reports a write it could not finish; a put is done only
	// when it succeeds.
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// getFile downloads remote into local, created 0644 or truncated. The remote file is
// opened first, so a missing or unreadable one leaves the local file untouched.
func getFile(ctx context.Context, c *sftp.Client, remote, local string) (n int64, err error) {
	src, err := c.Open(ctx, remote)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := src.Close(); err == nil {
			err = cerr
		}
	}()
	// Opening a directory succeeds on OpenSSH and only its READs fail; find out before
	// truncating the local file. A server that refuses FSTAT gets the benefit of doubt.
	if fi, serr := src.Stat(); serr == nil && fi.IsDir() {
		return 0, &fs.PathError{Op: "get", Path: remote, Err: errors.New("is a directory")}
	}
	dst, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	n, err = src.WriteTo(dst)
	// Close can report a delayed write error (NFS, full disk): the data is not safe
	// until it succeeds.
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// remoteTarget is where a put of local lands: inside remote when remote is a
// directory (or ends in '/'), else remote itself.
func remoteTarget(ctx context.Context, c *sftp.Client, local, remote string) string {
	base := filepath.Base(local)
	if strings.HasSuffix(remote, "/") {
		return remote + base
	}
	if fi, err := c.Stat(ctx, remote); err == nil && fi.IsDir() {
		return path.Join(remote, base)
	}
	return remote
}

// localTarget is where a get of remote lands: inside local when local is a
// directory (or ends in a separator), else local itself.
func localTarget(remote, local string) string {
	base := path.Base(remote)
	if strings.HasSuffix(local, string(filepath.Separator)) {
		return local + base
	}
	if fi, err := os.Stat(local); err == nil && fi.IsDir() {
		return filepath.Join(local, base)
	}
	return local
}

// sameLocalFile reports whether a and b name one file. Only meaningful with the local
// sftp-server, which shares this process's file system and working directory: copying
// a file onto itself would truncate it before reading.
func sameLocalFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
