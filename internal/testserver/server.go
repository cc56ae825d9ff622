// Package testserver is an in-process SFTP version 3 server for tests and
// benchmarks of the client. It exists for the faults a real server won't
// produce on demand: short reads, reordered, late, missing, duplicated or
// corrupt replies, and connections that die at a chosen moment.
//
// It deliberately shares no code with the client (it has its own packet
// decoding and encoding) so that a bug in one can't be hidden by the same
// bug in the other. It uses the standard library only.
//
// The server behaves like OpenSSH's sftp-server where the two could differ:
// status codes follow errno_to_portable, READ is clamped to max-read-length,
// plain RENAME never overwrites, SYMLINK takes the target first, READDIR
// sends at most 100 names including "." and "..", and ATTRS carry the
// file-type bits in permissions. The filesystem is an in-memory tree rooted
// at "/", which is also the start directory: relative paths resolve against
// it. New nodes belong to uid/gid 1000, created modes are masked with 022,
// and only the owner permission bits are enforced (read/write on OPEN,
// write on a directory to change its entries, read on OPENDIR).
//
// Where it departs from OpenSSH on purpose: an unknown packet type gets
// STATUS OP_UNSUPPORTED (OpenSSH sends nothing), and an EXTENDED request is
// served only if its name is advertised in VERSION, so Options.Extensions
// can hide an extension completely.
package testserver

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Server. The zero value is a well-behaved server that
// looks like OpenSSH 9.x.
//
// The hooks (Shorten, Fail, Stall, Corrupt) run on a session's reader
// goroutine, one request at a time and in arrival order within a session,
// but concurrently across sessions. They must not block.
type Options struct {
	// Extensions advertised in VERSION (name -> data). nil means the default
	// set: posix-rename@openssh.com "1", statvfs@openssh.com "2",
	// fstatvfs@openssh.com "2", hardlink@openssh.com "1", fsync@openssh.com
	// "1", limits@openssh.com "1". Only advertised extensions are served;
	// others, and advertised names this server doesn't implement, get
	// STATUS OP_UNSUPPORTED. An empty non-nil map advertises nothing.
	Extensions map[string]string

	// Limits are the values limits@openssh.com reports. The zero value means
	// OpenSSH's 262144/261120/261120/0; any other value is sent verbatim.
	// READ lengths are clamped to MaxRead when it is non-zero, as OpenSSH
	// does; a non-zero MaxOpenHandles is enforced per session (OPEN and
	// OPENDIR then fail with FAILURE, like running out of descriptors).
	Limits Limits

	// MaxPacket is the largest value of an incoming packet's length field
	// (the bytes after the field itself) the server accepts; a bigger one
	// drops the connection without a reply, as OpenSSH's sftp-server exits.
	// Zero means Limits.MaxPacket when that is set, else 262144 exactly like
	// OpenSSH, so a client that oversteps fails here as it would there.
	MaxPacket int

	// ReadCap, if > 0, caps the data in each DATA reply (short reads, like
	// rclone's 32768), after the MaxRead clamp.
	ReadCap int

	// Shorten, if set, returns how many bytes to send for a READ at offset
	// when asked bytes would otherwise be sent (asked is after MaxRead and
	// ReadCap, before clipping at end of file). The result is clamped to
	// [0, asked]; 0 sends an empty DATA unless the READ is at or past EOF,
	// which still gets STATUS EOF.
	Shorten func(offset int64, asked int) int

	// Reorder, if > 1, holds replies and releases them in shuffled order in
	// groups of up to Reorder. A group is released early whenever the
	// server has no complete request waiting to be read, so a client that
	// waits for a reply before sending more is never stalled. The shuffle is
	// seeded from Reorder, Seed and the session number, so runs are
	// repeatable for the same arrival pattern.
	Reorder int

	// Seed varies the Reorder shuffle and the HoldWrites draws: tests that draw
	// many servers from one random seed give each its own order.
	Seed uint64

	// HoldWrites, if > 0, makes each session carry out its WRITEs late, as a
	// server whose sessions are separate processes, each with requests read and
	// not yet carried out: a session keeps up to HoldWrites WRITEs neither
	// carried out nor answered, how many at each moment drawn from Seed. Nothing
	// orders one session's writes against another's, so across sessions WRITEs
	// land in another order than they were sent (and, with Reorder, are answered
	// in yet another). Within a session they are carried out in order, all of
	// them before any other request of the session, and all of them whenever no
	// request is waiting, so a client that waits for replies is never stalled.
	// When a session ends (its connection closed or killed, KillSessions, Close)
	// the WRITEs it holds are dropped, never carried out nor answered: what a
	// server process killed with requests read and not carried out leaves, holes
	// below data that other sessions wrote.
	HoldWrites int

	// Latency, if > 0, releases each reply no earlier than Latency after its
	// request was read. Replies wait in a timestamped queue in the writer;
	// requests keep being read and handled meanwhile, so latency doesn't
	// limit throughput of a pipelining client.
	Latency time.Duration

	// DropAfterRequests, if > 0, closes the connection upon receiving
	// request number N of a session (1-based, INIT not counted) without
	// handling or answering it. The request direction closes at once (the
	// client's later Writes fail); replies already produced for earlier
	// requests are still delivered (after their Latency), then the client
	// reads io.EOF.
	DropAfterRequests int

	// DropAfterBytes, if > 0, closes the connection in both directions once
	// this many reply bytes (VERSION included) have been written, cutting
	// the reply that crosses the limit.
	DropAfterBytes int64

	// Fail, if set, is asked about every request after INIT; a non-zero
	// result is sent as the STATUS code (any value, even > 8) instead of
	// executing the request.
	Fail func(req Request) uint32

	// Stall, if it returns true for a request, withholds its reply. The
	// request is still executed (a stalled WRITE writes), like a server whose
	// answer is lost or very late. Withheld replies are sent by
	// Server.ReleaseStalled and discarded by Close; Server.WaitStalled lets
	// a test wait for one to happen. INIT can be stalled too.
	Stall func(req Request) bool

	// Corrupt, if set, sees every encoded reply (the whole packet, length
	// field included; VERSION too, as Request{Type: TypeInit}) and returns
	// the raw packets to send instead: nil sends the reply unchanged, an
	// empty non-nil slice sends nothing. reply must not be modified (copy
	// it to change it) nor kept after the call, but the returned packets
	// may alias it: it stays intact until they have been sent.
	// Corrupt runs before Stall's decision takes effect, so a withheld reply
	// is released in its corrupted form.
	Corrupt func(req Request, reply []byte) [][]byte

	// Window is the buffer size of each direction of the in-memory
	// connection (default 2 MiB, an x/crypto/ssh channel window). A writer
	// blocks when its direction holds this many unread bytes.
	Window int

	// Listing, if set, is asked at every OPENDIR with the path as the client sent it.
	// A non-nil Lister makes the OPENDIR succeed, whatever the file system holds, and
	// serves that handle's READDIRs (see Lister): for directories of millions of
	// entries without storing them, and for listings a real server never sends
	// (names with "/", no end). nil serves the file system as usual.
	Listing func(path string) Lister

	// MaxFileSize bounds file sizes (default 4 GiB) so a WRITE or SETSTAT
	// at an absurd offset fails with FAILURE instead of exhausting memory.
	MaxFileSize int64

	// Root, if set, is served instead of an in-memory tree: "/" is the root's
	// directory, and every path is resolved inside it (os.Root), so no name or
	// link a client sends reaches outside. The operating system decides what
	// succeeds there (permissions, links, errors), and the caller keeps the Root:
	// closing it is the caller's, after the Server's Close.
	Root *os.Root

	// Quirks, if set, makes the server behave as another server does where it
	// departs from OpenSSH's (see Quirks and the personalities in
	// personalities.go).
	Quirks *Quirks

	// IgnoreSetTimes (in-memory tree only) makes SETSTAT and FSETSTAT answer OK to access and
	// modification times and leave them as they are (the rest of the request
	// is carried out), as SFTPGo does with setstat_mode 1 ("requests for
	// changing permissions, owner/group and access/modification times are
	// silently ignored", docs/full-configuration.md) for times, and AWS
	// Transfer with SetStatOption ENABLE_NO_OP. A WRITE still sets the
	// modification time.
	IgnoreSetTimes bool
}

