package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Directory listings. Every listing of this package goes through one reader, Dir:
// ReadDir, the io/fs views, Walk, WalkDir, Glob, RemoveAll and recursive Get all read
// their directories with it. A Dir read in pages fetches one READDIR page at a time, so
// its memory is one page (at most one reply, 256 KiB on OpenSSH) however large the
// directory is; a whole listing has up to readAhead in flight. What a listing holds in
// memory at once is bounded where the whole listing is kept: see MaxReadDirEntries.

const (
	// MaxReadDirEntries is the most entries a whole-directory listing holds: ReadDir,
	// Dir.ReadDir(n) with n <= 0, the io/fs ReadDir, and everything built on them (Walk,
	// WalkDir, Glob, RemoveAll, a recursive Get). Past it they fail with an error
	// matching ErrListingTooLarge. A directory of more entries is still listed in full
	// by DirEntries or Dir.ReadDir(n) with n > 0, which hold one page at a time.
	MaxReadDirEntries = 1 << 20
	// MaxReadDirBytes bounds the bytes of names and extended attributes a
	// whole-directory listing holds, so that a server sending a million entries with
	// long names cannot make one either (past it: ErrListingTooLarge).
	MaxReadDirBytes = 128 << 20
	// maxEmptyPages is how many READDIR replies in a row may bring no entry before the
	// listing fails: a real server ends a listing with STATUS EOF, and one that keeps
	// sending empty pages would otherwise keep a reader busy forever.
	maxEmptyPages = 16
)

var (
	// ErrListingTooLarge is matched by the error of a whole-directory listing that
	// passed MaxReadDirEntries or MaxReadDirBytes.
	ErrListingTooLarge = errors.New("sftp: the directory listing is larger than a whole-directory read accepts; list it with DirEntries or Dir.ReadDir(n)")
	// ErrInvalidEntryName is matched by the error of a listing in which the server sent
	// an entry name that is not one plain name: empty, containing "/" or NUL. Such a
	// name cannot be a directory entry on any real file system, and joined to a path it
	// would name some other file, so the listing is refused rather than shortened
	// silently. The entries before it have been returned. "." and ".." are not errors:
	// servers list them, and every listing skips them.
	ErrInvalidEntryName = errors.New("sftp: the server listed an invalid entry name")
)

// validEntryName reports whether a name from READDIR names one entry of the directory
// and nothing else. "." and ".." are skipped before this is asked.
func validEntryName(name string) bool {
	return fs.ValidPath(name) && !strings.ContainsAny(name, "/\x00")
}

// Dir is an open remote directory, read a page at a time. Its methods are safe for
// concurrent use, and calls are served one at a time. Entries come in the server's
// order, without "." and "..".
//
// A read interrupted by its ctx, or one that failed, leaves the Dir failed: the server
// has moved past a page the client never saw, so the rest of the listing could only be
// incomplete. Later reads return the same error.
type Dir struct {
	c      *Client
	cn     *conn
	name   string
	handle string

	// life ends when Close is called, so a read in another goroutine stops at once.
	life   context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	page    []fs.DirEntry // fetched and not yet returned
	err     error         // io.EOF at the end; else the failure, sticky
	empties int           // pages in a row that brought no entry
	closed  bool

	// ahead holds the READDIRs sent whose replies fill has not taken yet, in the
	// order they went out. A whole listing sends them in batches (see readAhead).
	ahead []pendingReq
	batch int // READDIRs the next batch sends; 0 until a whole listing starts
}

// readAhead bounds the READDIRs a whole listing keeps in flight. Most directories
// fit in one page, and a listing ends only at a reply of EOF, so a listing read one
// READDIR at a time pays two round trips where one would do: the first batch sends
// two, which brings a small directory's page and its EOF together. A listing that
// goes on doubles its batch up to readAhead, so a large directory costs a round trip
// per readAhead pages; what is in flight is bounded by readAhead replies.
const readAhead = 4

// OpenDir opens the named directory for reading. ctx bounds only the open; each read
// takes its own ctx (ReadDirContext), or none (ReadDir), and Close ends any read.
func (c *Client) OpenDir(ctx context.Context, name string) (*Dir, error) {
	d, err := c.openDir(ctx, name)
	if err != nil {
		return nil, pathErr("opendir", name, err)
	}
	return d, nil
}

