package sftp

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Tests of the everyday calls at the round-trip floor (wholefile.go, smallfile.go,
// dir.go): how many round trips each takes, counted rather than timed, and that the
// pipelined paths stay correct when the server fails, reorders, cuts reads short, the
// file changes, ctx ends or the Client is closed.

// round is the requests a call sends before it needs a reply to any of them.
type round []uint8

// callRounds describes a call by its round trips: the requests of each round, all of
// which go out before any of their replies is needed, and the requests it sends last
// without waiting for their replies.
type callRounds struct {
	rounds   []round
	unwaited round
}

// requireRounds runs call with every reply withheld, releasing them a round at a time,
// and checks that each round's requests are exactly those that arrive while the
// replies are held: so the call takes len(rounds) round trips, and sends nothing else.
// on switches the server's Stall hook (stallAll).
func requireRounds(t *testing.T, c *Client, srv *testserver.Server, on *atomic.Bool, want callRounds, call func(ctx context.Context) error) {
	t.Helper()
	srv.ResetStats()
	seen := map[uint8]int{}
	on.Store(true)
	done := tsGo(func() error { return call(testCtx(t)) })
	for i, r := range want.rounds {
		tsWaitStalled(t, srv, len(r))
		for _, typ := range r {
			seen[typ]++
		}
		requireRequests(t, srv, seen, fmt.Sprintf("round %d", i+1))
		select {
		case err := <-done:
			t.Fatalf("the call returned (%v) with the replies of round %d held", err, i+1)
		default:
		}
		require.Equal(t, len(r), srv.ReleaseStalled())
	}
	require.NoError(t, tsRecv(t, done, "call"))
	tsWaitStalled(t, srv, len(want.unwaited))
	for _, typ := range want.unwaited {
		seen[typ]++
	}
	on.Store(false)
	require.Equal(t, len(want.unwaited), srv.ReleaseStalled())
	// Replies come in order: once a STAT is answered, the server has read everything
	// the call sent.
	requireWorks(t, c)
	seen[testserver.TypeStat]++
	requireRequests(t, srv, seen, "in all")
}

// requireRequests checks that srv has read exactly the requests counted in want.
func requireRequests(t *testing.T, srv *testserver.Server, want map[uint8]int, when string) {
	t.Helper()
	got := map[uint8]int{}
	for typ := range uint8(255) {
		if n := srv.Requests(typ); n > 0 && typ != testserver.TypeInit {
			got[typ] = n
		}
	}
	wantCopy := maps.Clone(want)
	maps.DeleteFunc(wantCopy, func(_ uint8, n int) bool { return n == 0 })
	require.Equal(t, wantCopy, got, "requests the server has read, by type, %s", when)
}

// stallAll withholds every reply while on is set.
func stallAll(on *atomic.Bool) func(testserver.Request) bool {
	return func(testserver.Request) bool { return on.Load() }
}

const (
	tOpen     = testserver.TypeOpen
	tClose    = testserver.TypeClose
	tRead     = testserver.TypeRead
	tWrite    = testserver.TypeWrite
	tStat     = testserver.TypeStat
	tOpendir  = testserver.TypeOpendir
	tReaddir  = testserver.TypeReaddir
	tExtended = testserver.TypeExtended
)

// TestSmallCallsRoundTrips counts the round trips of every small call: one for each
// single-path call and for Open, two for ReadFile, WriteFile and ReadDir of small
// files and directories (the second round's requests all go out before any reply).
func TestSmallCallsRoundTrips(t *testing.T) {
	var on atomic.Bool
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallAll(&on)})
	require.NoError(t, srv.MkdirAll("/d", 0o755))
	for i := range 20 {
		require.NoError(t, srv.WriteFile(fmt.Sprintf("/d/e%02d", i), gpData(i, 1), 0o644))
	}
	f4k := gpData(4096, 2)
	require.NoError(t, srv.WriteFile("/f", f4k, 0o644))
	require.NoError(t, srv.WriteFile("/empty", nil, 0o644))
	require.NoError(t, srv.Symlink("/f", "/link"))
	maxWrite := c.Limits().MaxWrite
	three := gpData(2*maxWrite+5, 3) // three WRITEs

	one := func(typ uint8) callRounds { return callRounds{rounds: []round{{typ}}} }
	var opened *File // what an Open case opened, closed after its count
	for _, tc := range []struct {
		name string
		want callRounds
		call func(ctx context.Context) error
	}{
		{"Stat", one(tStat), func(ctx context.Context) error { _, err := c.Stat(ctx, "/f"); return err }},
		{"Lstat", one(testserver.TypeLstat), func(ctx context.Context) error { _, err := c.Lstat(ctx, "/link"); return err }},
		{"Open", one(tOpen), func(ctx context.Context) error {
			var err error
			opened, err = c.Open(ctx, "/f")
			return err
		}},
		{"Create", one(tOpen), func(ctx context.Context) error {
			var err error
			opened, err = c.Create(ctx, "/created")
			return err
		}},
		{"OpenFile O_RDWR|O_CREATE", one(tOpen), func(ctx context.Context) error {
			var err error
			opened, err = c.OpenFile(ctx, "/rw", os.O_RDWR|os.O_CREATE, 0o600)
			return err
		}},
		{"ReadFile 4 KiB", callRounds{rounds: []round{{tStat, tOpen}, {tRead, tRead, tClose}}}, func(ctx context.Context) error {
			got, err := c.ReadFile(ctx, "/f")
			if err == nil && !slices.Equal(got, f4k) {
				err = fmt.Errorf("ReadFile returned %d bytes, not the file", len(got))
			}
			return err
		}},
		{"ReadFile empty", callRounds{rounds: []round{{tStat, tOpen}, {tRead, tClose}}}, func(ctx context.Context) error {
			got, err := c.ReadFile(ctx, "/empty")
			if err == nil && (got == nil || len(got) != 0) {
				err = fmt.Errorf("ReadFile returned %v", got)
			}
			return err
		}},
		{"WriteFile 4 KiB", callRounds{rounds: []round{{tOpen}, {tWrite, tClose}}}, func(ctx context.Context) error {
			return c.WriteFile(ctx, "/w", f4k, 0o644)
		}},
		{"WriteFile empty", callRounds{rounds: []round{{tOpen}, {tClose}}}, func(ctx context.Context) error {
			return c.WriteFile(ctx, "/w0", nil, 0o644)
		}},
		{"WriteFile three WRITEs", callRounds{rounds: []round{{tOpen}, {tWrite, tWrite, tWrite, tClose}}}, func(ctx context.Context) error {
			return c.WriteFile(ctx, "/w3", three, 0o644)
		}},
		{"ReadDir", callRounds{rounds: []round{{tOpendir}, {tReaddir, tReaddir}}, unwaited: round{tClose}}, func(ctx context.Context) error {
			es, err := c.ReadDir(ctx, "/d")
			if err == nil && len(es) != 20 {
				err = fmt.Errorf("ReadDir listed %d entries", len(es))
			}
			return err
		}},
		// DirEntries holds one page at a time, so it asks for one at a time: the page,
		// then the EOF.
		{"DirEntries", callRounds{rounds: []round{{tOpendir}, {tReaddir}, {tReaddir}}, unwaited: round{tClose}}, func(ctx context.Context) error {
			n := 0
			for _, err := range c.DirEntries(ctx, "/d") {
				if err != nil {
					return err
				}
				n++
			}
			if n != 20 {
				return fmt.Errorf("DirEntries listed %d entries", n)
			}
			return nil
		}},
		{"Remove", one(testserver.TypeRemove), func(ctx context.Context) error { return c.Remove(ctx, "/created") }},
		{"Rename", one(tExtended), func(ctx context.Context) error { return c.Rename(ctx, "/rw", "/rw2") }},
		{"Mkdir", one(testserver.TypeMkdir), func(ctx context.Context) error { return c.Mkdir(ctx, "/newdir", 0o755) }},
		// The first call also asks, beside the STAT, whether missing names stat as
		// directories (removedir.go); later calls know.
		{"MkdirAll existing", callRounds{rounds: []round{{tStat, testserver.TypeLstat}}}, func(ctx context.Context) error { return c.MkdirAll(ctx, "/d", 0o755) }},
		{"MkdirAll existing again", one(tStat), func(ctx context.Context) error { return c.MkdirAll(ctx, "/d", 0o755) }},
		{"Chmod", one(testserver.TypeSetstat), func(ctx context.Context) error { return c.Chmod(ctx, "/rw2", 0o640) }},
		{"Chtimes", one(testserver.TypeSetstat), func(ctx context.Context) error {
			return c.Chtimes(ctx, "/rw2", time.Unix(1e9, 0), time.Unix(1e9, 0))
		}},
		{"Truncate", one(testserver.TypeSetstat), func(ctx context.Context) error { return c.Truncate(ctx, "/rw2", 1) }},
		{"Symlink", one(testserver.TypeSymlink), func(ctx context.Context) error { return c.Symlink(ctx, "/f", "/link2") }},
		{"Readlink", one(testserver.TypeReadlink), func(ctx context.Context) error { _, err := c.Readlink(ctx, "/link"); return err }},
		{"Link", one(tExtended), func(ctx context.Context) error { return c.Link(ctx, "/f", "/hard") }},
		{"RealPath", one(testserver.TypeRealpath), func(ctx context.Context) error { _, err := c.RealPath(ctx, "d"); return err }},
		{"StatVFS", one(tExtended), func(ctx context.Context) error { _, err := c.StatVFS(ctx, "/"); return err }},
		// LSTAT and OPENDIR together, two READDIRs to show it empty (a page of "."
		// and "..", then the end), and the RMDIR with the CLOSE.
		{"Remove directory", callRounds{rounds: []round{{testserver.TypeRemove}, {testserver.TypeLstat, tOpendir}, {tReaddir, tReaddir}, {tClose, testserver.TypeRmdir}}},
			func(ctx context.Context) error { return c.Remove(ctx, "/newdir") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireRounds(t, c, srv, &on, tc.want, tc.call)
			if opened != nil {
				require.NoError(t, opened.Close())
				opened = nil
			}
			require.Zero(t, srv.OpenHandles(), "no handle left open")
		})
	}
	got, err := srv.ReadFile("/w3")
	require.NoError(t, err)
	require.Equal(t, three, got)
}

