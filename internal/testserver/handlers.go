package testserver

import (
	"encoding/binary"
	"strconv"
	"time"
)

// readdirBatch is the most names one NAME reply carries, as in OpenSSH.
const readdirBatch = 100

// request is a parsed request. Its byte slices alias the session's input
// buffer, so it lives only while the request is handled; the session reuses
// one request value to keep the READ/WRITE path allocation-free.
type request struct {
	typ     uint8
	id      uint32
	seq     int
	arrival time.Time
	path    []byte // first path argument
	path2   []byte // second path argument (RENAME, SYMLINK, posix-rename, hardlink)
	handle  []byte
	offset  uint64
	length  uint32 // READ: bytes asked; WRITE: len(data)
	data    []byte
	pflags  uint32
	attrs   attrs
	ext     []byte
	bad     bool // the body ended before its fields did

	failAsked bool
	failCode  uint32
}

// handle is an open file or directory. Handles belong to one session, like
// file descriptors to one sftp-server process.
type handle struct {
	f           file    // an open file (nil for directory handles)
	d           dirList // an open directory (nil for files and synthetic listings)
	dir         bool
	read, write bool
	append      bool
	pos         int
	lister      Lister       // serves READDIR instead of d; see Options.Listing
	q           *quirkHandle // what Quirks remember of it; nil without Quirks
}

// release closes what the handle holds in the backend.
func (h *handle) release() {
	switch {
	case h.f != nil:
		_ = h.f.close()
	case h.d != nil:
		h.d.close()
	}
}

func (r *request) public() Request {
	return Request{
		Type:    r.typ,
		ID:      r.id,
		Path:    string(r.path),
		Handle:  string(r.handle),
		Offset:  r.offset,
		Len:     r.length,
		ExtName: string(r.ext),
		Seq:     r.seq,
	}
}

// parse reads the fields of r.typ from d. Trailing bytes are ignored, as
// OpenSSH does; a short body sets r.bad.
func (r *request) parse(d *decoder) {
	switch r.typ {
	case TypeOpen:
		r.path = d.bytes()
		r.pflags = d.u32()
		r.attrs = d.attrs()
	case TypeClose, TypeFstat, TypeReaddir:
		r.handle = d.bytes()
	case TypeRead:
		r.handle = d.bytes()
		r.offset = d.u64()
		r.length = d.u32()
	case TypeWrite:
		r.handle = d.bytes()
		r.offset = d.u64()
		r.data = d.bytes()
		r.length = uint32(len(r.data))
	case TypeLstat, TypeStat, TypeOpendir, TypeRemove, TypeRmdir, TypeRealpath, TypeReadlink:
		r.path = d.bytes()
	case TypeSetstat, TypeMkdir:
		r.path = d.bytes()
		r.attrs = d.attrs()
	case TypeFsetstat:
		r.handle = d.bytes()
		r.attrs = d.attrs()
	case TypeRename, TypeSymlink:
		r.path = d.bytes()
		r.path2 = d.bytes()
	case TypeExtended:
		r.ext = d.bytes()
		switch string(r.ext) {
		case extPosixRename, extHardlink:
			r.path = d.bytes()
			r.path2 = d.bytes()
		case extStatvfs:
			r.path = d.bytes()
		case extFstatvfs, extFsync:
			r.handle = d.bytes()
		}
	}
	r.bad = !d.ok()
}

// version answers INIT. VERSION has no request id; extension pairs are
// sorted by name so the packet is the same on every run.
func (ss *session) version(arrival time.Time) {
	r := &ss.req
	*r = request{typ: TypeInit, arrival: arrival}
	b := append(ss.getBuf(), 0, 0, 0, 0, TypeVersion)
	b = appendU32(b, 3)
	for _, name := range ss.cfg.extNames {
		b = appendString(b, name)
		b = appendString(b, ss.cfg.Extensions[name])
	}
	ss.emit(r, finish(b))
}

