package testserver

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func newServer(t *testing.T, opts Options) *Server {
	s := New(opts)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestInitVersion(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s)
	cur := cursor{t: t, b: c.ver.body}
	var got []string
	for len(cur.b) > 0 {
		got = append(got, cur.str()+"="+cur.str())
	}
	require.Equal(t, []string{
		"fstatvfs@openssh.com=2",
		"fsync@openssh.com=1",
		"hardlink@openssh.com=1",
		"limits@openssh.com=1",
		"posix-rename@openssh.com=1",
		"statvfs@openssh.com=2",
	}, got)
	require.Equal(t, 1, s.Requests(TypeInit))

	// Whatever the client asks for, the answer is 3, and only the
	// configured extensions are advertised.
	s2 := newServer(t, Options{Extensions: map[string]string{"x@example.com": "\x00\x01"}})
	c2 := connect(t, s2)
	c2.write(newInit(6).str("client-ext").str("v").bytes())
	v := c2.recv()
	require.EqualValues(t, TypeVersion, v.typ)
	require.EqualValues(t, 3, v.id)
	cur = cursor{t: t, b: v.body}
	require.Equal(t, "x@example.com", cur.str())
	require.Equal(t, "\x00\x01", cur.str())
	require.Empty(t, cur.b)
}

func TestRequestBeforeInitDrops(t *testing.T) {
	s := newServer(t, Options{})
	c := connect(t, s)
	c.write(statPkt(1, "/"))
	c.expectEOF()
}

func TestOpenWriteReadClose(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s)

	h := c.mustOpen("file", OpenWrite|OpenCreat|OpenTrunc)
	require.Equal(t, 1, s.OpenHandles())
	c.requireStatus(StatusOK, c.writeAt(h, 0, "hello "))
	c.requireStatus(StatusOK, c.writeAt(h, 6, "world"))
	// A write-only handle can't read: EBADF, which OpenSSH maps to 2.
	c.requireStatus(StatusNoSuchFile, c.readAt(h, 0, 5))
	c.requireStatus(StatusOK, c.closeHandle(h))
	require.Equal(t, 0, s.OpenHandles())
	// Closing again: the handle is gone.
	c.requireStatus(StatusNoSuchFile, c.closeHandle(h))

	got, err := s.ReadFile("/file")
	require.NoError(t, err)
	require.Equal(t, "hello world", string(got))

	h = c.mustOpen("/file", OpenRead)
	require.Equal(t, "hello", string(c.data(c.readAt(h, 0, 5))))
	// Crossing EOF returns what exists; at or past EOF is STATUS EOF.
	require.Equal(t, "world", string(c.data(c.readAt(h, 6, 100))))
	c.requireStatus(StatusEOF, c.readAt(h, 11, 100))
	c.requireStatus(StatusEOF, c.readAt(h, 1000, 1))
	// A zero-length READ gets an empty DATA, as in OpenSSH.
	require.Empty(t, c.data(c.readAt(h, 11, 0)))
	// Writing through a read-only handle fails the same way.
	c.requireStatus(StatusNoSuchFile, c.writeAt(h, 0, "x"))

	a := c.attrs(c.call(TypeFstat, func(p *pkt) { p.str(h) }))
	require.EqualValues(t, 0x0f, a.flags)
	require.EqualValues(t, 11, a.size)
	require.EqualValues(t, 0o100644, a.perm, "0666 minus umask 022, with S_IFREG")
	require.EqualValues(t, 1000, a.uid)
	c.requireStatus(StatusOK, c.closeHandle(h))

	// Unknown handles.
	c.requireStatus(StatusFailure, c.readAt("nope", 0, 1))
	c.requireStatus(StatusFailure, c.writeAt("nope", 0, "x"))
	c.requireStatus(StatusFailure, c.call(TypeFstat, func(p *pkt) { p.str("nope") }))
}

