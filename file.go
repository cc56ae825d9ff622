package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// File is an open remote file. It is safe for concurrent use: Read, Write, Seek,
// ReadFrom and WriteTo share the file offset and are serialised; ReadAt and WriteAt
// may run concurrently with anything.
type File struct {
	c      *Client
	cn     *conn
	name   string
	handle string
	append bool // opened with O_APPEND: the server ignores offsets, so never striped
	// access is what the File was opened for, os.O_RDONLY, os.O_WRONLY or os.O_RDWR:
	// a read of a File opened write-only, or a write of one opened read-only, fails
	// at once (checkAccess) rather than asking the server.
	access int
	// share, when > 1, is how many transfers run side by side with this one (a tree
	// copy): each then keeps a share of the window, so memory stays bounded by a few
	// windows however many files are in flight.
	share int
	// onAcked, set by a Put that reports progress, is called by the write engine with
	// each advance of the acknowledged prefix (write.go): progress counts what the
	// server confirmed, not what was handed to the channel.
	onAcked func(n int64)
	// siblings is how the sibling lanes of the File's last upload ended, for the cut
	// of a failed upload's part (partcut.go). Atomic: WriteAt and ReadFrom may run
	// on one File from several goroutines, each ending its own lanes.
	siblings atomic.Pointer[siblingEnd]

	// life ends when Close is called, and for the moment while the deadline has
	// passed (SetDeadline): the io methods, which take no ctx, wait on it (see
	// errors.go, "where ctx ends a wait"), so a transfer in another goroutine stops
	// promptly instead of deadlocking.
	life      *fileLife
	closeOnce sync.Once
	// callCtx is the ctx of the call that opened the File for its own use (Get, Put,
	// ReadFile, WriteFile), context.Background() for a File its user opened. It bounds
	// the waits for the File's CLOSEs (Close, a transfer's sibling handles, the CLOSE
	// behind a batch: handle.go), so a server that never answers one cannot hold that
	// call; a File closed by its user waits for them, as os.File's Close does.
	callCtx context.Context

	// hmu orders requests that name the handle against Close: every send holds it
	// shared and checks closed (the gate, enter); Close takes it exclusively before
	// sending CLOSE. The server reuses a closed handle's name for the next OPEN, so a
	// request sent after the CLOSE would act on some other file.
	hmu    sync.RWMutex
	closed bool // guarded by hmu

	mu     sync.Mutex  // guards offset and ra
	offset int64       // for Read, Write, Seek, ReadFrom, WriteTo
	ra     *readStream // read-ahead of sequential Read; nil when there is none
}

// Open opens the named file for reading. ctx bounds only the open: the File's I/O is
// bounded by File.SetDeadline and ended by Close, not by ctx.
func (c *Client) Open(ctx context.Context, name string) (*File, error) {
	return c.OpenFile(ctx, name, os.O_RDONLY, 0)
}