// serve handles one request after INIT. It returns false to drop the
// connection: a second INIT (fatal in OpenSSH) or a body too short to hold
// an id, which leaves nothing to reply to.
func (ss *session) serve(typ uint8, body []byte) bool {
	if typ == TypeInit || len(body) < 4 {
		return false
	}
	r := &ss.req
	*r = request{typ: typ, id: binary.BigEndian.Uint32(body), seq: ss.seq}
	if ss.cfg.Latency > 0 {
		r.arrival = time.Now()
	}
	d := decoder{b: body[4:]}
	r.parse(&d)

	if ss.cfg.HoldWrites > 0 && ss.hold(r) {
		return true
	}
	b := ss.getBuf()
	switch {
	case ss.cfg.Fail != nil && ss.failCode(r) != 0:
		b = appendStatus(b, r.id, ss.failCode(r))
	case r.bad:
		b = appendStatus(b, r.id, StatusBadMessage)
	case ss.cfg.Quirks != nil:
		b = ss.executeQuirky(b, r)
	default:
		b = ss.execute(b, r)
	}
	ss.emit(r, b)
	return true
}

// failCode asks Options.Fail once per request (it may count calls).
func (ss *session) failCode(r *request) uint32 {
	if !r.failAsked {
		r.failAsked = true
		r.failCode = ss.cfg.Fail(r.public())
	}
	return r.failCode
}

func (ss *session) execute(b []byte, r *request) []byte {
	id := r.id
	switch r.typ {
	case TypeOpen:
		return ss.open(b, r)
	case TypeClose:
		h := ss.handles[string(r.handle)]
		if h == nil {
			return appendStatus(b, id, eNOENT.status())
		}
		delete(ss.handles, string(r.handle))
		ss.srv.openHandles.Add(-1)
		h.release()
		return appendStatus(b, id, StatusOK)
	case TypeRead:
		return ss.read(b, r)
	case TypeWrite:
		h := ss.fileHandle(r.handle)
		switch {
		case h == nil:
			return appendStatus(b, id, StatusFailure)
		case !h.write:
			return appendStatus(b, id, eBADF.status())
		case h.f.isDir():
			return appendStatus(b, id, eISDIR.status())
		}
		err := h.f.writeAt(r.offset, r.data, h.append)
		return appendStatus(b, id, statusOf(err))
	case TypeLstat, TypeStat:
		a, err := ss.fs.stat(string(r.path), r.typ == TypeStat)
		return appendAttrsReply(b, id, a, err)
	case TypeFstat:
		h := ss.fileHandle(r.handle)
		if h == nil {
			return appendStatus(b, id, StatusFailure)
		}
		a, err := h.f.attrs()
		return appendAttrsReply(b, id, a, err)
	case TypeSetstat:
		return appendStatus(b, id, statusOf(ss.fs.setstat(string(r.path), r.attrs, true)))
	case TypeFsetstat:
		h := ss.fileHandle(r.handle)
		if h == nil {
			return appendStatus(b, id, StatusFailure)
		}
		return appendStatus(b, id, statusOf(h.f.setattrs(r.attrs, h.write)))
	case TypeOpendir:
		if ss.handlesFull() {
			return appendStatus(b, id, eMFILE.status())
		}
		if l := ss.listerFor(string(r.path)); l != nil {
			return ss.appendHandle(b, id, &handle{dir: true, lister: l})
		}
		d, err := ss.fs.opendir(string(r.path))
		if err != nil {
			return appendStatus(b, id, statusOf(err))
		}
		return ss.appendHandle(b, id, &handle{d: d, dir: true})
	case TypeReaddir:
		return ss.readdir(b, r)
	case TypeRemove:
		return appendStatus(b, id, statusOf(ss.fs.remove(string(r.path))))
	case TypeMkdir:
		perm := uint32(0o777)
		if r.attrs.flags&AttrPermissions != 0 {
			perm = r.attrs.perm & 0o7777
		}
		return appendStatus(b, id, statusOf(ss.fs.mkdir(string(r.path), perm&^umask)))
	case TypeRmdir:
		return appendStatus(b, id, statusOf(ss.fs.rmdir(string(r.path))))
	case TypeRealpath:
		p, err := ss.fs.realpath(string(r.path))
		return appendNameReply(b, id, p, err)
	case TypeRename:
		return appendStatus(b, id, statusOf(ss.fs.rename(string(r.path), string(r.path2), false)))
	case TypeReadlink:
		p, err := ss.fs.readlink(string(r.path))
		return appendNameReply(b, id, p, err)
	case TypeSymlink:
		// OpenSSH order: target first, link path second.
		return appendStatus(b, id, statusOf(ss.fs.symlink(string(r.path), string(r.path2))))
	case TypeExtended:
		return ss.extended(b, r)
	}
	return appendStatus(b, id, StatusOpUnsupported)
}

