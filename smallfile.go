package sftp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Small files in two round trips. A file that fits in one READ or one WRITE gains
// nothing from the transfer engine's window: what it costs is round trips, and taken
// one after another they are OPEN, READ (or WRITE), the READ that finds EOF, CLOSE. So
// once the HANDLE is known, everything else about the file goes out back to back: for
// a Get, the READ of the listed size, a READ just past it that should find EOF, and the
// CLOSE; for a Put, the WRITE, the FSETSTAT and fsync asked for, and the CLOSE. The
// replies are then collected, each matched by its id, so a server that answers out of
// order is read right. OpenSSH's server carries out a handle's requests in the order
// they came, so the CLOSE lands after the data; the rename of an upload waits for the
// CLOSE's reply, as a failed CLOSE must fail the Put.
//
// Such files are limited by requests in flight, not by any window, so a tree keeps
// more of them in flight than of large files (smallParallel).

// defaultSmallParallel is how many small files a tree keeps in flight when the caller
// did not choose Parallel. A tree of a few hundred small files then goes in one wave
// of round trips rather than two or three; smallBudget keeps the memory they hold to
// what 128 files of one full READ or WRITE each would.
const defaultSmallParallel = 512

// smallBudget bounds the bytes the small files in flight hold at once (each is
// charged smallCost), whatever their number.
const smallBudget = 32 << 20

// smallCost is what one small file in flight is charged against smallBudget: its
// data, what its probe may bring (smallProbe), and room for its requests and their
// small replies. That is what it holds: a download's data goes to its destination as
// its reply is taken, and the probe's is copied out (sendSmallReads), so a reply's
// buffer, which for any reply over 1 KiB is a whole data buffer (256 KiB), is held
// only while it is taken; an upload's data is read into the buffer its WRITE is sent
// from (readFramed).
func smallCost(size int64) int64 {
	return min(max(size, 0)+smallProbe+4<<10, smallBudget)
}

// smallProbe is the length of the READ a small file sends past its listed end, which
// should find EOF. A few bytes tell a file that grew since the listing (the engine
// then reads the rest on a new handle); asking for a whole READ made a file listed as
// empty hold up to 255 KiB that its charge did not cover.
const smallProbe = 512

// smallGet reports whether a remote file the listing gave size bytes for (-1: not
// known) is fetched by getSmall.
func (t *getPutCall) smallGet(size int64) bool {
	return size >= 0 && size <= int64(t.c.readSize())
}

// smallPut reports whether a local file of size bytes is sent by putSmall.
func (t *getPutCall) smallPut(size int64) bool {
	return size >= 0 && size <= int64(t.c.maxWrite())
}

// getSmall copies the remote file f (opened on src; the listing said size bytes, at
// most one READ) into lf, the part file, from its start, and closes f. A file that
// turns out longer than one READ shows (it grew since the listing, or the server
// returned less than asked) is read on from there with a new handle, by the engine.
func (t *getPutCall) getSmall(ctx context.Context, f *File, src string, lf *os.File, size int64, p *fileProgress, chk *fileCheck) (int64, error) {
	if err := ctxError(ctx, ""); err != nil {
		f.Close()
		return 0, err
	}
	var w io.Writer = lf
	if p != nil {
		w = &progressFile{f: lf, p: p}
	}
	n, rest, ends, err := f.receiveSmall(ctx, size, chk.writer(w))
	if err != nil || !rest {
		return n, err
	}
	g, err := t.openRemote(ctx, src, os.O_RDONLY, 0)
	if err != nil {
		return n, err
	}
	m, err := receive(ctx, g, lf, n, p, chk)
	g.Close()
	ends.sawData(n, m)
	n += m
	if err == nil {
		// The engine found the end at n. What the first two READs said must agree
		// with it (readEnds), or the part is good only up to the end they reported.
		ends.sawEOF(n)
		if cerr := ends.conflict(); cerr != nil {
			n, err = ends.eof, g.err("read", cerr)
			if terr := lf.Truncate(n); terr != nil {
				err = errors.Join(err, terr)
			}
		}
	}
	return n, err
}

// receiveSmall reads f, a file of size bytes (as a listing or a STAT said: at most one
// READ), and closes it, in one round trip: the READ of size bytes, a READ just past it
// that should find EOF, and the CLOSE go out back to back, and their replies are then
// matched by id. The requests go out while ctx lasts, and the CLOSE in any case
// (sendThenClose). rest reports that the file may go on past n, the bytes written to w: it
// turned out longer, or a READ came back short, or a server that reorders a handle's
// requests closed it before a READ. The caller decides how to read on, on a new handle.
// ends is what the READs said about the file's end, which whatever the caller reads
// next must agree with (readEnds); a READ from 0 finding EOF while the one past it
// found data is that contradiction already, and fails the read. Whatever the outcome,
// n is what was written to w, from its start.
func (f *File) receiveSmall(ctx context.Context, size int64, w io.Writer) (n int64, rest bool, ends readEnds, err error) {
	got, serr := f.sendSmallReads(ctx, size, w)
	rerr := got.err
	if serr != nil && rerr == nil {
		rerr = serr
	}
	var se *StatusError
	switch {
	case got.werr != nil:
		return got.n, false, newReadEnds(), got.werr
	case errors.As(rerr, &se) && serr == nil && ctx.Err() == nil:
		// A server that runs a handle's requests out of order may have closed it
		// before a READ. The caller reads on from what was written, on a new handle,
		// which reports the failure if it is real.
		ends = newReadEnds()
		ends.sawData(0, got.n)
		return got.n, true, ends, nil
	case rerr != nil:
		return got.n, false, newReadEnds(), f.err("read", rerr)
	}
	ends = got.ends(size)
	if cerr := ends.conflict(); cerr != nil {
		return got.n, false, ends, f.err("read", cerr)
	}
	n, rest, err = got.finish(w, size)
	return n, rest, ends, err
}

