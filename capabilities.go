package sftp

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// What a Client knows of its server: what the server said (its extensions, its
// limits) and what it was seen to do while the Client worked. Servers in front of
// object stores and managed-file-transfer products refuse requests a POSIX server
// takes (docs/servers.md); each refusal that changes what the Client does later is
// kept here, with the first STATUS that showed it, so that Capabilities can say why a
// feature is off, and the CLI's -v can print it.

// Refusal is a kind of request a server was seen to refuse.
type Refusal uint8

const (
	// RefusedReadWriteOpen: an OPEN for reading and writing (AWS Transfer, Azure
	// Blob). Uploads do not stripe there (each lane proves itself by reading back),
	// and Resume of an upload starts over (the part is checked by reading it).
	RefusedReadWriteOpen Refusal = iota + 1
	// RefusedReadBack: a READ on a handle opened for reading and writing (SFTPGo on
	// a cloud backend). As RefusedReadWriteOpen.
	RefusedReadBack
	// RefusedSetstat: a SETSTAT or FSETSTAT of mode or times (Preserve). With
	// PreserveWherePossible, later files are not asked for it.
	RefusedSetstat
	// RefusedRenameReplace: a RENAME onto an existing file (Azure Blob, Hetzner).
	// Put replaced the file by a REMOVE, then the RENAME (see Put).
	RefusedRenameReplace
	// RefusedSecondOpen: an OPEN of a file the Client already had open, for another
	// lane of a transfer (IBM Sterling, object stores): that transfer used one lane.
	RefusedSecondOpen
	// RefusedFstat: an FSTAT of a file open for reading (IBM Sterling). Later
	// downloads send none and use one lane (see WithReadOnce).
	RefusedFstat
	// RefusedLargeWrite: a WRITE larger than 32768 bytes (WithLargeWrites). Later
	// WRITEs are 32768 bytes.
	RefusedLargeWrite
	// RefusedRename: every RENAME (MinIO: OP_UNSUPPORTED). Later uploads by part
	// file fail before they send their data; InPlace does without.
	RefusedRename
)

var refusalNames = [...]string{
	RefusedReadWriteOpen: "OPEN for reading and writing",
	RefusedReadBack:      "READ on a handle opened for reading and writing",
	RefusedSetstat:       "SETSTAT of mode or times",
	RefusedRenameReplace: "RENAME onto an existing file",
	RefusedSecondOpen:    "a second OPEN of an open file",
	RefusedFstat:         "FSTAT of a file open for reading",
	RefusedLargeWrite:    "WRITE larger than 32768 bytes",
	RefusedRename:        "RENAME",
}

func (r Refusal) String() string {
	if int(r) < len(refusalNames) && refusalNames[r] != "" {
		return refusalNames[r]
	}
	return fmt.Sprintf("Refusal(%d)", uint8(r))
}

// Capabilities is what a Client knows of its server: what it advertised and what was
// negotiated, what it was seen to refuse so far, and which features are off, and
// why. It grows as the Client works: a refusal is known once a request met it.
type Capabilities struct {
	Extensions map[string]string // as the server's VERSION advertised them
	Limits     Limits            // as negotiated (MaxWrite: WithLargeWrites' size once a WRITE of it was taken)
	// ReadCap is the largest DATA the server returned when asked for more (a READ
	// cap below what it advertised), 0 while none came short.
	ReadCap int
	// PhantomDirs: the server reports a directory at a name that does not exist (an
	// object store keyed on name prefixes, as MinIO): RMDIR is sent there only when
	// no neighbour's name begins with the directory's (see Remove), and MkdirAll
	// sends MKDIR whatever STAT says. Known once a Remove, RemoveAll or MkdirAll
	// asked (one LSTAT of a random name).
	PhantomDirs bool
	// Refused holds each kind of request the server was seen to refuse, with the
	// first refusal.
	Refused map[Refusal]error
	// UploadStriping, DownloadStriping and Resume are "" while the feature is on for
	// the next transfer, else why it is off.
	UploadStriping   string
	DownloadStriping string
	Resume           string
}

// Capabilities reports what the Client knows of its server now. It sends nothing.
func (c *Client) Capabilities() Capabilities {
	cp := Capabilities{
		Extensions:  c.Extensions(),
		Limits:      c.limits,
		ReadCap:     int(c.readCap.Load()),
		PhantomDirs: c.facts.phantom.Load() == phantomYes,
		Refused:     c.facts.refusals(),
	}
	cp.Limits.MaxWrite = c.maxWrite()
	cp.UploadStriping = c.whyNoStriping(true)
	cp.DownloadStriping = c.whyNoStriping(false)
	cp.Resume = c.whyNoResume()
	return cp
}