func TestOpenFlags(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s)
	require.NoError(t, s.WriteFile("/f", []byte("0123456789"), 0o644))

	c.requireStatus(StatusNoSuchFile, c.open("/missing", OpenRead))
	c.requireStatus(StatusFailure, c.open("/f", OpenWrite|OpenCreat|OpenExcl))

	// APPEND ignores the offset.
	h := c.mustOpen("/f", OpenWrite|OpenAppend)
	c.requireStatus(StatusOK, c.writeAt(h, 0, "ab"))
	c.requireStatus(StatusOK, c.closeHandle(h))
	got, _ := s.ReadFile("/f")
	require.Equal(t, "0123456789ab", string(got))

	// TRUNC empties; writing past the end leaves a zero-filled gap.
	h = c.mustOpen("/f", OpenRead|OpenWrite|OpenCreat|OpenTrunc)
	c.requireStatus(StatusOK, c.writeAt(h, 3, "x"))
	require.Equal(t, "\x00\x00\x00x", string(c.data(c.readAt(h, 0, 100))))
	c.requireStatus(StatusOK, c.closeHandle(h))

	// Explicit permissions on create (umask still applies, as with open(2)).
	h = c.handle(c.call(TypeOpen, func(p *pkt) {
		p.str("/g").u32(OpenWrite | OpenCreat).u32(AttrPermissions).u32(0o600)
	}))
	c.requireStatus(StatusOK, c.closeHandle(h))
	a, err := s.Stat("/g")
	require.NoError(t, err)
	require.EqualValues(t, 0o100600, a.Mode)

	// Directories: read-only open works (READ then fails), write doesn't.
	c.requireStatus(StatusFailure, c.open("/", OpenWrite))
	h = c.mustOpen("/", OpenRead)
	c.requireStatus(StatusFailure, c.readAt(h, 0, 1))
	c.requireStatus(StatusOK, c.closeHandle(h))

	// Owner permission bits are enforced.
	require.NoError(t, s.Chmod("/f", 0o444))
	c.requireStatus(StatusPermissionDenied, c.open("/f", OpenWrite))
	require.NoError(t, s.Mkdir("/ro", 0o555))
	c.requireStatus(StatusPermissionDenied, c.open("/ro/new", OpenWrite|OpenCreat))
}

func TestReadClampedToMaxRead(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s)
	require.NoError(t, s.WriteFile("/big", make([]byte, 1<<20), 0o644))
	h := c.mustOpen("/big", OpenRead)
	require.Len(t, c.data(c.readAt(h, 0, 1<<20)), 261120)

	s2 := newServer(t, Options{Limits: Limits{MaxPacket: 1 << 20, MaxRead: 1000}})
	c2 := dial(t, s2)
	require.NoError(t, s2.WriteFile("/big", make([]byte, 1<<20), 0o644))
	h = c2.mustOpen("/big", OpenRead)
	require.Len(t, c2.data(c2.readAt(h, 0, 5000)), 1000)
}

func TestReaddirBatches(t *testing.T) {
	s := newServer(t, Options{})
	require.NoError(t, s.Mkdir("/d", 0o755))
	for i := range 250 {
		require.NoError(t, s.WriteFile(fmt.Sprintf("/d/f%03d", i), []byte("x"), 0o644))
	}
	require.NoError(t, s.Symlink("f000", "/d/link"))
	c := dial(t, s)
	h := c.handle(c.path(TypeOpendir, "/d"))

	var all []nameEntry
	var sizes []int
	for {
		r := c.call(TypeReaddir, func(p *pkt) { p.str(h) })
		if r.typ == TypeStatus {
			c.requireStatus(StatusEOF, r)
			break
		}
		batch := c.names(r)
		sizes = append(sizes, len(batch))
		all = append(all, batch...)
	}
	require.Equal(t, []int{100, 100, 53}, sizes, "250 files + link + . and ..")
	require.Equal(t, ".", all[0].name)
	require.Equal(t, "..", all[1].name)
	require.EqualValues(t, 0o40755, all[0].attrs.perm)
	byName := map[string]nameEntry{}
	for _, e := range all {
		byName[e.name] = e
	}
	require.Len(t, byName, 253)
	// READDIR reports lstat: the link is a link.
	require.EqualValues(t, 0o120777, byName["link"].attrs.perm)
	require.True(t, strings.HasPrefix(byName["f007"].long, "-rw-r--r--"), byName["f007"].long)
	require.True(t, strings.HasSuffix(byName["f007"].long, " f007"), byName["f007"].long)

	// Directory handles aren't file handles and vice versa.
	c.requireStatus(StatusFailure, c.readAt(h, 0, 1))
	c.requireStatus(StatusOK, c.closeHandle(h))
	c.requireStatus(StatusNoSuchFile, c.path(TypeOpendir, "/nope"))
	c.requireStatus(StatusNoSuchFile, c.path(TypeOpendir, "/d/f000"))
	fh := c.mustOpen("/d/f000", OpenRead)
	c.requireStatus(StatusFailure, c.call(TypeReaddir, func(p *pkt) { p.str(fh) }))
}

