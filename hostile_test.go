package sftp

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/localfs"
	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// The hostile-server suite: each test plays one attack a server that wants to harm the
// caller can make, and checks the safe outcome (nothing written outside the
// destination, no panic, no hang past ctx, bounded memory). Where the behaviour is a
// file system's (links, modes), the server is OpenSSH's sftp-server serving a
// directory the test prepared as the attacker would; where it takes replies no real
// server sends (long handles, endless trees, unanswered requests), it is the
// in-process testserver with replies rewritten by its Corrupt hook.

// victimFile makes a file outside every directory the transfer may touch, and returns
// a check that it still holds what it held.
func victimFile(t *testing.T) (string, func()) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "victim")
	gpWrite(t, name, []byte("precious"))
	return name, func() {
		t.Helper()
		require.Equal(t, []byte("precious"), gpRead(t, name), "the file outside the destination changed")
	}
}

// victimDir makes a directory outside the destination, and returns a check that
// nothing was added to it and its mode is unchanged.
func victimDir(t *testing.T) (string, func()) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.Mkdir(dir, 0o700))
	return dir, func() {
		t.Helper()
		require.Empty(t, dirNames(t, dir), "something was written outside the destination")
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), "the mode of a directory outside the destination changed")
	}
}

// Finding 1: a listing that holds a file x and a link x.sluice-part pointing outside.
// The link must not be recreated where the part file goes, nor the part file opened
// through it; a run after one that left such a link behind must not follow it either.
func TestHostileGetPartNameLink(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	victim, unchanged := victimFile(t)
	gpWrite(t, filepath.Join(remote, "top", "x"), []byte("from the server"))
	require.NoError(t, os.Symlink(victim, filepath.Join(remote, "top", "x"+partSuffix)))

	out := filepath.Join(local, "top")
	for run := range 2 {
		require.NoError(t, c.Get(ctx, filepath.Join(remote, "top"), out, Recursive()), "run %d", run)
		unchanged()
		require.Equal(t, []byte("from the server"), gpRead(t, filepath.Join(out, "x")))
		require.NoFileExists(t, filepath.Join(out, "x"+partSuffix))
	}

	// A link left under the part name (by an older client, say) is replaced, not
	// written through, and Resume refuses it rather than continue into it.
	require.NoError(t, os.Symlink(victim, filepath.Join(out, "x"+partSuffix)))
	require.Error(t, c.Get(ctx, filepath.Join(remote, "top", "x"), filepath.Join(out, "x"), Resume()))
	unchanged()
	require.NoError(t, c.Get(ctx, filepath.Join(remote, "top", "x"), filepath.Join(out, "x")))
	unchanged()
	require.Equal(t, []byte("from the server"), gpRead(t, filepath.Join(out, "x")))
}

// Finding 2: run 1 recreates a remote link d -> <a local directory outside>; in run 2
// the server lists d as a directory. Creating it, filling it and (with Preserve)
// setting its mode must not follow the link, whether d is the root of the copy or
// anywhere below it.
func TestHostileGetLinkFromEarlierRun(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	victim, untouched := victimDir(t)
	top := filepath.Join(remote, "top")
	require.NoError(t, os.MkdirAll(filepath.Join(top, "a"), 0o755))
	require.NoError(t, os.Symlink(victim, filepath.Join(top, "a", "d")))

	// Run 1: the link is recreated as a link (nothing written through it).
	require.NoError(t, c.Get(ctx, top, filepath.Join(local, "top"), Recursive()))
	target, err := os.Readlink(filepath.Join(local, "top", "a", "d"))
	require.NoError(t, err)
	require.Equal(t, victim, target)
	untouched()

	// Run 2: d is now a directory holding a file.
	require.NoError(t, os.Remove(filepath.Join(top, "a", "d")))
	gpWrite(t, filepath.Join(top, "a", "d", "authorized_keys"), []byte("ssh-ed25519 attacker"))
	require.NoError(t, os.Chmod(filepath.Join(top, "a", "d"), 0o777))

	// Nested: the tree's a/d meets the link.
	err = c.Get(ctx, top, filepath.Join(local, "top"), Recursive(), Preserve())
	require.ErrorIs(t, err, localfs.ErrLinkInTheWay)
	untouched()

	// Root: the copy itself is the link (as when a caller names the copy after the
	// source's base name in a directory an earlier run filled).
	err = c.Get(ctx, filepath.Join(top, "a", "d"), filepath.Join(local, "top", "a", "d"), Recursive(), Preserve())
	require.ErrorIs(t, err, localfs.ErrLinkInTheWay)
	untouched()
}