// whyNoStriping says why a transfer one way would not stripe, or "".
func (c *Client) whyNoStriping(upload bool) string {
	switch {
	case c.opts.sequential:
		return "WithSequential: one channel per file, in offset order"
	case !upload && c.readOnce():
		return c.whyReadOnce()
	case c.opts.channels <= 1:
		return "one channel (WithChannels(1))"
	case c.source == nil:
		return "one channel (NewClientPipe without WithPipeOpener)"
	case upload && c.facts.refused(RefusedReadWriteOpen):
		return "the server refuses to open a file for reading and writing, which a lane needs to prove it writes the same file"
	case upload && c.facts.refused(RefusedReadBack):
		return "the server refuses READs on a file opened for reading and writing, which a lane needs to prove it writes the same file"
	case time.Duration(c.main.minRTT.Load()) < c.opts.stripeMinRTT:
		return fmt.Sprintf("the round trip (%v) is under %v: one channel carries all the link can", time.Duration(c.main.minRTT.Load()).Round(time.Microsecond), c.opts.stripeMinRTT)
	}
	return ""
}

// whyNoResume says why Resume of an upload would start over, or "".
func (c *Client) whyNoResume() string {
	switch {
	case c.facts.refused(RefusedReadWriteOpen):
		return "the server refuses to open a file for reading and writing, which the checks of a part file need: Put with Resume starts over"
	case c.facts.refused(RefusedReadBack):
		return "the server refuses READs on a file opened for reading and writing, which the checks of a part file need: Put with Resume starts over"
	}
	return ""
}

// String is Capabilities as the CLI's -v prints it: one fact a line.
func (cp Capabilities) String() string {
	var b strings.Builder
	l := cp.Limits
	fmt.Fprintf(&b, "limits: packet %d, read %d, write %d, open handles %s\n", l.MaxPacket, l.MaxRead, l.MaxWrite, handles(l.MaxOpenHandles))
	if cp.ReadCap > 0 {
		fmt.Fprintf(&b, "read cap learned: %d\n", cp.ReadCap)
	}
	names := slices.Sorted(maps.Keys(cp.Extensions))
	if len(names) == 0 {
		names = []string{"none"}
	}
	fmt.Fprintf(&b, "extensions: %s\n", strings.Join(names, ", "))
	if cp.PhantomDirs {
		b.WriteString("reports directories at names that do not exist (an object store)\n")
	}
	for _, r := range slices.Sorted(maps.Keys(cp.Refused)) {
		fmt.Fprintf(&b, "refused: %v: %v\n", r, cp.Refused[r])
	}
	for _, f := range [...]struct{ name, why string }{{"upload striping", cp.UploadStriping}, {"download striping", cp.DownloadStriping}, {"resume of uploads", cp.Resume}} {
		if f.why != "" {
			fmt.Fprintf(&b, "%s off: %s\n", f.name, f.why)
		}
	}
	return b.String()
}

func handles(n int) string {
	if n == 0 {
		return "not limited"
	}
	return fmt.Sprint(n)
}

// serverFacts is what a Client learned of its server while it worked. Safe for
// concurrent use; the flags read on every transfer are atomic.
type serverFacts struct {
	seen    atomic.Uint32 // 1 << Refusal for each kind seen
	phantom atomic.Int32  // phantomDirs' answer: phantomUnknown, phantomNo, phantomYes

	mu    sync.Mutex
	first map[Refusal]error // guarded by mu

	obs *observer // the Client's: a refusal seen first is logged (observe.go)
}

// refuse records that the server refused a request of kind r with err (kept only
// the first time).
func (s *serverFacts) refuse(r Refusal, err error) {
	if s.refused(r) {
		return
	}
	s.mu.Lock()
	if s.first == nil {
		s.first = make(map[Refusal]error)
	}
	_, known := s.first[r]
	if !known {
		s.first[r] = err
	}
	s.seen.Or(1 << r)
	s.mu.Unlock()
	if !known && s.obs != nil {
		s.obs.refused(r, err)
	}
}

// refused reports whether a refusal of kind r was seen.
func (s *serverFacts) refused(r Refusal) bool { return s.seen.Load()&(1<<r) != 0 }

// noteSiblingRefused records why a lane's OPEN of a file the transfer has open was
// refused with err: for an upload, an OPEN for reading and writing; for a download,
// a second OPEN.
func (c *Client) noteSiblingRefused(upload bool, err error) {
	var se *StatusError
	switch {
	case !errors.As(err, &se):
	case upload:
		c.facts.refuse(RefusedReadWriteOpen, se)
	default:
		c.facts.refuse(RefusedSecondOpen, se)
	}
}

// noteReadBackRefused records err, the reply to a READ through a lane of an upload
// (opened for reading and writing), when it is a STATUS other than EOF: the server
// refuses to read back through such a handle.
func (c *Client) noteReadBackRefused(err error) {
	var se *StatusError
	if errors.As(err, &se) && se.Code != StatusEOF {
		c.facts.refuse(RefusedReadBack, se)
	}
}

func (s *serverFacts) refusals() map[Refusal]error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.first)
}