// Request describes a request to the Fail, Stall and Corrupt hooks. Path is
// the first path argument (OPEN's filename, RENAME's and hardlink's old
// path, SYMLINK's target, statvfs's path); Handle is set for handle
// requests; Offset and Len for READ (Len is the length asked for) and WRITE
// (Len is the data length); ExtName for EXTENDED. Seq counts the session's
// requests from 1 (INIT is 0). Fields of a request that failed to parse
// hold what could be read.
type Request struct {
	Type    uint8
	ID      uint32
	Path    string
	Handle  string
	Offset  uint64
	Len     uint32
	ExtName string
	Seq     int
}

// Limits are the four values of a limits@openssh.com reply.
type Limits struct {
	MaxPacket, MaxRead, MaxWrite, MaxOpenHandles uint64
}

// Attrs is what the test helpers Stat and Lstat report. Mode is the full
// st_mode, type bits included, as sent in ATTRS permissions.
type Attrs struct {
	Size         uint64
	UID, GID     uint32
	Mode         uint32
	Atime, Mtime uint32
}

// ErrClosed is returned by WaitStalled once the server is closed.
var ErrClosed = errors.New("testserver: server closed")

// Extension names the server implements.
const (
	extPosixRename = "posix-rename@openssh.com"
	extStatvfs     = "statvfs@openssh.com"
	extFstatvfs    = "fstatvfs@openssh.com"
	extHardlink    = "hardlink@openssh.com"
	extFsync       = "fsync@openssh.com"
	extLimits      = "limits@openssh.com"
)

