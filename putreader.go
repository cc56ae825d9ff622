package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// An upload from an io.Reader: a body a service receives (an HTTP request, a pipe,
// standard input) put on the server as atomically as Put puts a local file. It goes
// the way a file of Put goes, through the same part file (createRemotePart), the same
// two round trips for a small one (putSmall), the engine for the rest, and the same
// end (finishPut): the rename over the destination comes only after every byte was
// acknowledged and the handle closed.

// errStreamResume refuses Resume for a reader that cannot continue a part file.
var errStreamResume = errors.New("sftp: Resume needs a source that can be read at any offset (an io.ReaderAt and io.Seeker of known size, such as *os.File, *bytes.Reader or *io.SectionReader): a part file is checked against the source's bytes before it is continued, and the source read on from the part's end")

// errStreamOption refuses an option that describes a local file a reader does not have.
func errStreamOption(name string) error {
	return fmt.Errorf("sftp: %s does not apply to PutReader: a reader has no local file, mode or times", name)
}

// PutReader uploads what r yields, up to its io.EOF, to the remote file remote, as Put
// uploads a local file: under a part name beside remote (".<name>.sluice-part",
// created exclusively, so a link someone planted there is never written through), then
// renamed over remote (posix-rename@openssh.com where offered, so an existing file is
// replaced atomically) only once r has ended, every byte is acknowledged and the
// handle's close succeeded. A reader of remote sees the old file or the whole new one.
// An error from r other than io.EOF fails the upload, and remote is left as it was.
// It returns the bytes read from r, the new file's size, or 0 with an error.
//
// The file is created with mode 0666 less the server's umask, as by Create. remote
// names the file itself: an existing directory, FIFO or socket there is an error; an
// existing device is written in place (see Put). A stream of one WRITE's size or less
// (255 KiB on OpenSSH) takes two round trips before the rename, as a small file of Put.
//
// On failure a part file is removed, unless it holds data that Resume can continue.
// Resume needs a source that can be read at any offset: r an io.ReaderAt and io.Seeker
// of known size (an *os.File on a regular file, *bytes.Reader, *io.SectionReader). Then
// the bytes from r's current position are the file, and a part file an earlier call
// left is checked against them and continued as Put continues one (see Resume: from
// W, 64 MiB, before its end, after checking its attributes through the handle and its
// bytes just before that point against r's at the same offsets). A
// plain stream can be neither checked against a part file nor read from the middle:
// Resume with one is an error, and its failed uploads leave no part file.
//
// Options: OnProgress (Progress.Path is empty, Size is -1 for a plain stream), Fsync
// and Resume as above. Recursive, Preserve and SkipUnchanged describe a local file that
// r is not, and fail the call. ctx bounds the call as it bounds Put; a Read of r that
// blocks cannot be interrupted, so a call whose ctx ended returns once that Read does.
func (c *Client) PutReader(ctx context.Context, r io.Reader, remote string, opts ...TransferOption) (int64, error) {
	t, err := c.newCall(ctx, opts)
	if err != nil {
		return 0, err
	}
	src, err := t.newStreamSource(r)
	if err != nil {
		return 0, pathErr("put", remote, err)
	}
	n, err := t.putStreamTo(ctx, src, remote)
	if err != nil {
		return 0, pathErr("put", remote, err)
	}
	return n, nil
}

// streamSource is the reader of a PutReader.
type streamSource struct {
	r io.Reader
	// ra reads r's bytes by offset from base, when r is an io.ReaderAt and io.Seeker
	// of known size: size bytes from base. Nil for a plain stream, whose size is -1.
	ra         io.ReaderAt
	base, size int64
}

// prefix is the source as read at offsets from its position, for Verify to hash what
// a resumed upload's part holds already; nil for a plain stream, which is never resumed.
func (src *streamSource) prefix() io.ReaderAt {
	if src.ra == nil {
		return nil
	}
	return io.NewSectionReader(src.ra, src.base, src.size)
}

// newStreamSource looks at r and at the call's options, and refuses what cannot apply.
func (t *getPutCall) newStreamSource(r io.Reader) (*streamSource, error) {
	switch o := &t.o; {
	case r == nil:
		return nil, errors.New("sftp: PutReader of a nil io.Reader")
	case o.recursive:
		return nil, errStreamOption("Recursive")
	case o.preserve:
		return nil, errStreamOption("Preserve")
	case o.skipUnchanged:
		return nil, errStreamOption("SkipUnchanged")
	case o.fsync && !t.c.hasExt(extFsync):
		return nil, errUnsupportedExt(extFsync)
	}
	src := &streamSource{r: r, size: -1}
	if ra, base, size, ok := sizedReaderAt(r); ok {
		src.ra, src.base, src.size = ra, base, size
	} else if t.o.resume {
		return nil, errStreamResume
	}
	// A part a plain stream sent cannot be continued: a failed upload removes it.
	t.discardPart = src.ra == nil
	return src, nil
}

