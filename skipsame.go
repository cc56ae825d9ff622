package sftp

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"

	"github.com/sluicehq/sftp/internal/localfs"
)

// SkipIdentical makes Get and Put leave alone a file whose destination already holds
// the same bytes: the same size, and the same hash here and on the server, whatever the
// times (like rsync --checksum; SkipUnchanged compares size and modification time). A
// file whose hashes differ, or cannot be had, is copied. The local copy is read to hash
// it; the server's hash costs what Client.Hash costs (only the digest with check-file
// or WithHashCommand, else the whole file read), with the algorithm Verify would use.
// A skipped file is reported once, with Done and Skipped set, and its times are left
// as they are.
func SkipIdentical() TransferOption {
	return func(o *transferOptions) error { o.skipUnchanged, o.sameContent = true, true; return nil }
}

// unchangedGet reports whether a Get of the remote file src (fi) may leave dst, a
// name in the local destination's root, alone.
func (t *getPutCall) unchangedGet(ctx context.Context, src, dst string, fi fs.FileInfo) bool {
	if !t.o.sameContent {
		return unchangedLocal(t.local, dst, fi)
	}
	lfi, err := t.local.Lstat(dst)
	if err != nil || !lfi.Mode().IsRegular() || lfi.Size() != remoteSize(fi) {
		return false
	}
	lf, err := t.local.Root.OpenFile(dst, os.O_RDONLY|localfs.OpenFlags, 0)
	if err != nil {
		return false
	}
	defer lf.Close()
	if ofi, err := lf.Stat(); err != nil || !os.SameFile(lfi, ofi) {
		return false // not the file looked at: copy over it
	}
	return t.sameHash(ctx, lf, src)
}

// unchangedPut reports whether a Put of the local file ls may leave the remote file
// dst alone.
func (t *getPutCall) unchangedPut(ctx context.Context, ls localfs.Source, dst string) bool {
	if !t.o.sameContent {
		return t.unchangedRemote(ctx, dst, ls.Info)
	}
	rfi, err := t.c.Lstat(ctx, dst)
	if err != nil || !rfi.Mode().IsRegular() || remoteSize(rfi) != ls.Info.Size() {
		return false
	}
	lf, err := ls.Open()
	if err != nil {
		return false
	}
	defer lf.Close()
	return t.sameHash(ctx, lf, dst)
}

// sameHash reports whether the local file lf and the remote file name hash the same,
// the two hashed at once.
func (t *getPutCall) sameHash(ctx context.Context, lf io.Reader, name string) bool {
	alg := t.checkAlgorithm(ctx)
	type digest struct {
		sum []byte
		err error
	}
	remote := make(chan digest, 1)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		sum, _, ok, err := t.c.cheapSum(rctx, name, alg, 0, -1)
		if !ok && err == nil {
			var f *File
			if f, err = t.openRemote(rctx, name, os.O_RDONLY, 0); err == nil {
				sum, err = sumFile(rctx, f, alg, 0, -1)
			}
		}
		remote <- digest{sum, err}
	}()
	h, _ := alg.newHash()
	_, lerr := io.Copy(h, lf)
	if lerr != nil {
		cancel()
	}
	r := <-remote
	return lerr == nil && r.err == nil && bytes.Equal(h.Sum(nil), r.sum)
}
