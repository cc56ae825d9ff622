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
// its memory is one page (at most one reply, 256 KiB on OpenSSH, decoded) however
// large the directory is; a whole listing has up to readAhead in flight, and charges
// each page to its call's memory account (budget.go) before it asks for the next.

// readAhead bounds the READDIRs a whole listing keeps in flight. Most directories
// fit in one page, and a listing ends only at a reply of EOF, so a listing read one
// READDIR at a time pays two round trips where one would do: the first batch sends
// two, which brings a small directory's page and its EOF together. A listing that
// goes on doubles its batch up to readAhead, so a large directory costs a round trip
// per readAhead pages; what is in flight is bounded by readAhead replies.
const readAhead = 4

// maxEmptyPages is how many READDIR replies in a row may bring no entry before the
// listing fails: a real server ends a listing with STATUS EOF, and one that keeps
// sending empty pages would otherwise keep a reader busy forever.
const maxEmptyPages = 16

// ErrInvalidEntryName is matched by the error of a listing in which the server sent
// an entry name that is not one plain name: empty, containing "/" or NUL. Such a name
// cannot be a directory entry on any real file system, and joined to a path it would
// name some other file, so the listing is refused rather than shortened silently. The
// entries before it have been returned. "." and ".." are not errors: servers list
// them, and every listing skips them.
var ErrInvalidEntryName = errors.New("sftp: the server listed an invalid entry name")

// tooLargeHint is added to the error of a whole listing past the memory limit: what
// lists the directory anyway, and what raises the limit.
const tooLargeHint = "; DirEntries or Dir.ReadDir(n > 0) list a directory of any size a page at a time, and WithMemoryLimit raises the limit"

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
	ahead []call
	batch int // READDIRs the next batch sends; 0 until a whole listing starts

	// acct is the memory account of the call reading the Dir (its own, unless the
	// call sets its own before the first read): a NAME longer than the reply cap is
	// read within it, and the page it brought stays charged to it (pageCharge)
	// while the Dir holds the page (bigreply.go).
	acct       *budget
	pageCharge int64
}

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
	h, err := c.openHandle(ctx, c.main, "opendir", func(dst []byte, id uint32) []byte {
		return appendString1(dst, sshfx.TypeOpendir, id, name)
	})
	if err != nil {
		return nil, err
	}
	d := &Dir{c: c, cn: c.main, name: name, handle: h, acct: c.newBudget()}
	d.life, d.cancel = context.WithCancel(context.Background())
	return d, nil
}

// Name returns the name the directory was opened with.
func (d *Dir) Name() string { return d.name }

// ReadDir reads the directory in os.File's style: with n > 0 it returns at most n
// entries, and io.EOF (with none) at the end, holding one page at a time whatever the
// directory's size; with n <= 0 it returns all that remain with a nil error at the
// end, within the Client's memory limit like Client.ReadDir (past it, an error
// matching ErrListingTooLarge, and the Dir fails). It waits as long as the server
// takes; Close, or the connection dying, ends the wait. Use ReadDirContext to bound
// it.
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
		if d.page = d.page[k:]; len(d.page) == 0 {
			d.releasePage()
		}
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
	return pathErr("readdir", d.name, err)
}

// bound joins ctx with the Dir's life, so that Close interrupts a read, which then
// ends with errDirClosed (see errors.go).
func (d *Dir) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(d.life, func() { cancel(errDirClosed) })
	return ctx, func() { stop(); cancel(nil) }
}

// readAll returns every entry that remains. Each page is handed to charge as it
// comes, before the next is fetched, so a listing past its call's memory limit stops
// there rather than after the whole listing; nil charges a budget of the listing's
// own (one call's limit). An error, a charge's included, fails the Dir: the entries
// read so far are dropped, so the rest could only be an incomplete listing. Called
// with mu held.
func (d *Dir) readAll(ctx context.Context, charge func(page []fs.DirEntry) error) ([]fs.DirEntry, error) {
	if charge == nil {
		charge = d.acct.newHold().addPage
	}
	pages, _, err := d.readPages(ctx, charge, nil)
	var oneReply *replyTooLargeError
	switch {
	case errors.As(err, &oneReply): // no page at a time there: the server sent one
		return nil, err
	case errors.Is(err, ErrListingTooLarge):
		return nil, fmt.Errorf("%w%s", err, tooLargeHint)
	case err != nil:
		return nil, err
	}
	return joinPages(pages), nil
}