// Finding 3: a HANDLE longer than the 256 bytes the drafts allow. It is refused as a
// protocol error (the channel fails: every later request would carry it), and no
// write path panics on it.
func TestHostileLongHandle(t *testing.T) {
	for _, n := range []int{257, 1000, 4000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c, _ := newTestServerClient(t, testserver.Options{Corrupt: longHandles(n)})
			err := c.WriteFile(testCtx(t), "/f", []byte("data"), 0o644)
			pe := requireProtocolError(t, err)
			require.Contains(t, pe.Error(), "handle of")
			requireClosedConn(t, c.main.failed())
		})
	}
}

// Finding 9: the same long handle under a recursive Put, whose files move on
// goroutines the library starts, where a panic could not be recovered by the caller.
func TestHostileLongHandlePutTree(t *testing.T) {
	c, _ := newTestServerClient(t, testserver.Options{Corrupt: longHandles(1000)})
	local := t.TempDir()
	for i := range 8 {
		gpWrite(t, filepath.Join(local, "tree", fmt.Sprint(i)), gpData(100_000, uint64(i)))
	}
	err := c.Put(testCtx(t), filepath.Join(local, "tree"), "/tree", Recursive(), Parallel(4))
	requireProtocolError(t, err)
}

// longHandles rewrites every HANDLE reply to carry a handle of n bytes.
func longHandles(n int) func(testserver.Request, []byte) [][]byte {
	return func(req testserver.Request, reply []byte) [][]byte {
		if len(reply) < 5 || reply[4] != testserver.TypeHandle {
			return nil
		}
		return [][]byte{handleReply(req.ID, strings.Repeat("h", n))}
	}
}

func TestDecodeHandleLength(t *testing.T) {
	for _, tc := range []struct {
		n  int
		ok bool
	}{{0, true}, {256, true}, {257, false}} {
		r := rawReply(sshfx.TypeHandle, string(sshfx.AppendString(nil, strings.Repeat("h", tc.n))))
		h, err := decodeHandle("OPEN", r)
		if tc.ok {
			require.NoError(t, err)
			require.Len(t, h, tc.n)
		} else {
			requireProtocolError(t, err)
		}
	}
}

// Finding 6: Preserve copies permission bits only. A server's setuid, setgid or sticky
// bit must not turn a download into a program that runs as the caller, nor a local
// one into such a program on the server.
func TestHostilePreserveSpecialBits(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	top := filepath.Join(remote, "top")
	gpWrite(t, filepath.Join(top, "sub", "prog"), []byte("#!/bin/sh\n"))
	gpWrite(t, filepath.Join(remote, "prog"), []byte("#!/bin/sh\n"))
	for _, name := range []string{filepath.Join(top, "sub", "prog"), filepath.Join(remote, "prog")} {
		require.NoError(t, os.Chmod(name, 0o755|fs.ModeSetuid|fs.ModeSetgid))
	}
	require.NoError(t, os.Chmod(filepath.Join(top, "sub"), 0o777|fs.ModeSticky|fs.ModeSetgid))
	requireMode := func(name string, want fs.FileMode) {
		t.Helper()
		fi, err := os.Stat(name)
		require.NoError(t, err)
		require.Equal(t, want, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky), name)
	}
	// Make sure the server really has the bits, or the test proves nothing.
	fi, err := c.Stat(ctx, filepath.Join(remote, "prog"))
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&fs.ModeSetuid)

	require.NoError(t, c.Get(ctx, filepath.Join(remote, "prog"), filepath.Join(local, "prog"), Preserve()))
	requireMode(filepath.Join(local, "prog"), 0o755)
	require.NoError(t, c.Get(ctx, top, filepath.Join(local, "top"), Recursive(), Preserve()))
	requireMode(filepath.Join(local, "top", "sub", "prog"), 0o755)
	requireMode(filepath.Join(local, "top", "sub"), 0o777)

	// Put: the local copies get the bits back, and must not carry them up.
	for _, name := range []string{filepath.Join(local, "prog"), filepath.Join(local, "top", "sub", "prog")} {
		require.NoError(t, os.Chmod(name, 0o755|fs.ModeSetuid|fs.ModeSetgid))
	}
	require.NoError(t, os.Chmod(filepath.Join(local, "top", "sub"), 0o777|fs.ModeSticky))
	require.NoError(t, c.Put(ctx, filepath.Join(local, "prog"), filepath.Join(remote, "up"), Preserve()))
	requireMode(filepath.Join(remote, "up"), 0o755)
	require.NoError(t, c.Put(ctx, filepath.Join(local, "top"), filepath.Join(remote, "uptree"), Recursive(), Preserve()))
	requireMode(filepath.Join(remote, "uptree", "sub", "prog"), 0o755)
	requireMode(filepath.Join(remote, "uptree", "sub"), 0o777)
}