// smallReads is what the READs of receiveSmall brought back. The first READ's data is
// written to w as its reply is taken, and the probe's copied out of its reply, so that
// no reply's buffer (a whole 256 KiB one for any reply over 1 KiB) is held while the
// other replies are waited for: a small file holds its data once, as smallCost charges.
type smallReads struct {
	firstEOF bool   // the READ of the listed size from 0 found EOF (size > 0)
	n        int64  // the bytes of the first READ written to w
	probe    []byte // the READ past the listed end: nil for EOF
	err      error  // the first failure, by request order
	werr     error  // w's failure
}

// took files d, the data of the READ number i of sendSmallReads (nil for EOF): the
// first READ's goes to w, the probe's is kept.
func (g *smallReads) took(i int, d []byte, w io.Writer) {
	switch {
	case i == 1:
		g.probe = bytes.Clone(d)
	case d == nil:
		g.firstEOF = true
	case g.werr == nil:
		m, err := w.Write(d)
		g.n += int64(m)
		g.werr = err
	}
}

// sendSmallReads sends receiveSmall's requests and collects their replies, writing
// the first READ's data to w as it comes. serr is the error of a request that could
// not be sent.
func (f *File) sendSmallReads(ctx context.Context, size int64, w io.Writer) (g smallReads, serr error) {
	cn := f.cn
	wants := []uint32{uint32(size), smallProbe}
	// Both READs are built in one buffer: the first has gone out when the second is.
	pkt := make([]byte, 0, readPacketLen(f.handle))
	encs := []encoder{
		unshared(func(id uint32) []byte { return appendRead(pkt, id, f.handle, 0, uint32(size)) }),
		unshared(func(id uint32) []byte { return appendRead(pkt, id, f.handle, uint64(size), smallProbe) }),
	}
	reads := []int{0, 1} // which of the two each request is
	if size == 0 {
		// The probe alone: it reads from 0.
		wants, encs, reads = wants[1:], encs[1:], reads[1:]
	}
	calls, cls, serr := f.sendThenClose(ctx, encs)
	for i, cl := range calls {
		r, err := cl.wait(ctx)
		if err == nil {
			var d []byte
			if d, err = smallData(&r, wants[i]); err == nil {
				g.took(reads[i], d, w)
			}
			r.release()
		}
		if err != nil && g.err == nil {
			g.err = cn.check(err)
		}
	}
	// A read handle's CLOSE reports nothing that matters to the data (as in
	// getFile), unless the reply itself is malformed, which fails the channel. It is
	// waited for all the same (bounded as every CLOSE of f: File.callCtx): sent behind
	// the READs, it is answered in their round trip by a server that runs a handle's
	// requests in order, so the wait costs nothing there, and the handle is gone when
	// the call returns, before any request the caller sends next, on any channel.
	cls.take(f.callCtx, status("CLOSE"))
	return g, serr
}

// finish writes to w what the probe of a file of size bytes brought, after the first
// READ's data, and reports what was written in all and whether the file may go on
// past it.
func (g *smallReads) finish(w io.Writer, size int64) (n int64, rest bool, err error) {
	n = g.n
	switch {
	case g.firstEOF:
		return 0, false, nil // EOF at 0: the file was emptied since the listing
	case n < size:
		// Short: the file shrank, or the server caps READs below this one. Only a
		// READ from n tells which; what the probe brought is not next to n, but is
		// kept in the ends, which the end the engine finds must agree with.
		return n, true, nil
	case len(g.probe) == 0:
		return n, false, nil // EOF where the listing said
	}
	// The file grew since the listing: keep what the probe brought and go on.
	m, err := w.Write(g.probe)
	return n + int64(m), err == nil, err
}

// ends is what the READs of a file listed as size bytes said about its end: the first
// read from 0 (none when size is 0), the probe from size.
func (g *smallReads) ends(size int64) readEnds {
	ends := newReadEnds()
	if size > 0 {
		if g.firstEOF {
			ends.sawEOF(0)
		} else {
			ends.sawData(0, g.n)
		}
	}
	if g.probe == nil {
		ends.sawEOF(size)
	} else {
		ends.sawData(size, int64(len(g.probe)))
	}
	return ends
}

