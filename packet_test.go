package sftp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Golden packets, written out by hand from the draft's layouts and OpenSSH's PROTOCOL
// (summarised in docs/protocol.md): uint32 length, type byte, uint32 id (not for INIT),
// then the fields.
// Request id 7 and handle "h1" throughout.
var requestGoldens = []struct {
	name string
	enc  func(dst []byte) []byte
	want string
}{
	{"INIT", appendInit,
		"\x00\x00\x00\x05" + "\x01" + "\x00\x00\x00\x03"},
	{"OPEN", func(dst []byte) []byte {
		return appendOpen(dst, 7, "/f", sshfx.FlagWrite|sshfx.FlagCreat|sshfx.FlagTrunc,
			&sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: 0o644})
	}, "\x00\x00\x00\x17" + "\x03" + "\x00\x00\x00\x07" +
		"\x00\x00\x00\x02/f" +
		"\x00\x00\x00\x1a" + // WRITE|CREAT|TRUNC
		"\x00\x00\x00\x04" + "\x00\x00\x01\xa4"}, // ATTRS: PERMISSIONS 0644
	{"OPEN no attrs", func(dst []byte) []byte {
		return appendOpen(dst, 7, "/f", sshfx.FlagRead, &sshfx.Attrs{})
	}, "\x00\x00\x00\x13" + "\x03" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02/f" +
		"\x00\x00\x00\x01" + "\x00\x00\x00\x00"},
	{"CLOSE", func(dst []byte) []byte { return appendString1(dst, sshfx.TypeClose, 7, "h1") },
		"\x00\x00\x00\x0b" + "\x04" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02h1"},
	{"READ", func(dst []byte) []byte { return appendRead(dst, 7, "h1", 0x0102030405060708, 32768) },
		"\x00\x00\x00\x17" + "\x05" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02h1" +
			"\x01\x02\x03\x04\x05\x06\x07\x08" + "\x00\x00\x80\x00"},
	{"WRITE", func(dst []byte) []byte { return appendWrite(dst, 7, "h1", 0x1000, []byte("data")) },
		"\x00\x00\x00\x1b" + "\x06" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02h1" +
			"\x00\x00\x00\x00\x00\x00\x10\x00" + "\x00\x00\x00\x04data"},
	{"WRITE header and payload", func(dst []byte) []byte {
		return append(appendWriteHeader(dst, 7, "h1", 0x1000, 4), "data"...)
	}, "\x00\x00\x00\x1b" + "\x06" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02h1" +
		"\x00\x00\x00\x00\x00\x00\x10\x00" + "\x00\x00\x00\x04data"},
	{"WRITE empty", func(dst []byte) []byte { return appendWrite(dst, 7, "h1", 0, nil) },
		"\x00\x00\x00\x17" + "\x06" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02h1" +
			"\x00\x00\x00\x00\x00\x00\x00\x00" + "\x00\x00\x00\x00"},
	{"LSTAT", func(dst []byte) []byte { return appendString1(dst, sshfx.TypeLstat, 7, "/a/b") },
		"\x00\x00\x00\x0d" + "\x07" + "\x00\x00\x00\x07" + "\x00\x00\x00\x04/a/b"},
	{"FSTAT", func(dst []byte) []byte { return appendString1(dst, sshfx.TypeFstat, 7, "h1") },
		"\x00\x00\x00\x0b" + "\x08" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02h1"},
	{"SETSTAT", func(dst []byte) []byte {
		return appendStringAttrs(dst, sshfx.TypeSetstat, 7, "/a/b", &sshfx.Attrs{Flags: sshfx.AttrSize, Size: 5})
	}, "\x00\x00\x00\x19" + "\x09" + "\x00\x00\x00\x07" + "\x00\x00\x00\x04/a/b" +
		"\x00\x00\x00\x01" + "\x00\x00\x00\x00\x00\x00\x00\x05"},
	{"FSETSTAT", func(dst []byte) []byte {
		return appendStringAttrs(dst, sshfx.TypeFsetstat, 7, "h1",
			&sshfx.Attrs{Flags: sshfx.AttrACModTime, ATime: 1, MTime: 2})
	}, "\x00\x00\x00\x17" + "\x0a" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02h1" +
		"\x00\x00\x00\x08" + "\x00\x00\x00\x01" + "\x00\x00\x00\x02"},
	{"FSETSTAT uid/gid", func(dst []byte) []byte {
		return appendStringAttrs(dst, sshfx.TypeFsetstat, 7, "h1",
			&sshfx.Attrs{Flags: sshfx.AttrUIDGID, UID: 1000, GID: 0xffffffff})
	}, "\x00\x00\x00\x17" + "\x0a" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02h1" +
		"\x00\x00\x00\x02" + "\x00\x00\x03\xe8" + "\xff\xff\xff\xff"},
	{"OPENDIR", func(dst []byte) []byte { return appendString1(dst, sshfx.TypeOpendir, 7, "/d") },
		"\x00\x00\x00\x0b" + "\x0b" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02/d"},
	{"READDIR", func(dst []byte) []byte { return appendString1(dst, sshfx.TypeReaddir, 7, "h1") },
		"\x00\x00\x00\x0b" + "\x0c" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02h1"},
	{"REMOVE", func(dst []byte) []byte { return appendString1(dst, sshfx.TypeRemove, 7, "/f") },
		"\x00\x00\x00\x0b" + "\x0d" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02/f"},
	{"MKDIR", func(dst []byte) []byte {
		return appendStringAttrs(dst, sshfx.TypeMkdir, 7, "/d", &sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: 0o755})
	}, "\x00\x00\x00\x13" + "\x0e" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02/d" +
		"\x00\x00\x00\x04" + "\x00\x00\x01\xed"},
	{"RMDIR", func(dst []byte) []byte { return appendString1(dst, sshfx.TypeRmdir, 7, "/d") },
		"\x00\x00\x00\x0b" + "\x0f" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02/d"},
	{"REALPATH", func(dst []byte) []byte { return appendString1(dst, sshfx.TypeRealpath, 7, ".") },
		"\x00\x00\x00\x0a" + "\x10" + "\x00\x00\x00\x07" + "\x00\x00\x00\x01."},
	{"STAT", func(dst []byte) []byte { return appendString1(dst, sshfx.TypeStat, 7, "/a/b") },
		"\x00\x00\x00\x0d" + "\x11" + "\x00\x00\x00\x07" + "\x00\x00\x00\x04/a/b"},
	{"RENAME", func(dst []byte) []byte { return appendString2(dst, sshfx.TypeRename, 7, "/old", "/new") },
		"\x00\x00\x00\x15" + "\x12" + "\x00\x00\x00\x07" + "\x00\x00\x00\x04/old" + "\x00\x00\x00\x04/new"},
	{"READLINK", func(dst []byte) []byte { return appendString1(dst, sshfx.TypeReadlink, 7, "/l") },
		"\x00\x00\x00\x0b" + "\x13" + "\x00\x00\x00\x07" + "\x00\x00\x00\x02/l"},
	{"SYMLINK", func(dst []byte) []byte { return appendString2(dst, sshfx.TypeSymlink, 7, "target", "/link") },
		"\x00\x00\x00\x18" + "\x14" + "\x00\x00\x00\x07" + "\x00\x00\x00\x06target" + "\x00\x00\x00\x05/link"},
	{"posix-rename", func(dst []byte) []byte { return appendExtended(dst, 7, extPosixRename, "/old", "/new") },
		"\x00\x00\x00\x31" + "\xc8" + "\x00\x00\x00\x07" + "\x00\x00\x00\x18posix-rename@openssh.com" +
			"\x00\x00\x00\x04/old" + "\x00\x00\x00\x04/new"},
	{"statvfs", func(dst []byte) []byte { return appendExtended(dst, 7, extStatVFS, "/") },
		"\x00\x00\x00\x21" + "\xc8" + "\x00\x00\x00\x07" + "\x00\x00\x00\x13statvfs@openssh.com" +
			"\x00\x00\x00\x01/"},
	{"fstatvfs", func(dst []byte) []byte { return appendExtended(dst, 7, extFstatVFS, "h1") },
		"\x00\x00\x00\x23" + "\xc8" + "\x00\x00\x00\x07" + "\x00\x00\x00\x14fstatvfs@openssh.com" +
			"\x00\x00\x00\x02h1"},
	{"hardlink", func(dst []byte) []byte { return appendExtended(dst, 7, extHardlink, "/old", "/new") },
		"\x00\x00\x00\x2d" + "\xc8" + "\x00\x00\x00\x07" + "\x00\x00\x00\x14hardlink@openssh.com" +
			"\x00\x00\x00\x04/old" + "\x00\x00\x00\x04/new"},
	{"fsync", func(dst []byte) []byte { return appendExtended(dst, 7, extFsync, "h1") },
		"\x00\x00\x00\x20" + "\xc8" + "\x00\x00\x00\x07" + "\x00\x00\x00\x11fsync@openssh.com" +
			"\x00\x00\x00\x02h1"},
	{"limits", func(dst []byte) []byte { return appendExtended(dst, 7, extLimits) },
		"\x00\x00\x00\x1b" + "\xc8" + "\x00\x00\x00\x07" + "\x00\x00\x00\x12limits@openssh.com"},
	{"expand-path", func(dst []byte) []byte { return appendExtended(dst, 7, extExpandPath, "~/x") },
		"\x00\x00\x00\x27" + "\xc8" + "\x00\x00\x00\x07" + "\x00\x00\x00\x17expand-path@openssh.com" +
			"\x00\x00\x00\x03~/x"},
	{"home-directory", func(dst []byte) []byte { return appendExtended(dst, 7, extHomeDirectory, "") },
		"\x00\x00\x00\x1b" + "\xc8" + "\x00\x00\x00\x07" + "\x00\x00\x00\x0ehome-directory" +
			"\x00\x00\x00\x00"},
	{"lsetstat", func(dst []byte) []byte {
		return appendLsetstat(dst, 7, "/l", &sshfx.Attrs{Flags: sshfx.AttrACModTime, ATime: 1, MTime: 2})
	}, "\x00\x00\x00\x2f" + "\xc8" + "\x00\x00\x00\x07" + "\x00\x00\x00\x14lsetstat@openssh.com" +
		"\x00\x00\x00\x02/l" + "\x00\x00\x00\x08" + "\x00\x00\x00\x01" + "\x00\x00\x00\x02"},
}

func TestRequestEncodersGolden(t *testing.T) {
	for _, tt := range requestGoldens {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, []byte(tt.want), tt.enc(nil))

			// Behind other bytes (a buffer reused for the next packet), the packet must
			// measure only itself and leave what precedes it alone.
			dst := make([]byte, 3, 512)
			copy(dst, "\xaa\xbb\xcc")
			require.Equal(t, []byte("\xaa\xbb\xcc"+tt.want), tt.enc(dst))
		})
	}
}

func TestWriteHeaderMatchesWrite(t *testing.T) {
	payload := make([]byte, 70000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for _, n := range []int{0, 1, 255, 256, 65536, len(payload)} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			whole := appendWrite(nil, 0xfffffffe, "\x00\x00\x01\x00", 1<<40, payload[:n])
			hdr := appendWriteHeader(nil, 0xfffffffe, "\x00\x00\x01\x00", 1<<40, n)
			require.Equal(t, whole, append(hdr, payload[:n]...))
			require.Equal(t, uint32(len(whole)-4), binary.BigEndian.Uint32(whole), "the length covers the payload")
		})
	}
}