func (c *Client) openDir(ctx context.Context, name string) (*Dir, error) {
	h, err := c.openHandle(ctx, c.main, "opendir", func(id uint32) []byte {
		return appendString1(nil, sshfx.TypeOpendir, id, name)
	})
	if err != nil {
		return nil, err
	}
	d := &Dir{c: c, cn: c.main, name: name, handle: h}
	d.life, d.cancel = context.WithCancel(context.Background())
	return d, nil
}

// Name returns the name the directory was opened with.
func (d *Dir) Name() string { return d.name }

// ReadDir reads the directory in os.File's style: with n > 0 it returns at most n
// entries, and io.EOF (with none) at the end; with n <= 0 it returns all that remain
// with a nil error at the end, bounded like Client.ReadDir. It waits as long as the
// server takes; Close, or the connection dying, ends the wait. Use ReadDirContext to
// bound it.
func (d *Dir) ReadDir(n int) ([]fs.DirEntry, error) {
	return d.ReadDirContext(context.Background(), n)
}

// ReadDirContext is ReadDir bounded by ctx. Entries come in the server's order.
func (d *Dir) ReadDirContext(ctx context.Context, n int) ([]fs.DirEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, pathErr("readdir", d.name, fs.ErrClosed)
	}
	ctx, stop := d.bound(ctx)
	defer stop()
	if n > 0 {
		for len(d.page) == 0 && d.err == nil {
			d.fill(ctx)
		}
		if len(d.page) == 0 {
			return nil, d.fail(d.err)
		}
		k := min(n, len(d.page))
		out := d.page[:k:k]
		d.page = d.page[k:]
		return out, nil
	}
	out, err := d.readAll(ctx, nil)
	return out, d.fail(err)
}

// fail labels a listing error with the directory's name; io.EOF stays bare, as
// callers compare it with ==.
func (d *Dir) fail(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	if d.life.Err() != nil && errors.Is(err, context.Canceled) {
		err = fmt.Errorf("sftp: directory closed during the read: %w", fs.ErrClosed)
	}
	return pathErr("readdir", d.name, err)
}

// bound joins ctx with the Dir's life, so that Close interrupts a read.
func (d *Dir) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// readAll returns every entry that remains, bounded by MaxReadDirEntries and
// MaxReadDirBytes. charge, when not nil, is given each page as it comes, before the
// next is fetched: a caller that bounds what several listings hold together stops
// the read with its error as soon as the bound is passed, rather than after a whole
// listing. Called with mu held.
func (d *Dir) readAll(ctx context.Context, charge func(page []fs.DirEntry) error) ([]fs.DirEntry, error) {
	var out []fs.DirEntry
	size := 0
	if d.batch == 0 {
		d.batch = 2
	}
	for {
		for _, e := range d.page {
			size += entrySize(e)
		}
		out = append(out, d.page...)
		page := d.page
		d.page = nil
		if len(out) > MaxReadDirEntries || size > MaxReadDirBytes {
			d.err = fmt.Errorf("%w (more than %d entries or %d bytes)", ErrListingTooLarge, MaxReadDirEntries, MaxReadDirBytes)
			return nil, d.err
		}
		if charge != nil && len(page) > 0 {
			if err := charge(page); err != nil {
				d.err = err
				return nil, err
			}
		}
		switch {
		case d.err == io.EOF:
			return out, nil
		case d.err != nil:
			return nil, d.err
		}
		d.fill(ctx)
	}
}

// entrySize is what an entry costs a whole listing in bytes the server chose.
func entrySize(e fs.DirEntry) int {
	n := len(e.Name())
	if de, ok := e.(dirEntry); ok {
		for _, x := range de.fi.attrs.Extended {
			n += len(x.Type) + len(x.Data)
		}
	}
	return n
}

