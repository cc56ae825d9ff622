package sftp

import (
	"context"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The handle lifecycle, one family for files, directories and the handles a call
// opens for itself:
//   - open: the OPEN/OPENDIR round trip (paths.go, file.go, dir.go);
//   - mark closed: File.markClosed, so that no request can follow the CLOSE;
//   - close now: conn.closeNow waits for the reply while ctx lasts; closeWithin,
//     closeBoth, Dir.sendClose/closeSent.wait and sendThenClose/closeReply are its
//     forms for a File, a Copy, a listing and a batch that ends in the CLOSE;
//   - close later: conn.closeLater sends the CLOSE and drops its reply, for a handle
//     nobody waits for (an orphan of a cancelled OPEN, a path that is failing).
// A striped transfer closes its sibling handles in lanes.finish (lanes.go).

// closeLater closes h without waiting for anything: the CLOSE is queued for the
// writer (neither the reader nor a caller giving up on ctx may wait for a write, which
// a full window would stall), and its reply is dropped. It closes the handles of
// requests whose waiter gave up (a cancelled OPEN or OPENDIR), which the server would
// otherwise keep for the rest of the session, and handles on paths where an error is
// already being returned, which must not be held up. Once the session is over there
// is nothing to do: the server forgets its handles with it.
func (c *conn) closeLater(h string) {
	id := c.newID()
	c.send(context.Background(), id, appendString1(nil, sshfx.TypeClose, id, h), nil)
}

// closeNow closes h and waits, while ctx lasts, for the server's answer, which it
// returns.
func (c *conn) closeNow(ctx context.Context, h string) error {
	r, err := c.roundTrip(ctx, func(id uint32) []byte { return appendString1(nil, sshfx.TypeClose, id, h) })
	if err != nil {
		return err
	}
	defer r.release()
	return c.check(expectStatus("CLOSE", &r))
}

// closeBoth closes h for a Copy, waiting for the reply while ctx allows (so the
// handles are gone when Copy returns), and keeping the first error.
func (c *Client) closeBoth(ctx context.Context, cn *conn, h string, errp *error) {
	if ctx.Err() != nil {
		cn.closeLater(h)
		return
	}
	if err := cn.closeNow(ctx, h); *errp == nil {
		*errp = err
	}
}

// closeWithin closes f, waiting for the server's answer only while ctx lasts: a
// stalled server must not hold up a call whose ctx has ended. The CLOSE then stays in
// flight; it completes, or fails with the connection, in the background.
func closeWithin(ctx context.Context, f *File) error {
	ok, err := waitWithin(ctx, f.cn, f.Close)
	if !ok {
		return f.err("close", err)
	}
	return err
}

// waitWithin runs fn, a request or two on cn, waiting for it only while ctx lasts. ok
// is false when ctx ended first: fn then goes on in the background, where closing the
// connection waits for it (and ends it, as every wait on the connection ends when it
// fails), and err is the ctx error.
func waitWithin(ctx context.Context, cn *conn, fn func() error) (ok bool, err error) {
	if ctx.Done() == nil {
		return true, fn()
	}
	done := make(chan error, 1)
	if !cn.background(func() { done <- fn() }) {
		return true, fn() // the connection is gone: fn fails at once
	}
	select {
	case err := <-done:
		return true, err
	case <-ctx.Done():
		select {
		case err := <-done: // an answer that came in time still counts
			return true, err
		default:
			return false, ctxError(ctx, "")
		}
	}
}

// markClosed marks f closed, once: no request about its handle is sent after it (see
// hmu), so the CLOSE that follows is the handle's last. Close also ends the File's
// life first (endLife), so that a send waiting for its turn gives up and frees hmu;
// sendThenClose does not, as its own requests are still to go out. It reports whether
// this call marked it, false when f was closed already.
func (f *File) markClosed(endLife bool) bool {
	first := false
	f.closeOnce.Do(func() {
		first = true
		if endLife {
			f.cancel()
		}
		f.hmu.Lock()
		f.closed = true
		f.hmu.Unlock()
	})
	return first
}

// sendThenClose sends the requests encs build about f's handle, then its CLOSE, back
// to back on f's channel. f is marked closed first, as Close does (see hmu), so that
// no request can follow the CLOSE; Close called later returns fs.ErrClosed and sends
// nothing. The requests go out while ctx lasts; the CLOSE while the call's ctx (cctx)
// does, and otherwise in the background, so the handle is closed whatever happens. An
// error means some requests did not go out: those have sent false. Each enc is called
// just before its request is sent. It returns the packet and, for a packet in a buffer
// that is to be reused, the packetRef the channel's writer tells once it no longer
// reads it (see conn.sendRef): a packet longer than copyMax is written from the
// buffer itself, after sendThenClose has returned.
func (f *File) sendThenClose(ctx, cctx context.Context, encs []encoder) (reqs []pendingReq, cls pendingReq, err error) {
	if !f.markClosed(false) {
		return nil, cls, errFileClosed
	}
	cn := f.cn
	reqs = make([]pendingReq, len(encs))
	for i, enc := range encs {
		if err != nil {
			break
		}
		id := cn.newID()
		pkt, ref := enc(id)
		reqs[i], err = sendReqRef(ctx, cn, id, pkt, ref)
	}
	bp := cn.smallPool.Get().(*[]byte)
	id := cn.newID()
	cls, cerr := sendReq(cctx, cn, id, appendString1((*bp)[:0], sshfx.TypeClose, id, f.handle))
	cn.smallPool.Put(bp) // written by now; a handle of at most 256 bytes never outgrows it
	if cerr != nil {
		cn.closeLater(f.handle) // a no-op once the session is gone, and with it the handle
	}
	return reqs, cls, err
}

// closeReply waits, while ctx lasts, for the reply to a CLOSE sendThenClose sent. A
// CLOSE that did not go out reports why: the channel's error when the Client was
// closed or the connection died (net.ErrClosed), the ctx error, or errFileClosed when
// the File was closed already.
func closeReply(ctx context.Context, f *File, cls pendingReq) error {
	if !cls.sent {
		if cls.err != nil {
			return cls.err
		}
		return errFileClosed
	}
	r, err := waitReq(ctx, f.cn, cls)
	if err != nil {
		return err
	}
	defer r.release()
	return f.cn.check(expectStatus("CLOSE", &r))
}

// sendClose sends the CLOSE of a Dir nobody reads any more and returns without
// waiting for the reply; wait takes it. A listing is whole once READDIR said EOF, so
// a walk need not spend a round trip on each directory's CLOSE before going on: it
// collects them, and waits for them all before it returns, so no handle is left
// open behind it. When ctx has ended the CLOSE goes out in the background, as close
// does.
func (d *Dir) sendClose(ctx context.Context) closeSent {
	d.cancel()
	d.mu.Lock()
	defer d.mu.Unlock()
	cs := closeSent{d: d}
	if d.closed {
		return cs
	}
	d.closed, d.page = true, nil
	d.releasePage()
	d.abandonAhead()
	if ctx.Err() != nil {
		d.cn.closeLater(d.handle)
		return cs
	}
	r := pendingReq{id: d.cn.newID(), ch: make(chan response, 1)}
	if err := d.cn.send(ctx, r.id, appendString1(nil, sshfx.TypeClose, r.id, d.handle), r.ch); err != nil {
		d.cn.closeLater(d.handle)
		return cs
	}
	r.sent = true
	cs.req = r
	return cs
}

// forget drops the reply to the CLOSE of a listing that is whole: the call returns
// without waiting for it, so a small directory's ReadDir costs two round trips (OPENDIR,
// then the READDIRs), not three. Nothing is lost: the listing ended at EOF, and a failed
// CLOSE of a directory handle changes nothing in it. The CLOSE went out before the call
// returns, on the main channel, which carries every Dir and every path call: a server
// that runs a channel's requests in order (as OpenSSH's does) has closed the handle
// before it runs any request the caller sends next there, an RMDIR of the directory
// included. A reply that breaks the protocol is dropped unread, as every reply nobody
// waits for is (see conn.abandon).
func (cs closeSent) forget() {
	if cs.req.sent {
		cs.d.cn.abandon(cs.req.id, cs.req.ch)
	}
}

// wait waits, while ctx lasts, for the reply to the CLOSE, and returns its error. A
// CLOSE that could not be sent was handed to the background and is not waited for;
// once ctx ends the reply is dropped.
func (cs closeSent) wait(ctx context.Context) error {
	if !cs.req.sent {
		return nil
	}
	r, err := cs.d.cn.wait(ctx, cs.req.id, cs.req.ch)
	if err != nil {
		return pathErr("close", cs.d.name, err)
	}
	defer r.release()
	return pathErr("close", cs.d.name, cs.d.cn.check(expectStatus("CLOSE", &r)))
}

// closeSent is a directory's CLOSE sent without waiting for its reply.
type closeSent struct {
	d   *Dir
	req pendingReq
}