// Reply bodies as the reader hands them over: after length, type and id.
const (
	statusBody = "\x00\x00\x00\x02" + "\x00\x00\x00\x0cNo such file" + "\x00\x00\x00\x02en"
	handleBody = "\x00\x00\x00\x02h1"
	dataBody   = "\x00\x00\x00\x05hello"
	attrsBody  = "\x80\x00\x00\x0f" +
		"\x00\x00\x00\x00\x00\x00\x10\x00" + // size 4096
		"\x00\x00\x03\xe8" + "\x00\x00\x03\xe9" + // uid 1000, gid 1001
		"\x00\x00\x81\xa4" + // 0100644
		"\x00\x00\x00\x01" + "\x00\x00\x00\x02" + // atime, mtime
		"\x00\x00\x00\x01" + "\x00\x00\x00\x01k" + "\x00\x00\x00\x02\x00\xff"
	nameBody = "\x00\x00\x00\x02" +
		"\x00\x00\x00\x01a" + "\x00\x00\x00\x03l a" + "\x00\x00\x00\x04\x00\x00\x41\xed" +
		"\x00\x00\x00\x01b" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"
	oneNameBody = "\x00\x00\x00\x01" + "\x00\x00\x00\x05/home" + "\x00\x00\x00\x05/home" + "\x00\x00\x00\x00"
	statVFSBody = "\x00\x00\x00\x00\x00\x00\x10\x00" + // bsize 4096
		"\x00\x00\x00\x00\x00\x00\x02\x00" + // frsize 512
		"\x00\x00\x00\x00\x00\x00\x00\x03" + "\x00\x00\x00\x00\x00\x00\x00\x04" +
		"\x00\x00\x00\x00\x00\x00\x00\x05" + "\x00\x00\x00\x00\x00\x00\x00\x06" +
		"\x00\x00\x00\x00\x00\x00\x00\x07" + "\x00\x00\x00\x00\x00\x00\x00\x08" +
		"\xff\xff\xff\xff\xff\xff\xff\xff" + // fsid
		"\x00\x00\x00\x00\x00\x00\x00\x01" + // read-only
		"\x00\x00\x00\x00\x00\x00\x00\xff" // namemax
	versionBody = "\x00\x00\x00\x03" +
		"\x00\x00\x00\x18posix-rename@openssh.com" + "\x00\x00\x00\x011" +
		"\x00\x00\x00\x09vendor-id" + "\x00\x00\x00\x03\x00\x01\xfe"
)

