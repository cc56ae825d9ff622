package testserver

import (
	"path"
	"slices"
	"strings"
	"time"
)

// Quirks are the ways another server departs from OpenSSH's sftp-server, each one
// a behaviour that server's documentation or its users' reports describe (the
// personalities in personalities.go cite them). The zero value departs in nothing.
// A status field of zero means "as OpenSSH": the request is executed.
type Quirks struct {
	// Name says which server the quirks imitate.
	Name string

	// WholeListing: a READDIR answers with every remaining entry of the directory
	// in one NAME, however large.
	WholeListing bool
	// NoDotEntries: listings carry no "." and "..".
	NoDotEntries bool

	// ReadWriteOpen is the status of an OPEN asking for both READ and WRITE.
	ReadWriteOpen uint32
	// ReadWriteRead is the status of a READ on a handle opened with both READ and
	// WRITE (the OPEN itself succeeds).
	ReadWriteRead uint32
	// AppendOpen is the status of an OPEN with APPEND.
	AppendOpen uint32
	// ResumeOpen is the status of an OPEN for writing, without TRUNC, of an
	// existing regular file: what a client resuming an upload sends.
	ResumeOpen uint32
	// OverwriteTruncates: an OPEN for writing of an existing file replaces its
	// contents as if TRUNC were given (an object store writes whole objects).
	OverwriteTruncates bool
	// SecondWriter is the status of an OPEN for writing of a file that another
	// handle, on any session, has open for writing.
	SecondWriter uint32
	// OpenMissing is the status of an OPEN for reading of a missing file.
	OpenMissing uint32
	// HoleFailsClose: the CLOSE of a handle whose WRITEs left a gap, or went back
	// over bytes already written, fails with FAILURE and the file is not kept; a
	// WRITE more than 100 MiB past the contiguous end fails at once. (A server
	// that buffers out-of-order WRITEs in memory to send them on in order.)
	HoleFailsClose bool

	// SetstatRefused is the status of a SETSTAT or FSETSTAT carrying any attribute
	// in SetstatRefusedAttrs (ATTRS flag bits); nothing is changed.
	SetstatRefused      uint32
	SetstatRefusedAttrs uint32
	// SetstatIgnoredAttrs are attributes a SETSTAT or FSETSTAT answers OK to and
	// leaves unchanged.
	SetstatIgnoredAttrs uint32
	// TruncateRefused is the status of a SETSTAT (by path, not FSETSTAT) that
	// changes the size.
	TruncateRefused uint32

	// RefusedExtensions are advertised EXTENDED requests answered OP_UNSUPPORTED.
	RefusedExtensions []string

	// RenameRefused is the status of every RENAME and posix-rename.
	RenameRefused uint32
	// RenameExisting is the status of a plain RENAME onto an existing name
	// (OpenSSH's is FAILURE).
	RenameExisting uint32
	// RenameReplaces: a plain RENAME replaces an existing file, as posix-rename does.
	RenameReplaces bool
	// RenameFullDir is the status of a RENAME of a directory that is not empty.
	RenameFullDir uint32
	// RenameSelfRemoves: a RENAME of a file onto its own name removes the file and
	// answers NO_SUCH_FILE.
	RenameSelfRemoves bool

	// LinksRefused is the status of SYMLINK and READLINK.
	LinksRefused uint32

	// MissingIsDir: STAT and LSTAT of a missing name report an empty directory.
	MissingIsDir bool
	// RemoveMissingOK: REMOVE of a missing name answers OK.
	RemoveMissingOK bool
	// RmdirRemovesAll: RMDIR of a directory that is not empty removes it with
	// everything below it.
	RmdirRemovesAll bool
	// ImplicitDirs: an OPEN for writing makes the directories above the file that
	// are missing (an object store has no directories, only names).
	ImplicitDirs bool

	// FoldCase: a name matches an existing entry whatever the case of its
	// letters (the entry keeps the case it was created with).
	FoldCase bool
	// PathPrefix is put before every path REALPATH returns, and taken off any path
	// received that starts with it ("/C:" for Windows OpenSSH).
	PathPrefix string

	// WriteOnly: the account may only upload. OPEN for writing (without READ),
	// and WRITE, FSTAT, FSETSTAT and CLOSE on such a handle, are served; STAT,
	// LSTAT, OPENDIR, READLINK, OPEN for reading, RENAME, REMOVE, MKDIR, RMDIR and
	// SETSTAT get PERMISSION_DENIED.
	WriteOnly bool

	// ExtractCount, if > 0, is how many times each file may be opened for reading.
	// While it is open, STAT, LSTAT and FSTAT of it and another OPEN of it fail
	// with FAILURE ("not extractable"); once its count is used up and it is
	// closed, it is gone from the tree.
	ExtractCount int

	// MaxSessions, if > 0, is how many sessions may be open at once: Conn beyond
	// that returns a connection that is already closed.
	MaxSessions int
	// IdleTimeout, if > 0, ends a session that has sent no request for this long.
	IdleTimeout time.Duration
}

// holeAhead is how far past the contiguous end a HoleFailsClose server takes a
// WRITE (MinIO's ftpMaxWriteOffset).
const holeAhead = 100 << 20

// refusal is a STATUS a quirk answers with instead of executing a request.
type refusal struct {
	code uint32
	msg  string // "" for the code's usual text
}

// readdirBatch is the most names one NAME reply carries.
func (ss *session) readdirBatch() int {
	if q := ss.cfg.Quirks; q != nil && q.WholeListing {
		return int(^uint(0) >> 1)
	}
	return readdirBatch
}