// failWhen returns a Fail hook that answers requests matching with code while armed.
func failWhen(armed *atomic.Bool, code uint32, match func(testserver.Request) bool) func(testserver.Request) uint32 {
	return func(r testserver.Request) uint32 {
		if armed.Load() && match(r) {
			return code
		}
		return 0
	}
}

// TestReadFileSmallFaults: a STATUS failure on each request ReadFile pipelines, a short
// read, replies out of order and malformed replies each give the file's exact content
// or a clear error, and no handle stays open.
func TestReadFileSmallFaults(t *testing.T) {
	data := gpData(4096, 5)
	var once atomic.Bool
	for _, tc := range []struct {
		name    string
		opts    func(armed *atomic.Bool) testserver.Options
		wantErr func(t *testing.T, err error)
		handles int // left open at the server: a refused CLOSE keeps its handle
	}{
		{name: "STATUS on the READ", opts: func(a *atomic.Bool) testserver.Options {
			return testserver.Options{Fail: failWhen(a, testserver.StatusPermissionDenied, atOrPast(tRead, 0))}
		}, wantErr: func(t *testing.T, err error) { require.ErrorIs(t, err, fs.ErrPermission) }},
		{name: "STATUS on the READ past the end", opts: func(a *atomic.Bool) testserver.Options {
			return testserver.Options{Fail: failWhen(a, testserver.StatusFailure, atOrPast(tRead, 4096))}
		}, wantErr: requireStatusError},
		// As from a server that ran the CLOSE before a READ: read again, on a new handle.
		{name: "STATUS on one READ", opts: func(a *atomic.Bool) testserver.Options {
			once.Store(false)
			return testserver.Options{Fail: failWhen(a, testserver.StatusFailure, func(r testserver.Request) bool {
				return r.Type == tRead && once.CompareAndSwap(false, true)
			})}
		}},
		{name: "STATUS on the CLOSE", opts: func(a *atomic.Bool) testserver.Options {
			return testserver.Options{Fail: failWhen(a, testserver.StatusFailure, ofType(tClose))}
		}, handles: 1},
		{name: "STATUS on the STAT", opts: func(a *atomic.Bool) testserver.Options {
			return testserver.Options{Fail: failWhen(a, testserver.StatusPermissionDenied, ofType(tStat))}
		}},
		{name: "short READs", opts: func(*atomic.Bool) testserver.Options { return testserver.Options{ReadCap: 1000} }},
		{name: "shortened READs", opts: func(*atomic.Bool) testserver.Options {
			return testserver.Options{Shorten: func(_ int64, asked int) int { return max(1, asked/3) }}
		}},
		{name: "replies out of order", opts: func(*atomic.Bool) testserver.Options { return testserver.Options{Reorder: 4} }},
		{name: "malformed STAT reply", opts: func(a *atomic.Bool) testserver.Options {
			return testserver.Options{Corrupt: armedCorrupt(a, testserver.CorruptAttrsFlags())}
		}, wantErr: func(t *testing.T, err error) { requireChannelFailed(t, err) }},
		{name: "DATA longer than asked", opts: func(a *atomic.Bool) testserver.Options {
			return testserver.Options{Corrupt: armedCorrupt(a, testserver.CorruptLongData())}
		}, wantErr: func(t *testing.T, err error) { requireChannelFailed(t, err) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var armed atomic.Bool
			c, srv := newTestServerClient(t, tc.opts(&armed))
			require.NoError(t, srv.WriteFile("/f", data, 0o644))
			armed.Store(true)
			got, err := c.ReadFile(testCtx(t), "/f")
			armed.Store(false)
			if tc.wantErr != nil {
				t.Logf("ReadFile: %v", err)
				require.Error(t, err)
				require.Nil(t, got)
				tc.wantErr(t, err)
				var pe *fs.PathError
				require.ErrorAs(t, err, &pe)
				require.Equal(t, "/f", pe.Path)
			} else {
				require.NoError(t, err)
				require.Equal(t, data, got)
			}
			if c.main.failed() != nil {
				return // the session is gone, and with it every handle
			}
			settle(t, c)
			require.Equal(t, tc.handles, srv.OpenHandles())
		})
	}
}

