package sftp

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Whole files in the fewest round trips SFTP allows. ReadFile sends a STAT of the file
// just before its OPEN, so the size comes back with the handle: a file that fits one
// READ is then read like a small file of a tree (receiveSmall: the READ, a READ past
// its end and the CLOSE together), two round trips in all; a larger one goes through
// the transfer engine on the same handle. WriteFile sends data that fits in one
// channel window as WRITEs with the CLOSE right behind them, also two round trips;
// more goes through the engine.

// ReadFile reads the named file whole, like os.ReadFile. ctx bounds the whole read,
// not just the open: when it ends, the transfer stops and the ctx error is returned.
// A file that fits in one READ (255 KiB from OpenSSH) costs two round trips: a STAT
// and the OPEN together, then the READs and the CLOSE together. What it returns is
// always what one handle read.
func (c *Client) ReadFile(ctx context.Context, name string) ([]byte, error) {
	f, size, err := c.openSized(ctx, name)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if size > 0 {
		buf.Grow(int(min(size, maxPrealloc)))
	}
	if size >= 0 && size <= int64(c.readSize()) {
		err = readOneRound(ctx, f, size, &buf)
		if errors.Is(err, errReadAgain) {
			buf.Reset()
			err = c.readAgain(ctx, name, &buf)
		}
	} else {
		err = readWhole(ctx, f, &buf)
	}
	if err != nil {
		return nil, err
	}
	if buf.Len() == 0 {
		return []byte{}, nil // non-nil, as from os.ReadFile
	}
	return buf.Bytes(), nil
}

// errReadAgain is readOneRound's report that the file was not what the STAT said.
var errReadAgain = errors.New("sftp: the file changed while it was read")

// readOneRound reads f, of size bytes (at most one READ) as a STAT just said, into buf in
// one round trip, and closes it. errReadAgain means the handle turned out to hold
// something else (the file grew, shrank or was replaced since the STAT, or the server
// returned less than asked): what was read then stays unused, and readAgain reads the
// file from its start on a new handle. Going on from where this handle stopped could
// join the start of one file to the end of another, one that replaced it meanwhile:
// one handle's view is what a whole-file read must return.
func readOneRound(ctx context.Context, f *File, size int64, buf *bytes.Buffer) error {
	_, rest, _, err := f.receiveSmall(ctx, size, buf)
	switch {
	case err != nil:
		return err
	case rest:
		return errReadAgain
	}
	return nil
}

// readAgain reads the named file whole on a new handle, with the transfer engine.
func (c *Client) readAgain(ctx context.Context, name string, buf *bytes.Buffer) error {
	f, err := c.Open(ctx, name)
	if err != nil {
		return err
	}
	f.callCtx = ctx
	return readWhole(ctx, f, buf)
}

// readWhole reads f from its start to EOF into buf with the transfer engine, and
// closes it.
func readWhole(ctx context.Context, f *File, buf *bytes.Buffer) error {
	_, err := f.writeTo(ctx, "read", buf)
	// As in os.ReadFile, a failed close does not spoil data read whole.
	f.Close()
	return err
}

// openSized opens name for reading with a STAT of it sent just before the OPEN, on the
// same channel: the size arrives with the handle, in one round trip. size is -1 when
// the STAT failed or named something other than a regular file; the OPEN's outcome
// decides the call. The STAT and the OPEN may see different files (one replaced the
// other in between): the size only chooses how to read, and readOneRound checks that the
// handle holds exactly that much.
func (c *Client) openSized(ctx context.Context, name string) (f *File, size int64, err error) {
	for {
		f, size, err = c.openSizedOn(ctx, c.fileChannel(), name) // see filechannel.go
		// A channel closed for lying idle (channelidle.go) was sent nothing: another one.
		if !errors.Is(err, errChannelRetired) {
			return f, size, err
		}
	}
}

func (c *Client) openSizedOn(ctx context.Context, cn *conn, name string) (f *File, size int64, err error) {
	bp := cn.smallPool.Get().(*[]byte)
	st := cn.start(ctx, appendString1((*bp)[:0], sshfx.TypeStat, cn.newID(), name), nil)
	cn.smallPool.Put(bp) // copied, or built elsewhere when it outgrew bp
	if st.err != nil {
		return nil, -1, pathErr("open", name, st.err)
	}
	f, err = c.openFile(ctx, cn, name, os.O_RDONLY, 0)
	if err != nil {
		st.abandon()
		return nil, -1, pathErr("open", name, err)
	}
	f.callCtx = ctx
	if size, err = statSize(ctx, st); err != nil {
		f.Close()
		return nil, -1, pathErr("open", name, err)
	}
	return f, size, nil
}

