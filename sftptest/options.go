package sftptest

import (
	"time"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Options configures a Server. The zero value serves an empty in-memory tree as
// OpenSSH 9.x's sftp-server would.
//
// The hooks (Shorten, Fail, Stall, Corrupt, Listing) run on a session's reader,
// one request at a time and in arrival order within a session, concurrently
// across sessions. They must not block.
type Options struct {
	// Personality is the server to behave as; the zero value is OpenSSH's.
	Personality Personality

	// Dir, if set, is the directory served ("/" is Dir) instead of an in-memory
	// tree. Every path is resolved inside it through an os.Root, so no name or
	// link a client sends reaches outside. The operating system then decides what
	// succeeds (permissions, links); REALPATH is lexical and statvfs reports
	// made-up figures.
	Dir string

	// Extensions advertised in VERSION (name -> data); nil keeps the
	// Personality's. Only advertised extensions are served; an empty non-nil map
	// advertises nothing.
	Extensions map[string]string

	// Limits, if not zero, replaces what limits@openssh.com reports (and READ
	// lengths are clamped to its MaxRead).
	Limits Limits

	// MaxPacket is the largest request length accepted; a bigger one drops the
	// session without a reply, as OpenSSH's sftp-server exits. Zero keeps 262144.
	MaxPacket int

	// ReadCap, if > 0, caps the data of each DATA reply (short reads).
	ReadCap int

	// Shorten, if set, returns how many bytes to send for a READ at offset when
	// asked bytes would be sent; the result is clamped to [0, asked].
	Shorten func(offset int64, asked int) int

	// Reorder, if > 1, releases replies in shuffled groups of up to Reorder (a
	// group goes out early whenever no request is waiting, so a client that waits
	// for each reply is never stalled). Seed varies the shuffle.
	Reorder int
	Seed    uint64

	// Latency, if > 0, releases each reply no earlier than Latency after its
	// request was read; requests keep being handled meanwhile.
	Latency time.Duration

	// DropAfterRequests, if > 0, drops a session on receiving its request number
	// N (1-based, INIT not counted), without handling or answering it.
	DropAfterRequests int

	// DropAfterBytes, if > 0, drops a session once this many reply bytes have been
	// written, cutting the reply that crosses the limit.
	DropAfterBytes int64

	// Fail, if set, is asked about every request after INIT; a non-zero result is
	// sent as the STATUS code (any value) instead of executing the request.
	Fail func(req Request) uint32

	// Stall, if it returns true for a request, withholds its reply (the request
	// is still executed) until ReleaseStalled.
	Stall func(req Request) bool

	// Corrupt, if set, sees every encoded reply (length field included) and
	// returns the packets to send instead: nil sends the reply unchanged, an empty
	// non-nil slice sends nothing. The reply must not be modified or kept.
	Corrupt func(req Request, reply []byte) [][]byte

	// Listing, if set, is asked at every OPENDIR; a non-nil Lister serves that
	// handle's READDIRs whatever the tree holds.
	Listing func(path string) Lister

	// MaxFileSize bounds file sizes (default 4 GiB).
	MaxFileSize int64

	// Window is the buffer of each direction of a Conn (default 2 MiB, an SSH
	// channel's window).
	Window int
}

// internal is o as the engine's Options, on top of the Personality's.
func (o Options) internal() testserver.Options {
	t := o.Personality.options()
	if o.Extensions != nil {
		t.Extensions = o.Extensions
	}
	if o.Limits != (Limits{}) {
		t.Limits = testserver.Limits(o.Limits)
	}
	if o.MaxPacket != 0 {
		t.MaxPacket = o.MaxPacket
	}
	if o.ReadCap != 0 {
		t.ReadCap = o.ReadCap
	}
	t.Shorten, t.Reorder, t.Seed, t.Latency = o.Shorten, o.Reorder, o.Seed, o.Latency
	t.DropAfterRequests, t.DropAfterBytes = o.DropAfterRequests, o.DropAfterBytes
	t.MaxFileSize, t.Window = o.MaxFileSize, o.Window
	if o.Fail != nil {
		t.Fail = func(r testserver.Request) uint32 { return o.Fail(Request(r)) }
	}
	if o.Stall != nil {
		t.Stall = func(r testserver.Request) bool { return o.Stall(Request(r)) }
	}
	if o.Corrupt != nil {
		t.Corrupt = func(r testserver.Request, b []byte) [][]byte { return o.Corrupt(Request(r), b) }
	}
	if o.Listing != nil {
		t.Listing = func(p string) testserver.Lister {
			l := o.Listing(p)
			if l == nil {
				return nil
			}
			return func(page int) []testserver.ListEntry { return internalEntries(l(page)) }
		}
	}
	return t
}

func internalEntries(es []ListEntry) []testserver.ListEntry {
	if es == nil {
		return nil
	}
	out := make([]testserver.ListEntry, len(es))
	for i, e := range es {
		out[i] = testserver.ListEntry{Name: e.Name, Mode: e.Mode, Size: e.Size}
		if e.Extended != nil {
			out[i].Extended = make([]testserver.ExtendedPair, len(e.Extended))
			for j, x := range e.Extended {
				out[i].Extended[j] = testserver.ExtendedPair(x)
			}
		}
	}
	return out
}

// Request describes a request to the Fail, Stall and Corrupt hooks. Path is the
// first path argument; Handle is set for handle requests; Offset and Len for READ
// (the length asked) and WRITE (the data length); ExtName for EXTENDED. Seq counts
// the session's requests from 1.
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

// Attrs is what Server.Stat and Lstat report: Mode is the whole st_mode, type
// bits included, as sent in ATTRS permissions.
type Attrs struct {
	Size         uint64
	UID, GID     uint32
	Mode         uint32
	Atime, Mtime uint32
}

// ListEntry is one name a synthetic listing serves (Mode is the whole st_mode).
type ListEntry struct {
	Name string
	Mode uint32
	Size uint64
	// Extended, when not nil, is sent as the entry's extended pairs.
	Extended []ExtendedPair
}

// ExtendedPair is one (type, data) pair of an ATTRS block's extended data.
type ExtendedPair struct{ Type, Data string }

// Lister serves the READDIRs of one synthetic directory handle: page counts them
// from 0; it returns the entries of that page, sent in one NAME as given, or nil to
// answer end of file.
type Lister func(page int) []ListEntry

// Packet types, for Request.Type.
const (
	TypeInit          = testserver.TypeInit
	TypeOpen          = testserver.TypeOpen
	TypeClose         = testserver.TypeClose
	TypeRead          = testserver.TypeRead
	TypeWrite         = testserver.TypeWrite
	TypeLstat         = testserver.TypeLstat
	TypeFstat         = testserver.TypeFstat
	TypeSetstat       = testserver.TypeSetstat
	TypeFsetstat      = testserver.TypeFsetstat
	TypeOpendir       = testserver.TypeOpendir
	TypeReaddir       = testserver.TypeReaddir
	TypeRemove        = testserver.TypeRemove
	TypeMkdir         = testserver.TypeMkdir
	TypeRmdir         = testserver.TypeRmdir
	TypeRealpath      = testserver.TypeRealpath
	TypeStat          = testserver.TypeStat
	TypeRename        = testserver.TypeRename
	TypeReadlink      = testserver.TypeReadlink
	TypeSymlink       = testserver.TypeSymlink
	TypeExtended      = testserver.TypeExtended
	TypeStatus        = testserver.TypeStatus
	TypeHandle        = testserver.TypeHandle
	TypeData          = testserver.TypeData
	TypeName          = testserver.TypeName
	TypeAttrs         = testserver.TypeAttrs
	TypeExtendedReply = testserver.TypeExtendedReply
)

// Status codes, for Fail's result.
const (
	StatusOK               = testserver.StatusOK
	StatusEOF              = testserver.StatusEOF
	StatusNoSuchFile       = testserver.StatusNoSuchFile
	StatusPermissionDenied = testserver.StatusPermissionDenied
	StatusFailure          = testserver.StatusFailure
	StatusBadMessage       = testserver.StatusBadMessage
	StatusOpUnsupported    = testserver.StatusOpUnsupported
)

// Corrupt helpers: each returns a func for Options.Corrupt that spoils only the
// first reply of the given packet type the server sends.

func wrapCorrupt(f func(testserver.Request, []byte) [][]byte) func(Request, []byte) [][]byte {
	return func(r Request, b []byte) [][]byte { return f(testserver.Request(r), b) }
}

// CorruptOversize sets the length field of the first reply of type typ to
// 0x7fffffff: a client must refuse it before allocating.
func CorruptOversize(typ uint8) func(Request, []byte) [][]byte {
	return wrapCorrupt(testserver.CorruptOversize(typ))
}

// CorruptTruncate drops the last byte of the first reply of type typ, fixing the
// length field: a valid frame whose last field is cut short.
func CorruptTruncate(typ uint8) func(Request, []byte) [][]byte {
	return wrapCorrupt(testserver.CorruptTruncate(typ))
}

// CorruptWrongID gives the first reply of type typ a request id no client issued;
// its request is never answered.
func CorruptWrongID(typ uint8) func(Request, []byte) [][]byte {
	return wrapCorrupt(testserver.CorruptWrongID(typ))
}

// CorruptRepeat sends the first reply of type typ twice.
func CorruptRepeat(typ uint8) func(Request, []byte) [][]byte {
	return wrapCorrupt(testserver.CorruptRepeat(typ))
}

// CorruptLongData makes the first DATA reply one byte longer than its READ asked.
func CorruptLongData() func(Request, []byte) [][]byte {
	return wrapCorrupt(testserver.CorruptLongData())
}

// StatusInstead answers the first request that would get a reply of type typ
// with a STATUS of code instead (the request was executed).
func StatusInstead(typ uint8, code uint32) func(Request, []byte) [][]byte {
	return wrapCorrupt(testserver.StatusInstead(typ, code))
}