// armedCorrupt applies corrupt only while armed is set.
func armedCorrupt(armed *atomic.Bool, corrupt func(testserver.Request, []byte) [][]byte) func(testserver.Request, []byte) [][]byte {
	return func(r testserver.Request, reply []byte) [][]byte {
		if !armed.Load() {
			return nil
		}
		return corrupt(r, reply)
	}
}

func requireStatusError(t *testing.T, err error) {
	t.Helper()
	var se *StatusError
	require.ErrorAs(t, err, &se)
}

// TestReadFileChangedSinceStat changes the file after the STAT and the OPEN that size
// and open it, before its READs: ReadFile returns what the file holds when read,
// whether it grew a little, grew past one READ, shrank or was emptied.
func TestReadFileChangedSinceStat(t *testing.T) {
	for name, size := range map[string]int{
		"grew a little": 4096 + 10, "grew past one READ": 4096 + 600_000, "shrank": 100, "emptied": 0,
	} {
		t.Run(name, func(t *testing.T) {
			var on atomic.Bool
			c, srv := newTestServerClient(t, testserver.Options{Stall: stallTypes(&on, tStat, tOpen)})
			require.NoError(t, srv.WriteFile("/f", gpData(4096, 1), 0o644))
			on.Store(true)
			done := tsGo(func() tsBytes { b, err := c.ReadFile(testCtx(t), "/f"); return tsBytes{b, err} })
			tsWaitStalled(t, srv, 2) // the STAT and the OPEN: both done, neither answered
			on.Store(false)
			data := gpData(size, 2)
			require.NoError(t, srv.WriteFile("/f", data, 0o644))
			srv.ReleaseStalled()
			got := tsRecv(t, done, "ReadFile")
			require.NoError(t, got.err)
			require.Equal(t, data, got.b)
			require.Zero(t, srv.OpenHandles())
		})
	}
}

