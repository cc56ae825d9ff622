package testserver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// newDirServer serves a fresh directory through Options.Root.
func newDirServer(t *testing.T, opts Options) (*Server, string) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	opts.Root = root
	s := New(opts)
	t.Cleanup(func() {
		require.NoError(t, s.Close())
		require.NoError(t, root.Close())
	})
	return s, dir
}

// backendScript runs the same requests on a server and returns each reply's status
// (or, for a reply that is not a STATUS, its type), so two backends can be compared.
func backendScript(t *testing.T, s *Server) []uint32 {
	c := dial(t, s)
	var got []uint32
	code := func(r reply) {
		if r.typ == TypeStatus {
			got = append(got, c.status(r))
			return
		}
		got = append(got, 1000+uint32(r.typ))
	}
	h := c.mustOpen("f", OpenWrite|OpenCreat|OpenTrunc)
	code(c.writeAt(h, 0, "hello "))
	code(c.writeAt(h, 6, "world"))
	code(c.readAt(h, 0, 5)) // write-only handle
	code(c.closeHandle(h))
	code(c.open("f", OpenWrite|OpenCreat|OpenExcl))
	h = c.mustOpen("f", OpenRead)
	require.Equal(t, "world", string(c.data(c.readAt(h, 6, 100))))
	code(c.readAt(h, 11, 10))
	code(c.writeAt(h, 0, "x"))
	code(c.closeHandle(h))
	code(c.path(TypeMkdir, "d"))
	code(c.path(TypeMkdir, "d"))
	code(c.path(TypeRemove, "d"))
	code(c.path(TypeRmdir, "f"))
	code(c.path2(TypeRename, "f", "g"))
	code(c.path(TypeStat, "f"))
	code(c.open("d", OpenWrite))
	h = c.mustOpen("x", OpenWrite|OpenCreat)
	code(c.closeHandle(h))
	code(c.path2(TypeRename, "g", "x"))
	code(c.ext(extPosixRename, func(p *pkt) { p.str("g").str("x") }))
	code(c.path2(TypeSymlink, "x", "l"))
	require.Equal(t, "x", c.names(c.path(TypeReadlink, "l"))[0].name)
	code(c.path(TypeReadlink, "x"))
	code(c.ext(extHardlink, func(p *pkt) { p.str("x").str("hx") }))
	code(c.call(TypeSetstat, func(p *pkt) { p.str("x").u32(AttrSize).u64(3) }))
	require.EqualValues(t, 3, c.attrs(c.path(TypeStat, "hx")).size, "a hard link shares the file")
	code(c.path(TypeRmdir, "d"))
	code(c.path(TypeRmdir, "missing"))
	code(c.path(TypeOpendir, "missing"))
	return got
}

// The directory backend answers as the in-memory tree does, which follows
// OpenSSH's sftp-server.
func TestDirBackendMatchesMemory(t *testing.T) {
	mem := backendScript(t, newServer(t, Options{}))
	s, dir := newDirServer(t, Options{})
	require.Equal(t, mem, backendScript(t, s))
	b, err := os.ReadFile(filepath.Join(dir, "x"))
	require.NoError(t, err)
	require.Equal(t, "hel", string(b))
	fi, err := os.Lstat(filepath.Join(dir, "l"))
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeSymlink)
}

// A directory listing carries each entry's attributes and an ls -l line; what the
// server's helpers write lands on the disk.
func TestDirBackendListingAndHelpers(t *testing.T) {
	s, dir := newDirServer(t, Options{})
	require.NoError(t, s.Mkdir("/sub", 0o750))
	require.NoError(t, s.WriteFile("/sub/a", []byte("abc"), 0o600))
	got, err := os.ReadFile(filepath.Join(dir, "sub", "a"))
	require.NoError(t, err)
	require.Equal(t, "abc", string(got))
	a, err := s.Stat("/sub/a")
	require.NoError(t, err)
	require.EqualValues(t, 0o100600, a.Mode)
	require.EqualValues(t, 3, a.Size)

	c := dial(t, s)
	h := c.handle(c.path(TypeOpendir, "/sub"))
	ents := c.names(c.call(TypeReaddir, func(p *pkt) { p.str(h) }))
	require.Len(t, ents, 3)
	require.Equal(t, []string{".", "..", "a"}, []string{ents[0].name, ents[1].name, ents[2].name})
	require.EqualValues(t, 3, ents[2].attrs.size)
	require.Contains(t, ents[2].long, "-rw-------")
	c.requireStatus(StatusEOF, c.call(TypeReaddir, func(p *pkt) { p.str(h) }))
	c.requireStatus(StatusOK, c.closeHandle(h))
}

// No path leaves the root, whatever ".." or links it holds.
func TestDirBackendStaysInside(t *testing.T) {
	s, dir := newDirServer(t, Options{})
	outside := filepath.Join(filepath.Dir(dir), filepath.Base(dir)+"-outside")
	require.NoError(t, os.WriteFile(outside, []byte("secret"), 0o644))
	t.Cleanup(func() { os.Remove(outside) })
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "out")))
	c := dial(t, s)
	require.Equal(t, "/", c.names(c.path(TypeRealpath, "../.."))[0].name)
	c.requireStatus(StatusNoSuchFile, c.open("../"+filepath.Base(outside), OpenRead))
	r := c.open("out", OpenRead)
	require.EqualValues(t, TypeStatus, r.typ, "a link out of the root does not open")
}