func rawReply(typ sshfx.PacketType, body string) *response {
	return &response{typ: typ, body: []byte(body)}
}

func TestDecodeRepliesValid(t *testing.T) {
	err := decodeStatus([]byte(statusBody))
	require.Equal(t, &StatusError{Code: StatusNoSuchFile, Message: "No such file", Lang: "en"}, err)

	h, err := decodeHandle("OPEN", rawReply(sshfx.TypeHandle, handleBody))
	require.NoError(t, err)
	require.Equal(t, "h1", h)

	r := rawReply(sshfx.TypeData, dataBody)
	data, err := decodeData(r)
	require.NoError(t, err)
	require.Equal(t, []byte("hello"), data)
	require.Same(t, &r.body[4], &data[0], "DATA is handed out without a copy")

	a, err := decodeAttrs("STAT", rawReply(sshfx.TypeAttrs, attrsBody))
	require.NoError(t, err)
	require.Equal(t, sshfx.Attrs{
		Flags: 0x8000000f, Size: 4096, UID: 1000, GID: 1001, Permissions: 0o100644,
		ATime: 1, MTime: 2, Extended: []sshfx.ExtendedAttr{{Type: "k", Data: "\x00\xff"}},
	}, a)

	names, err := decodeName("READDIR", rawReply(sshfx.TypeName, nameBody))
	require.NoError(t, err)
	require.Equal(t, []nameEntry{
		{name: "a", typeHint: fs.ModeSymlink, attrs: sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: 0o40755}},
		{name: "b"},
	}, names)

	s, err := decodeStatVFS(rawReply(sshfx.TypeExtendedReply, statVFSBody))
	require.NoError(t, err)
	require.Equal(t, &StatVFS{
		BlockSize: 4096, FragmentSize: 512, Blocks: 3, BlocksFree: 4, BlocksAvail: 5,
		Files: 6, FilesFree: 7, FilesAvail: 8, FSID: 1<<64 - 1, Flag: 1, NameMax: 255,
	}, s)

	exts, err := decodeVersion([]byte(versionBody))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"posix-rename@openssh.com": "1", "vendor-id": "\x00\x01\xfe"}, exts)
}