// Create creates or truncates the named file for writing (mode 0666 before the server's
// umask). It opens the file write-only (os.O_WRONLY|os.O_CREATE|os.O_TRUNC: WRITE,
// CREAT and TRUNC, without READ), because some servers (AWS Transfer) refuse
// read-write opens where write-only would do. So, unlike pkg/sftp's Create (and
// os.Create), the File cannot be read back: Read, ReadAt and WriteTo fail at once,
// with no request sent, with an error matching syscall.EBADF ("bad file descriptor",
// what os.File says for a read of a write-only file). To write and read through one
// File, open it with OpenFile(ctx, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666).
func (c *Client) Create(ctx context.Context, name string) (*File, error) {
	return c.OpenFile(ctx, name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
}

// OpenFile opens the named file with os.O_* flags; perm is used when the file is
// created. As with Open, ctx bounds only the open.
//
// The File keeps what it was opened for, as an *os.File does: on a File opened
// os.O_WRONLY, Read, ReadAt and WriteTo fail at once with an error matching
// syscall.EBADF; on one opened os.O_RDONLY, so do Write, WriteAt, WriteString and
// ReadFrom. No request is sent for them. Attribute changes (Truncate, Chmod, Chown,
// Chtimes) and Sync are sent whatever the mode: the server decides, as the kernel
// does for ftruncate and localfs.Fchmod.
//
// With os.O_CREATE|os.O_EXCL, a name that exists already (a file, a directory, a link
// even to nothing) fails the open with an error matching fs.ErrExist, as os.OpenFile's
// does: servers answer only FAILURE there, so after a FAILURE OpenFile asks with Lstat
// (one more round trip, on that failure only). Some servers do not honour O_EXCL at
// all (rclone's opens the existing file; see docs/servers.md).
func (c *Client) OpenFile(ctx context.Context, name string, flag int, perm fs.FileMode) (*File, error) {
	f, err := c.openFile(ctx, c.fileChannel(), name, flag, perm) // see filechannel.go
	// A channel closed for lying idle (channelidle.go) was sent nothing: another one.
	for errors.Is(err, errChannelRetired) {
		f, err = c.openFile(ctx, c.fileChannel(), name, flag, perm)
	}
	if err != nil {
		if exclusiveCreate(flag) {
			err = c.existError(ctx, name, err)
		}
		return nil, pathErr("open", name, err)
	}
	return f, nil
}

// openFlags maps os flags onto SFTP pflags. The draft wants CREAT beside TRUNC and
// EXCL, so O_TRUNC without O_CREATE cannot be sent as TRUNC (it would create a missing
// file); truncAfter tells the caller to truncate with FSETSTAT instead.
func openFlags(flag int) (pf sshfx.OpenFlag, truncAfter bool) {
	switch flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		pf = sshfx.FlagRead
	case os.O_WRONLY:
		pf = sshfx.FlagWrite
	default:
		pf = sshfx.FlagRead | sshfx.FlagWrite
	}
	if flag&os.O_APPEND != 0 {
		pf |= sshfx.FlagAppend
	}
	if flag&os.O_CREATE != 0 {
		pf |= sshfx.FlagCreat
		if flag&os.O_EXCL != 0 {
			pf |= sshfx.FlagExcl
		}
		if flag&os.O_TRUNC != 0 {
			pf |= sshfx.FlagTrunc
		}
	} else if flag&os.O_TRUNC != 0 {
		truncAfter = true
	}
	return pf, truncAfter
}