// listsName says whether a listing includes name.
func (ss *session) listsName(name string) bool {
	q := ss.cfg.Quirks
	return q == nil || !q.NoDotEntries || (name != "." && name != "..")
}

// executeQuirky executes a request as the Quirks say: paths mapped, refusals
// answered, the rest executed with the quirks that change a result.
func (ss *session) executeQuirky(b []byte, r *request) []byte {
	q := ss.cfg.Quirks
	r.path = ss.mapPath(q, r.path)
	r.path2 = ss.mapPath(q, r.path2)
	if rf := ss.refuse(q, r); rf.code != 0 {
		return appendStatusMsg(b, r.id, rf.code, rf.msg)
	}
	switch r.typ {
	case TypeOpen:
		return ss.openQuirky(b, r)
	case TypeClose:
		return ss.closeQuirky(b, r)
	case TypeWrite:
		return ss.writeQuirky(b, r)
	case TypeLstat, TypeStat:
		return ss.statQuirky(b, r)
	case TypeSetstat, TypeFsetstat:
		return ss.setstatQuirky(b, r)
	case TypeRemove:
		return ss.removeQuirky(b, r)
	case TypeRmdir:
		return ss.rmdirQuirky(b, r)
	case TypeRealpath:
		return ss.realpathQuirky(b, r)
	case TypeRename:
		return ss.renameQuirky(b, r)
	}
	return ss.execute(b, r)
}

// mapPath applies PathPrefix and FoldCase to a path received.
func (ss *session) mapPath(q *Quirks, p []byte) []byte {
	if p == nil {
		return nil
	}
	s := string(p)
	if q.PathPrefix != "" && (s == q.PathPrefix || strings.HasPrefix(s, q.PathPrefix+"/")) {
		s = "/" + strings.TrimPrefix(strings.TrimPrefix(s, q.PathPrefix), "/")
	}
	if q.FoldCase {
		s = ss.foldCase(s)
	}
	return []byte(s)
}

// foldCase replaces each element of p that names nothing by the entry of its
// directory that differs from it only in case, if there is one.
func (ss *session) foldCase(p string) string {
	els := splitPath(p)
	dir := "/"
	for i, el := range els {
		if el == "." || el == ".." {
			dir = path.Join(dir, el)
			continue
		}
		if _, err := ss.fs.stat(path.Join(dir, el), false); err != nil {
			if match, ok := ss.caseMatch(dir, el); ok {
				els[i] = match
			}
		}
		dir = path.Join(dir, els[i])
	}
	if strings.HasPrefix(p, "/") || len(els) == 0 {
		return "/" + strings.Join(els, "/")
	}
	return strings.Join(els, "/")
}

func (ss *session) caseMatch(dir, name string) (string, bool) {
	d, err := ss.fs.opendir(dir)
	if err != nil {
		return "", false
	}
	defer d.close()
	for _, n := range d.names() {
		if strings.EqualFold(n, name) {
			return n, true
		}
	}
	return "", false
}

// refuse answers the requests a quirk refuses outright.
func (ss *session) refuse(q *Quirks, r *request) refusal {
	if q.WriteOnly {
		if rf := ss.refuseWriteOnly(r); rf.code != 0 {
			return rf
		}
	}
	switch r.typ {
	case TypeRename:
		return refusal{code: q.RenameRefused}
	case TypeExtended:
		return refuseExtended(q, string(r.ext))
	case TypeSymlink, TypeReadlink:
		return refusal{code: q.LinksRefused}
	case TypeRead:
		if h := ss.fileHandle(r.handle); h != nil && h.read && h.write {
			return refusal{code: q.ReadWriteRead}
		}
	case TypeFstat:
		if h := ss.fileHandle(r.handle); h != nil && h.q != nil && h.q.extracting != "" {
			return notExtractable(h.q.extracting)
		}
	}
	return refusal{}
}

// refuseExtended answers the EXTENDED requests the Quirks refuse.
func refuseExtended(q *Quirks, name string) refusal {
	switch {
	case slices.Contains(q.RefusedExtensions, name):
		return refusal{code: StatusOpUnsupported}
	case name == extPosixRename:
		return refusal{code: q.RenameRefused}
	}
	return refusal{}
}

// refuseWriteOnly is WriteOnly's rule.
func (ss *session) refuseWriteOnly(r *request) refusal {
	denied := refusal{code: StatusPermissionDenied}
	switch r.typ {
	case TypeStat, TypeLstat, TypeOpendir, TypeReadlink, TypeRename, TypeRemove, TypeMkdir, TypeRmdir, TypeSetstat:
		return denied
	case TypeOpen:
		if r.pflags&OpenRead != 0 || r.pflags&(OpenWrite|OpenAppend) == 0 {
			return denied
		}
	case TypeExtended:
		if string(r.ext) == extPosixRename || string(r.ext) == extHardlink {
			return denied
		}
	}
	return refusal{}
}

func notExtractable(name string) refusal {
	return refusal{code: StatusFailure, msg: "The message [" + path.Base(name) + "] is not extractable!"}
}

// appendStatusMsg is appendStatus with a message of the quirk's own.
func appendStatusMsg(b []byte, id, code uint32, msg string) []byte {
	if msg == "" {
		return appendStatus(b, id, code)
	}
	b = begin(b, TypeStatus, id)
	b = appendU32(b, code)
	b = appendString(b, msg)
	b = appendString(b, "")
	return finish(b)
}

// cleanPath is the name quirks keep state under: lexical, absolute.
func cleanPath(p []byte) string { return path.Clean("/" + string(p)) }