// TestDecodeRepliesTruncated cuts every valid reply at every length: each prefix must
// be refused with a *ProtocolError, never accepted short and never a panic.
func TestDecodeRepliesTruncated(t *testing.T) {
	decoders := []struct {
		name   string
		body   string
		decode func(b []byte) error
	}{
		{"HANDLE", handleBody, func(b []byte) error {
			_, err := decodeHandle("OPEN", &response{typ: sshfx.TypeHandle, body: b})
			return err
		}},
		{"DATA", dataBody, func(b []byte) error {
			_, err := decodeData(&response{typ: sshfx.TypeData, body: b})
			return err
		}},
		{"ATTRS", attrsBody, func(b []byte) error {
			_, err := decodeAttrs("STAT", &response{typ: sshfx.TypeAttrs, body: b})
			return err
		}},
		{"NAME", nameBody, func(b []byte) error {
			_, err := decodeName("READDIR", &response{typ: sshfx.TypeName, body: b})
			return err
		}},
		{"NAME one", oneNameBody, func(b []byte) error {
			_, err := decodeOneName("REALPATH", &response{typ: sshfx.TypeName, body: b})
			return err
		}},
		{"statvfs", statVFSBody, func(b []byte) error {
			_, err := decodeStatVFS(&response{typ: sshfx.TypeExtendedReply, body: b})
			return err
		}},
	}
	for _, tt := range decoders {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			for i := range len(body) {
				// A fresh copy each time, so a decoder reading past b[:i] would trip the
				// race detector or the bounds check rather than see the real bytes.
				b := append([]byte(nil), body[:i]...)
				var pe *ProtocolError
				require.ErrorAs(t, tt.decode(b), &pe, "prefix of %d bytes", i)
			}
			// One byte too many is refused as well: the two sides disagree on the layout.
			var pe *ProtocolError
			require.ErrorAs(t, tt.decode(append(body, 0)), &pe)
			require.ErrorIs(t, pe, sshfx.ErrLongPacket)
		})
	}
}