func TestPathOperations(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s)

	realpath := func(p string) string {
		t.Helper()
		n := c.names(c.path(TypeRealpath, p))
		require.Len(t, n, 1)
		require.Equal(t, n[0].name, n[0].long)
		require.Zero(t, n[0].attrs.flags)
		return n[0].name
	}
	require.Equal(t, "/", realpath("."))
	require.Equal(t, "/", realpath(""))
	require.Equal(t, "/missing", realpath("missing"), "a missing last element still resolves")
	c.requireStatus(StatusNoSuchFile, c.path(TypeRealpath, "/missing/x"))

	c.requireStatus(StatusOK, c.call(TypeMkdir, func(p *pkt) { p.str("dir").u32(0) }))
	c.requireStatus(StatusFailure, c.call(TypeMkdir, func(p *pkt) { p.str("/dir").u32(0) }))
	require.EqualValues(t, 0o40755, c.attrs(c.path(TypeStat, "/dir")).perm)
	require.Equal(t, "/dir", realpath("/dir/../dir/./"))

	require.NoError(t, s.WriteFile("/dir/a", []byte("aaa"), 0o600))
	// SYMLINK takes the target first (OpenSSH order).
	c.requireStatus(StatusOK, c.path2(TypeSymlink, "a", "/dir/ln"))
	c.requireStatus(StatusFailure, c.path2(TypeSymlink, "a", "/dir/ln"))
	n := c.names(c.path(TypeReadlink, "/dir/ln"))
	require.Equal(t, "a", n[0].name)
	c.requireStatus(StatusBadMessage, c.path(TypeReadlink, "/dir/a"))
	require.EqualValues(t, 0o100600, c.attrs(c.path(TypeStat, "/dir/ln")).perm)
	require.EqualValues(t, 0o120777, c.attrs(c.path(TypeLstat, "/dir/ln")).perm)
	require.Equal(t, "/dir/a", realpath("/dir/ln"))
	c.requireStatus(StatusOK, c.path2(TypeSymlink, "loop", "/loop"))
	c.requireStatus(StatusNoSuchFile, c.path(TypeStat, "/loop"))

	// Plain RENAME never overwrites; posix-rename does.
	require.NoError(t, s.WriteFile("/dir/b", []byte("bbb"), 0o644))
	c.requireStatus(StatusFailure, c.path2(TypeRename, "/dir/a", "/dir/b"))
	c.requireStatus(StatusFailure, c.path2(TypeRename, "/dir/a", "/dir/a"))
	c.requireStatus(StatusNoSuchFile, c.path2(TypeRename, "/dir/zz", "/dir/c"))
	c.requireStatus(StatusOK, c.path2(TypeRename, "/dir/a", "/dir/c"))
	c.requireStatus(StatusOK, c.ext(extPosixRename, func(p *pkt) { p.str("/dir/c").str("/dir/b") }))
	got, err := s.ReadFile("/dir/b")
	require.NoError(t, err)
	require.Equal(t, "aaa", string(got))
	c.requireStatus(StatusBadMessage, c.path2(TypeRename, "/dir", "/dir/sub"))

	// hardlink shares contents.
	c.requireStatus(StatusOK, c.ext(extHardlink, func(p *pkt) { p.str("/dir/b").str("/hl") }))
	c.requireStatus(StatusPermissionDenied, c.ext(extHardlink, func(p *pkt) { p.str("/dir").str("/hl2") }))
	h := c.mustOpen("/hl", OpenWrite)
	c.requireStatus(StatusOK, c.writeAt(h, 0, "X"))
	c.requireStatus(StatusOK, c.ext(extFsync, func(p *pkt) { p.str(h) }))
	c.requireStatus(StatusOK, c.closeHandle(h))
	got, _ = s.ReadFile("/dir/b")
	require.Equal(t, "Xaa", string(got))

	// REMOVE is for files, RMDIR for empty directories.
	c.requireStatus(StatusFailure, c.path(TypeRemove, "/dir"))
	c.requireStatus(StatusFailure, c.path(TypeRmdir, "/dir"))
	c.requireStatus(StatusNoSuchFile, c.path(TypeRmdir, "/hl"))
	c.requireStatus(StatusOK, c.path(TypeRemove, "/dir/b"))
	c.requireStatus(StatusOK, c.path(TypeRemove, "/dir/ln"))
	c.requireStatus(StatusNoSuchFile, c.path(TypeRemove, "/dir/b"))
	c.requireStatus(StatusOK, c.path(TypeRmdir, "/dir"))
	c.requireStatus(StatusNoSuchFile, c.path(TypeStat, "/dir"))
	c.requireStatus(StatusFailure, c.path(TypeRmdir, "/"))
	c.requireStatus(StatusBadMessage, c.path(TypeRmdir, "/."))
	c.requireStatus(StatusFailure, c.path2(TypeRename, "/", "/x"))
	c.requireStatus(StatusFailure, c.ext(extPosixRename, func(p *pkt) { p.str("/hl").str("/") }))
	got, _ = s.ReadFile("/hl")
	require.Equal(t, "Xaa", string(got), "the other link survives")
}

