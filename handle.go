package sftp

import (
	"context"
	"io/fs"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The handle lifecycle. A handle is opened by an OPEN or OPENDIR round trip
// (openHandle, paths.go) and ends with a CLOSE, a request on the one path (conn.go)
// like any other, in one of two forms:
//
//   - waited (closeHandle, or startClose and the call's take later): the caller learns
//     what the server said, which for a written file may be the only report of a lost
//     write. File.Close, Dir.Close, Copy's handles, a batch that ends in the CLOSE
//     (sendThenClose) and a listing's CLOSE taken later (Dir.sendClose) wait; so does a
//     striped transfer for its sibling handles (lanes.finish, lanes.turnAway).
//   - started and not waited (closeLater), where nobody can wait: the reader, which
//     meets the HANDLE of an OPEN whose caller gave up (dispatch, call.abandon) and must
//     never block; a caller whose ctx has ended (startClose); a download's sibling
//     turned away mid-transfer, whose stream must not stop for a round trip
//     (lanes.refuse, reopen.go). The server closes it all the same, and the reader
//     drops its reply.
//
// A CLOSE is never withdrawn from the write queue (connwrite.go): a handle the client
// stops caring about must still be closed, or the server keeps it for the session.
// How long one is waited for: while the caller's ctx lasts; for a File's, while its
// callCtx does (the call that opened it for itself, or none for a File its user
// opened) and its deadline (SetDeadline) has not passed, siblings and batches
// included (siblingBound). Close waits as long as that, CloseContext also no longer
// than its ctx. A reply not waited for is dropped by the reader; the channel forgets
// it after a bound (givenup.go). An upload's CLOSE, which must land before its part
// file is cut, is waited for whole, alone once the Put's ctx has ended (finishPut,
// through waitWithin: errors.go).
//
// A File is marked closed (markClosed) before its CLOSE is sent, so that no request
// about the handle follows the CLOSE (File.hmu): the server reuses a closed handle's
// name for the next OPEN.

// closeLater closes h without waiting for anything: the CLOSE is queued for the
// writer (neither the reader nor a caller giving up on ctx may wait for a write, which
// a full window would stall), and its reply is dropped. Once the session is over there
// is nothing to do: the server forgets its handles with it.
func (c *conn) closeLater(h string) {
	bp := c.smallPool.Get().(*[]byte)
	c.startInto(context.Background(), appendString1((*bp)[:0], sshfx.TypeClose, c.newID(), h), nil, nil)
	c.smallPool.Put(bp) // copied: a handle of at most 256 bytes never outgrows it
}

// startClose sends the CLOSE of h and returns the call that waits for its reply. When
// ctx has ended the CLOSE still goes out, as closeLater, and the call reports ctx's
// error.
func (c *conn) startClose(ctx context.Context, h string) call {
	bp := c.smallPool.Get().(*[]byte)
	cl := c.start(ctx, appendString1((*bp)[:0], sshfx.TypeClose, c.newID(), h), nil)
	c.smallPool.Put(bp) // copied, as in closeLater
	if cl.err != nil {
		c.closeLater(h) // a no-op once the session is gone, and with it the handle
	}
	return cl
}

// closeHandle closes h and waits, while ctx lasts, for the server's answer, which it
// returns.
func (c *conn) closeHandle(ctx context.Context, h string) error {
	return c.startClose(ctx, h).take(ctx, status("CLOSE"))
}

// close closes f: its life ends, so that transfers in other goroutines stop, it is
// marked closed, and its CLOSE goes out; the reply is waited for while ctx lasts and
// the deadline set by SetDeadline has not passed (past it the CLOSE still goes out).
func (f *File) close(ctx context.Context) error {
	// The deadline is read before the life ends: SetDeadline fails from then on, so
	// it cannot move while the CLOSE is waited for.
	if when, ok := f.life.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, when, errDeadline)
		defer cancel()
	}
	f.life.end()
	if !f.markClosed() {
		return f.closedErr("close")
	}
	// A Read-ahead left idle holds pooled buffers; free it if nobody is mid-transfer.
	// A transfer in progress frees its own on the way out.
	if f.mu.TryLock() {
		f.dropReadAhead()
		f.mu.Unlock()
	}
	return f.err("close", f.cn.closeHandle(ctx, f.handle))
}