// fill fetches the next page into d.page, or sets d.err. Called with mu held and
// d.page empty. It sends d.batch READDIRs when none is in flight (one while no whole
// listing set a batch), and takes their replies one per call, in the order sent.
func (d *Dir) fill(ctx context.Context) {
	if err := ctx.Err(); err != nil {
		d.abandonAhead()
		d.err = fmt.Errorf("sftp: %w", err)
		return
	}
	if len(d.ahead) == 0 {
		if err := d.sendBatch(ctx); err != nil {
			d.err = err
			return
		}
	}
	r := d.ahead[0]
	d.ahead = d.ahead[1:]
	page, err := d.take(ctx, r)
	if err == io.EOF && len(d.ahead) > 0 {
		// The READDIRs sent behind the one that found the end. On a server that
		// carries out a handle's requests in order they find EOF too; one that did
		// not may have given them the pages, so those are kept, and the listing goes
		// on until a batch ends at EOF with nothing after it.
		page, err = d.drainAfterEOF(ctx)
	}
	switch {
	case err == nil:
	case err == io.EOF:
		d.err = io.EOF
		return
	default:
		d.abandonAhead()
		d.err = err
		return
	}
	var invalid error
	kept := make([]fs.DirEntry, 0, len(page))
	for _, e := range page {
		if e.name == "." || e.name == ".." {
			continue
		}
		if !validEntryName(e.name) {
			invalid = fmt.Errorf("%w: %q", ErrInvalidEntryName, e.name)
			break
		}
		kept = append(kept, dirEntry{newFileInfo(e.name, &e.attrs, typeFromLongname(e.longname))})
	}
	d.page = kept
	if invalid != nil {
		d.abandonAhead()
		d.err = invalid
	}
	if len(kept) > 0 || d.err != nil {
		d.empties = 0
		return
	}
	if d.empties++; d.empties >= maxEmptyPages {
		d.abandonAhead()
		d.err = fmt.Errorf("sftp: the server sent %d READDIR replies in a row without an entry", d.empties)
	}
}

// sendBatch sends the next batch of READDIRs into d.ahead. An error means none went
// out.
func (d *Dir) sendBatch(ctx context.Context) error {
	n := max(d.batch, 1)
	if d.batch > 0 {
		d.batch = min(2*d.batch, readAhead)
	}
	for range n {
		r := pendingReq{id: d.cn.newID(), ch: make(chan response, 1), sent: true}
		if err := d.cn.send(ctx, r.id, appendString1(nil, sshfx.TypeReaddir, r.id, d.handle), r.ch); err != nil {
			if len(d.ahead) == 0 {
				return err
			}
			break // the ones sent are taken first; the next call sends again
		}
		d.ahead = append(d.ahead, r)
	}
	return nil
}

// take waits for the reply to the READDIR r and decodes it: a page, io.EOF, or an
// error.
func (d *Dir) take(ctx context.Context, r pendingReq) ([]nameEntry, error) {
	resp, err := d.cn.wait(ctx, r.id, r.ch)
	if err != nil {
		return nil, err
	}
	names, err := decodeName("READDIR", &resp)
	resp.release()
	if err != nil && err != io.EOF {
		err = d.cn.check(err)
	}
	return names, err
}

// drainAfterEOF takes the replies still in flight once one said EOF. Their EOFs and
// errors say nothing more (the listing had ended); a page among them, which only a
// server that reorders a handle's requests sends, is returned, and the listing goes
// on. It returns io.EOF when none brought a page.
func (d *Dir) drainAfterEOF(ctx context.Context) ([]nameEntry, error) {
	var pages []nameEntry
	for len(d.ahead) > 0 {
		r := d.ahead[0]
		d.ahead = d.ahead[1:]
		page, err := d.take(ctx, r)
		if err == nil {
			pages = append(pages, page...)
			continue
		}
		if ctx.Err() != nil || d.cn.failed() != nil {
			return nil, err
		}
	}
	if pages == nil {
		return nil, io.EOF
	}
	return pages, nil
}

// abandonAhead forgets the READDIRs in flight: their replies are dropped.
func (d *Dir) abandonAhead() {
	for _, r := range d.ahead {
		d.cn.abandon(r.id, r.ch)
	}
	d.ahead = nil
}

// Close closes the directory handle, ending any read in progress. A second Close
// returns an error matching fs.ErrClosed.
func (d *Dir) Close() error {
	return d.close(context.Background())
}

// close closes the handle, waiting for the reply no longer than ctx allows: past
// that, the CLOSE still goes out but nobody waits for it.
func (d *Dir) close(ctx context.Context) error {
	d.cancel()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return pathErr("close", d.name, fs.ErrClosed)
	}
	d.closed, d.page = true, nil
	d.abandonAhead()
	if ctx.Err() != nil {
		d.c.closeHandleBackground(d.cn, d.handle)
		return nil
	}
	return pathErr("close", d.name, d.c.closeHandleWait(ctx, d.cn, d.handle))
}