func TestSetstat(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s)
	require.NoError(t, s.WriteFile("/f", []byte("0123456789"), 0o644))

	c.requireStatus(StatusOK, c.call(TypeSetstat, func(p *pkt) {
		p.str("/f").u32(AttrSize | AttrUIDGID | AttrPermissions | AttrACModTime).
			u64(4).u32(7).u32(8).u32(0o600).u32(100).u32(200)
	}))
	a := c.attrs(c.path(TypeStat, "/f"))
	require.Equal(t, testAttrs{flags: 0x0f, size: 4, uid: 7, gid: 8, perm: 0o100600, atime: 100, mtime: 200}, a)

	// Growing reads back as zeros even where old data used to be.
	c.requireStatus(StatusOK, c.call(TypeSetstat, func(p *pkt) { p.str("/f").u32(AttrSize).u64(8) }))
	got, _ := s.ReadFile("/f")
	require.Equal(t, "0123\x00\x00\x00\x00", string(got))

	// Extended attribute pairs are parsed and ignored.
	c.requireStatus(StatusOK, c.call(TypeSetstat, func(p *pkt) {
		p.str("/f").u32(AttrPermissions | AttrExtended).u32(0o640).u32(1).str("k").str("v")
	}))
	require.EqualValues(t, 0o100640, c.attrs(c.path(TypeStat, "/f")).perm)

	// Unknown flag bits can't be parsed in v3.
	c.requireStatus(StatusBadMessage, c.call(TypeSetstat, func(p *pkt) { p.str("/f").u32(0x100) }))
	// Size on a directory fails, but the other fields still apply.
	c.requireStatus(StatusFailure, c.call(TypeSetstat, func(p *pkt) {
		p.str("/").u32(AttrSize | AttrPermissions).u64(0).u32(0o700)
	}))
	require.EqualValues(t, 0o40700, c.attrs(c.path(TypeStat, "/")).perm)

	// FSETSTAT: truncating through a read-only handle is EINVAL.
	h := c.mustOpen("/f", OpenRead)
	c.requireStatus(StatusBadMessage, c.call(TypeFsetstat, func(p *pkt) { p.str(h).u32(AttrSize).u64(0) }))
	c.requireStatus(StatusOK, c.call(TypeFsetstat, func(p *pkt) { p.str(h).u32(AttrPermissions).u32(0o644) }))
	c.requireStatus(StatusFailure, c.call(TypeFsetstat, func(p *pkt) { p.str("bad").u32(0) }))

	// An absurd size is refused instead of allocated.
	c.requireStatus(StatusFailure, c.call(TypeSetstat, func(p *pkt) { p.str("/f").u32(AttrSize).u64(1 << 62) }))
	hw := c.mustOpen("/f", OpenWrite)
	c.requireStatus(StatusFailure, c.writeAt(hw, 1<<62, "x"))
}