// statSize takes the reply to the STAT st and returns the size of the regular file it
// describes, or -1. A refusal is no error; a malformed reply fails the channel.
func statSize(ctx context.Context, st call) (int64, error) {
	size := int64(-1)
	err := st.take(ctx, func(r response) error {
		a, err := decodeAttrs("STAT", &r)
		switch {
		case err != nil, !a.Has(sshfx.AttrSize):
		case a.Has(sshfx.AttrPermissions) && a.Permissions&unixTypeMask != 0 && a.Permissions&unixTypeMask != unixRegular:
			// a directory, a device: the engine's READs decide what it gives
		default:
			size = int64(min(a.Size, 1<<62))
		}
		return err
	})
	if se := (*StatusError)(nil); errors.As(err, &se) {
		return -1, nil
	}
	return size, err
}

// WriteFile writes data to the named file, creating it with perm (before the server's
// umask) if needed and truncating it otherwise, like os.WriteFile. ctx bounds the whole
// write. The error includes what the server says when the file is closed. Data that
// fits in one channel window (about 1.9 MiB) costs two round trips: the OPEN, then
// the WRITEs and the CLOSE together.
//
// As with os.WriteFile, the file is written in place under its own name: a link at
// name is followed, a reader may see the file half written, and a failure leaves it
// so. The name is the caller's, and in place keeps what a rename would lose (the
// file's owner, mode and hard links) on servers without a rename that replaces. To
// replace a file whole or not at all, use PutReader (with a *bytes.Reader), which
// writes a part file and renames it.
func (c *Client) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	f, err := c.OpenFile(ctx, name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	f.callCtx = ctx
	if f.fitsOneBurst(len(data)) {
		return f.writeSmall(ctx, data)
	}
	_, err = f.writeAt(ctx, "write", data, 0)
	// Close also reports a failure the server only notices when the handle is closed.
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// pipelinedWriteMax is the most data WriteFile sends as WRITEs back to back with the
// CLOSE right behind them, two round trips in all: what one channel window holds, less
// room for the small requests of other users of the channel, so that the burst goes
// out without waiting for the server to grant more. More goes through the engine.
const pipelinedWriteMax = channelWindow - 64<<10

// fitsOneBurst reports whether n bytes go to f as WRITEs sent back to back: no more
// than one channel window holds (pipelinedWriteMax), in no more requests than a
// transfer of f keeps in flight.
func (f *File) fitsOneBurst(n int) bool {
	size := f.c.maxWrite()
	return n <= pipelinedWriteMax && (n+size-1)/size <= f.window()
}

// writeSmall writes data, which fitsOneBurst, at the start of f, just opened with
// O_TRUNC, and closes it: every WRITE and then the CLOSE go out back to back, and the
// replies are collected after, in one round trip. The first failure among them is the
// error, the CLOSE's included: a CLOSE of a written file can report what the server
// only noticed then, so it is always waited for (while ctx lasts). Each WRITE is
// built in a buffer of its own from the pool, which goes back once the channel's
// writer has written it: a WRITE is longer than what the channel copies (copyMax),
// so it is written from that buffer after sendThenClose returns.
func (f *File) writeSmall(ctx context.Context, data []byte) error {
	size := f.c.maxWrite()
	// One encoder serves every WRITE: sendThenClose calls them in order, each just
	// before its request goes out.
	off := 0
	enc := func(id uint32) ([]byte, packetRef) {
		pp := &pooledPacket{bp: f.c.dataBuf(), pool: &f.c.dataPool}
		pp.refs.Store(1) // the writer's, told when it is done with the packet
		n := copy((*pp.bp)[dataOff:dataOff+size], data[off:])
		// It cannot fail: decodeHandle refused handles longer than packetSlack has
		// room for.
		pkt, _ := writePacket(*pp.bp, id, f.handle, int64(off), n)
		off += n
		return pkt, pp
	}
	encs := make([]encoder, (len(data)+size-1)/size)
	for i := range encs {
		encs[i] = enc
	}
	calls, cls, err := f.sendThenClose(ctx, encs)
	if err != nil {
		err = f.err("write", err)
	}
	for _, cl := range calls {
		if werr := cl.take(ctx, status("WRITE")); werr != nil && err == nil {
			err = f.err("write", werr)
		}
	}
	if cerr := cls.take(f.callCtx, status("CLOSE")); cerr != nil && err == nil {
		err = f.err("close", cerr)
	}
	return err
}