// closeSent is a directory's CLOSE sent without waiting for its reply.
type closeSent struct {
	d   *Dir
	req pendingReq
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
	d.abandonAhead()
	if ctx.Err() != nil {
		d.c.closeHandleBackground(d.cn, d.handle)
		return cs
	}
	r := pendingReq{id: d.cn.newID(), ch: make(chan response, 1)}
	if err := d.cn.send(ctx, r.id, appendString1(nil, sshfx.TypeClose, r.id, d.handle), r.ch); err != nil {
		d.c.closeHandleBackground(d.cn, d.handle)
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

// DirEntries lists the named directory as it goes: each READDIR page is fetched
// when the entries before it have been consumed, so memory stays at one page for
// directories of any size. Entries come in the server's order, without "." and "..".
// An error ends the sequence (it is yielded with a nil entry); ctx bounds every
// request, and the directory handle is closed when the loop ends, early or not.
func (c *Client) DirEntries(ctx context.Context, name string) iter.Seq2[fs.DirEntry, error] {
	return func(yield func(fs.DirEntry, error) bool) {
		d, err := c.openDir(ctx, name)
		if err != nil {
			yield(nil, pathErr("readdir", name, err))
			return
		}
		// Deferred, so the handle is closed however the loop ends: a break, an
		// error, or a panic in the loop's body, which unwinds through yield.
		closed := false
		defer func() {
			if !closed {
				d.close(ctx)
			}
		}()
		for {
			page, err := d.ReadDirContext(ctx, 1<<10)
			if err == io.EOF {
				break
			}
			if err != nil {
				yield(nil, err)
				return
			}
			for _, e := range page {
				if !yield(e, nil) {
					return
				}
			}
		}
		// The listing is whole: its CLOSE is not waited for, as in ReadDir.
		closed = true
		d.sendClose(ctx).forget()
	}
}

// ReadDir reads the named directory and returns its entries sorted by name, without
// "." and "..". It holds the whole listing in memory, so it accepts at most
// MaxReadDirEntries entries and MaxReadDirBytes of names (past either, an error
// matching ErrListingTooLarge): list larger directories with DirEntries or OpenDir.
// A name that is not one plain name fails the listing (ErrInvalidEntryName).
// A directory of one READDIR page (up to 100 entries from OpenSSH) costs two round
// trips: the OPENDIR, then two READDIRs together (the page and the end). The CLOSE
// then goes out, and ReadDir returns without waiting for its answer.
func (c *Client) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	return c.readDir(ctx, name, nil)
}

// readDir is ReadDir with readAll's charge.
func (c *Client) readDir(ctx context.Context, name string, charge func(page []fs.DirEntry) error) ([]fs.DirEntry, error) {
	entries, cs, err := c.listDir(ctx, name, charge)
	if err != nil {
		return nil, err
	}
	cs.forget()
	return entries, nil
}

// listDir is readDir that sends the directory's CLOSE and returns without waiting
// for its reply: the caller must wait for cs before it returns. On an error the
// CLOSE has been waited for already (while ctx allows), and cs is empty.
func (c *Client) listDir(ctx context.Context, name string, charge func(page []fs.DirEntry) error) (entries []fs.DirEntry, cs closeSent, err error) {
	d, err := c.openDir(ctx, name)
	if err != nil {
		return nil, cs, pathErr("readdir", name, err)
	}
	return d.listAll(ctx, charge)
}

// listAll is listDir on a Dir already open, which it closes.
func (d *Dir) listAll(ctx context.Context, charge func(page []fs.DirEntry) error) (entries []fs.DirEntry, cs closeSent, err error) {
	name := d.name
	d.mu.Lock()
	entries, err = d.readAll(ctx, charge)
	d.mu.Unlock()
	if err != nil {
		d.close(ctx) // waits for the CLOSE while ctx allows; the listing's error wins
		return nil, cs, pathErr("readdir", name, err)
	}
	cs = d.sendClose(ctx)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, cs, nil
}

// dirEntry is an fs.DirEntry over the attributes READDIR sent: Info costs no request.
type dirEntry struct{ fi *fileInfo }

func (e dirEntry) Name() string               { return e.fi.name }
func (e dirEntry) IsDir() bool                { return e.fi.IsDir() }
func (e dirEntry) Type() fs.FileMode          { return e.fi.Mode().Type() }
func (e dirEntry) Info() (fs.FileInfo, error) { return e.fi, nil }
func (e dirEntry) String() string             { return fs.FormatDirEntry(e) }