func TestExtensions(t *testing.T) {
	s := newServer(t, Options{Limits: Limits{MaxPacket: 1, MaxRead: 2, MaxWrite: 3, MaxOpenHandles: 4}, MaxPacket: 1 << 16})
	c := dial(t, s)

	r := c.ext(extLimits, nil)
	require.EqualValues(t, TypeExtendedReply, r.typ)
	cur := cursor{t: t, b: r.body}
	require.Equal(t, []uint64{1, 2, 3, 4}, []uint64{cur.u64(), cur.u64(), cur.u64(), cur.u64()})
	require.Empty(t, cur.b)

	r = c.ext(extStatvfs, func(p *pkt) { p.str("/") })
	require.EqualValues(t, TypeExtendedReply, r.typ)
	require.Len(t, r.body, 11*8)
	c.requireStatus(StatusNoSuchFile, c.ext(extStatvfs, func(p *pkt) { p.str("/nope") }))

	require.NoError(t, s.WriteFile("/f", nil, 0o644))
	h := c.mustOpen("/f", OpenRead)
	r = c.ext(extFstatvfs, func(p *pkt) { p.str(h) })
	require.EqualValues(t, TypeExtendedReply, r.typ)
	c.requireStatus(StatusFailure, c.ext(extFstatvfs, func(p *pkt) { p.str("bad") }))

	c.requireStatus(StatusOpUnsupported, c.ext("nope@example.com", func(p *pkt) { p.str("x") }))

	// MaxOpenHandles is enforced per session.
	for range 3 {
		c.mustOpen("/f", OpenRead)
	}
	c.requireStatus(StatusFailure, c.open("/f", OpenRead))
	c.requireStatus(StatusFailure, c.path(TypeOpendir, "/"))

	// Extensions that aren't advertised aren't served.
	s2 := newServer(t, Options{Extensions: map[string]string{}})
	c2 := dial(t, s2)
	require.Empty(t, c2.ver.body)
	c2.requireStatus(StatusOpUnsupported, c2.ext(extLimits, nil))
	c2.requireStatus(StatusOpUnsupported, c2.ext(extPosixRename, func(p *pkt) { p.str("a").str("b") }))
}

func TestMalformedRequests(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s)

	// Truncated fields get BAD_MESSAGE with the request's id.
	c.requireStatus(StatusBadMessage, c.call(TypeRead, func(p *pkt) { p.str("h").u32(1) }))
	c.requireStatus(StatusBadMessage, c.call(TypeOpen, func(p *pkt) { p.u32(100).raw('a') }))
	c.requireStatus(StatusBadMessage, c.call(TypeSetstat, func(p *pkt) {
		p.str("/").u32(AttrExtended).u32(0xffffffff)
	}))
	// Trailing bytes are ignored, as OpenSSH does.
	c.requireStatus(StatusOK, c.call(TypeMkdir, func(p *pkt) { p.str("/d").u32(0).raw(1, 2, 3) }))
	// An unknown type gets OP_UNSUPPORTED (OpenSSH would stay silent).
	c.requireStatus(StatusOpUnsupported, c.call(99, nil))
	require.Equal(t, 1, s.Requests(99))

	drops := map[string][]byte{
		"second INIT":    newInit(3).bytes(),
		"no id":          {0, 0, 0, 3, TypeStat, 0, 0},
		"zero length":    {0, 0, 0, 0},
		"over MaxPacket": append([]byte{0, 4, 0, 1, TypeWrite}, make([]byte, 262144)...),
	}
	for name, b := range drops {
		t.Run(name, func(t *testing.T) {
			c := dial(t, s)
			_, _ = c.w.Write(b) // may fail once the server has hung up
			c.expectEOF()
		})
	}
}