func TestDecodeStatusTruncated(t *testing.T) {
	body := []byte(statusBody)
	for i := range len(body) {
		err := decodeStatus(append([]byte(nil), body[:i]...))
		if i == 4 {
			// A bare code is accepted on purpose: some old servers send nothing more.
			require.Equal(t, &StatusError{Code: StatusNoSuchFile}, err)
			continue
		}
		var pe *ProtocolError
		require.ErrorAs(t, err, &pe, "prefix of %d bytes", i)
	}
	require.NoError(t, decodeStatus([]byte{0, 0, 0, 0}), "bare OK")
	require.Same(t, io.EOF, decodeStatus([]byte{0, 0, 0, 1}), "bare EOF")
}

func TestDecodeVersionTruncated(t *testing.T) {
	body := []byte(versionBody)
	// Cut exactly between pairs, VERSION is complete, with fewer extensions.
	valid := map[int]map[string]string{
		4:          {},
		4 + 28 + 5: {"posix-rename@openssh.com": "1"},
	}
	for i := range len(body) {
		exts, err := decodeVersion(append([]byte(nil), body[:i]...))
		if want, ok := valid[i]; ok {
			require.NoError(t, err, "prefix of %d bytes", i)
			require.Equal(t, want, exts)
			continue
		}
		var pe *ProtocolError
		require.ErrorAs(t, err, &pe, "prefix of %d bytes", i)
		require.Nil(t, exts)
	}
}