// readPages reads pages until the end of the listing, handing each to charge before
// the next is fetched. With enough set, it stops early once enough reports true and
// no READDIR is in flight, and leaves the Dir to be read on a page at a time, one
// READDIR in flight: whole then says false. Called with mu held.
func (d *Dir) readPages(ctx context.Context, charge func(page []fs.DirEntry) error, enough func() bool) (pages [][]fs.DirEntry, whole bool, err error) {
	if d.batch == 0 {
		d.batch = 2
	}
	for {
		if page := d.page; len(page) > 0 {
			d.page = nil
			d.releasePage() // the holder's charge takes over
			if err := charge(page); err != nil {
				d.abandonAhead()
				d.err = err
				return nil, false, err
			}
			pages = append(pages, page)
		}
		switch {
		case d.err == io.EOF:
			return pages, true, nil
		case d.err != nil:
			return nil, false, d.err
		case enough != nil && len(d.ahead) == 0 && enough():
			d.batch = 0
			return pages, false, nil
		}
		d.fill(ctx)
	}
}

// fill fetches the next page into d.page, or sets d.err. Called with mu held and
// d.page empty. It sends d.batch READDIRs when none is in flight (one while no whole
// listing set a batch), and takes their replies one per call, in the order sent.
func (d *Dir) fill(ctx context.Context) {
	if err := ctxError(ctx, ""); err != nil {
		d.abandonAhead()
		d.err = err
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
	kept, invalid, err := d.take(ctx, r)
	if err == io.EOF && len(d.ahead) > 0 {
		// The READDIRs sent behind the one that found the end. On a server that
		// carries out a handle's requests in order they find EOF too; one that did
		// not may have given them the pages, so those are kept, and the listing goes
		// on until an EOF has no page behind it.
		kept, invalid, err = d.drainAfterEOF(ctx)
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
	bp := d.cn.smallPool.Get().(*[]byte)
	defer d.cn.smallPool.Put(bp) // each READDIR is copied: a handle is at most 256 bytes
	for range n {
		cl := d.cn.startListing(ctx, appendString1((*bp)[:0], sshfx.TypeReaddir, d.cn.newID(), d.handle), d.acct)
		if cl.err != nil {
			if len(d.ahead) == 0 {
				return cl.err
			}
			break // the ones sent are taken first; the next call sends again
		}
		d.ahead = append(d.ahead, cl)
	}
	return nil
}

// take waits for the reply to the READDIR cl and decodes it: the entries a listing
// keeps of a page (keptEntries; invalid is the error of a name that ended them),
// io.EOF, or an error.
func (d *Dir) take(ctx context.Context, cl call) (kept []fs.DirEntry, invalid, err error) {
	resp, err := cl.wait(ctx)
	if err != nil {
		return nil, nil, err
	}
	if resp.acct != nil {
		return d.takeLarge(&resp) // longer than the reply cap: bigreply.go
	}
	names, err := decodeName("READDIR", &resp)
	resp.release()
	if err != nil {
		if err != io.EOF {
			err = d.cn.check(err)
		}
		return nil, nil, err
	}
	kept, invalid = keptEntries(names)
	return kept, invalid, nil
}

// drainAfterEOF takes the replies still in flight once one said EOF. Their EOFs and
// errors say nothing more (the listing had ended); a page among them, which only a
// server that reorders a handle's requests sends, is returned, and the listing goes
// on. The replies behind that page are taken by the next fills, each page decoded
// only once the one before it has been charged. It returns io.EOF when none brought
// a page.
func (d *Dir) drainAfterEOF(ctx context.Context) (kept []fs.DirEntry, invalid, err error) {
	for len(d.ahead) > 0 {
		r := d.ahead[0]
		d.ahead = d.ahead[1:]
		kept, invalid, err := d.take(ctx, r)
		if err == nil {
			return kept, invalid, nil
		}
		if ctx.Err() != nil || d.cn.failed() != nil {
			return nil, nil, err
		}
	}
	return nil, nil, io.EOF
}

// keptEntries turns a decoded page into the entries a listing keeps: "." and ".."
// are skipped, and the array has room for exactly the others, so a page of dots
// leaves nothing behind. A name that is not one plain name ends the page there, with
// an error matching ErrInvalidEntryName.
func keptEntries(page []nameEntry) ([]fs.DirEntry, error) {
	n := 0
	for i := range page {
		if name := page[i].name; name != "." && name != ".." {
			n++
		}
	}
	kept := make([]fs.DirEntry, 0, n)
	for i := range page {
		e := &page[i]
		if e.name == "." || e.name == ".." {
			continue
		}
		if !validEntryName(e.name) {
			return kept, fmt.Errorf("%w: %q", ErrInvalidEntryName, e.name)
		}
		kept = append(kept, dirEntry{newFileInfo(e.name, &e.attrs, e.typeHint)})
	}
	return kept, nil
}

// abandonAhead forgets the READDIRs in flight: their replies are dropped.
func (d *Dir) abandonAhead() {
	for _, cl := range d.ahead {
		cl.abandon()
	}
	d.ahead = nil
}

// Close closes the directory handle, ending any read in progress, and waits for the
// server's answer until it comes or the connection dies. A second Close returns an
// error matching fs.ErrClosed. CloseContext bounds the wait.
func (d *Dir) Close() error {
	return d.close(context.Background())
}

// CloseContext is Close with the wait for the server's answer bounded by ctx: when
// ctx ends first it returns ctx's error (wrapped, matching errors.Is), the CLOSE
// having gone out all the same, and the Dir is closed. A server that never answers a
// CLOSE cannot hold it past ctx.
func (d *Dir) CloseContext(ctx context.Context) error {
	return d.close(ctx)
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
		cl, _ := d.sendClose(ctx)
		cl.abandon()
	}
}

// ReadDir reads the named directory and returns its entries sorted by name, without
// "." and "..". It holds the whole listing in memory, so it is bounded by the Client's
// memory limit (WithMemoryLimit, 64 MiB by default: about 400,000 entries with short
// names and no extended attributes), each page charged as it arrives; past the limit
// it fails with an error matching ErrListingTooLarge. DirEntries and OpenDir list a
// directory of any size a page at a time. A name that is not one plain name fails
// the listing (ErrInvalidEntryName).
// A directory of one READDIR page (up to 100 entries from OpenSSH) costs two round
// trips: the OPENDIR, then two READDIRs together (the page and the end). The CLOSE
// then goes out, and ReadDir returns without waiting for its answer.
func (c *Client) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	return c.readDir(ctx, name, nil)
}