func TestMaxPacketBoundary(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s)
	h := c.mustOpen("/f", OpenWrite|OpenCreat)
	// The largest WRITE that fits 262144 exactly is accepted.
	hdr := 1 + 4 + 4 + len(h) + 8 + 4
	data := strings.Repeat("z", 262144-hdr)
	c.requireStatus(StatusOK, c.writeAt(h, 0, data))
	// One byte more and the server hangs up.
	id := c.id()
	_, _ = c.w.Write(newPkt(TypeWrite, id).str(h).u64(0).str(data + "z").bytes())
	c.expectEOF()
}

func TestSessionEndClosesHandles(t *testing.T) {
	s := newServer(t, Options{})
	require.NoError(t, s.WriteFile("/f", []byte("x"), 0o644))
	c := dial(t, s)
	c.mustOpen("/f", OpenRead)
	c.handle(c.path(TypeOpendir, "/"))
	require.Equal(t, 2, s.OpenHandles())
	// Handles are per session.
	c2 := dial(t, s)
	h2 := c2.mustOpen("/f", OpenRead)
	c.requireStatus(StatusFailure, c.readAt(h2, 0, 1))
	require.Equal(t, 3, s.OpenHandles())

	require.NoError(t, c.w.Close())
	c.expectEOF() // EOF comes after the session's cleanup
	require.Equal(t, 1, s.OpenHandles())
}

func TestHelpers(t *testing.T) {
	s := newServer(t, Options{})
	require.NoError(t, s.MkdirAll("/a/b/c", 0o700))
	require.NoError(t, s.MkdirAll("/a/b/c", 0o700))
	a, err := s.Stat("/a/b")
	require.NoError(t, err)
	require.EqualValues(t, 0o40700, a.Mode)
	require.NoError(t, s.WriteFile("/a/f", []byte("x"), 0o640|fs.ModeSetgid))
	a, err = s.Lstat("/a/f")
	require.NoError(t, err)
	require.EqualValues(t, 0o102640, a.Mode)
	require.EqualValues(t, 1, a.Size)
	require.ErrorIs(t, s.Mkdir("/a", 0o700), fs.ErrExist)
	_, err = s.ReadFile("/nope")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorIs(t, s.WriteFile("/nope/f", nil, 0o644), fs.ErrNotExist)
	require.Error(t, s.WriteFile("/a", nil, 0o644))
	require.Error(t, s.MkdirAll("/a/f/g", 0o755))
}

// TestBulkTransfer moves more than the pipe window in both directions with
// pipelined requests, exercising ring wrap-around and back-pressure.
func TestBulkTransfer(t *testing.T) {
	s := newServer(t, Options{Window: 100 << 10})
	c := dial(t, s)
	const chunk = 32 << 10
	const n = 64
	want := make([]byte, n*chunk)
	for i := range want {
		want[i] = byte(i * 7)
	}
	h := c.mustOpen("/bulk", OpenRead|OpenWrite|OpenCreat)
	go func() {
		for i := range n {
			off := i * chunk
			_, _ = c.w.Write(newPkt(TypeWrite, uint32(1000+i)).str(h).u64(uint64(off)).str(string(want[off : off+chunk])).bytes())
		}
	}()
	for range n {
		c.requireStatus(StatusOK, c.recv())
	}
	go func() {
		for i := range n {
			_, _ = c.w.Write(newPkt(TypeRead, uint32(2000+i)).str(h).u64(uint64(i * chunk)).u32(chunk).bytes())
		}
	}()
	got := make([]byte, n*chunk)
	for range n {
		r := c.recv()
		i := int(r.id) - 2000
		copy(got[i*chunk:], c.data(r))
	}
	require.True(t, bytes.Equal(want, got))
}

func TestClientClosesReadEnd(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s)
	require.NoError(t, c.r.Close())
	// The next reply fails to write, which ends the session; the client's
	// writes then fail too.
	_, _ = c.w.Write(statPkt(1, "/"))
	_, err := c.w.Write(statPkt(2, "/"))
	for err == nil {
		_, err = c.w.Write(statPkt(3, "/"))
	}
	require.ErrorIs(t, err, io.ErrClosedPipe)
}
