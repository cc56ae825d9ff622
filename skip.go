package sftp

import (
	"context"
	"errors"
	"io/fs"

	"github.com/sluicehq/sftp/internal/localfs"
)

// SkipUnchanged makes Get and Put leave alone a file whose destination already has
// the source's size and modification time (in whole seconds, all SFTP v3 carries),
// like rclone copy. Get and Put name the copy itself, so the same call run again
// lands where the first run did; combined with Preserve, which gives copies their
// source's times, that second run moves nothing. Such a file is reported once, with
// Done and Skipped set. Nothing compares content: a file changed without a change of
// size or time is not copied.
func SkipUnchanged() TransferOption {
	return func(o *transferOptions) error { o.skipUnchanged = true; return nil }
}

// SkipFiles leaves out of a Get or Put every regular file for which skip returns
// true: it is not opened or copied, and it is neither reported to OnProgress nor
// counted in FilesTotal or TotalSize, as if the source did not hold it. skip gets the
// file's source path, as Progress.Path names it (remote for Get, local for Put), and
// what the listing (or, for a single file, the STAT) said of it. Directories and
// symbolic links are not offered to it: a tree's directories are still made and
// walked, and its links made. A skipped single file makes the call return nil with
// nothing done.
//
// skip is called once per file, before anything of the file is opened, from the
// goroutines that walk the tree, so calls may overlap: it must be safe for concurrent
// use, and quick.
//
// What it is for: a caller that runs a tree transfer again after it was cut short (a
// dropped connection) passes the source paths whose Done reports it saw, so the files
// already in place are not copied again, and with Resume the ones in flight continue
// from their part files. Unlike SkipUnchanged it asks the destination nothing.
func SkipFiles(skip func(src string, fi fs.FileInfo) bool) TransferOption {
	return func(o *transferOptions) error {
		if skip == nil {
			return errors.New("sftp: SkipFiles(nil)")
		}
		o.skipFile = skip
		return nil
	}
}

// skipped reports whether SkipFiles leaves out the file src.
func (t *getPutCall) skipped(src string, fi fs.FileInfo) bool {
	return t.o.skipFile != nil && t.o.skipFile(src, fi)
}

// unchangedLocal reports whether the local file dst (relative to d's root)
// matches the remote fi. Lstat, so a link standing at dst is never taken for the copy.
func unchangedLocal(d *localfs.Dest, dst string, fi fs.FileInfo) bool {
	_, mtime, ok := remoteTimes(fi)
	lfi, err := d.Lstat(dst)
	return ok && err == nil && lfi.Mode().IsRegular() && lfi.Size() == remoteSize(fi) &&
		lfi.ModTime().Unix() == mtime.Unix()
}

// unchangedRemote reports whether the remote file dst matches the local fi.
func (t *getPutCall) unchangedRemote(ctx context.Context, dst string, fi fs.FileInfo) bool {
	rfi, err := t.c.Lstat(ctx, dst)
	if err != nil || !rfi.Mode().IsRegular() {
		return false
	}
	_, mtime, ok := remoteTimes(rfi)
	return ok && remoteSize(rfi) == fi.Size() && mtime.Unix() == fi.ModTime().Unix()
}

// skip reports a file left alone by SkipUnchanged: counted as done and skipped. Its
// size leaves TotalSize (it was counted when found) and never enters TotalBytes:
// nothing of it moves.
func (r *reporter) skip(path, dest string, size int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files++
	r.skipped++
	if r.totalSize >= 0 && size >= 0 {
		r.totalSize -= size
	}
	p := &fileProgress{r: r, path: path, dest: dest, bytes: size, size: size}
	pr := r.snapshot(p)
	pr.Done, pr.Skipped = true, true
	r.fn(pr)
}