func (c *Client) openFile(ctx context.Context, cn *conn, name string, flag int, perm fs.FileMode) (*File, error) {
	pf, truncAfter := openFlags(flag)
	var a sshfx.Attrs
	if pf&sshfx.FlagCreat != 0 {
		a = sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: toUnixPerm(perm)}
	}
	h, err := c.openHandle(ctx, cn, "open", func(dst []byte, id uint32) []byte {
		return appendOpen(dst, id, name, pf, &a)
	})
	if err != nil {
		return nil, err
	}
	f := c.newFile(cn, name, h)
	f.append = flag&os.O_APPEND != 0
	f.access = flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	if truncAfter {
		if err := f.setstat(ctx, &sshfx.Attrs{Flags: sshfx.AttrSize}); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

func (c *Client) newFile(cn *conn, name, handle string) *File {
	return &File{c: c, cn: cn, name: name, handle: handle, life: newFileLife(), callCtx: context.Background()}
}

// Name returns the name the file was opened with.
func (f *File) Name() string { return f.name }

func (f *File) err(op string, err error) error { return pathErr(op, f.name, err) }

// closedErr is what a File's methods return when its life has ended before they
// start: fs.ErrClosed after Close, as from an *os.File, or the deadline's error.
func (f *File) closedErr(op string) error {
	if err := f.life.Err(); err == errDeadline {
		return f.err(op, err)
	}
	return f.err(op, fs.ErrClosed)
}

// errNotForReading and errNotForWriting are what a read of a File opened write-only,
// and a write of one opened read-only, fail with: syscall.EBADF, as from an *os.File
// (pkg/sftp sent the request and returned the server's answer, which for a read of a
// write-only handle is NO_SUCH_FILE on OpenSSH: a misleading "file does not exist").
var (
	errNotForReading = fmt.Errorf("%w: the file was opened write-only (Create opens write-only; OpenFile with os.O_RDWR to read it too)", syscall.EBADF)
	errNotForWriting = fmt.Errorf("%w: the file was opened read-only (Open opens read-only; OpenFile with os.O_WRONLY or os.O_RDWR to write)", syscall.EBADF)
)

// checkAccess returns the error of op, a read (write false) or a write, on this File
// before anything is sent: fs.ErrClosed (or the deadline's error) once the File's
// life has ended, then EBADF when it was not opened for op, else nil.
func (f *File) checkAccess(op string, write bool) error {
	if f.life.Err() != nil {
		return f.closedErr(op)
	}
	switch {
	case write && f.access == os.O_RDONLY:
		return f.err(op, errNotForWriting)
	case !write && f.access == os.O_WRONLY:
		return f.err(op, errNotForReading)
	}
	return nil
}

// Close closes the remote handle. Transfers running in other goroutines end promptly
// with an error matching fs.ErrClosed. A second Close returns fs.ErrClosed.
//
// Close waits for the server's answer to the CLOSE, which for a written file may be
// the only report of a failed write, as long as the deadline set by SetDeadline
// allows, and with none set until the server answers or the connection dies, as
// os.File's Close does. Past the deadline it returns an error matching
// os.ErrDeadlineExceeded; the CLOSE has gone out all the same, and the File is
// closed. CloseContext bounds the wait by a ctx too.
func (f *File) Close() error { return f.close(f.callCtx) }

// CloseContext is Close with the wait for the server's answer bounded by ctx as well
// as by the deadline: when ctx ends first it returns ctx's error (wrapped, matching
// errors.Is), the CLOSE having gone out all the same, and the File is closed. A
// server that never answers a CLOSE cannot hold it past ctx.
func (f *File) CloseContext(ctx context.Context) error { return f.close(ctx) }

// enter is the gate of f's handles (see hmu): every request that names one of them,
// the File's own or a transfer's sibling, goes out while its sender holds hmu shared,
// which enter takes. It reports why nothing may go out (f is closed, or its life has
// ended) after letting go of hmu and telling ref; on nil the caller sends, then calls
// f.hmu.RUnlock.
func (f *File) enter(ref packetRef) error {
	f.hmu.RLock()
	err := ctxError(f.life, "")
	if f.closed {
		err = errFileClosed
	}
	if err != nil {
		f.hmu.RUnlock()
		tell(ref)
	}
	return err
}

// startInto sends pkt, a request naming a handle of f on cn, through the gate, its
// reply to go to into (conn.startInto): a transfer's requests, under the transfer's
// ctx.
func (f *File) startInto(ctx context.Context, cn *conn, pkt []byte, ref packetRef, into chan<- response) error {
	if err := f.enter(ref); err != nil {
		return err
	}
	defer f.hmu.RUnlock()
	return cn.startInto(ctx, pkt, ref, into)
}

// do is one round trip (conn.do) about f's handle, through the gate, bounded by ctx:
// f's life for the io methods, the call's ctx for Get and Put. The gate is held until
// the reply: Close ends the life first, which ends the io methods' waits, before it
// takes hmu for itself; a File a call opened for itself is closed by that call, after
// its round trips.
func (f *File) do(ctx context.Context, enc func(dst []byte, id uint32) []byte, decode func(response) error) error {
	if err := f.enter(nil); err != nil {
		return err
	}
	defer f.hmu.RUnlock()
	return f.cn.do(ctx, enc, decode)
}

// Stat returns the file's attributes (FSTAT).
func (f *File) Stat() (fs.FileInfo, error) {
	a, err := f.fstat(f.life)
	if err != nil {
		return nil, f.err("stat", err)
	}
	return newFileInfo(baseName(f.name), &a, 0), nil
}

func (f *File) fstat(ctx context.Context) (a sshfx.Attrs, err error) {
	err = f.do(ctx, func(dst []byte, id uint32) []byte {
		return appendString1(dst, sshfx.TypeFstat, id, f.handle)
	}, func(r response) (err error) {
		a, err = decodeAttrs("FSTAT", &r)
		return err
	})
	return a, err
}

func (f *File) setstat(ctx context.Context, a *sshfx.Attrs) error {
	return f.do(ctx, func(dst []byte, id uint32) []byte {
		return appendStringAttrs(dst, sshfx.TypeFsetstat, id, f.handle, a)
	}, status("FSETSTAT"))
}

// Sync asks the server to flush the file to stable storage (fsync@openssh.com).
// Where the server does not offer fsync@openssh.com (paramiko's, for one, does not),
// Sync sends nothing and returns an error matching errors.ErrUnsupported: a caller
// for whom durability is best effort can go on after checking errors.Is(err,
// errors.ErrUnsupported). Whether the server offers it is also known before any
// Sync, from the VERSION it sent:
//
//	canSync := c.Extensions()["fsync@openssh.com"] == "1"
func (f *File) Sync() error { return f.sync(f.life) }

func (f *File) sync(ctx context.Context) error {
	if !f.c.hasExt(extFsync) {
		return f.err("sync", errUnsupportedExt(extFsync))
	}
	return f.err("sync", f.do(ctx, func(dst []byte, id uint32) []byte {
		return appendExtended(dst, id, extFsync, f.handle)
	}, status(extFsync)))
}

// Truncate changes the size of the file. It does not move the offset.
func (f *File) Truncate(size int64) error {
	if size < 0 {
		return f.err("truncate", syscall.EINVAL)
	}
	f.mu.Lock()
	f.dropReadAhead() // what was read ahead may no longer exist
	f.mu.Unlock()
	return f.err("truncate", f.setstat(f.life, &sshfx.Attrs{Flags: sshfx.AttrSize, Size: uint64(size)}))
}

// Chmod changes the mode of the file.
func (f *File) Chmod(mode fs.FileMode) error {
	return f.err("chmod", f.setstat(f.life, &sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: toUnixPerm(mode)}))
}