// Finding 7: a server that never answers CLOSE. Get and Put return the ctx error
// once ctx ends, instead of waiting for the answer.
func TestHostileCloseNeverAnswered(t *testing.T) {
	for _, tc := range []struct {
		name string
		nth  int // which CLOSE is withheld: in the tree, the first is the listing's
		call func(ctx context.Context, c *Client, local string) error
	}{
		{"Get", 1, func(ctx context.Context, c *Client, local string) error {
			return c.Get(ctx, "/f", filepath.Join(local, "got"))
		}},
		{"Put", 1, func(ctx context.Context, c *Client, local string) error {
			return c.Put(ctx, filepath.Join(local, "src"), "/put")
		}},
		{"Get tree", 2, func(ctx context.Context, c *Client, local string) error {
			return c.Get(ctx, "/dir", filepath.Join(local, "tree"), Recursive())
		}},
		{"Put tree", 1, func(ctx context.Context, c *Client, local string) error {
			return c.Put(ctx, local, "/tree", Recursive())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var closes atomic.Int32
			c, srv, _, local := cancelEnv(t, func(r testserver.Request) bool {
				return r.Type == testserver.TypeClose && int(closes.Add(1)) == tc.nth
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := tsGo(func() error { return tc.call(ctx, c, local) })
			tsWaitStalled(t, srv, 1)
			cancel()
			require.ErrorIs(t, tsRecv(t, res, tc.name), context.Canceled)
			require.Equal(t, 1, srv.ReleaseStalled())
			requireWorks(t, c)
		})
	}
}

// Finding 8: a directory that contains itself, served as plain directories (no link
// to notice), forever. The walk stops at 64 levels with an error naming the path.
func TestHostileSelfContainingDir(t *testing.T) {
	loop := &scriptedTree{prefix: "/loop", names: []string{"d"}}
	c, srv := newTestServerClient(t, testserver.Options{Corrupt: loop.corrupt})
	require.NoError(t, srv.Mkdir("/loop", 0o755))
	err := c.Get(testCtx(t), "/loop", filepath.Join(t.TempDir(), "out"), Recursive())
	require.ErrorIs(t, err, errTooDeep)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "/loop"+strings.Repeat("/d", 64), pe.Path)
	require.Contains(t, err.Error(), "more than 64 levels")
	require.Equal(t, 64, srv.Requests(testserver.TypeOpendir), "one listing per level")
}

// A listing that names one entry twice (here as a directory and as a link) while the
// first is still being copied: the second is refused, never made at the same local
// name at the same time. The directory is copied, the link is not.
func TestHostileDuplicateName(t *testing.T) {
	dup := &scriptedTree{prefix: "/dup", names: []string{"x"}, dupAsLink: true}
	c, srv := newTestServerClient(t, testserver.Options{Corrupt: dup.corrupt})
	require.NoError(t, srv.Mkdir("/dup", 0o755))
	out := filepath.Join(t.TempDir(), "out")
	err := c.Get(testCtx(t), "/dup", out, Recursive())
	require.ErrorIs(t, err, errDuplicateName)
	var te *TreeError
	require.ErrorAs(t, err, &te)
	var pe *fs.PathError
	require.ErrorAs(t, te.Failed[0], &pe)
	require.Equal(t, "/dup/x", pe.Path)
	fi, err := os.Lstat(filepath.Join(out, "x"))
	require.NoError(t, err)
	require.True(t, fi.IsDir(), "the link took the directory's place")
}

// scriptedTree serves every directory under prefix itself, through the Corrupt hook:
// OPENDIR of any path there gets a handle of the script's, and its READDIR lists names
// as directories (with dupAsLink, each name again as a link), then EOF. The server's
// own replies for those paths are replaced, so the tree never ends.
type scriptedTree struct {
	prefix    string
	names     []string
	dupAsLink bool

	mu     sync.Mutex
	n      int
	listed map[string]bool
}

func (s *scriptedTree) corrupt(req testserver.Request, reply []byte) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	const handlePrefix = "script:"
	switch {
	case req.Type == testserver.TypeOpendir && strings.HasPrefix(req.Path, s.prefix):
		s.n++
		return [][]byte{handleReply(req.ID, fmt.Sprint(handlePrefix, s.n))}
	case req.Type == testserver.TypeReaddir && strings.HasPrefix(req.Handle, handlePrefix):
		if s.listed == nil {
			s.listed = map[string]bool{}
		}
		if s.listed[req.Handle] {
			return [][]byte{statusReply(req.ID, sshfx.StatusEOF, "")}
		}
		s.listed[req.Handle] = true
		return [][]byte{s.nameReply(req.ID)}
	case req.Type == testserver.TypeClose && strings.HasPrefix(req.Handle, handlePrefix):
		return [][]byte{statusReply(req.ID, sshfx.StatusOK, "")}
	}
	return nil
}