func (ss *session) open(b []byte, r *request) []byte {
	if ss.handlesFull() {
		return appendStatus(b, r.id, eMFILE.status())
	}
	perm := uint32(0o666)
	if r.attrs.flags&AttrPermissions != 0 {
		perm = r.attrs.perm & 0o7777
	}
	f, err := ss.fs.open(string(r.path), r.pflags, perm&^umask)
	if err != nil {
		return appendStatus(b, r.id, statusOf(err))
	}
	write := r.pflags&OpenWrite != 0
	h := &handle{
		f:      f,
		read:   r.pflags&OpenRead != 0 || !write,
		write:  write,
		append: r.pflags&OpenAppend != 0,
	}
	return ss.appendHandle(b, r.id, h)
}

// handlesFull applies Limits.MaxOpenHandles per session.
func (ss *session) handlesFull() bool {
	lim := ss.cfg.Limits.MaxOpenHandles
	return lim > 0 && uint64(len(ss.handles)) >= lim
}

// appendHandle registers h under a fresh handle string, unique across the
// server's sessions, and encodes the HANDLE reply.
func (ss *session) appendHandle(b []byte, id uint32, h *handle) []byte {
	key := "h" + strconv.FormatUint(ss.srv.handleSeq.Add(1), 10)
	ss.handles[key] = h
	ss.lastHandle = h
	ss.srv.openHandles.Add(1)
	b = begin(b, TypeHandle, id)
	b = appendString(b, key)
	return finish(b)
}

// fileHandle finds a file handle; nil for unknown handles and directory
// handles, which OpenSSH answers with FAILURE in file operations.
func (ss *session) fileHandle(key []byte) *handle {
	h := ss.handles[string(key)]
	if h == nil || h.dir {
		return nil
	}
	return h
}

// read serves READ: clamp to MaxRead, ReadCap and Shorten, then append the
// file's bytes straight into the reply buffer.
func (ss *session) read(b []byte, r *request) []byte {
	h := ss.fileHandle(r.handle)
	switch {
	case h == nil:
		return appendStatus(b, r.id, StatusFailure)
	case !h.read:
		return appendStatus(b, r.id, eBADF.status())
	case h.f.isDir():
		return appendStatus(b, r.id, eISDIR.status())
	}
	if r.length == 0 {
		// OpenSSH answers a zero-length READ with an empty DATA, even at EOF.
		b = begin(b, TypeData, r.id)
		return finish(appendU32(b, 0))
	}
	want := ss.readLength(r)
	b = begin(b, TypeData, r.id)
	at := len(b)
	b = appendU32(b, 0)
	b, eof, err := h.f.appendRead(b, r.offset, want)
	switch {
	case err != nil:
		return appendStatus(b, r.id, statusOf(err))
	case eof:
		return appendStatus(b, r.id, StatusEOF)
	}
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return finish(b)
}