// Chown changes the numeric uid and gid of the file; -1 is refused, as by Client.Chown.
func (f *File) Chown(uid, gid int) error {
	a, err := ownerAttrs(uid, gid)
	if err != nil {
		return f.err("chown", err)
	}
	return f.err("chown", f.setstat(f.life, a))
}

// Chtimes changes the access and modification times of the file.
func (f *File) Chtimes(atime, mtime time.Time) error {
	a, err := timesAttrs(atime, mtime)
	if err != nil {
		return f.err("chtimes", err)
	}
	return f.err("chtimes", f.setstat(f.life, a))
}

// Seek sets the offset for the next Read or Write. io.SeekEnd asks the server for the
// size.
func (f *File) Seek(offset int64, whence int) (int64, error) {
	if f.life.Err() != nil {
		return 0, f.closedErr("seek")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = f.offset
	case io.SeekEnd:
		a, err := f.fstat(f.life)
		if err != nil {
			return 0, f.err("seek", err)
		}
		if !a.Has(sshfx.AttrSize) {
			return 0, f.err("seek", errors.New("sftp: server did not report the file size"))
		}
		base = int64(min(a.Size, 1<<63-1))
	default:
		return 0, f.err("seek", syscall.EINVAL)
	}
	pos := base + offset
	if pos < 0 || (offset > 0 && pos < base) {
		return 0, f.err("seek", syscall.EINVAL)
	}
	if pos != f.offset {
		f.dropReadAhead()
	}
	f.offset = pos
	return pos, nil
}

// Read reads up to len(p) bytes at the file offset. Sequential Reads are served from
// a read-ahead window that grows while reading stays sequential, so small reads (a
// bufio.Reader, io.ReadAll) run at transfer speed.
//
// As the io.Reader contract allows, Read may return fewer bytes than len(p) (at most
// one READ reply's worth, Limits().MaxRead) with a nil error, and it reports the end
// of the file as 0, io.EOF on the call after the last data. pkg/sftp's Read filled p
// whenever the file held enough, and could return the last bytes with io.EOF; code
// that relied on a full p should call io.ReadFull, or ReadAt, which fills p or says
// why not. To read a whole file, io.ReadAll, File.WriteTo (io.Copy) and
// Client.ReadFile are the fast ways.
func (f *File) Read(p []byte) (int, error) {
	if err := f.checkAccess("read", false); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ra == nil {
		f.ra = f.newReadStream(f.life, f.offset, -1, 1, false)
	}
	n, err := f.ra.read(p)
	f.offset += int64(n)
	if err != nil {
		f.dropReadAhead()
		if err != io.EOF {
			err = f.err("read", err)
		}
	}
	return n, err
}

