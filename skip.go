package sftp

import (
	"context"
	"io/fs"
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

// unchangedLocal reports whether the local file dst (relative to the Get's root)
// matches the remote fi. Lstat, so a link standing at dst is never taken for the copy.
func (d *localDest) unchangedLocal(dst string, fi fs.FileInfo) bool {
	_, mtime, ok := remoteTimes(fi)
	lfi, err := d.lstat(dst)
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

// skip reports a file left alone by SkipUnchanged: counted as done, with its bytes.
func (r *reporter) skip(path, dest string, size int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files++
	r.totalBytes += size
	p := &fileProgress{r: r, path: path, dest: dest, bytes: size, size: size}
	pr := r.snapshot(p)
	pr.Done, pr.Skipped = true, true
	r.fn(pr)
}