// config is Options with defaults filled in, fixed at New.
type config struct {
	Options
	extNames  []string // advertised names, sorted so VERSION is repeatable
	maxRead   int
	maxPacket int
}

// Server is an in-memory SFTP v3 server. Its methods are safe for concurrent
// use. Each Conn is an independent session over the shared filesystem.
type Server struct {
	cfg config
	fs  backend

	wg sync.WaitGroup // every session goroutine

	mu       sync.Mutex // guards the fields below
	sessions map[*session]struct{}
	closed   bool
	nsess    uint64
	stalled  int           // replies withheld across sessions
	stallCh  chan struct{} // closed and replaced whenever stalled changes or the server closes

	quirks *quirkState

	handleSeq   atomic.Uint64
	openHandles atomic.Int64
	requests    [256]atomic.Int64

	statsMu     sync.Mutex // guards inflight, maxInflight and each session's outstanding/ended
	inflight    int
	maxInflight int
}

// New returns a server with an empty filesystem (just "/").
func New(opts Options) *Server {
	cfg := config{Options: opts}
	if cfg.Extensions == nil {
		cfg.Extensions = map[string]string{
			extPosixRename: "1",
			extStatvfs:     "2",
			extFstatvfs:    "2",
			extHardlink:    "1",
			extFsync:       "1",
			extLimits:      "1",
		}
	} else {
		cfg.Extensions = maps.Clone(cfg.Extensions)
	}
	cfg.extNames = slices.Sorted(maps.Keys(cfg.Extensions))
	if cfg.Limits == (Limits{}) {
		cfg.Limits = Limits{MaxPacket: 262144, MaxRead: 261120, MaxWrite: 261120}
	}
	cfg.maxRead = int(min(cfg.Limits.MaxRead, 1<<31-1))
	cfg.maxPacket = cfg.MaxPacket
	if cfg.maxPacket <= 0 {
		cfg.maxPacket = 262144
		if cfg.Limits.MaxPacket != 0 {
			cfg.maxPacket = int(min(cfg.Limits.MaxPacket, 1<<31-1))
		}
	}
	if cfg.Window <= 0 {
		cfg.Window = 2 << 20
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = 4 << 30
	}
	var tree backend
	if cfg.Root != nil {
		tree = newDirFS(cfg.Root, cfg.MaxFileSize)
	} else {
		mem := newFS(cfg.MaxFileSize)
		mem.ignoreTimes = cfg.IgnoreSetTimes
		tree = mem
	}
	return &Server{
		cfg:      cfg,
		fs:       tree,
		quirks:   newQuirkState(),
		sessions: make(map[*session]struct{}),
		stallCh:  make(chan struct{}),
	}
}