// readLength is how many bytes a READ gets: what it asked, clamped by MaxRead,
// ReadCap and Shorten.
func (ss *session) readLength(r *request) uint64 {
	want := uint64(r.length)
	if ss.cfg.maxRead > 0 {
		want = min(want, uint64(ss.cfg.maxRead))
	}
	if ss.cfg.ReadCap > 0 {
		want = min(want, uint64(ss.cfg.ReadCap))
	}
	if ss.cfg.Shorten != nil {
		got := ss.cfg.Shorten(int64(r.offset), int(want))
		want = uint64(max(0, min(got, int(want))))
	}
	return want
}

func (ss *session) readdir(b []byte, r *request) []byte {
	h := ss.handles[string(r.handle)]
	if h == nil || !h.dir {
		return appendStatus(b, r.id, StatusFailure)
	}
	if h.lister != nil {
		return ss.readdirListed(b, r, h)
	}
	b = begin(b, TypeName, r.id)
	countAt := len(b)
	b = appendU32(b, 0)
	count := 0
	names := h.d.names()
	for h.pos < len(names) && count < ss.readdirBatch() {
		name := names[h.pos]
		h.pos++
		if !ss.listsName(name) {
			continue
		}
		a, long, ok := h.d.entry(name)
		if !ok {
			continue
		}
		b = appendString(b, name)
		b = appendString(b, long)
		b = appendAttrs(b, a)
		count++
	}
	if count == 0 {
		return appendStatus(b, r.id, StatusEOF)
	}
	binary.BigEndian.PutUint32(b[countAt:], uint32(count))
	return finish(b)
}

func (ss *session) extended(b []byte, r *request) []byte {
	name := string(r.ext)
	if _, ok := ss.cfg.Extensions[name]; !ok {
		return appendStatus(b, r.id, StatusOpUnsupported)
	}
	switch name {
	case extPosixRename:
		return appendStatus(b, r.id, statusOf(ss.fs.rename(string(r.path), string(r.path2), true)))
	case extHardlink:
		return appendStatus(b, r.id, statusOf(ss.fs.link(string(r.path), string(r.path2))))
	case extStatvfs, extFstatvfs:
		if name == extStatvfs {
			if _, err := ss.fs.stat(string(r.path), true); err != nil {
				return appendStatus(b, r.id, statusOf(err))
			}
		} else if ss.fileHandle(r.handle) == nil {
			return appendStatus(b, r.id, StatusFailure)
		}
		b = begin(b, TypeExtendedReply, r.id)
		for _, v := range ss.fs.statvfs() {
			b = appendU64(b, v)
		}
		return finish(b)
	case extFsync:
		if ss.fileHandle(r.handle) == nil {
			return appendStatus(b, r.id, StatusFailure)
		}
		return appendStatus(b, r.id, StatusOK)
	case extLimits:
		l := ss.cfg.Limits
		b = begin(b, TypeExtendedReply, r.id)
		b = appendU64(b, l.MaxPacket)
		b = appendU64(b, l.MaxRead)
		b = appendU64(b, l.MaxWrite)
		b = appendU64(b, l.MaxOpenHandles)
		return finish(b)
	}
	return appendStatus(b, r.id, StatusOpUnsupported)
}

func appendAttrsReply(b []byte, id uint32, a attrs, err error) []byte {
	if err != nil {
		return appendStatus(b, id, statusOf(err))
	}
	b = begin(b, TypeAttrs, id)
	return finish(appendAttrs(b, a))
}

// appendNameReply answers REALPATH and READLINK like OpenSSH: one name whose
// longname repeats it, with empty attributes.
func appendNameReply(b []byte, id uint32, name string, err error) []byte {
	if err != nil {
		return appendStatus(b, id, statusOf(err))
	}
	b = begin(b, TypeName, id)
	b = appendU32(b, 1)
	b = appendString(b, name)
	b = appendString(b, name)
	b = appendU32(b, 0)
	return finish(b)
}