// dropReadAhead forgets the read-ahead window. f.mu must be held.
func (f *File) dropReadAhead() {
	if f.ra != nil {
		f.ra.close()
		f.ra = nil
	}
}

// ReadAt reads len(p) bytes at off with many requests in flight. It returns fewer only
// with an error, io.EOF when the file ends first.
func (f *File) ReadAt(p []byte, off int64) (int, error) { return f.readAt(f.life, p, off) }

// readAt is ReadAt while ctx lasts.
func (f *File) readAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := f.checkAccess("readat", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, f.err("readat", syscall.EINVAL)
	}
	if len(p) == 0 {
		return 0, nil
	}
	// Random access means the sequential read-ahead is guessing wrong: stop it rather
	// than let it hold buffers and keep the server busy.
	if f.mu.TryLock() {
		f.dropReadAhead()
		f.mu.Unlock()
	}
	s := f.newReadStream(ctx, off, off+int64(len(p)), f.c.oneChannelWindow(), false)
	defer s.close()
	n, err := io.ReadFull(readerFunc(s.read), p)
	if err == io.ErrUnexpectedEOF {
		err = io.EOF // the file ended inside p: io.ReaderAt says EOF
	}
	if err != nil && err != io.EOF {
		err = f.err("readat", err)
	}
	return n, err
}

type readerFunc func([]byte) (int, error)

func (r readerFunc) Read(p []byte) (int, error) { return r(p) }

// readerAt is f as an io.ReaderAt whose reads wait while ctx lasts.
func (f *File) readerAt(ctx context.Context) io.ReaderAt {
	return readerAtFunc(func(p []byte, off int64) (int, error) { return f.readAt(ctx, p, off) })
}

type readerAtFunc func([]byte, int64) (int, error)

func (r readerAtFunc) ReadAt(p []byte, off int64) (int, error) { return r(p, off) }

// Write writes p at the file offset (at the end for files opened with O_APPEND) with
// many requests in flight.
func (f *File) Write(p []byte) (int, error) {
	if err := f.checkAccess("write", true); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropReadAhead()
	n, err := f.writeAt(f.life, "write", p, f.offset)
	f.offset += int64(n)
	return n, err
}

// WriteString is Write of a string.
func (f *File) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

// WriteAt writes p at off with many requests in flight. On error, n counts the bytes
// from off that the server acknowledged before the first failed WRITE.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	if err := f.checkAccess("writeat", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, f.err("writeat", syscall.EINVAL)
	}
	f.mu.Lock()
	f.dropReadAhead()
	f.mu.Unlock()
	return f.writeAt(f.life, "writeat", p, off)
}

// writeAt writes p at off while ctx lasts; its errors name op, the caller's entry
// point.
func (f *File) writeAt(ctx context.Context, op string, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	k, err := f.largeWriteAt(ctx, op, p, off) // WithLargeWrites' first WRITE, or nothing
	if err != nil || k == len(p) {
		return k, err
	}
	p, off = p[k:], off+int64(k)
	if len(p) <= f.c.maxWrite() {
		n, err := f.writeOne(ctx, op, p, off)
		return k + n, err
	}
	ws := f.newWriteStream(ctx, op, off)
	n, err := ws.copyFrom(bytes.NewReader(p))
	return k + int(n), err
}

