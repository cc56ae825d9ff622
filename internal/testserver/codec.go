package testserver

import "encoding/binary"

// Packet types (draft-ietf-secsh-filexfer-02 §3). Untyped so tests can use
// them as uint8 or compare them with raw bytes without conversions.
const (
	TypeInit     = 1
	TypeVersion  = 2
	TypeOpen     = 3
	TypeClose    = 4
	TypeRead     = 5
	TypeWrite    = 6
	TypeLstat    = 7
	TypeFstat    = 8
	TypeSetstat  = 9
	TypeFsetstat = 10
	TypeOpendir  = 11
	TypeReaddir  = 12
	TypeRemove   = 13
	TypeMkdir    = 14
	TypeRmdir    = 15
	TypeRealpath = 16
	TypeStat     = 17
	TypeRename   = 18
	TypeReadlink = 19
	TypeSymlink  = 20

	TypeStatus        = 101
	TypeHandle        = 102
	TypeData          = 103
	TypeName          = 104
	TypeAttrs         = 105
	TypeExtended      = 200
	TypeExtendedReply = 201
)

// Status codes of a v3 STATUS reply.
const (
	StatusOK               = 0
	StatusEOF              = 1
	StatusNoSuchFile       = 2
	StatusPermissionDenied = 3
	StatusFailure          = 4
	StatusBadMessage       = 5
	StatusNoConnection     = 6
	StatusConnectionLost   = 7
	StatusOpUnsupported    = 8
)

// OPEN pflags.
const (
	OpenRead   = 0x01
	OpenWrite  = 0x02
	OpenAppend = 0x04
	OpenCreat  = 0x08
	OpenTrunc  = 0x10
	OpenExcl   = 0x20
)

// ATTRS flag bits. Any other bit makes an ATTRS unparseable in v3.
const (
	AttrSize        = 0x00000001
	AttrUIDGID      = 0x00000002
	AttrPermissions = 0x00000004
	AttrACModTime   = 0x00000008
	AttrExtended    = 0x80000000

	attrKnown = AttrSize | AttrUIDGID | AttrPermissions | AttrACModTime | AttrExtended
)

// statusMessage returns the fixed English text OpenSSH's sftp-server sends
// with each code; clients must not depend on it, but tests may print it.
func statusMessage(code uint32) string {
	switch code {
	case StatusOK:
		return "Success"
	case StatusEOF:
		return "End of file"
	case StatusNoSuchFile:
		return "No such file"
	case StatusPermissionDenied:
		return "Permission denied"
	case StatusFailure:
		return "Failure"
	case StatusBadMessage:
		return "Bad message"
	case StatusNoConnection:
		return "No connection"
	case StatusConnectionLost:
		return "Connection lost"
	case StatusOpUnsupported:
		return "Operation unsupported"
	}
	return "Unknown error"
}

// attrs is the decoded form of an ATTRS block. Only fields whose bit is set
// in flags are meaningful; extended pairs are parsed (to stay in sync with
// the stream) and dropped, since this server has no use for them.
type attrs struct {
	flags        uint32
	size         uint64
	uid, gid     uint32
	perm         uint32
	atime, mtime uint32
}

// decoder reads fields from a request body. Errors are sticky: after the
// first short read every accessor returns a zero value and ok() reports
// false, so request parsers read every field and check once at the end
// instead of after each field, and never index out of range.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) ok() bool { return !d.bad }

func (d *decoder) take(n int) []byte {
	if d.bad || n < 0 || len(d.b) < n {
		d.bad = true
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u32() uint32 {
	p := d.take(4)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint32(p)
}

func (d *decoder) u64() uint64 {
	p := d.take(8)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint64(p)
}

// bytes returns a string field without copying; the slice aliases the
// session's input buffer and is only valid while the request is handled.
func (d *decoder) bytes() []byte {
	n := d.u32()
	if d.bad {
		return nil
	}
	if uint64(n) > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	return d.take(int(n))
}

// attrs decodes an ATTRS block. Unknown flag bits are an error: in v3 they
// would mean fields of unknown size follow, so the rest can't be parsed.
func (d *decoder) attrs() attrs {
	var a attrs
	a.flags = d.u32()
	if a.flags&^attrKnown != 0 {
		d.bad = true
		return attrs{}
	}
	if a.flags&AttrSize != 0 {
		a.size = d.u64()
	}
	if a.flags&AttrUIDGID != 0 {
		a.uid = d.u32()
		a.gid = d.u32()
	}
	if a.flags&AttrPermissions != 0 {
		a.perm = d.u32()
	}
	if a.flags&AttrACModTime != 0 {
		a.atime = d.u32()
		a.mtime = d.u32()
	}
	if a.flags&AttrExtended != 0 {
		n := d.u32()
		// Each pair needs at least 8 bytes, so a count larger than that
		// can't be honest; checking first avoids looping 4 billion times.
		if uint64(n)*8 > uint64(len(d.b)) {
			d.bad = true
			return attrs{}
		}
		for i := uint32(0); i < n && !d.bad; i++ {
			d.bytes()
			d.bytes()
		}
	}
	return a
}

// Encoders append to dst and return the extended slice. A reply is built by
// begin (length placeholder + type + id), field appends, then finish, which
// patches the length, so each reply is one contiguous buffer written once.

func appendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func appendString(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

// begin starts a reply at the beginning of b (replies always own their
// buffer, so the length field is at offset 0).
func begin(b []byte, typ uint8, id uint32) []byte {
	b = append(b[:0], 0, 0, 0, 0, typ)
	return appendU32(b, id)
}

func finish(b []byte) []byte {
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func appendAttrs(b []byte, a attrs) []byte {
	b = appendU32(b, a.flags)
	if a.flags&AttrSize != 0 {
		b = appendU64(b, a.size)
	}
	if a.flags&AttrUIDGID != 0 {
		b = appendU32(b, a.uid)
		b = appendU32(b, a.gid)
	}
	if a.flags&AttrPermissions != 0 {
		b = appendU32(b, a.perm)
	}
	if a.flags&AttrACModTime != 0 {
		b = appendU32(b, a.atime)
		b = appendU32(b, a.mtime)
	}
	if a.flags&AttrExtended != 0 {
		b = appendU32(b, 0)
	}
	return b
}

func appendStatus(b []byte, id, code uint32) []byte {
	b = begin(b, TypeStatus, id)
	b = appendU32(b, code)
	b = appendString(b, statusMessage(code))
	b = appendString(b, "")
	return finish(b)
}
