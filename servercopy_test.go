package sftp

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

func TestCopyInsideTheServer(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(1<<20+123, 7)
	writeLocal(t, filepath.Join(dir, "src"), data, 0o640)
	writeLocal(t, filepath.Join(dir, "old"), randBytes(3<<20, 8), 0o644)
	writeLocal(t, filepath.Join(dir, "empty"), nil, 0o644)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	require.True(t, c.hasExt(extCopyData), "OpenSSH 9.0+ offers copy-data")

	require.NoError(t, c.Copy(ctx, "src", "dst"))
	require.Equal(t, data, readLocal(t, filepath.Join(dir, "dst")))
	fi, err := os.Stat(filepath.Join(dir, "dst"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o640), fi.Mode().Perm(), "created with the source's permissions")

	// Many small ranges in flight, onto a longer file that must be truncated.
	require.NoError(t, c.copyData(ctx, "src", "old", 64<<10))
	require.Equal(t, data, readLocal(t, filepath.Join(dir, "old")))
	// A range size that divides the file exactly, and an empty file.
	require.NoError(t, c.copyData(ctx, "src", "exact", uint64(len(data))))
	require.Equal(t, data, readLocal(t, filepath.Join(dir, "exact")))
	require.NoError(t, c.Copy(ctx, "empty", "empty2"))
	require.Empty(t, readLocal(t, filepath.Join(dir, "empty2")))

	err = c.Copy(ctx, "missing", "x")
	require.ErrorIs(t, err, fs.ErrNotExist)
	var le *os.LinkError
	require.ErrorAs(t, err, &le)
	require.NoFileExists(t, filepath.Join(dir, "x"))
	require.Error(t, c.Copy(ctx, ".", "x"), "a directory is not copied")
	requireNoOpenHandles(t, c)
}

// requireNoOpenHandles checks the server holds no handle of c's session: OpenSSH's
// sftp-server reuses the lowest free handle number, so a fresh OPEN gets handle 0.
func requireNoOpenHandles(t *testing.T, c *Client) {
	t.Helper()
	ctx := testCtx(t)
	f, err := c.Open(ctx, ".")
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, "\x00\x00\x00\x00", f.handle, "a handle was left open")
}

func TestCopyUnsupported(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{})
	require.NoError(t, srv.WriteFile("/a", []byte("x"), 0o644))
	err := c.Copy(testCtx(t), "/a", "/b")
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.Zero(t, srv.OpenHandles())
	_, err = srv.ReadFile("/b")
	require.ErrorIs(t, err, fs.ErrNotExist, "nothing was created")
	_, _, err = c.UserGroupNames(testCtx(t), []uint32{0}, nil)
	require.ErrorIs(t, err, errors.ErrUnsupported)
}

func TestUserGroupNames(t *testing.T) {
	c := newServerClient(t, t.TempDir())
	me, err := user.Current()
	require.NoError(t, err)
	uid, err := strconv.Atoi(me.Uid)
	require.NoError(t, err)
	gid, err := strconv.Atoi(me.Gid)
	require.NoError(t, err)
	grp, err := user.LookupGroupId(me.Gid)
	require.NoError(t, err)

	users, groups, err := c.UserGroupNames(testCtx(t), []uint32{uint32(uid), 4_000_000_000}, []uint32{uint32(gid)})
	require.NoError(t, err)
	require.Equal(t, []string{me.Username, ""}, users, "an unknown id comes back empty")
	require.Equal(t, []string{grp.Name}, groups)
	users, groups, err = c.UserGroupNames(testCtx(t), nil, nil)
	require.NoError(t, err)
	require.Empty(t, users)
	require.Empty(t, groups)
}

// copyServer is a fault server that advertises copy-data and users-groups-by-id (it
// answers both with OP_UNSUPPORTED unless a hook steps in) and reports CLOSEs to w.
func copyServer(t *testing.T, w *closeWatch, opts testserver.Options) (*Client, *testserver.Server) {
	opts.Extensions = map[string]string{extCopyData: "1", extUsersGroups: "1"}
	stall := opts.Stall
	opts.Stall = func(r testserver.Request) bool {
		w.observe(r)
		return stall != nil && stall(r)
	}
	c, srv := newTestServerClient(t, opts)
	require.NoError(t, srv.WriteFile("/src", []byte("data"), 0o644))
	return c, srv
}

