// Package sshfx holds the SFTP v3 wire primitives (draft-ietf-secsh-filexfer-02 as
// OpenSSH speaks it): typed constants, append-style encoders, a cursor decoder with a
// sticky error, and the ATTRS codec. It does no I/O and starts no goroutines, so every
// piece of it can be tested and fuzzed on byte slices alone.
package sshfx

import "strconv"

// PacketType is the byte after the length of every SFTP packet.
type PacketType uint8

// Packet types of SFTP version 3.
const (
	TypeInit          PacketType = 1
	TypeVersion       PacketType = 2
	TypeOpen          PacketType = 3
	TypeClose         PacketType = 4
	TypeRead          PacketType = 5
	TypeWrite         PacketType = 6
	TypeLstat         PacketType = 7
	TypeFstat         PacketType = 8
	TypeSetstat       PacketType = 9
	TypeFsetstat      PacketType = 10
	TypeOpendir       PacketType = 11
	TypeReaddir       PacketType = 12
	TypeRemove        PacketType = 13
	TypeMkdir         PacketType = 14
	TypeRmdir         PacketType = 15
	TypeRealpath      PacketType = 16
	TypeStat          PacketType = 17
	TypeRename        PacketType = 18
	TypeReadlink      PacketType = 19
	TypeSymlink       PacketType = 20
	TypeStatus        PacketType = 101
	TypeHandle        PacketType = 102
	TypeData          PacketType = 103
	TypeName          PacketType = 104
	TypeAttrs         PacketType = 105
	TypeExtended      PacketType = 200
	TypeExtendedReply PacketType = 201
)

var packetNames = map[PacketType]string{
	TypeInit: "INIT", TypeVersion: "VERSION", TypeOpen: "OPEN", TypeClose: "CLOSE",
	TypeRead: "READ", TypeWrite: "WRITE", TypeLstat: "LSTAT", TypeFstat: "FSTAT",
	TypeSetstat: "SETSTAT", TypeFsetstat: "FSETSTAT", TypeOpendir: "OPENDIR",
	TypeReaddir: "READDIR", TypeRemove: "REMOVE", TypeMkdir: "MKDIR", TypeRmdir: "RMDIR",
	TypeRealpath: "REALPATH", TypeStat: "STAT", TypeRename: "RENAME",
	TypeReadlink: "READLINK", TypeSymlink: "SYMLINK", TypeStatus: "STATUS",
	TypeHandle: "HANDLE", TypeData: "DATA", TypeName: "NAME", TypeAttrs: "ATTRS",
	TypeExtended: "EXTENDED", TypeExtendedReply: "EXTENDED_REPLY",
}

func (t PacketType) String() string {
	if s, ok := packetNames[t]; ok {
		return s
	}
	return "PacketType(" + strconv.Itoa(int(t)) + ")"
}

// Status is the code of a STATUS reply.
type Status uint32

// Status codes defined by version 3. Servers that also speak later versions map their
// richer codes down to Failure for a v3 session, and anything above OpUnsupported is to
// be treated as Failure.
const (
	StatusOK               Status = 0
	StatusEOF              Status = 1
	StatusNoSuchFile       Status = 2
	StatusPermissionDenied Status = 3
	StatusFailure          Status = 4
	StatusBadMessage       Status = 5
	StatusNoConnection     Status = 6
	StatusConnectionLost   Status = 7
	StatusOpUnsupported    Status = 8
)

var statusNames = [...]string{
	"OK", "EOF", "NO_SUCH_FILE", "PERMISSION_DENIED", "FAILURE", "BAD_MESSAGE",
	"NO_CONNECTION", "CONNECTION_LOST", "OP_UNSUPPORTED",
}

func (s Status) String() string {
	// Compared as Status, not int: on 32-bit targets int(s) of a code >= 1<<31 (any
	// server may send one) is negative and would index out of range.
	if s < Status(len(statusNames)) {
		return statusNames[s]
	}
	return "Status(" + strconv.FormatUint(uint64(s), 10) + ")"
}

// OpenFlag is the pflags field of OPEN.
type OpenFlag uint32

// OPEN flags. The draft requires Creat alongside Trunc and Excl; OpenSSH does not
// enforce that but other servers do, so callers always send it.
const (
	FlagRead   OpenFlag = 0x01
	FlagWrite  OpenFlag = 0x02
	FlagAppend OpenFlag = 0x04
	FlagCreat  OpenFlag = 0x08
	FlagTrunc  OpenFlag = 0x10
	FlagExcl   OpenFlag = 0x20
)

// AttrFlag says which optional fields an ATTRS block carries.
type AttrFlag uint32

// ATTRS flags of version 3. Any other bit makes the block unparseable, because the
// fields it would announce have no defined layout.
const (
	AttrSize        AttrFlag = 0x00000001
	AttrUIDGID      AttrFlag = 0x00000002
	AttrPermissions AttrFlag = 0x00000004
	AttrACModTime   AttrFlag = 0x00000008
	AttrExtended    AttrFlag = 0x80000000

	attrKnown = AttrSize | AttrUIDGID | AttrPermissions | AttrACModTime | AttrExtended
)

// ProtocolVersion is the only version this package speaks.
const ProtocolVersion = 3

// HeaderLen is the uint32 length that prefixes every packet.
const HeaderLen = 4