// Conn starts a session and returns the client's ends of its connection:
// the client reads replies from r and writes requests to w. Closing w ends
// the session once the replies already due are delivered (then r gives
// io.EOF); closing r makes the server's next reply fail, which ends it too.
// Whenever the server ends a session itself (w closed, a protocol error,
// DropAfterRequests, DropAfterBytes) r reports io.EOF only after the
// session's handles are closed and its stats settled, so a test can assert
// on OpenHandles or MaxInflight right after seeing io.EOF. After Close,
// Conn returns ends that are already closed.
func (s *Server) Conn() (r io.ReadCloser, w io.WriteCloser) {
	in, out := newPipe(s.cfg.Window), newPipe(s.cfg.Window)
	s.mu.Lock()
	if s.closed || s.sessionsFull() {
		s.mu.Unlock()
		in.closeRead()
		out.closeWrite()
		return clientReader{out}, clientWriter{in}
	}
	s.nsess++
	ss := newSession(s, in, out, s.nsess)
	s.sessions[ss] = struct{}{}
	s.wg.Add(2)
	s.mu.Unlock()
	go ss.readLoop()
	go ss.writeLoop()
	return clientReader{out}, clientWriter{in}
}

// Close ends every session (clients read io.EOF, their writes fail),
// discards withheld replies and waits for all goroutines to exit. It is
// idempotent and always returns nil.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stallCh)
		s.stallCh = make(chan struct{})
	}
	list := slices.Collect(maps.Keys(s.sessions))
	s.mu.Unlock()
	for _, ss := range list {
		ss.kill()
	}
	s.wg.Wait()
	return nil
}

// sessionsFull applies Quirks.MaxSessions. Callers hold s.mu.
func (s *Server) sessionsFull() bool {
	q := s.cfg.Quirks
	return q != nil && q.MaxSessions > 0 && len(s.sessions) >= q.MaxSessions
}

func (s *Server) liveSessions() []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.sessions))
}

func (s *Server) removeSession(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, ss)
}

// KillSessions ends every session at once, as connections that die: replies not
// yet sent are dropped, and so are the WRITEs sessions hold (HoldWrites). The server
// stays open for new sessions. It returns once the sessions it ended have stopped
// changing the file system.
func (s *Server) KillSessions() {
	list := s.liveSessions()
	for _, ss := range list {
		ss.kill()
	}
	for _, ss := range list {
		<-ss.readerDone
	}
}

// OpenHandles is the number of handles currently open across sessions. A
// session's handles are closed when it ends.
func (s *Server) OpenHandles() int { return int(s.openHandles.Load()) }

// Requests is how many packets of type t the server has read, across
// sessions (INIT included, malformed and dropped requests included).
func (s *Server) Requests(t uint8) int { return int(s.requests[t].Load()) }

// MaxInflight is the largest number of requests that were outstanding at one
// moment, summed over sessions. A request is outstanding from the moment
// the client finishes writing it into the connection until the client has
// read the last byte of its reply; INIT is not counted. It is measured in
// the pipe, not by the server's progress, so it is exact from the client's
// point of view: a client that waits for each reply before sending the next
// request scores exactly 1, and one that writes request k+1 before it has
// read reply k scores at least 2, whatever the scheduling. Replies that are
// withheld or dropped (Stall, Corrupt returning nothing, a dropped
// connection) leave their request outstanding until the session ends.
func (s *Server) MaxInflight() int {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return s.maxInflight
}

// ResetStats zeroes MaxInflight (to the current in-flight count) and the
// Requests counters, so a test can measure one phase, say a transfer after
// its setup.
func (s *Server) ResetStats() {
	s.statsMu.Lock()
	s.maxInflight = s.inflight
	s.statsMu.Unlock()
	for i := range s.requests {
		s.requests[i].Store(0)
	}
}

