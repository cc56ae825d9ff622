package testserver

import (
	"fmt"
	"io"
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Each personality's documented behaviours, request by request (personalities.go
// cites the sources). The sluice client's side of them is in the cross-server suite.

// codeMsg reads a STATUS without checking its text against OpenSSH's.
func codeMsg(t *testing.T, r reply) (uint32, string) {
	t.Helper()
	require.EqualValues(t, TypeStatus, r.typ, "want STATUS, got type %d", r.typ)
	cur := cursor{t: t, b: r.body}
	return cur.u32(), cur.str()
}

func requireCode(t *testing.T, want uint32, r reply) {
	t.Helper()
	code, msg := codeMsg(t, r)
	require.EqualValues(t, want, code, "status %d %q", code, msg)
}

func setstatPkt(name string, flags uint32) func(p *pkt) {
	return func(p *pkt) {
		p.str(name).u32(flags)
		if flags&AttrSize != 0 {
			p.u64(1)
		}
		if flags&AttrUIDGID != 0 {
			p.u32(1).u32(1)
		}
		if flags&AttrPermissions != 0 {
			p.u32(0o600)
		}
		if flags&AttrACModTime != 0 {
			p.u32(1).u32(2)
		}
	}
}

func TestPersonalityAWSTransferS3(t *testing.T) {
	s := newServer(t, AWSTransferS3())
	for i := range 250 {
		require.NoError(t, s.WriteFile(fmt.Sprintf("/f%03d", i), nil, 0o644))
	}
	c := dial(t, s)
	require.Empty(t, c.ver.body, "no extensions advertised")
	h := c.handle(c.path(TypeOpendir, "/"))
	require.Len(t, c.names(c.call(TypeReaddir, func(p *pkt) { p.str(h) })), 252, "one NAME for the whole directory")
	requireCode(t, StatusEOF, c.call(TypeReaddir, func(p *pkt) { p.str(h) }))

	code, msg := codeMsg(t, c.open("f000", OpenRead|OpenWrite|OpenCreat|OpenTrunc))
	require.EqualValues(t, StatusOpUnsupported, code)
	require.Equal(t, "Cannot open file in mode: WRITE|TRUNCATE|CREATE|READ", msg)
	requireCode(t, StatusOpUnsupported, c.call(TypeSetstat, setstatPkt("f000", AttrACModTime)))
	w := c.mustOpen("f000", OpenWrite|OpenCreat|OpenTrunc)
	requireCode(t, StatusOpUnsupported, c.call(TypeFsetstat, func(p *pkt) { p.str(w).u32(AttrPermissions).u32(0o600) }))
	other := dial(t, s)
	requireCode(t, StatusFailure, other.open("f000", OpenWrite|OpenCreat|OpenTrunc))
	c.requireStatus(StatusOK, c.closeHandle(w))
	other.requireStatus(StatusOK, other.closeHandle(other.mustOpen("f000", OpenWrite)))
	requireCode(t, StatusOK, c.path2(TypeRename, "f001", "f002"))
	requireCode(t, StatusOpUnsupported, c.path2(TypeSymlink, "f002", "l"))
}

func TestPersonalitySessionLimit(t *testing.T) {
	s := newServer(t, AWSTransferS3())
	for range 10 {
		dial(t, s)
	}
	c := connect(t, s)
	c.expectEOF()
}

func TestPersonalityAzureBlob(t *testing.T) {
	s := newServer(t, AzureBlob())
	require.NoError(t, s.WriteFile("/a", []byte("a"), 0o644))
	require.NoError(t, s.WriteFile("/b", []byte("b"), 0o644))
	c := dial(t, s)
	require.Empty(t, c.ver.body)
	requireCode(t, StatusOpUnsupported, c.open("a", OpenRead|OpenWrite))
	requireCode(t, StatusOpUnsupported, c.open("a", OpenWrite|OpenAppend))
	for _, f := range []uint32{AttrPermissions, AttrUIDGID, AttrACModTime} {
		requireCode(t, StatusOpUnsupported, c.call(TypeSetstat, setstatPkt("a", f)))
	}
	requireCode(t, StatusOK, c.call(TypeSetstat, setstatPkt("a", AttrSize)))
	requireCode(t, StatusFailure, c.path2(TypeRename, "a", "b"))
	requireCode(t, StatusOK, c.path2(TypeRename, "a", "c"))
	requireCode(t, StatusOpUnsupported, c.path(TypeReadlink, "c"))
}

func TestPersonalitySFTPGoCloud(t *testing.T) {
	s := newServer(t, SFTPGoCloud())
	require.NoError(t, s.WriteFile("/a", make([]byte, 100000), 0o644))
	require.NoError(t, s.WriteFile("/b", []byte("b"), 0o644))
	require.NoError(t, s.MkdirAll("/d/e", 0o755))
	c := dial(t, s)
	h := c.mustOpen("a", OpenRead)
	require.Len(t, c.data(c.readAt(h, 0, 65536)), 32768)
	h = c.mustOpen("new", OpenRead|OpenWrite|OpenCreat|OpenTrunc)
	requireCode(t, StatusOK, c.writeAt(h, 0, "x"))
	requireCode(t, StatusOpUnsupported, c.readAt(h, 0, 1))
	requireCode(t, StatusOpUnsupported, c.open("a", OpenWrite))
	requireCode(t, StatusOpUnsupported, c.call(TypeSetstat, setstatPkt("a", AttrACModTime)))
	requireCode(t, StatusOpUnsupported, c.call(TypeSetstat, setstatPkt("a", AttrSize)))
	requireCode(t, StatusOK, c.path2(TypeRename, "b", "a"))
	got, err := s.ReadFile("/a")
	require.NoError(t, err)
	require.Equal(t, "b", string(got), "plain RENAME replaced the target")
	requireCode(t, StatusFailure, c.path2(TypeRename, "d", "d2"))
}

func TestPersonalityMinIO(t *testing.T) {
	s := newServer(t, MinIO())
	require.NoError(t, s.MkdirAll("/d/e", 0o755))
	require.NoError(t, s.WriteFile("/d/e/f", []byte("f"), 0o644))
	c := dial(t, s)
	requireCode(t, StatusOpUnsupported, c.path2(TypeRename, "d", "x"))
	requireCode(t, StatusOpUnsupported, c.ext(extPosixRename, func(p *pkt) { p.str("d").str("x") }))
	requireCode(t, StatusOpUnsupported, c.ext(extStatvfs, func(p *pkt) { p.str("d") }))
	a := c.attrs(c.path(TypeLstat, "missing"))
	require.EqualValues(t, sIFDIR|0o755, a.perm, "a missing name is a directory")
	requireCode(t, StatusOK, c.path(TypeRemove, "missing"))
	requireCode(t, StatusFailure, c.open("missing", OpenRead))
	h := c.handle(c.path(TypeOpendir, "d"))
	ents := c.names(c.call(TypeReaddir, func(p *pkt) { p.str(h) }))
	require.Len(t, ents, 1)
	require.Equal(t, "e", ents[0].name)

	// Out of order is fine while the gaps fill; a gap left at CLOSE stores nothing.
	w := c.mustOpen("up", OpenWrite|OpenCreat|OpenTrunc)
	requireCode(t, StatusOK, c.writeAt(w, 3, "def"))
	requireCode(t, StatusOK, c.writeAt(w, 0, "abc"))
	requireCode(t, StatusOK, c.closeHandle(w))
	got, err := s.ReadFile("/up")
	require.NoError(t, err)
	require.Equal(t, "abcdef", string(got))
	w = c.mustOpen("up", OpenWrite)
	requireCode(t, StatusOK, c.writeAt(w, 4, "x"))
	code, msg := codeMsg(t, c.closeHandle(w))
	require.EqualValues(t, StatusFailure, code)
	require.Contains(t, msg, "not flushed")
	_, err = s.Stat("/up")
	require.ErrorIs(t, err, fs.ErrNotExist, "a CLOSE that failed stores nothing")
}

func TestPersonalityHetznerAndDropFolder(t *testing.T) {
	s := newServer(t, HetznerStorageBox())
	require.NoError(t, s.WriteFile("/a", nil, 0o644))
	require.NoError(t, s.WriteFile("/b", nil, 0o644))
	c := dial(t, s)
	requireCode(t, 11, c.path2(TypeRename, "a", "b"))

	d := newServer(t, DropFolder())
	require.NoError(t, d.WriteFile("/old", []byte("x"), 0o644))
	c = dial(t, d)
	for _, typ := range []uint8{TypeStat, TypeLstat, TypeOpendir, TypeRemove} {
		requireCode(t, StatusPermissionDenied, c.path(typ, "old"))
	}
	requireCode(t, StatusPermissionDenied, c.call(TypeMkdir, func(p *pkt) { p.str("d").u32(0) }))
	requireCode(t, StatusPermissionDenied, c.open("old", OpenRead))
	requireCode(t, StatusPermissionDenied, c.path2(TypeRename, "old", "new"))
	w := c.mustOpen("new", OpenWrite|OpenCreat|OpenTrunc)
	requireCode(t, StatusOK, c.writeAt(w, 0, "data"))
	require.EqualValues(t, 4, c.attrs(c.call(TypeFstat, func(p *pkt) { p.str(w) })).size)
	requireCode(t, StatusOK, c.closeHandle(w))
}

func TestPersonalityWindowsOpenSSH(t *testing.T) {
	s := newServer(t, WindowsOpenSSH())
	require.NoError(t, s.WriteFile("/f", make([]byte, 300000), 0o644))
	c := dial(t, s)
	require.Equal(t, "/C:/", c.names(c.path(TypeRealpath, "."))[0].name)
	require.Equal(t, "/C:/f", c.names(c.path(TypeRealpath, "/C:/f"))[0].name)
	h := c.mustOpen("/C:/f", OpenRead)
	require.Len(t, c.data(c.readAt(h, 0, 261120)), 102400)
	requireCode(t, StatusNoSuchFile, c.path2(TypeRename, "f", "/C:/f"))
	_, err := s.Stat("/f")
	require.Error(t, err, "renamed onto itself, the file is gone")
}

func TestPersonalityIBMSterling(t *testing.T) {
	s := newServer(t, IBMSterling())
	require.NoError(t, s.WriteFile("/msg", []byte("payload"), 0o644))
	c := dial(t, s)
	require.EqualValues(t, 7, c.attrs(c.path(TypeStat, "msg")).size, "STAT before OPEN is fine")
	h := c.mustOpen("msg", OpenRead)
	code, msg := codeMsg(t, c.call(TypeFstat, func(p *pkt) { p.str(h) }))
	require.EqualValues(t, StatusFailure, code)
	require.Equal(t, "The message [msg] is not extractable!", msg)
	requireCode(t, StatusFailure, c.path(TypeStat, "msg"))
	requireCode(t, StatusFailure, dial(t, s).open("msg", OpenRead))
	require.Equal(t, "payload", string(c.data(c.readAt(h, 0, 100))), "READs go on")
	requireCode(t, StatusOK, c.closeHandle(h))
	requireCode(t, StatusNoSuchFile, c.path(TypeStat, "msg"))
}

func TestPersonalityFilesComAndIdle(t *testing.T) {
	opts := FilesCom()
	opts.Quirks.IdleTimeout = time.Millisecond
	s := newServer(t, opts)
	require.NoError(t, s.Mkdir("/Dir", 0o755))
	require.NoError(t, s.WriteFile("/Dir/File.TXT", []byte("x"), 0o644))
	c := connect(t, s)
	c.write(newInit(3).bytes())
	// Idle past the timeout, the session ends: with its VERSION sent or not,
	// depending on whether the timer fired before the writer sent it.
	if r, err := c.tryRecv(); err == nil {
		require.EqualValues(t, TypeVersion, r.typ)
		c.expectEOF()
	} else {
		require.ErrorIs(t, err, io.EOF)
	}

	opts = FilesCom()
	s = newServer(t, opts)
	require.NoError(t, s.Mkdir("/Dir", 0o755))
	require.NoError(t, s.WriteFile("/Dir/File.TXT", []byte("x"), 0o644))
	c = dial(t, s)
	require.EqualValues(t, 1, c.attrs(c.path(TypeStat, "/dir/file.txt")).size)
	requireCode(t, StatusOK, c.call(TypeSetstat, setstatPkt("/DIR/FILE.txt", AttrPermissions)))
	a, err := s.Stat("/Dir/File.TXT")
	require.NoError(t, err)
	require.EqualValues(t, 0o100644, a.Mode, "chmod answered OK and changed nothing")
}