func TestDecodeVersion(t *testing.T) {
	for _, v := range []uint32{0, 1, 2, 4, 5, 6, 0xffffffff} {
		b := sshfx.AppendUint32(nil, v)
		b = sshfx.AppendString(b, "versions")
		b = sshfx.AppendString(b, "2,3,4,5,6")
		exts, err := decodeVersion(b)
		var pe *ProtocolError
		require.ErrorAs(t, err, &pe, "version %d", v)
		require.Contains(t, err.Error(), fmt.Sprintf("version %d", v))
		require.Nil(t, exts)
	}

	exts, err := decodeVersion([]byte{0, 0, 0, 3})
	require.NoError(t, err)
	require.NotNil(t, exts)
	require.Empty(t, exts)

	// MINA's "supported2" is binary, including bytes that are not UTF-8.
	bin := "\x00\x00\x00\x00\xff\xfe\x80\x00\x01"
	b := sshfx.AppendUint32(nil, 3)
	b = sshfx.AppendString(b, "supported2")
	b = sshfx.AppendString(b, bin)
	b = sshfx.AppendString(b, "newline")
	b = sshfx.AppendString(b, "\r\n")
	exts, err = decodeVersion(b)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"supported2": bin, "newline": "\r\n"}, exts)
}

func TestStatusErrorText(t *testing.T) {
	require.Equal(t, "sftp: No such file (NO_SUCH_FILE)",
		(&StatusError{Code: StatusNoSuchFile, Message: "No such file", Lang: "en"}).Error())
	require.Equal(t, "sftp: PERMISSION_DENIED", (&StatusError{Code: StatusPermissionDenied}).Error())
	require.Equal(t, "sftp: File already exists (FAILURE)",
		(&StatusError{Code: StatusFailure, Message: "File already exists"}).Error())
	require.Equal(t, "sftp: Status(42)", (&StatusError{Code: 42}).Error())
	require.Equal(t, "OP_UNSUPPORTED", StatusOpUnsupported.String())
	require.Equal(t, "Status(9)", StatusCode(9).String())
}

func TestStatusErrorIs(t *testing.T) {
	targets := []error{fs.ErrNotExist, fs.ErrPermission, errors.ErrUnsupported, fs.ErrExist, io.EOF}
	tests := []struct {
		code StatusCode
		want error // the one target it matches, or nil
	}{
		{StatusEOF, nil},
		{StatusNoSuchFile, fs.ErrNotExist},
		{StatusPermissionDenied, fs.ErrPermission},
		{StatusFailure, nil},
		{StatusBadMessage, nil},
		{StatusOpUnsupported, errors.ErrUnsupported},
		{9, nil},
		{0xffffffff, nil},
	}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			// Wrapped as the path operations return it.
			err := error(&fs.PathError{Op: "stat", Path: "/x", Err: &StatusError{Code: tt.code, Message: "text"}})
			for _, target := range targets {
				require.Equal(t, target == tt.want, errors.Is(err, target), "target %v", target)
			}
			require.ErrorIs(t, err, &StatusError{Code: tt.code}, "messages do not matter")
			var se *StatusError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tt.code, se.Code)
		})
	}
}

func TestStatusErrorUnknownCodesAreFailure(t *testing.T) {
	failure := &StatusError{Code: StatusFailure}
	for _, code := range []StatusCode{9, 10, 100, 0xffffffff} {
		err := &StatusError{Code: code, Message: "File exists"}
		require.ErrorIs(t, err, failure, "code %d", code)
		require.ErrorIs(t, failure, &StatusError{Code: code}, "and the other way round")
		require.ErrorIs(t, err, &StatusError{Code: 9})
		require.NotErrorIs(t, err, &StatusError{Code: StatusNoSuchFile})
		require.NotErrorIs(t, err, &StatusError{Code: StatusOpUnsupported})
		require.NotErrorIs(t, err, errors.ErrUnsupported)
	}
	require.NotErrorIs(t, &StatusError{Code: StatusNoSuchFile}, &StatusError{Code: StatusPermissionDenied})
	require.NotErrorIs(t, &StatusError{Code: StatusOpUnsupported}, failure)
}