func (s *scriptedTree) nameReply(id uint32) []byte {
	type entry struct {
		name string
		mode uint32
	}
	var es []entry
	for _, name := range s.names {
		es = append(es, entry{name, 0o40755})
		if s.dupAsLink {
			es = append(es, entry{name, 0o120777})
		}
	}
	b := sshfx.AppendUint32(nil, uint32(len(es)))
	for _, e := range es {
		b = sshfx.AppendString(b, e.name)
		b = sshfx.AppendString(b, e.name)
		b = sshfx.AppendAttrs(b, &sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: e.mode})
	}
	return replyPacket(sshfx.TypeName, id, b)
}

// Put, the same class of bug on the server's side: a link planted under the part
// name is not written through, and a link where the tree has a directory is not
// followed, at the root or below it.
func TestHostilePutThroughRemoteLinks(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	victim, unchanged := victimFile(t)
	gpWrite(t, filepath.Join(local, "f"), []byte("uploaded"))
	require.NoError(t, os.Symlink(victim, filepath.Join(remote, ".f"+partSuffix)))
	require.NoError(t, c.Put(ctx, filepath.Join(local, "f"), filepath.Join(remote, "f")))
	unchanged()
	require.Equal(t, []byte("uploaded"), gpRead(t, filepath.Join(remote, "f")))

	dir, untouched := victimDir(t)
	gpWrite(t, filepath.Join(local, "tree", "d", "authorized_keys"), []byte("ssh-ed25519 attacker"))
	require.NoError(t, os.MkdirAll(filepath.Join(remote, "nested", "tree"), 0o755))
	require.NoError(t, os.Symlink(dir, filepath.Join(remote, "nested", "tree", "d")))
	err := c.Put(ctx, filepath.Join(local, "tree"), filepath.Join(remote, "nested", "tree"), Recursive(), Preserve())
	require.ErrorIs(t, err, localfs.ErrLinkInTheWay)
	untouched()

	require.NoError(t, os.Mkdir(filepath.Join(remote, "root"), 0o755))
	require.NoError(t, os.Symlink(dir, filepath.Join(remote, "root", "d")))
	err = c.Put(ctx, filepath.Join(local, "tree", "d"), filepath.Join(remote, "root", "d"), Recursive(), Preserve())
	require.ErrorIs(t, err, localfs.ErrLinkInTheWay)
	untouched()
}