func (s *Server) stallDelta(d int) {
	if d == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled += d
	close(s.stallCh)
	s.stallCh = make(chan struct{})
}

// Stalled is the number of replies currently withheld by Options.Stall.
func (s *Server) Stalled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stalled
}

// WaitStalled blocks until at least n replies are withheld, ctx is done
// (its error is returned) or the server is closed (ErrClosed). It is the
// way to know a stalled request has reached the server without sleeping.
func (s *Server) WaitStalled(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		stalled, closed, ch := s.stalled, s.closed, s.stallCh
		s.mu.Unlock()
		switch {
		case stalled >= n:
			return nil
		case closed:
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ReleaseStalled sends every reply withheld so far (in the order they were
// withheld, after replies already queued) and returns how many. Requests
// stalled later are withheld again. This is how a test produces a late
// reply, e.g. one that arrives after the client gave up waiting.
func (s *Server) ReleaseStalled() int { return s.ReleaseStalledWhere(nil) }

// ReleaseStalledWhere is ReleaseStalled for the withheld replies whose request match
// accepts; the others stay withheld. Replies released by successive calls go out in
// the order of the calls, so a test can choose the order in which a client sees a
// set of replies: stall them all, then release one group after another.
func (s *Server) ReleaseStalledWhere(match func(Request) bool) int {
	total := 0
	for _, ss := range s.liveSessions() {
		total += ss.releaseStalled(match)
	}
	s.stallDelta(-total)
	return total
}

// WriteFile creates or replaces the contents of a regular file, like
// os.WriteFile, except that perm is applied as given (no umask) when the
// file is created. Symlinks are followed; the parent must exist.
func (s *Server) WriteFile(name string, data []byte, perm fs.FileMode) error {
	return pathErr("writefile", name, s.fs.writeFile(name, data, unixPerm(perm)))
}

// ReadFile returns a copy of a file's contents (symlinks followed).
func (s *Server) ReadFile(name string) ([]byte, error) {
	b, err := s.fs.readFile(name)
	return b, pathErr("readfile", name, err)
}

// Mkdir creates a directory with exactly perm (no umask).
func (s *Server) Mkdir(name string, perm fs.FileMode) error {
	return pathErr("mkdir", name, s.fs.mkdir(name, unixPerm(perm)))
}

// MkdirAll creates a directory and any missing parents with exactly perm.
func (s *Server) MkdirAll(name string, perm fs.FileMode) error {
	els := splitPath(name)
	for i := range els {
		p := "/" + strings.Join(els[:i+1], "/")
		err := s.fs.mkdir(p, unixPerm(perm))
		if err != nil && err != eEXIST {
			return pathErr("mkdir", p, err)
		}
	}
	if a, err := s.fs.stat(name, true); err != nil || a.perm&sIFMT != sIFDIR {
		return pathErr("mkdir", name, eNOTDIR)
	}
	return nil
}

// Symlink creates linkname pointing at target (os.Symlink's order).
func (s *Server) Symlink(target, linkname string) error {
	return pathErr("symlink", linkname, s.fs.symlink(target, linkname))
}

// Chmod sets the permission bits (fs.FileMode permission and setuid,
// setgid, sticky bits) of name, following symlinks.
func (s *Server) Chmod(name string, mode fs.FileMode) error {
	a := attrs{flags: AttrPermissions, perm: unixPerm(mode)}
	return pathErr("chmod", name, s.fs.setstat(name, a, true))
}

// Stat reports name's attributes, following symlinks.
func (s *Server) Stat(name string) (Attrs, error) {
	a, err := s.fs.stat(name, true)
	return exportAttrs(a), pathErr("stat", name, err)
}

// Lstat reports name's attributes without following a final symlink.
func (s *Server) Lstat(name string) (Attrs, error) {
	a, err := s.fs.stat(name, false)
	return exportAttrs(a), pathErr("lstat", name, err)
}

func exportAttrs(a attrs) Attrs {
	return Attrs{Size: a.size, UID: a.uid, GID: a.gid, Mode: a.perm, Atime: a.atime, Mtime: a.mtime}
}

func unixPerm(m fs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}

func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}