// readDir is ReadDir with readAll's charge. The listing is whole once READDIR said
// EOF: its CLOSE is sent and not waited for (Dir.sendClose).
func (c *Client) readDir(ctx context.Context, name string, charge func(page []fs.DirEntry) error) ([]fs.DirEntry, error) {
	d, err := c.openDir(ctx, name)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	entries, cl, err := d.listAll(ctx, charge)
	cl.abandon()
	return entries, err
}

// listAll reads the rest of the listing of d, sorted by name, and closes d: it sends
// the CLOSE and returns without waiting for its reply (cl), which the caller takes or
// abandons. On an error the CLOSE has been waited for already (while ctx allows), and
// cl is empty.
func (d *Dir) listAll(ctx context.Context, charge func(page []fs.DirEntry) error) (entries []fs.DirEntry, cl call, err error) {
	name := d.name
	d.mu.Lock()
	entries, err = d.readAll(ctx, charge)
	d.mu.Unlock()
	if err != nil {
		d.close(ctx) // waits for the CLOSE while ctx allows; the listing's error wins
		return nil, cl, pathErr("readdir", name, err)
	}
	cl, _ = d.sendClose(ctx)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, cl, nil
}

// dirEntry is an fs.DirEntry over the attributes READDIR sent: Info costs no request.
type dirEntry struct{ fi *fileInfo }

func (e dirEntry) Name() string               { return e.fi.name }
func (e dirEntry) IsDir() bool                { return e.fi.IsDir() }
func (e dirEntry) Type() fs.FileMode          { return e.fi.Mode().Type() }
func (e dirEntry) Info() (fs.FileInfo, error) { return e.fi, nil }
func (e dirEntry) String() string             { return fs.FormatDirEntry(e) }

// joinPages joins the pages of a listing into one slice; a single page is the
// listing.
func joinPages(pages [][]fs.DirEntry) []fs.DirEntry {
	if len(pages) == 1 {
		return pages[0]
	}
	return slices.Concat(pages...)
}