type tsBytes struct {
	b   []byte
	err error
}

// TestReadFileShortReadRereadsWhole: when the pipelined READ comes back short and the
// file then changes, ReadFile reads it again from its start on a new handle, rather
// than going on from where the first handle stopped: the result is one file's content,
// never the start of one joined to the end of another.
func TestReadFileShortReadRereadsWhole(t *testing.T) {
	var first atomic.Bool
	var on atomic.Bool
	c, srv := newTestServerClient(t, testserver.Options{
		Shorten: func(off int64, asked int) int {
			if off == 0 && first.CompareAndSwap(false, true) {
				return 100
			}
			return asked
		},
		Stall: stallTypes(&on, tRead),
	})
	old := gpData(4096, 3)
	require.NoError(t, srv.WriteFile("/f", old, 0o644))
	on.Store(true)
	done := tsGo(func() tsBytes { b, err := c.ReadFile(testCtx(t), "/f"); return tsBytes{b, err} })
	tsWaitStalled(t, srv, 2) // the short READ and the READ past the end, both done
	on.Store(false)
	replaced := gpData(600_000, 4)
	require.NoError(t, srv.WriteFile("/f", replaced, 0o644))
	srv.ReleaseStalled()
	got := tsRecv(t, done, "ReadFile")
	require.NoError(t, got.err)
	require.Equal(t, len(replaced), len(got.b))
	require.Equal(t, replaced, got.b, "the new content alone, not the old one's first 100 bytes and the rest")
	require.Equal(t, 2, srv.Requests(tOpen), "read again on a second handle")
	require.Zero(t, srv.OpenHandles())
}

