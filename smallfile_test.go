package sftp

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Tests of the two-round-trip path for small files (smallfile.go): that the requests
// really go out together, and that every way the file or the server can differ from
// what the listing promised still gives a byte-identical copy or a clear error, with
// no handle left open.

// stallTypes returns a Stall hook that withholds the replies to requests of the given
// types while on is set.
func stallTypes(on *atomic.Bool, types ...uint8) func(testserver.Request) bool {
	return func(r testserver.Request) bool {
		if !on.Load() {
			return false
		}
		for _, typ := range types {
			if r.Type == typ {
				return true
			}
		}
		return false
	}
}

// TestSmallGetPipelined proves without timing that a small file's READs and CLOSE go
// out together: the server withholds every reply to them, and all three arrive.
func TestSmallGetPipelined(t *testing.T) {
	var on atomic.Bool
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallTypes(&on, testserver.TypeRead, testserver.TypeClose)})
	data := gpData(4096, 1)
	require.NoError(t, srv.WriteFile("/f", data, 0o644))
	local := filepath.Join(t.TempDir(), "f")
	on.Store(true)
	done := tsGo(func() error { return c.Get(testCtx(t), "/f", local) })
	tsWaitStalled(t, srv, 3) // the READ, the READ past the end, and the CLOSE
	require.Equal(t, 1, srv.Requests(testserver.TypeClose), "CLOSE sent before any READ was answered")
	on.Store(false)
	srv.ReleaseStalled()
	require.NoError(t, tsRecv(t, done, "Get"))
	require.Equal(t, data, gpRead(t, local))
	require.Equal(t, 2, srv.Requests(testserver.TypeRead))
	require.Zero(t, srv.OpenHandles())
}

// TestSmallPutPipelined: the WRITE, FSETSTAT, fsync and CLOSE of a small upload all
// reach the server before any of them is answered, and the rename only after.
func TestSmallPutPipelined(t *testing.T) {
	var on atomic.Bool
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallTypes(&on,
		testserver.TypeWrite, testserver.TypeFsetstat, testserver.TypeExtended, testserver.TypeClose)})
	data := gpData(4096, 2)
	local := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(local, data, 0o640))
	srv.ResetStats()
	on.Store(true)
	done := tsGo(func() error { return c.Put(testCtx(t), local, "/f", Preserve(), Fsync()) })
	tsWaitStalled(t, srv, 4)
	// The one EXTENDED is the fsync: the rename (posix-rename@openssh.com) waits for
	// the CLOSE's reply.
	require.Equal(t, 1, srv.Requests(testserver.TypeExtended))
	require.Zero(t, srv.Requests(testserver.TypeRename))
	on.Store(false)
	srv.ReleaseStalled()
	require.NoError(t, tsRecv(t, done, "Put"))
	got, err := srv.ReadFile("/f")
	require.NoError(t, err)
	require.Equal(t, data, got)
	a, err := srv.Stat("/f")
	require.NoError(t, err)
	require.Equal(t, uint32(0o640), a.Mode&0o777)
	require.Zero(t, srv.OpenHandles())
}

// smallTree writes files of sizes around the edges of the small path under root.
func smallTree(t *testing.T, root string, maxRead int) map[string][]byte {
	t.Helper()
	sizes := []int{0, 1, 999, 1000, 1001, 4096, 65536, maxRead - 1, maxRead, maxRead + 1, 3*maxRead + 17}
	want := map[string][]byte{}
	for i := range 40 {
		n := sizes[i%len(sizes)]
		name := filepath.Join("d"+strconv.Itoa(i%3), "f"+strconv.Itoa(i))
		want[filepath.ToSlash(name)] = gpData(n, uint64(i))
		gpWrite(t, filepath.Join(root, name), want[filepath.ToSlash(name)])
	}
	return want
}

func readTree(t *testing.T, root string, want map[string][]byte) {
	t.Helper()
	for name, data := range want {
		require.Equal(t, data, gpRead(t, filepath.Join(root, filepath.FromSlash(name))), name)
	}
	n := 0
	require.NoError(t, filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	}))
	require.Equal(t, len(want), n, "files in %s", root)
}