// putStreamTo uploads src to remote, the copy's name.
func (t *getPutCall) putStreamTo(ctx context.Context, src *streamSource, remote string) (int64, error) {
	device, err := t.lookRemoteDest(ctx, remote)
	if err != nil {
		return 0, err
	}
	t.rep.plan(src.size)
	if device {
		return t.sendInPlace(ctx, src.r, "", src.size, remote)
	}
	return t.putStream(ctx, src, remote)
}

// putStream uploads src to a part file and renames it to dst: putFile for a reader.
func (t *getPutCall) putStream(ctx context.Context, src *streamSource, dst string) (n int64, err error) {
	part := t.uploadName(dst) // the part file, or dst written in place (delivery.go)
	if err := t.c.partEnds.awaitPart(ctx, part); err != nil {
		return 0, err // an earlier upload's end, in the background, is still at it
	}
	var off int64
	var f *File
	var restart error // why a part file was not continued
	if t.o.resume {
		// A window on r from its position, so that offsets in the part are offsets in it.
		from := io.NewSectionReader(src.ra, src.base, src.size)
		if f, off, restart, err = t.resumeRemotePart(ctx, part, from, src.size); err != nil {
			return 0, err
		}
	}
	if f == nil {
		if f, err = t.openUpload(ctx, part, 0o666); err != nil {
			return 0, err
		}
	}
	p := t.rep.startAfter("", dst, off, src.size, restart)
	defer func() { p.end(ctx, err) }()
	var chk *fileCheck
	if chk, err = t.startCheck(ctx, src.prefix(), off); err == nil {
		err = ctxError(ctx, "") // as in putFile
	}
	if err == nil {
		var head []byte
		var small bool
		if head, small, err = t.streamHead(src, off); small {
			chk.hashData(head[dataOff:])
			return int64(len(head) - dataOff), t.putSmall(ctx, f, part, dst, head, nil, p, chk) // closes f
		} else if err == nil {
			err = t.sendStream(ctx, f, src, head, off, p, &n, chk)
		}
	}
	acked := t.keepable(off + n)
	return off + n, t.finishPut(ctx, f, part, dst, err, acked, t.closing(f, acked), chk)
}

// streamHead reads the start of src when the upload starts at its beginning (off 0),
// to send a stream that fits in one WRITE by the two round trips of a small file:
// small reports that head holds it all, framed for putSmall (see readFramed).
// Otherwise head is what was read of a plain stream, to be sent first (unframed); a
// source read at offsets is left at its position.
func (t *getPutCall) streamHead(src *streamSource, off int64) (head []byte, small bool, err error) {
	limit := int64(t.c.maxWrite())
	if off != 0 || src.size > limit {
		return nil, false, nil
	}
	// Of a known size, one byte more shows a source that grew since; of a stream, one
	// more than a WRITE shows it does not fit.
	want := limit
	if src.size >= 0 {
		want = src.size
	}
	framed, small, err := readFramed(src.r, int(want))
	switch {
	case err != nil || small:
		return framed, small, err
	case src.ra != nil:
		// Longer than its size said: the engine reads it at offsets, from the start.
		_, err := src.r.(io.Seeker).Seek(src.base, io.SeekStart)
		return nil, false, err
	}
	return framed[dataOff:], false, nil
}

// sendStream writes head and then the rest of src from off into f, then syncs as
// asked; *n counts the bytes from off the server acknowledged. With Verify, chk hashes
// what is sent.
func (t *getPutCall) sendStream(ctx context.Context, f *File, src *streamSource, head []byte, off int64, p *fileProgress, n *int64, chk *fileCheck) error {
	if off > 0 {
		if _, err := src.r.(io.Seeker).Seek(src.base+off, io.SeekStart); err != nil {
			return err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
	}
	r := src.r
	if len(head) > 0 {
		r = io.MultiReader(bytes.NewReader(head), r)
	}
	if p != nil {
		f.onAcked = p.add
	}
	var err error
	if *n, err = f.readFrom(ctx, chk.reader(r)); err != nil {
		return err
	}
	if err := chk.moved(off + *n); err != nil {
		return err
	}
	if err := ctxError(ctx, ""); err != nil {
		return err
	}
	if t.o.fsync {
		return f.sync(ctx)
	}
	return nil
}

// keepable is what a failed upload's part holds that is worth keeping: acked, the
// bytes the server acknowledged, unless the source cannot continue it (a plain
// stream), which makes the part worth nothing and finishPut remove it.
func (t *getPutCall) keepable(acked int64) int64 {
	if t.discardPart {
		return 0
	}
	return acked
}