// TestSmallCallsCancelAndClose: ReadFile, WriteFile and ReadDir whose pipelined
// requests are never answered end when ctx does (and their handle is closed at the
// server once it answers), or when the Client is closed.
func TestSmallCallsCancelAndClose(t *testing.T) {
	calls := map[string]struct {
		stall uint8
		call  func(ctx context.Context, c *Client) error
	}{
		"ReadFile": {tRead, func(ctx context.Context, c *Client) error { _, err := c.ReadFile(ctx, "/f"); return err }},
		"WriteFile": {tWrite, func(ctx context.Context, c *Client) error {
			return c.WriteFile(ctx, "/w", gpData(3*c.Limits().MaxWrite, 6), 0o644)
		}},
		"ReadDir": {tReaddir, func(ctx context.Context, c *Client) error { _, err := c.ReadDir(ctx, "/d"); return err }},
	}
	for name, tc := range calls {
		for _, closeClient := range []bool{false, true} {
			how := map[bool]string{false: "ctx", true: "Client.Close"}[closeClient]
			t.Run(name+"/"+how, func(t *testing.T) {
				var on atomic.Bool
				c, srv := newTestServerClient(t, testserver.Options{Stall: stallTypes(&on, tc.stall)})
				require.NoError(t, srv.WriteFile("/f", gpData(4096, 7), 0o644))
				require.NoError(t, srv.MkdirAll("/d", 0o755))
				require.NoError(t, srv.WriteFile("/d/x", nil, 0o644))
				ctx, cancel := context.WithCancel(testCtx(t))
				defer cancel()
				on.Store(true)
				done := tsGo(func() error { return tc.call(ctx, c) })
				tsWaitStalled(t, srv, 1)
				if closeClient {
					require.NoError(t, c.Close())
					requireClosedConn(t, tsRecv(t, done, name))
					return // the session is gone, and with it every handle
				}
				cancel()
				err := tsRecv(t, done, name)
				require.ErrorIs(t, err, context.Canceled)
				var pe *fs.PathError
				require.ErrorAs(t, err, &pe)
				on.Store(false)
				srv.ReleaseStalled()
				settle(t, c)
				require.Zero(t, srv.OpenHandles())
			})
		}
	}
}