func TestCopyServerFaults(t *testing.T) {
	isCopy := func(r testserver.Request) bool { return r.ExtName == extCopyData }

	t.Run("refused", func(t *testing.T) {
		w := newCloseWatch()
		c, srv := copyServer(t, w, testserver.Options{Fail: func(r testserver.Request) uint32 {
			if isCopy(r) {
				return uint32(StatusFailure)
			}
			return 0
		}})
		err := c.Copy(testCtx(t), "/src", "/dst")
		require.ErrorIs(t, err, &StatusError{Code: StatusFailure})
		require.Zero(t, srv.OpenHandles(), "both handles are closed before Copy returns")
		requireWorks(t, c)
	})

	t.Run("advertised but unsupported", func(t *testing.T) {
		w := newCloseWatch()
		c, srv := copyServer(t, w, testserver.Options{})
		require.ErrorIs(t, c.Copy(testCtx(t), "/src", "/dst"), errors.ErrUnsupported)
		require.Zero(t, srv.OpenHandles())
	})

	t.Run("stalled", func(t *testing.T) {
		w := newCloseWatch()
		c, srv := copyServer(t, w, testserver.Options{Stall: stallFirst(isCopy)})
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		res := tsGo(func() error { return c.Copy(ctx, "/src", "/dst") })
		tsWaitStalled(t, srv, 1)
		cancel()
		require.ErrorIs(t, tsRecv(t, res, "Copy after cancel"), context.Canceled)
		requireWorks(t, c)
		w.waitHandles(t, srv) // closed in the background
	})
}

func TestUserGroupNamesMalformedReplies(t *testing.T) {
	// reply crafts an EXTENDED_REPLY carrying the given user and group name lists.
	reply := func(id uint32, users, groups []string) []byte {
		pack := func(names []string) string {
			var b []byte
			for _, n := range names {
				b = sshfx.AppendString(b, n)
			}
			return string(b)
		}
		body := sshfx.AppendString(sshfx.AppendString(nil, pack(users)), pack(groups))
		pkt := binary.BigEndian.AppendUint32(nil, uint32(5+len(body)))
		pkt = append(pkt, testserver.TypeExtendedReply)
		pkt = binary.BigEndian.AppendUint32(pkt, id)
		return append(pkt, body...)
	}
	for _, tc := range []struct {
		name          string
		users, groups []string
	}{
		{"too many users", []string{"a", "b"}, []string{"g"}},
		{"too few groups", []string{"a"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestServerClient(t, testserver.Options{
				Extensions: map[string]string{extUsersGroups: "1"},
				Corrupt: func(r testserver.Request, _ []byte) [][]byte {
					if r.ExtName != extUsersGroups {
						return nil
					}
					return [][]byte{reply(r.ID, tc.users, tc.groups)}
				},
			})
			_, _, err := c.UserGroupNames(testCtx(t), []uint32{1}, []uint32{1})
			requireProtocolError(t, err)
		})
	}
	// A well-formed reply is taken as it is.
	c, _ := newTestServerClient(t, testserver.Options{
		Extensions: map[string]string{extUsersGroups: "1"},
		Corrupt: func(r testserver.Request, _ []byte) [][]byte {
			if r.ExtName != extUsersGroups {
				return nil
			}
			return [][]byte{reply(r.ID, []string{"root", ""}, []string{"wheel"})}
		},
	})
	users, groups, err := c.UserGroupNames(testCtx(t), []uint32{0, 7}, []uint32{0})
	require.NoError(t, err)
	require.Equal(t, []string{"root", ""}, users)
	require.Equal(t, []string{"wheel"}, groups)
}