// TestSmallTreeFaults copies a tree both ways through servers that reorder replies,
// cut READs short, or cap them, and checks the copies byte for byte.
func TestSmallTreeFaults(t *testing.T) {
	for name, opts := range map[string]testserver.Options{
		"reorder": {Reorder: 5},
		"readcap": {ReadCap: 1000},
		"shorten": {Shorten: func(off int64, asked int) int { return max(1, asked/3) }},
	} {
		t.Run(name, func(t *testing.T) {
			c, srv := newTestServerClient(t, opts)
			ctx := testCtx(t)
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			want := smallTree(t, src, c.Limits().MaxRead)
			require.NoError(t, c.Put(ctx, src, "/tree", Recursive(), Preserve()))
			require.NoError(t, c.Get(ctx, "/tree", filepath.Join(dir, "back"), Recursive(), Preserve()))
			readTree(t, filepath.Join(dir, "back"), want)
			require.Zero(t, srv.OpenHandles())
		})
	}
}

// TestSmallGetChangedSinceListing changes the file between the STAT that sizes it and
// the transfer: the copy is what the file holds when read, whether it grew, shrank or
// was emptied.
func TestSmallGetChangedSinceListing(t *testing.T) {
	for name, size := range map[string]int{
		"grew a little": 4096 + 10, "grew a lot": 4096 + 600_000, "shrank": 100, "emptied": 0,
	} {
		t.Run(name, func(t *testing.T) {
			var on atomic.Bool
			c, srv := newTestServerClient(t, testserver.Options{Stall: stallTypes(&on, testserver.TypeStat)})
			require.NoError(t, srv.WriteFile("/f", gpData(4096, 1), 0o644))
			local := filepath.Join(t.TempDir(), "f")
			on.Store(true)
			done := tsGo(func() error { return c.Get(testCtx(t), "/f", local) })
			tsWaitStalled(t, srv, 1)
			on.Store(false)
			data := gpData(size, 2)
			require.NoError(t, srv.WriteFile("/f", data, 0o644))
			srv.ReleaseStalled()
			require.NoError(t, tsRecv(t, done, "Get"))
			require.Equal(t, data, gpRead(t, local))
			require.Zero(t, srv.OpenHandles())
		})
	}
}

// TestSmallStatusErrors: a failure answering any of the pipelined requests fails the
// transfer with the server's error (but a read handle's CLOSE does not matter), leaves
// no part file, and no handle open.
func TestSmallStatusErrors(t *testing.T) {
	const failure = 4 // SSH_FX_FAILURE
	failOn := func(typ uint8, off uint64) func(testserver.Request) uint32 {
		return func(r testserver.Request) uint32 {
			if r.Type == typ && (typ != testserver.TypeRead || r.Offset == off) {
				return failure
			}
			return 0
		}
	}
	var once atomic.Bool
	failOnce := func(r testserver.Request) uint32 {
		if r.Type == testserver.TypeRead && once.CompareAndSwap(false, true) {
			return failure
		}
		return 0
	}
	for _, tc := range []struct {
		name    string
		get     bool
		fail    func(testserver.Request) uint32
		wantErr bool
	}{
		// As from a server that ran the CLOSE first: read again, on a new handle.
		{"get: READ once", true, failOnce, false},
		{"get: READ", true, failOn(testserver.TypeRead, 0), true},
		{"get: READ past the end", true, failOn(testserver.TypeRead, 4096), true},
		{"get: CLOSE", true, failOn(testserver.TypeClose, 0), false},
		{"put: WRITE", false, failOn(testserver.TypeWrite, 0), true},
		{"put: FSETSTAT", false, failOn(testserver.TypeFsetstat, 0), true},
		{"put: fsync", false, failOn(testserver.TypeExtended, 0), true},
		{"put: CLOSE", false, failOn(testserver.TypeClose, 0), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var armed atomic.Bool
			c, srv := newTestServerClient(t, testserver.Options{Fail: func(r testserver.Request) uint32 {
				if !armed.Load() {
					return 0
				}
				return tc.fail(r)
			}})
			ctx := testCtx(t)
			dir := t.TempDir()
			local := filepath.Join(dir, "f")
			data := gpData(4096, 3)
			var err error
			if tc.get {
				require.NoError(t, srv.WriteFile("/f", data, 0o644))
				armed.Store(true)
				err = c.Get(ctx, "/f", local)
			} else {
				require.NoError(t, os.WriteFile(local, data, 0o644))
				armed.Store(true)
				err = c.Put(ctx, local, "/f", Preserve(), Fsync())
			}
			armed.Store(false)
			settle(t, c)
			if tc.fail(testserver.Request{Type: testserver.TypeClose}) != 0 {
				// The server refused the CLOSE, so it keeps the handle: all the client
				// can do is not wait for it.
				require.Equal(t, 1, srv.OpenHandles())
			} else {
				require.Zero(t, srv.OpenHandles())
			}
			if !tc.wantErr {
				require.NoError(t, err)
				require.Equal(t, data, gpRead(t, local))
				return
			}
			var se *StatusError
			require.True(t, errors.As(err, &se), "want a *StatusError, got %T: %v", err, err)
			if tc.get {
				// No copy; a part file only if it holds data read before the failure,
				// for Resume.
				for _, name := range dirNames(t, dir) {
					require.Equal(t, "f"+partSuffix, name)
					part := gpRead(t, filepath.Join(dir, name))
					require.NotEmpty(t, part)
					require.Equal(t, data[:len(part)], part)
				}
				return
			}
			_, serr := srv.Stat("/f")
			require.ErrorIs(t, serr, fs.ErrNotExist, "no copy at the destination")
			part, serr := srv.ReadFile("/.f" + partSuffix)
			if tc.name == "put: WRITE" {
				require.ErrorIs(t, serr, fs.ErrNotExist, "the empty part file is removed")
			} else {
				require.NoError(t, serr, "the part file keeps the acknowledged data, for Resume")
				require.Equal(t, data, part)
			}
		})
	}
}