// TestWriteFileSmallFaults: a STATUS failure on any WRITE or on the CLOSE fails
// WriteFile with the server's error, naming the file, and the handle is closed.
func TestWriteFileSmallFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		match   func(maxWrite int) func(testserver.Request) bool
		op      string
		handles int
	}{
		{"the only WRITE", func(int) func(testserver.Request) bool { return ofType(tWrite) }, "write", 0},
		{"the second of three WRITEs", func(m int) func(testserver.Request) bool {
			return func(r testserver.Request) bool { return r.Type == tWrite && r.Offset == uint64(m) }
		}, "write", 0},
		{"the CLOSE", func(int) func(testserver.Request) bool { return ofType(tClose) }, "close", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var armed atomic.Bool
			var match func(testserver.Request) bool
			c, srv := newTestServerClient(t, testserver.Options{Fail: func(r testserver.Request) uint32 {
				if armed.Load() && match(r) {
					return testserver.StatusFailure
				}
				return 0
			}})
			match = tc.match(c.Limits().MaxWrite)
			data := gpData(3*c.Limits().MaxWrite-7, 8)
			if tc.name == "the only WRITE" {
				data = data[:4096]
			}
			armed.Store(true)
			err := c.WriteFile(testCtx(t), "/w", data, 0o644)
			armed.Store(false)
			requireStatusError(t, err)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.op, pe.Op)
			require.Equal(t, "/w", pe.Path)
			settle(t, c)
			require.Equal(t, tc.handles, srv.OpenHandles())
		})
	}
}

// TestSmallCallsOutOfOrder: a server that answers out of order still gets files and
// listings whole from ReadFile, WriteFile and ReadDir, small and larger.
func TestSmallCallsOutOfOrder(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Reorder: 5})
	ctx := testCtx(t)
	require.NoError(t, srv.MkdirAll("/d", 0o755))
	for i, n := range []int{0, 1, 4096, c.Limits().MaxWrite, 3*c.Limits().MaxWrite + 1} {
		name := fmt.Sprintf("/d/f%d", i)
		data := gpData(n, uint64(i))
		require.NoError(t, c.WriteFile(ctx, name, data, 0o644))
		got, err := srv.ReadFile(name)
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, got), "%s on the server", name)
		got, err = c.ReadFile(ctx, name)
		require.NoError(t, err)
		require.Equal(t, data, got)
	}
	es, err := c.ReadDir(ctx, "/d")
	require.NoError(t, err)
	require.Len(t, es, 5)
	settle(t, c)
	require.Zero(t, srv.OpenHandles())
}