// writeOne writes p, which fits one WRITE, from the caller's goroutine: a transfer's
// goroutines would cost more than they save for one request.
func (f *File) writeOne(ctx context.Context, op string, p []byte, off int64) (int, error) {
	// The buffer goes back to the pool once both this call and the channel's writer
	// are done with it: a call that gives up may leave its WRITE mid-Write.
	pp := &pooledPacket{bp: f.c.dataBuf(), pool: &f.c.dataPool}
	pp.refs.Store(2)
	defer pp.writeDone()
	copy((*pp.bp)[dataOff:], p)
	pkt, err := writePacket(*pp.bp, f.cn.newID(), f.handle, off, len(p))
	if err != nil {
		pp.writeDone() // the writer's share: it never gets the packet
		return 0, f.err(op, err)
	}
	if err := f.enter(pp); err != nil {
		return 0, f.err(op, err)
	}
	cl := f.cn.start(ctx, pkt, pp) // the writer lets go of pp
	f.hmu.RUnlock()
	if err := cl.take(ctx, status("WRITE")); err != nil {
		return 0, f.err(op, err)
	}
	return len(p), nil
}

// ReadFrom writes everything r yields at the file offset, reading r straight into
// WRITE packets with many in flight. When r is an io.ReaderAt and io.Seeker of known
// size (an *os.File, *bytes.Reader, *io.SectionReader), several goroutines read it in
// parallel, and r is left positioned after what was written. On error, n counts the
// bytes the server acknowledged, all of them before the first failed WRITE.
func (f *File) ReadFrom(r io.Reader) (int64, error) { return f.readFrom(f.life, r) }

// readFrom is ReadFrom while ctx lasts.
func (f *File) readFrom(ctx context.Context, r io.Reader) (int64, error) {
	if err := f.checkAccess("readfrom", true); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropReadAhead()
	r, k, err := f.largeReadFrom(ctx, r, f.offset) // WithLargeWrites' first WRITE, or nothing
	f.offset += k
	if err != nil {
		return k, err
	}
	if k > 0 && f.onAcked != nil {
		f.onAcked(k)
	}
	ws := f.newWriteStream(ctx, "readfrom", f.offset)
	n, err := ws.copyFrom(r) // remote failures come back as *fs.PathError, r's bare
	f.offset += n
	return k + n, err
}

// WriteTo writes the file from its offset to EOF into w, keeping many READs in flight
// and handing w the data in order. When w is an io.WriterAt and io.Seeker (an
// *os.File not opened with O_APPEND), each piece is written at its offset as it
// arrives, and w is left positioned after what was written; on error, n is what was
// written in one run from w's position, and pieces past it may have been written too.
// A server that reports the end of the file and sends data past it fails WriteTo (as
// every read) at that end: the bytes between are unknown.
func (f *File) WriteTo(w io.Writer) (int64, error) { return f.writeTo(f.life, "writeto", w) }

// writeTo is WriteTo while ctx lasts, its errors naming op, the caller's entry point.
func (f *File) writeTo(ctx context.Context, op string, w io.Writer) (int64, error) {
	if err := f.checkAccess(op, false); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropReadAhead()
	s := f.newReadStream(ctx, f.offset, -1, f.window(), !f.c.readOnce()) // no FSTAT on a read-once server
	s.op = op
	defer s.close()
	// Remote failures come back as *fs.PathError, w's bare.
	wa, base, direct := writerAt(w)
	var n int64
	var err error
	if direct {
		n, err = s.writeAt(wa, base)
	} else {
		n, err = s.writeTo(w)
	}
	f.offset += n
	if direct {
		if _, serr := w.(io.Seeker).Seek(base+n, io.SeekStart); err == nil {
			err = serr
		}
	}
	return n, err
}

// writerAt reports whether w can take pieces at their offsets, and where w is.
func writerAt(w io.Writer) (io.WriterAt, int64, bool) {
	wa, isAt := w.(io.WriterAt)
	sk, isSeeker := w.(io.Seeker)
	if !isAt || !isSeeker {
		return nil, 0, false
	}
	base, err := sk.Seek(0, io.SeekCurrent)
	if err != nil || base < 0 {
		return nil, 0, false
	}
	// An *os.File opened with O_APPEND refuses WriteAt: it gets the data in order.
	if _, err := wa.WriteAt(nil, base); err != nil {
		return nil, 0, false
	}
	return wa, base, true
}