// smallData checks a reply to a READ of want bytes: its data, nil for EOF.
func smallData(r *response, want uint32) ([]byte, error) {
	if r.typ != sshfx.TypeData {
		err := otherReply("READ", r, sshfx.TypeData)
		if err == io.EOF {
			return nil, nil
		}
		return nil, err
	}
	d, err := decodeData(r)
	switch {
	case err != nil:
		return nil, err
	case uint32(len(d)) > want:
		return nil, protoErr("READ", "DATA of %d bytes for a READ of %d", len(d), want)
	case len(d) == 0:
		return nil, protoErr("READ", "empty DATA for a READ of %d bytes", want)
	}
	return d, nil
}

// smallUpload reads the local file lf (described by fi) whole if the transfer starts
// at its beginning (off 0) and it fits in one WRITE: small reports that framed holds it
// all (see readFramed). Otherwise lf is left at its start for the engine.
func (t *getPutCall) smallUpload(lf *os.File, fi fs.FileInfo, off int64) (framed []byte, small bool, err error) {
	if off != 0 || !t.smallPut(fi.Size()) {
		return nil, false, nil
	}
	framed, small, err = readFramed(lf, min(int(fi.Size()), t.c.maxWrite()))
	if err != nil || small {
		return framed, small, err
	}
	// Longer than the listing said: the engine copies whatever is there.
	if _, err := lf.Seek(0, io.SeekStart); err != nil {
		return nil, false, err
	}
	return nil, false, nil
}

// readFramed reads r to its end when it holds at most max bytes, and reports that it
// did (small). The data is read at dataOff in framed, behind room for a WRITE's header
// (writePacket), so that putSmall sends it from the buffer it was read into: a small
// upload is in memory once, as smallCost charges it, however long its WRITE waits to
// be written. One byte more than max is read to see whether r goes on; when it does,
// framed[dataOff:] holds those max+1 bytes.
func readFramed(r io.Reader, max int) (framed []byte, small bool, err error) {
	buf := make([]byte, dataOff+max+1)
	n, err := io.ReadFull(r, buf[dataOff:])
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return buf[:dataOff+n], true, nil
	case err != nil:
		return nil, false, err
	}
	return buf, false, nil
}

// putSmall writes the data framed holds (see readFramed), the whole of a small local
// file described by fi (nil for a PutReader's stream, which has no metadata to
// preserve), to f, the part file just created on the server, sets its metadata and
// syncs it as asked, closes it and renames it to dst: everything before the rename in
// one round trip.
func (t *getPutCall) putSmall(ctx context.Context, f *File, part, dst string, framed []byte, fi fs.FileInfo, p *fileProgress, chk *fileCheck) error {
	type step struct {
		op  string
		enc func(id uint32) []byte
	}
	var steps []step
	data := framed[dataOff:]
	if len(data) > 0 {
		steps = append(steps, step{"write", func(id uint32) []byte {
			// It cannot fail: decodeHandle refused handles longer than dataOff has
			// room for.
			pkt, _ := writePacket(framed, id, f.handle, 0, len(data))
			return pkt
		}})
	}
	if t.preserving() {
		a, err := preserveAttrs(fi.Mode(), localAtime(fi), fi.ModTime())
		if err != nil {
			t.abortPut(f, part)
			return err
		}
		steps = append(steps, step{"setstat", func(id uint32) []byte {
			return appendStringAttrs(nil, sshfx.TypeFsetstat, id, f.handle, a)
		}})
	}
	if t.o.fsync {
		steps = append(steps, step{"sync", func(id uint32) []byte { return appendExtended(nil, id, extFsync, f.handle) }})
	}
	if err := ctxError(ctx, ""); err != nil {
		t.abortPut(f, part)
		return err
	}
	encs := make([]encoder, len(steps))
	for i, s := range steps {
		encs[i] = unshared(s.enc)
	}
	calls, cls, err := f.sendThenClose(ctx, encs)
	var acked int64
	for i, cl := range calls {
		werr := cl.take(ctx, status(steps[i].op))
		if steps[i].op == "setstat" {
			werr = t.preserveOutcome(werr)
		}
		switch {
		case werr == nil && steps[i].op == "write":
			acked = int64(len(data))
			p.add(int64(len(data)))
		case werr != nil && err == nil:
			err = f.err(steps[i].op, werr)
		}
	}
	return t.finishPut(ctx, f, part, dst, err, t.keepable(acked), func(bool) error {
		// No cut: the CLOSE is out. It is taken in the background once the call's ctx
		// has ended (finishPut).
		if cerr := cls.take(context.Background(), status("CLOSE")); cerr != nil {
			return f.err("close", cerr)
		}
		return nil
	}, chk)
}

// abortPut closes f, the part file of an upload that sent nothing, and removes it
// (partcut.go).
func (t *getPutCall) abortPut(f *File, part string) {
	waitWithin(t.ctx, "", f.cn, func() (struct{}, error) {
		cerr := cutAndClose(f, 0)
		t.removeUnproven(context.WithoutCancel(t.ctx), part)
		return struct{}{}, cerr
	}, nil)
}
