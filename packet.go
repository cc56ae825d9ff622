package sftp

import (
	"fmt"
	"io"
	"io/fs"
	"unicode/utf8"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Names and versions of the OpenSSH extensions this client uses. A server advertises
// each with a version string, which must match before the extension is used
// (OpenSSH PROTOCOL §4.2).
const (
	extPosixRename   = "posix-rename@openssh.com"
	extStatVFS       = "statvfs@openssh.com"
	extFstatVFS      = "fstatvfs@openssh.com"
	extHardlink      = "hardlink@openssh.com"
	extFsync         = "fsync@openssh.com"
	extLsetstat      = "lsetstat@openssh.com"
	extLimits        = "limits@openssh.com"
	extExpandPath    = "expand-path@openssh.com"
	extHomeDirectory = "home-directory"
	extSymlinkOrder  = "symlink-order@rjk.greenend.org.uk"
	extCopyData      = "copy-data"
	extUsersGroups   = "users-groups-by-id@openssh.com"
)

var extVersions = map[string]string{
	extPosixRename: "1", extStatVFS: "2", extFstatVFS: "2", extHardlink: "1", extFsync: "1",
	extLsetstat: "1", extLimits: "1", extExpandPath: "1", extHomeDirectory: "1",
	extCopyData: "1", extUsersGroups: "1",
}

// Request encoders. Each appends one whole packet to dst (which is usually empty with
// spare capacity) and patches its length, so the result goes out in a single Write.

func appendInit(dst []byte) []byte {
	start := len(dst)
	dst = sshfx.Begin(dst, sshfx.TypeInit, 0)
	dst = sshfx.AppendUint32(dst, sshfx.ProtocolVersion)
	return sshfx.Finish(dst, start)
}

// appendString1 encodes the requests whose body is one string: a path (STAT, LSTAT,
// OPENDIR, REMOVE, RMDIR, REALPATH, READLINK) or a handle (CLOSE, FSTAT, READDIR).
func appendString1(dst []byte, t sshfx.PacketType, id uint32, s string) []byte {
	start := len(dst)
	dst = sshfx.Begin(dst, t, id)
	dst = sshfx.AppendString(dst, s)
	return sshfx.Finish(dst, start)
}

// appendString2 encodes RENAME and SYMLINK. The caller decides the SYMLINK order.
func appendString2(dst []byte, t sshfx.PacketType, id uint32, a, b string) []byte {
	start := len(dst)
	dst = sshfx.Begin(dst, t, id)
	dst = sshfx.AppendString(dst, a)
	dst = sshfx.AppendString(dst, b)
	return sshfx.Finish(dst, start)
}

// appendStringAttrs encodes SETSTAT, FSETSTAT and MKDIR.
func appendStringAttrs(dst []byte, t sshfx.PacketType, id uint32, s string, a *sshfx.Attrs) []byte {
	start := len(dst)
	dst = sshfx.Begin(dst, t, id)
	dst = sshfx.AppendString(dst, s)
	dst = sshfx.AppendAttrs(dst, a)
	return sshfx.Finish(dst, start)
}

func appendOpen(dst []byte, id uint32, path string, pflags sshfx.OpenFlag, a *sshfx.Attrs) []byte {
	start := len(dst)
	dst = sshfx.Begin(dst, sshfx.TypeOpen, id)
	dst = sshfx.AppendString(dst, path)
	dst = sshfx.AppendUint32(dst, uint32(pflags))
	dst = sshfx.AppendAttrs(dst, a)
	return sshfx.Finish(dst, start)
}

func appendRead(dst []byte, id uint32, handle string, off uint64, n uint32) []byte {
	start := len(dst)
	dst = sshfx.Begin(dst, sshfx.TypeRead, id)
	dst = sshfx.AppendString(dst, handle)
	dst = sshfx.AppendUint64(dst, off)
	dst = sshfx.AppendUint32(dst, n)
	return sshfx.Finish(dst, start)
}

// appendWriteHeader encodes a WRITE up to and including the data length, with the packet
// length already counting n data bytes. The caller then appends (or reads) exactly n
// bytes behind it, which is how uploads avoid copying the payload twice.
func appendWriteHeader(dst []byte, id uint32, handle string, off uint64, n int) []byte {
	start := len(dst)
	dst = sshfx.Begin(dst, sshfx.TypeWrite, id)
	dst = sshfx.AppendString(dst, handle)
	dst = sshfx.AppendUint64(dst, off)
	dst = sshfx.AppendUint32(dst, uint32(n))
	sshfx.Finish(dst, start)
	// Finish measured the header only; add the payload that will follow.
	l := uint32(len(dst)-start-sshfx.HeaderLen) + uint32(n)
	dst[start], dst[start+1], dst[start+2], dst[start+3] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
	return dst
}

func appendWrite(dst []byte, id uint32, handle string, off uint64, data []byte) []byte {
	dst = appendWriteHeader(dst, id, handle, off, len(data))
	return append(dst, data...)
}

// appendExtended encodes an EXTENDED request whose arguments are all strings, which
// covers every extension this client sends except copy-data.
func appendExtended(dst []byte, id uint32, name string, args ...string) []byte {
	start := len(dst)
	dst = sshfx.Begin(dst, sshfx.TypeExtended, id)
	dst = sshfx.AppendString(dst, name)
	for _, a := range args {
		dst = sshfx.AppendString(dst, a)
	}
	return sshfx.Finish(dst, start)
}

func appendLsetstat(dst []byte, id uint32, path string, a *sshfx.Attrs) []byte {
	start := len(dst)
	dst = sshfx.Begin(dst, sshfx.TypeExtended, id)
	dst = sshfx.AppendString(dst, extLsetstat)
	dst = sshfx.AppendString(dst, path)
	dst = sshfx.AppendAttrs(dst, a)
	return sshfx.Finish(dst, start)
}

// Reply decoders. Each takes a reply whose type and id the reader already consumed and
// returns the expected payload, the server's STATUS as an error, or a *ProtocolError.
//
// The line between the two kinds of error is OpenSSH's:
//   - A STATUS, whatever its code (OK included), is a well-formed answer to one
//     request. Where the request wanted something else it fails that request and
//     nothing more: the channel and every other request carry on. rclone, for one,
//     answers a READ on a handle opened read-write with STATUS OK.
//   - Anything else that does not fit (a reply of another type, a body its fields do
//     not fill exactly, DATA longer than its READ asked for) is a *ProtocolError.
//     The caller hands it to conn.check, which closes the channel; the reader does
//     the same for broken framing (a bad length, an unknown or repeated id).

func protoErr(op string, format string, args ...any) *ProtocolError {
	return &ProtocolError{Op: op, Reason: fmt.Errorf(format, args...)}
}

// decodeStatus turns a STATUS body into nil (OK) or a *StatusError. io.EOF is returned
// bare for EOF so READ and READDIR callers can hand it straight to io contracts.
func decodeStatus(body []byte) error {
	var d sshfx.Decoder // on the stack: every WRITE's acknowledgement passes here
	d.Reset(body)
	code := d.Uint32()
	msg := d.Bytes()
	lang := d.Bytes()
	// Some old servers omit message and language; accept a bare code, as OpenSSH does.
	// Bytes after the language tag are ignored rather than refused: a STATUS is still
	// clear without them, and later protocol versions append fields there.
	if err := d.Err(); err != nil && len(body) != 4 {
		return &ProtocolError{Op: "STATUS", Reason: err}
	}
	switch sshfx.Status(code) {
	case sshfx.StatusOK:
		return nil
	case sshfx.StatusEOF:
		return io.EOF
	}
	return &StatusError{Code: StatusCode(code), Message: statusText(msg, maxStatusMessage), Lang: statusText(lang, maxStatusLang)}
}

// What a *StatusError keeps of the server's text. A message is for people, and the
// servers' are a line (OpenSSH's "No such file"); a STATUS can carry 256 KiB of it, and
// an error is kept by whoever collects them (a tree keeps a thousand), so each keeps
// the first 1 KiB and says how long the message was. A language tag is a few bytes.
const (
	maxStatusMessage = 1 << 10
	maxStatusLang    = 64
)

// statusText is the first max bytes of b, cut at a character's start, as a string:
// when b is longer, followed by " [... the first N of M bytes]", so the cut is seen.
func statusText(b []byte, max int) string {
	if len(b) <= max {
		return string(b)
	}
	n := max
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return fmt.Sprintf("%s [... the first %d of %d bytes]", b[:n], n, len(b))
}

// expectStatus is for requests whose only success reply is STATUS OK.
func expectStatus(op string, r *response) error {
	if r.typ != sshfx.TypeStatus {
		return protoErr(op, "got %v, want STATUS", r.typ)
	}
	err := decodeStatus(r.body)
	if err == io.EOF {
		// EOF is not an answer to a request that only succeeds or fails.
		return unexpectedStatus(StatusEOF, op)
	}
	return err
}

// status is the decoder (for conn.do, call.take) of a request whose only success
// reply is STATUS OK: expectStatus for op.
func status(op string) func(response) error {
	return func(r response) error { return expectStatus(op, &r) }
}

// otherReply is the error for a reply that is not of type want. A STATUS is the
// server's answer to this one request whatever its code, so it fails the request
// only: OK becomes a *StatusError (nothing was returned where data was due), as does
// EOF except where it is a normal answer (DATA for a READ, NAME for a READDIR: there it
// is io.EOF itself). Any other type is a *ProtocolError.
func otherReply(op string, r *response, want sshfx.PacketType) error {
	if r.typ != sshfx.TypeStatus {
		return protoErr(op, "got %v, want %v", r.typ, want)
	}
	err := decodeStatus(r.body)
	switch {
	case err == nil:
		return unexpectedStatus(StatusOK, op)
	case err == io.EOF && want != sshfx.TypeData && want != sshfx.TypeName:
		return unexpectedStatus(StatusEOF, op)
	}
	return err
}

// unexpectedStatus is the error for a well-formed STATUS whose code answers nothing
// op asked: OK where data was due, EOF where no end can be reached.
func unexpectedStatus(code StatusCode, op string) *StatusError {
	return &StatusError{Code: code, Message: "unexpected " + code.String() + " status in reply to " + op}
}

// packetSlack is the room a data buffer keeps beyond its payload for the header of
// a WRITE or DATA packet (type, id, handle up to 256 bytes, offset, lengths).
const packetSlack = 1024

// maxHandleLen is the longest handle the drafts allow a server to send.
const maxHandleLen = 256

// maxWriteHeader is the longest WRITE header: length, type, id, handle, offset and
// data length. Data buffers keep packetSlack bytes in front of the payload for it.
const maxWriteHeader = 4 + 1 + 4 + 4 + maxHandleLen + 8 + 4

// A compile-time check that packetSlack holds the longest header: the constant
// conversion fails to compile if it does not.
const _ = uint(packetSlack - maxWriteHeader)

// decodeHandle reads a HANDLE reply. A handle longer than the drafts allow is refused
// as a protocol error, which fails the channel (the caller's check): every later
// request would carry it, and buffers are sized for handles within the limit.
func decodeHandle(op string, r *response) (string, error) {
	if r.typ != sshfx.TypeHandle {
		return "", otherReply(op, r, sshfx.TypeHandle)
	}
	d := sshfx.NewDecoder(r.body)
	h := d.Bytes()
	if err := d.Done(); err != nil {
		return "", &ProtocolError{Op: op, Reason: err}
	}
	if len(h) > maxHandleLen {
		return "", protoErr(op, "handle of %d bytes, longer than the %d allowed", len(h), maxHandleLen)
	}
	return string(h), nil
}

// decodeData returns the payload of a DATA reply, aliasing r's buffer.
func decodeData(r *response) ([]byte, error) {
	if r.typ != sshfx.TypeData {
		return nil, otherReply("READ", r, sshfx.TypeData)
	}
	d := sshfx.NewDecoder(r.body)
	b := d.Bytes()
	if err := d.Done(); err != nil {
		return nil, &ProtocolError{Op: "READ", Reason: err}
	}
	return b, nil
}

func decodeAttrs(op string, r *response) (sshfx.Attrs, error) {
	if r.typ != sshfx.TypeAttrs {
		return sshfx.Attrs{}, otherReply(op, r, sshfx.TypeAttrs)
	}
	d := sshfx.NewDecoder(r.body)
	a := d.Attrs()
	if err := d.Done(); err != nil {
		return sshfx.Attrs{}, &ProtocolError{Op: op, Reason: err}
	}
	return a, nil
}

type nameEntry struct {
	name string
	// typeHint is the file type the longname's first character gives, for servers
	// that send permissions without type bits; the longname itself is not kept.
	typeHint fs.FileMode
	attrs    sshfx.Attrs
}

// decodeName reads a NAME reply. A STATUS EOF comes back as io.EOF (end of READDIR).
//
// What it allocates is bounded by the reply's length, which the reader capped before
// reading it: per entry, at least 12 bytes on the wire (three lengths or flags), the
// nameEntry (88 bytes), the name's bytes and the extended pairs (32 bytes for the 8 of
// an empty one, plus their bytes); the longname is read without being copied. A
// listing turns the page into kept entries and charges them to its call's memory
// account before it asks for the next: pageInflation bounds the two together.
func decodeName(op string, r *response) ([]nameEntry, error) {
	if r.typ != sshfx.TypeName {
		return nil, otherReply(op, r, sshfx.TypeName)
	}
	d := sshfx.NewDecoder(r.body)
	n := d.Uint32()
	// Every entry takes at least 12 bytes, so a count beyond that is a lie; checking
	// first keeps a hostile count from sizing the allocation.
	if d.Err() == nil && uint64(n)*12 > uint64(d.Len()) {
		return nil, protoErr(op, "%d names in %d bytes", n, d.Len())
	}
	out := make([]nameEntry, 0, n)
	for i := uint32(0); i < n && d.Err() == nil; i++ {
		var e nameEntry
		e.name = d.String()
		e.typeHint = longnameType(d.Bytes())
		d.AttrsInto(&e.attrs)
		out = append(out, e)
	}
	if err := d.Done(); err != nil {
		return nil, &ProtocolError{Op: op, Reason: err}
	}
	return out, nil
}

// longnameType is typeFromLongname without a copy of the longname: its first byte
// says the type, and a one-byte string costs no allocation.
func longnameType(l []byte) fs.FileMode {
	if len(l) == 0 {
		return 0
	}
	return typeFromLongname(string(l[:1]))
}

// decodeOneName is for REALPATH, READLINK and the path extensions, which answer NAME
// with exactly one entry.
func decodeOneName(op string, r *response) (string, error) {
	names, err := decodeName(op, r)
	if err == io.EOF {
		return "", unexpectedStatus(StatusEOF, op)
	}
	if err != nil {
		return "", err
	}
	if len(names) != 1 {
		return "", protoErr(op, "got %d names, want 1", len(names))
	}
	return names[0].name, nil
}

func decodeExtendedReply(op string, r *response) (*sshfx.Decoder, error) {
	if r.typ != sshfx.TypeExtendedReply {
		return nil, otherReply(op, r, sshfx.TypeExtendedReply)
	}
	return sshfx.NewDecoder(r.body), nil
}

// decodeVersion reads a VERSION body (everything after the type byte). Extension data
// may be binary (MINA, asyncssh), so it is kept as bytes in a string.
func decodeVersion(body []byte) (map[string]string, error) {
	d := sshfx.NewDecoder(body)
	v := d.Uint32()
	if err := d.Err(); err != nil {
		return nil, &ProtocolError{Op: "VERSION", Reason: err}
	}
	if v != sshfx.ProtocolVersion {
		return nil, protoErr("VERSION", "server speaks version %d; this client speaks only %d", v, sshfx.ProtocolVersion)
	}
	exts := make(map[string]string)
	for d.Len() > 0 {
		name := d.String()
		data := d.String()
		if d.Err() != nil {
			break
		}
		exts[name] = data
	}
	if err := d.Done(); err != nil {
		return nil, &ProtocolError{Op: "VERSION", Reason: err}
	}
	return exts, nil
}

// readPacketLen is the length of a READ of handle: length, type, id, handle, offset,
// length.
func readPacketLen(handle string) int { return 4 + 1 + 4 + 4 + len(handle) + 8 + 4 }