func TestProtocolError(t *testing.T) {
	_, err := decodeAttrs("STAT", rawReply(sshfx.TypeHandle, handleBody))
	var pe *ProtocolError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "STAT", pe.Op)
	require.Equal(t, "sftp: protocol error in STAT: got HANDLE, want ATTRS", err.Error())

	_, err = decodeHandle("OPEN", rawReply(sshfx.TypeHandle, "\x00\x00"))
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, sshfx.ErrShortPacket, "the cause is kept")
	require.NotErrorIs(t, err, fs.ErrNotExist)
}

func TestDecodeOtherReplies(t *testing.T) {
	var pe *ProtocolError

	// A STATUS where something else was due is the server's answer.
	_, err := decodeHandle("OPEN", rawReply(sshfx.TypeStatus, statusBody))
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = decodeData(rawReply(sshfx.TypeStatus, "\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"))
	require.Same(t, io.EOF, err, "EOF for a READ is io.EOF itself")
	_, err = decodeName("READDIR", rawReply(sshfx.TypeStatus, "\x00\x00\x00\x01"))
	require.Same(t, io.EOF, err)

	// STATUS OK returns nothing where data was due, but it is a well-formed answer:
	// the server's error for this request, never a protocol error (which would close
	// the channel).
	ok := "\x00\x00\x00\x00"
	for name, decode := range map[string]func(*response) error{
		"READ":    func(r *response) error { _, err := decodeData(r); return err },
		"STAT":    func(r *response) error { _, err := decodeAttrs("STAT", r); return err },
		"OPEN":    func(r *response) error { _, err := decodeHandle("OPEN", r); return err },
		"READDIR": func(r *response) error { _, err := decodeName("READDIR", r); return err },
		"REALPATH": func(r *response) error {
			_, err := decodeOneName("REALPATH", r)
			return err
		},
		"statvfs": func(r *response) error { _, err := decodeStatVFS(r); return err },
	} {
		err = decode(rawReply(sshfx.TypeStatus, ok))
		require.ErrorIs(t, err, &StatusError{Code: StatusOK}, name)
		require.NotErrorAs(t, err, &pe, name)
		require.Equal(t, "sftp: unexpected OK status in reply to "+name+" (OK)", err.Error())
	}
	// EOF is an answer only to READ and READDIR; elsewhere it must not pass for the
	// io.EOF callers compare with ==.
	eof := "\x00\x00\x00\x01"
	_, err = decodeAttrs("STAT", rawReply(sshfx.TypeStatus, eof))
	require.NotErrorIs(t, err, io.EOF)
	require.ErrorIs(t, err, &StatusError{Code: StatusEOF})
	_, err = decodeHandle("OPEN", rawReply(sshfx.TypeStatus, eof))
	require.NotErrorIs(t, err, io.EOF)
	require.ErrorIs(t, err, &StatusError{Code: StatusEOF})
	// Any other code, defined or not, is the server's error as it is.
	_, err = decodeData(rawReply(sshfx.TypeStatus, "\x00\x00\x00\x63"))
	require.ErrorIs(t, err, &StatusError{Code: StatusFailure}, "code 99 means FAILURE")
	require.NotErrorAs(t, err, &pe)

	// A malformed STATUS is still a protocol error through any decoder.
	_, err = decodeHandle("OPEN", rawReply(sshfx.TypeStatus, "\x00\x00\x00\x02\x00\x00"))
	require.ErrorAs(t, err, &pe)

	_, err = decodeExtendedReply("limits", rawReply(sshfx.TypeData, dataBody))
	require.ErrorAs(t, err, &pe)
	_, err = decodeStatVFS(rawReply(sshfx.TypeStatus, "\x00\x00\x00\x08"))
	require.ErrorIs(t, err, errors.ErrUnsupported)
}