// TestCopyOntoItself copies a file onto itself under every name SFTP v3 lets a
// client reach it by: the same name, a symbolic link and a hard link. The source
// must come out as it went in (it used to be truncated to 0 bytes before the copy
// read it).
func TestCopyOntoItself(t *testing.T) {
	data := randBytes(3<<20+17, 11)
	for _, tc := range []struct {
		name string
		make func(t *testing.T, c *Client, dir string) string // returns dst
	}{
		{"absolute path", func(_ *testing.T, _ *Client, dir string) string { return filepath.Join(dir, "src") }},
		{"symlink", func(t *testing.T, _ *Client, dir string) string {
			require.NoError(t, os.Symlink("src", filepath.Join(dir, "alias")))
			return "alias"
		}},
		{"hard link", func(t *testing.T, c *Client, _ string) string {
			require.NoError(t, c.Link(testCtx(t), "src", "twin"))
			return "twin"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeLocal(t, filepath.Join(dir, "src"), data, 0o640)
			c := newServerClient(t, dir)
			dst := tc.make(t, c, dir)
			// Small ranges, several in flight, as well as Copy's own.
			require.NoError(t, c.Copy(testCtx(t), "src", dst))
			require.Equal(t, data, readLocal(t, filepath.Join(dir, "src")), "the source is unchanged")
			require.NoError(t, c.copyData(testCtx(t), "src", dst, 256<<10))
			require.Equal(t, data, readLocal(t, filepath.Join(dir, "src")), "the source is unchanged")
			requireNoOpenHandles(t, c)
		})
	}
	// The same path is refused (OpenSSH would answer a bare FAILURE), and nothing is
	// opened, so nothing can be truncated.
	dir := t.TempDir()
	writeLocal(t, filepath.Join(dir, "src"), data, 0o640)
	c := newServerClient(t, dir)
	err := c.Copy(testCtx(t), "src", "src")
	require.ErrorIs(t, err, errCopySame)
	require.ErrorIs(t, err, fs.ErrInvalid)
	require.Equal(t, data, readLocal(t, filepath.Join(dir, "src")), "the source is unchanged")
	requireNoOpenHandles(t, c)
}

// TestCopyOntoLongerFile: dst is no longer truncated when it is opened, so its size
// must be set to src's afterwards, or it would keep its old tail.
func TestCopyOntoLongerFile(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(1<<20+5, 12)
	writeLocal(t, filepath.Join(dir, "src"), data, 0o640)
	writeLocal(t, filepath.Join(dir, "dst"), randBytes(5<<20, 13), 0o600)
	c := newServerClient(t, dir)
	require.NoError(t, c.Copy(testCtx(t), "src", "dst"))
	require.Equal(t, data, readLocal(t, filepath.Join(dir, "dst")), "dst ends with src's data and size")
	fi, err := os.Stat(filepath.Join(dir, "dst"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), fi.Mode().Perm(), "an existing dst keeps its mode, as with cp")
	requireNoOpenHandles(t, c)
}

// TestCopyHugeSourceSize: a server that reports src's size as 2^63 and answers every
// range with EOF. The copy must stop issuing ranges at the first EOF, not send one
// per 64 MiB up to 2^63 (2^37 requests, bounded only by ctx).
func TestCopyHugeSourceSize(t *testing.T) {
	var fstats, ranges atomic.Int32
	w := newCloseWatch()
	c, srv := copyServer(t, w, testserver.Options{
		Corrupt: func(r testserver.Request, reply []byte) [][]byte {
			switch {
			case r.Type == testserver.TypeFstat && fstats.Add(1) == 1:
				// The first FSTAT, which sizes the ranges: its size becomes 2^63.
				flags := binary.BigEndian.Uint32(reply[9:])
				if len(reply) < 21 || reply[4] != testserver.TypeAttrs || flags&1 == 0 {
					return nil
				}
				p := slices.Clone(reply)
				binary.BigEndian.PutUint64(p[13:], 1<<63)
				return [][]byte{p}
			case r.ExtName == extCopyData:
				ranges.Add(1)
				pkt := binary.BigEndian.AppendUint32(nil, 1+4+4+4+4)
				pkt = append(pkt, testserver.TypeStatus)
				pkt = binary.BigEndian.AppendUint32(pkt, r.ID)
				pkt = binary.BigEndian.AppendUint32(pkt, uint32(StatusEOF))
				pkt = binary.BigEndian.AppendUint32(pkt, 0) // message
				pkt = binary.BigEndian.AppendUint32(pkt, 0) // language
				return [][]byte{pkt}
			}
			return nil
		},
	})
	require.NoError(t, c.Copy(testCtx(t), "/src", "/dst"))
	require.LessOrEqual(t, ranges.Load(), int32(copyFlight+1), "no range is issued after one met end of file")
	require.EqualValues(t, 2, fstats.Load(), "src is sized before and after the ranges")
	got, err := srv.ReadFile("/dst")
	require.NoError(t, err)
	require.Len(t, got, 4, "dst takes src's size from the FSTAT after the copy")
	require.Zero(t, srv.OpenHandles())
}