// TestReadDirPastTheFirstBatch: a listing of more pages than the first batch of
// READDIRs asks for is read whole, and its handle closed; a refused CLOSE does not
// fail a listing that is whole; a refused READDIR fails it, and closes the handle.
func TestReadDirPastTheFirstBatch(t *testing.T) {
	var armed atomic.Bool
	var failOn atomic.Uint32
	c, srv := newTestServerClient(t, testserver.Options{
		Listing: synthetic("/big", numbered(95, 10)),
		Fail: func(r testserver.Request) uint32 {
			if armed.Load() && uint32(r.Type) == failOn.Load() {
				return testserver.StatusFailure
			}
			return 0
		},
	})
	ctx := testCtx(t)
	es, err := c.ReadDir(ctx, "/big")
	require.NoError(t, err)
	require.Len(t, es, 95)
	require.Equal(t, numberedName(94), es[94].Name())
	settle(t, c)
	require.Zero(t, srv.OpenHandles())
	require.Equal(t, 1, srv.Requests(tClose))

	failOn.Store(uint32(tClose))
	armed.Store(true)
	es, err = c.ReadDir(ctx, "/big")
	armed.Store(false)
	require.NoError(t, err, "the listing was whole")
	require.Len(t, es, 95)

	settle(t, c) // that listing's CLOSE, sent unanswered, has reached the server
	srv.ResetStats()
	failOn.Store(uint32(tReaddir))
	armed.Store(true)
	_, err = c.ReadDir(ctx, "/big")
	armed.Store(false)
	requireStatusError(t, err)
	require.Equal(t, 1, srv.Requests(tClose), "a failed listing closes its handle")
}

// TestSmallCallsOpenSSH runs ReadFile, WriteFile, ReadDir and DirEntries against
// OpenSSH's sftp-server over pipes, at sizes around every edge of the pipelined paths,
// and checks the content and that the server has no descriptor left open.
func TestSmallCallsOpenSSH(t *testing.T) {
	dir := t.TempDir()
	c, pid := getPutClient(t, dir)
	ctx := testCtx(t)
	before := serverFDs(t, pid)
	maxRead, maxWrite := c.Limits().MaxRead, c.Limits().MaxWrite
	for i, n := range []int{0, 1, 4096, maxRead - 1, maxRead, maxRead + 1, maxWrite * 3,
		pipelinedWriteMax, pipelinedWriteMax + 1, 3<<20 + 5} {
		name := filepath.Join(dir, fmt.Sprintf("f%02d", i))
		data := gpData(n, uint64(i))
		require.NoError(t, c.WriteFile(ctx, name, data, 0o640), "WriteFile %d bytes", n)
		require.True(t, bytes.Equal(data, gpRead(t, name)), "%d bytes written", n)
		fi, err := os.Stat(name)
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o640), fi.Mode().Perm()&^0o022)
		got, err := c.ReadFile(ctx, name)
		require.NoError(t, err, "ReadFile %d bytes", n)
		require.True(t, bytes.Equal(data, got), "%d bytes read", n)
	}
	// WriteFile truncates a longer file.
	long := filepath.Join(dir, "f09")
	require.NoError(t, c.WriteFile(ctx, long, []byte("short"), 0o644))
	require.Equal(t, []byte("short"), gpRead(t, long))

	for _, entries := range []int{0, 20, 250} {
		d := filepath.Join(dir, fmt.Sprintf("d%d", entries))
		require.NoError(t, os.Mkdir(d, 0o755))
		var want []string
		for i := range entries {
			name := fmt.Sprintf("e%03d", i)
			want = append(want, name)
			gpWrite(t, filepath.Join(d, name), nil)
		}
		es, err := c.ReadDir(ctx, d)
		require.NoError(t, err)
		var got []string
		for _, e := range es {
			got = append(got, e.Name())
		}
		require.Equal(t, want, got)
		n := 0
		for _, err := range c.DirEntries(ctx, d) {
			require.NoError(t, err)
			n++
		}
		require.Equal(t, entries, n)
	}
	// Replies come in order: once a STAT is answered, the CLOSEs sent before it are
	// done.
	_, err := c.Stat(ctx, dir)
	require.NoError(t, err)
	require.Equal(t, before, serverFDs(t, pid))
}