// markClosed marks f closed, once: no request about its handle is sent after it (see
// hmu), so the CLOSE that follows is the handle's last. It reports whether this call
// marked it, false when f was closed already.
func (f *File) markClosed() bool {
	first := false
	f.closeOnce.Do(func() {
		first = true
		f.hmu.Lock()
		f.closed = true
		f.hmu.Unlock()
	})
	return first
}

// encoder builds the packet of request id for sendThenClose; ref, if not nil, is told
// once the channel no longer reads the packet (conn.start).
type encoder func(id uint32) (pkt []byte, ref packetRef)

// unshared makes an encoder of build, for a packet in a buffer nobody reuses.
func unshared(build func(id uint32) []byte) encoder {
	return func(id uint32) ([]byte, packetRef) { return build(id), nil }
}

// sendThenClose sends the requests encs build about f's handle, then its CLOSE, back
// to back on f's channel, and returns their calls: the requests', in order, as many as
// went out, and the CLOSE's. f is marked closed first, as Close does (see hmu), so
// that no request can follow the CLOSE; Close called later returns fs.ErrClosed and
// sends nothing. The requests go out while ctx lasts, the CLOSE whatever happens; the
// caller takes its reply, waiting as long as that CLOSE may be waited for (File.callCtx
// for a read's, the whole of it for an upload's, see finishPut). An error means some
// requests did not go out.
// Each enc is called just before its request is sent, so consecutive requests may be
// built in one buffer: a packet longer than copyMax is written from its buffer after
// sendThenClose has returned, which its ref hears of (conn.start).
func (f *File) sendThenClose(ctx context.Context, encs []encoder) (calls []call, cls call, err error) {
	if !f.markClosed() {
		return nil, call{err: errFileClosed}, errFileClosed
	}
	cn := f.cn
	calls = make([]call, 0, len(encs))
	for _, enc := range encs {
		pkt, ref := enc(cn.newID())
		cl := cn.start(ctx, pkt, ref)
		if cl.err != nil {
			err = cl.err
			break
		}
		calls = append(calls, cl)
	}
	return calls, cn.startClose(context.Background(), f.handle), err
}

// sendClose closes d, sending its CLOSE, and returns the call that waits for the
// reply: a listing is whole once READDIR said EOF, so a walk need not spend a round
// trip on each directory's CLOSE before going on: it collects them, and waits for them
// all before it returns, so no handle is left open behind it. A listing whose call
// returns at once (ReadDir, DirEntries) abandons it: the CLOSE went out before the call
// returns, on the main channel, which carries every Dir and every path call, and a
// server that runs a channel's requests in order (as OpenSSH's does) has closed the
// handle before it runs any request the caller sends next there, an RMDIR of the
// directory included. When ctx has ended the CLOSE goes out in the background
// (startClose). A second close reports fs.ErrClosed.
func (d *Dir) sendClose(ctx context.Context) (call, error) {
	d.cancel()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return call{err: fs.ErrClosed}, fs.ErrClosed
	}
	d.closed, d.page = true, nil
	d.releasePage()
	d.abandonAhead()
	return d.cn.startClose(ctx, d.handle), nil
}

// close closes d, waiting for the reply no longer than ctx allows: past that, the
// CLOSE still goes out but nobody waits for it.
func (d *Dir) close(ctx context.Context) error {
	cl, err := d.sendClose(ctx)
	if err == nil {
		err = cl.take(ctx, status("CLOSE"))
	}
	return pathErr("close", d.name, err)
}