func TestExpectStatus(t *testing.T) {
	require.NoError(t, expectStatus("CLOSE", rawReply(sshfx.TypeStatus, "\x00\x00\x00\x00\x00\x00\x00\x07Success\x00\x00\x00\x00")))
	require.ErrorIs(t, expectStatus("REMOVE", rawReply(sshfx.TypeStatus, statusBody)), fs.ErrNotExist)

	// EOF answers no request that only succeeds or fails: it must not pass for io.EOF,
	// which a caller could take for success.
	err := expectStatus("WRITE", rawReply(sshfx.TypeStatus, "\x00\x00\x00\x01"))
	require.NotErrorIs(t, err, io.EOF)
	require.ErrorIs(t, err, &StatusError{Code: StatusEOF})

	var pe *ProtocolError
	require.ErrorAs(t, expectStatus("CLOSE", rawReply(sshfx.TypeHandle, handleBody)), &pe)
}

func TestDecodeOneName(t *testing.T) {
	s, err := decodeOneName("REALPATH", rawReply(sshfx.TypeName, oneNameBody))
	require.NoError(t, err)
	require.Equal(t, "/home", s)

	var pe *ProtocolError
	_, err = decodeOneName("REALPATH", rawReply(sshfx.TypeName, nameBody))
	require.ErrorAs(t, err, &pe, "two names")
	_, err = decodeOneName("REALPATH", rawReply(sshfx.TypeName, "\x00\x00\x00\x00"))
	require.ErrorAs(t, err, &pe, "no names")

	_, err = decodeOneName("READLINK", rawReply(sshfx.TypeStatus, "\x00\x00\x00\x01"))
	require.NotErrorIs(t, err, io.EOF)
	require.ErrorIs(t, err, &StatusError{Code: StatusEOF})
}

func TestDecodeNameHostileCount(t *testing.T) {
	for _, n := range []uint32{0xffffffff, 0x00ffffff, 2} {
		body := sshfx.AppendUint32(nil, n)
		body = append(body, make([]byte, 12)...) // room for exactly one empty entry

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		names, err := decodeName("READDIR", &response{typ: sshfx.TypeName, body: body})
		runtime.ReadMemStats(&after)

		var pe *ProtocolError
		require.ErrorAs(t, err, &pe, "count %d", n)
		require.Nil(t, names)
		// Trusting the count would allocate n entries of ~150 bytes up front.
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "count %d", n)
	}

	// The same 12 bytes with a count of 1 are a valid, empty entry.
	body := append([]byte{0, 0, 0, 1}, make([]byte, 12)...)
	names, err := decodeName("READDIR", &response{typ: sshfx.TypeName, body: body})
	require.NoError(t, err)
	require.Equal(t, []nameEntry{{}}, names)
}

func TestDecodeDataEmpty(t *testing.T) {
	// An empty DATA decodes; whether it is acceptable is the transfer's decision.
	b, err := decodeData(rawReply(sshfx.TypeData, "\x00\x00\x00\x00"))
	require.NoError(t, err)
	require.Empty(t, b)
}

// TestOwnerAttrs: a chown's ids must fit 32 bits. The bound is checked at run time, so
// it holds (and compiles) whether int has 32 or 64 bits.
func TestOwnerAttrs(t *testing.T) {
	a, err := ownerAttrs(65534, 0)
	require.NoError(t, err)
	require.Equal(t, &sshfx.Attrs{Flags: sshfx.AttrUIDGID, UID: 65534}, a)
	for _, ids := range [][2]int{{-1, 0}, {0, -1}} {
		_, err := ownerAttrs(ids[0], ids[1])
		require.ErrorIs(t, err, syscall.EINVAL, "%v", ids)
	}
	if strconv.IntSize == 64 {
		var tooBig int64 = math.MaxUint32 + 1
		_, err := ownerAttrs(int(tooBig), 0)
		require.ErrorIs(t, err, syscall.EINVAL)
		a, err := ownerAttrs(0, int(tooBig-1))
		require.NoError(t, err)
		require.Equal(t, uint32(math.MaxUint32), a.GID)
	}
}