// TestSmallStalledCancel: a small transfer whose replies never come ends when ctx
// does, or when the Client is closed, and its handle is closed at the server.
func TestSmallStalledCancel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		get    bool
		closeC bool
	}{
		{"get ctx", true, false}, {"put ctx", false, false},
		{"get Close", true, true}, {"put Close", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var on atomic.Bool
			c, srv := newTestServerClient(t, testserver.Options{Stall: stallTypes(&on, testserver.TypeRead, testserver.TypeWrite)})
			dir := t.TempDir()
			local := filepath.Join(dir, "f")
			data := gpData(4096, 4)
			require.NoError(t, srv.WriteFile("/f", data, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "up"), data, 0o644))
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			on.Store(true)
			done := tsGo(func() error {
				if tc.get {
					return c.Get(ctx, "/f", local)
				}
				return c.Put(ctx, filepath.Join(dir, "up"), "/g")
			})
			tsWaitStalled(t, srv, 1)
			if tc.closeC {
				require.NoError(t, c.Close())
				require.ErrorIs(t, tsRecv(t, done, "transfer"), net.ErrClosed)
				return // the session is gone, and with it every handle
			}
			cancel()
			require.ErrorIs(t, tsRecv(t, done, "transfer"), context.Canceled)
			on.Store(false)
			srv.ReleaseStalled()
			settle(t, c)
			require.Zero(t, srv.OpenHandles())
			_, err := os.Lstat(local + partSuffix)
			require.ErrorIs(t, err, fs.ErrNotExist)
			_, err = srv.Lstat("/.g" + partSuffix)
			require.ErrorIs(t, err, fs.ErrNotExist)
		})
	}
}

// TestSmallTreeOpenSSH copies a tree of small files both ways with OpenSSH's
// sftp-server, with Preserve and Fsync so that every pipelined request is in play, and
// checks the copies and that the server has no descriptor left open.
func TestSmallTreeOpenSSH(t *testing.T) {
	dir := t.TempDir()
	c, pid := getPutClient(t, dir)
	ctx := testCtx(t)
	before := serverFDs(t, pid)
	src := filepath.Join(t.TempDir(), "src")
	want := smallTree(t, src, c.Limits().MaxRead)
	require.NoError(t, c.Put(ctx, src, filepath.Join(dir, "tree"), Recursive(), Preserve(), Fsync()))
	readTree(t, filepath.Join(dir, "tree"), want)
	back := filepath.Join(t.TempDir(), "back")
	require.NoError(t, c.Get(ctx, filepath.Join(dir, "tree"), back, Recursive(), Preserve(), Fsync()))
	readTree(t, back, want)
	fi, err := os.Stat(filepath.Join(back, "d0", "f0"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o644), fi.Mode().Perm())
	require.Equal(t, before, serverFDs(t, pid))
}
